"""The chaos harness's fence device (`--fencing`): "power off" one node of this machine — SIGKILL its agent
and every workload process it runs, as pulling its plug would — and exit 0 once they are all dead, which the
fencing controller's command agent takes as a confirmed fence (exit 1: they did not die in time).

    python -m kubelite.testing.chaos.power WORKDIR RUN_ID NODE

The node stays off (its marker file `<node>.off` in WORKDIR) until the harness powers it on again: it
restarts the agent and deletes the node's NodeFence, the administrator's word (README, Fencing)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from kubelite.clock import Clock, RealClock
from kubelite.testing.chaos import procs

KILL_TIMEOUT = 10.0


def agent_pid(workdir: Path, node: str) -> int | None:
    """The node's agent, from the pid file the harness wrote, if it is still that agent (not a reused pid)."""
    try:
        pid = int((workdir / f"{node}.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if b"agent" in cmdline and node.encode() in cmdline else None


async def power_off(workdir: Path, run_id: str, node: str, clock: Clock) -> bool:
    (workdir / f"{node}.off").touch()  # first: the harness must not restart the agent it finds dead
    deadline = clock.monotonic() + KILL_TIMEOUT
    while clock.monotonic() < deadline:
        agent = agent_pid(workdir, node)
        victims = [p for p in [*([agent] if agent is not None else []), *procs.node_processes(run_id, node)]
                   if procs.alive(p)]
        if not victims:
            return True
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await clock.sleep(0.1)
    return False


def main(argv: list[str]) -> int:
    workdir, run_id, node = Path(argv[0]), argv[1], argv[2]
    return 0 if asyncio.run(power_off(workdir, run_id, node, RealClock())) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
