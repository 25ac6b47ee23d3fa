"""The harness's fence device on real processes: powering node-a off SIGKILLs its agent and its workload's
processes (children included), confirms only once they are dead, and leaves node-b's alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kubelite.clock import RealClock
from kubelite.testing.chaos import procs
from kubelite.testing.chaos.power import power_off

RUN = "chaos-test-power"


def _workload(node: str) -> subprocess.Popen[bytes]:
    """A workload loop that forks a child, marked as the agent's containers are (downward API env)."""
    env = {**os.environ, procs.RUN_ENV: RUN, "CHAOS_NODE": node}
    return subprocess.Popen(["bash", "-c", "sleep 60 & wait"], env=env, start_new_session=True)


async def test_power_off_kills_the_nodes_agent_and_workload_only(tmp_path: Path) -> None:
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "agent", "--node-name", "node-a"])
    (tmp_path / "node-a.pid").write_text(str(agent.pid))
    mine, other = _workload("node-a"), _workload("node-b")
    try:
        for _ in range(100):  # both loops have forked their sleep
            if len(procs.node_processes(RUN, "node-a")) == 2 and len(procs.node_processes(RUN, "node-b")) == 2:
                break
            await RealClock().sleep(0.05)
        assert await power_off(tmp_path, RUN, "node-a", RealClock())
        assert agent.wait(5) == -9 and mine.wait(5) == -9
        assert procs.node_processes(RUN, "node-a") == [] and (tmp_path / "node-a.off").exists()
        assert len(procs.node_processes(RUN, "node-b")) == 2 and other.poll() is None
    finally:
        for p in (agent, mine, other):
            p.kill()
            p.wait()
        for pid in procs.node_processes(RUN, "node-b"):
            os.kill(pid, 9)
