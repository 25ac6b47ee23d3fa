"""A real node agent (real processes, real time, a real API server on a SQLite file) keeps nothing of a pod
once it is gone — as kubelet's HandlePodRemoves: the status manager, pod workers, probes and the pod's
directory let it go (BENCHMARKS.md, Memory kept after a pod is gone; the simulated cluster's cases are
tests/sim/test_podleak.py, whose walk this reuses)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.agent import Agent
from kubelite.agent.config import NodeConfig
from kubelite.agent.runtime.process import ProcessRuntime
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from tests.sim.test_podleak import holders

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"


async def _until(check: Any, timeout: float = 15.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not reached in time")


@pytest.mark.parametrize("command,delete_while_running", [
    pytest.param(["sh", "-c", "exit 0"], False, id="a pod that ran to its end, then deleted"),
    pytest.param(["sleep", "30"], True, id="a running pod deleted (stopped with its grace period)"),
])
async def test_the_agent_keeps_nothing_of_a_deleted_pod(inprocess_server: ApiServer, tmp_path: Path,
                                                        command: list[str], delete_while_running: bool) -> None:
    client = InProcessClient(inprocess_server)
    clock = RealClock()
    (tmp_path / "node").mkdir()
    agent = Agent(client, clock, "n1", tmp_path / "node", NodeConfig(), ProcessRuntime(clock))
    running = asyncio.create_task(agent.run(http=False))
    try:
        pod = await client.create(PODS, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "x", "command": command}]}})
        uid = pod["metadata"]["uid"]
        phase = "Running" if delete_while_running else "Succeeded"
        await _until(lambda: ((agent.pods.get("default", "p") or {}).get("status") or {}).get("phase") == phase)
        await client.delete(f"{PODS}/p")  # graceful: the agent stops it, writes its status, then deletes it
        await _until(lambda: agent.pods.get("default", "p") is None and not agent.syncers)
        await asyncio.sleep(0.2)  # the last callbacks of the pod's worker and status writes
        gc.collect()
        assert holders(agent, {uid}) == []
        assert not (tmp_path / "node" / "pods").exists() or not any((tmp_path / "node" / "pods").iterdir())
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
