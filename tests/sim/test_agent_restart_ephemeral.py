"""Ephemeral containers across an agent restart (hollow node, virtual time, as test_agent_restart.py): the next agent
adopts a running one (same instance, no restart) and sees one that ended while no agent ran ended with its own exit
code — and, ephemeral, never starts it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelite.apiserver.inprocess import InProcessClient
from kubelite.sim import runner
from kubelite.sim.clock import VirtualClock
from tests.sim.test_agent_restart import on_one_node, restart_agent

Obj = dict[str, Any]
POD = "/api/v1/namespaces/default/pods/p"
MAIN = {"name": "main", "image": "hollow", "command": ["hollow"]}
EPHEMERAL = [{"name": "stays", "image": "hollow", "command": ["hollow"]},
             {"name": "ends", "image": "hollow", "command": ["hollow", "--run", "30", "--exit", "3"]}]


def test_a_restarted_agent_adopts_ephemeral_containers_and_never_restarts_them(tmp_path: Path) -> None:
    async def story(client: InProcessClient, cluster: runner._Cluster, clock: VirtualClock) -> tuple[Obj, Obj]:
        await client.create("/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n-0", "containers": [MAIN]}})
        await clock.sleep(5)
        await client.patch(f"{POD}/ephemeralcontainers", {"spec": {"ephemeralContainers": EPHEMERAL}},
                           "application/strategic-merge-patch+json")
        await clock.sleep(10)
        before = await client.get(POD)
        await restart_agent(cluster, clock, 30)  # "ends" exits at 45 s, while no agent runs
        await clock.sleep(30)
        return before, await client.get(POD)

    before, after = on_one_node(tmp_path, story)
    was = {c["name"]: c for c in before["status"]["ephemeralContainerStatuses"]}
    now = {c["name"]: c for c in after["status"]["ephemeralContainerStatuses"]}
    assert now["stays"]["state"] == was["stays"]["state"] and "running" in now["stays"]["state"]
    assert now["stays"]["containerID"] == was["stays"]["containerID"]
    assert now["ends"]["state"]["terminated"]["exitCode"] == 3
    assert (now["stays"]["restartCount"], now["ends"]["restartCount"]) == (0, 0)
    assert after["status"]["phase"] == "Running"
