"""The process runtime: a container is a process group in its own session, logging in CRI format.

stdout and stderr are read line by line and written to the container's log file as
`<RFC3339Nano timestamp> <stream> F <line>`, kubelet's on-disk format, so `pods/log`
can serve timestamps, tails and `--since`. Signals go to the whole process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from kubelite.clock import Clock

PAUSE = [sys.executable, "-c", "import signal\nwhile True: signal.pause()"]


def cri_timestamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


@dataclass
class Process:
    pid: int
    started: float
    log_path: Path
    proc: asyncio.subprocess.Process
    readers: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def exited(self) -> None:
        await self.proc.wait()


@dataclass(frozen=True)
class Exit:
    code: int
    signal: int  # 0 when the process exited by itself


class ProcessRuntime:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    async def start(self, argv: list[str], env: dict[str, str], cwd: str | None, log_path: Path) -> Process:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, cwd=cwd or None, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
        p = Process(proc.pid, self.clock.now(), log_path, proc)
        log: IO[bytes] = log_path.open("ab", buffering=0)
        assert proc.stdout is not None and proc.stderr is not None
        p.readers = [asyncio.create_task(self._pump(proc.stdout, b"stdout", log)),
                     asyncio.create_task(self._pump(proc.stderr, b"stderr", log))]
        return p

    async def _pump(self, stream: asyncio.StreamReader, name: bytes, log: IO[bytes]) -> None:
        while True:
            line = await stream.readline()
            if not line:
                return
            if not line.endswith(b"\n"):
                line += b"\n"
            log.write(cri_timestamp(self.clock.now()).encode() + b" " + name + b" F " + line)

    def signal(self, p: Process, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, sig)

    def kill(self, p: Process) -> None:
        self.signal(p, signal.SIGKILL)

    async def wait(self, p: Process) -> Exit:
        """The exit of the container's main process (log readers finish when the pipes close)."""
        code = await p.proc.wait()
        if code < 0:
            return Exit(128 - code, -code)
        return Exit(code, 0)
