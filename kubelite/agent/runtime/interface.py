"""What the agent needs from a container runtime (kubelet's kubecontainer.Runtime, reduced to processes).

A runtime starts a container instance and hands back a `Handle`; it delivers signals, reports
the exit, and can find again the instances a previous agent started (from the checkpoint's
record, or from the log path when the agent died before recording it). Pod sync is written
against this Protocol only, so the process runtime and the hollow runtime run the same code.
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kubelite.agent.cgroups import Limits


@dataclass(frozen=True)
class Exit:
    code: int  # the exit status, 128 + the signal's number for a container a signal ended
    oom_killed: bool = False
    # when the runtime knows it (the shim's record of an exit that happened while no agent watched)
    finished_at: float | None = field(default=None, compare=False)


KILLED = Exit(128 + signal.SIGKILL)


@dataclass
class Handle:
    """What the pod worker holds of a running container, whichever runtime runs it."""

    pid: int
    started: float
    # The environment the instance was started with (set by the runtime; read back when adopted): what exec'd
    # commands, exec probes and hooks run with, as CRI's Exec joins the container's process.
    env: dict[str, str] = field(default_factory=dict, init=False)
    result: Exit | None = field(default=None, init=False)
    done: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    @property
    def alive(self) -> bool:
        return self.result is None

    async def exited(self) -> None:
        await self.done.wait()

    def finish(self, result: Exit) -> None:
        if self.result is None:
            self.result = result
            self.done.set()

    def checkpoint(self) -> dict[str, Any]:
        """What a restarted agent needs to find this process again (see `Runtime.adopt`)."""
        return {"pid": self.pid, "started": self.started}

    # --- attach: a container started with `stdin` or `tty` takes input; these are no-ops otherwise ---

    @property
    def has_stdin(self) -> bool:
        return False

    async def write_stdin(self, data: bytes) -> None:
        """Send `data` to the container's stdin (its terminal with `tty`)."""

    def close_stdin(self) -> None:
        """End the container's stdin (`stdinOnce` after the first attach): it reads EOF."""

    def resize(self, width: int, height: int) -> None:
        """Set the size of the container's terminal (`tty` only)."""


class Runtime(Protocol):
    # True when containers are host processes that the agent must wrap in its sandbox (see agent/sandbox.py);
    # a simulated runtime runs nothing a pod could use to read the node's files.
    sandboxed: bool

    async def start(self, argv: list[str], env: dict[str, str], cwd: str | None, log_path: Path,
                    limits: Limits | None = None, stdin: bool = False, tty: bool = False) -> Handle:
        """Start an instance; `stdin` gives it an input the agent writes (attach), `tty` a terminal."""
        ...

    def signal(self, p: Handle, sig: int) -> None: ...

    def kill(self, p: Handle) -> None: ...

    async def wait(self, p: Handle) -> Exit: ...

    def adopt(self, checkpoint: dict[str, Any]) -> Handle:
        """The instance a previous agent started, live or ended (then with its recorded exit)."""
        ...

    def find(self, log_path: Path) -> Handle | None:
        """The instance started for `log_path` by an agent that died before recording it, if any."""
        ...
