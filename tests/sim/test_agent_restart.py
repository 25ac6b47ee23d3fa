"""A hollow node's agent restarted: the next agent adopts the containers the previous one started, as a
restarted kubelet (or kubelite agent on real processes) does — nothing is killed or restarted by the restart
itself, and a container that ended while no agent watched is seen ended with its own exit code and time.

The agents are the simulation's (`runner._Cluster`: real Agent, hollow runtime, in-process API server) on a
virtual-time loop; the pods are bound to the node directly (no scheduler needed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import parse_rfc3339
from kubelite.sim import runner, scenario
from kubelite.sim.clock import VirtualClock, VirtualTimeLoop
from kubelite.store.memory import MemoryStore

Obj = dict[str, Any]
T = TypeVar("T")
STOP_AT, DOWN = 30.0, 20.0  # the first agent stops 30 s after the pod is created; the next starts 20 s later


def _pod(policy: str, command: list[str]) -> Obj:
    container: Obj = {"name": "main", "image": "hollow", "command": command}
    if any(arg.startswith("liveness=") for arg in command):
        container["livenessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 5, "failureThreshold": 1}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n-0", "restartPolicy": policy, "containers": [container]}}


CASES = [
    pytest.param("Never", ["hollow"], "Running", "running", 0, None, None,
                 id="a Never pod keeps running across a restart"),
    pytest.param("Always", ["hollow"], "Running", "running", 0, None, None,
                 id="an Always pod's restart count is unchanged by a restart"),
    pytest.param("Never", ["hollow", "--run", "40", "--exit", "3"], "Failed", "terminated", 0, 3, (39, 41),
                 id="a container that exits while no agent runs is seen exited with its code and time"),
    pytest.param("Always", ["hollow", "--run", "40", "--exits", "3,0"], "Running", "running", 1, 3, (39, 41),
                 id="an Always container that exits while no agent runs is restarted once by the next agent"),
    # liveness fails from 35 s: the stopped agent's prober ended with it, so the kill is the next agent's (≥ 50 s)
    pytest.param("Always", ["hollow", "--probe", "liveness=0:35"], "Running", "running", 1, 143, (50, 60),
                 id="no probe of the stopped agent acts while no agent runs"),
]


Story = Callable[[InProcessClient, runner._Cluster, VirtualClock], Awaitable[T]]


def on_one_node(tmp_path: Path, story: Story[T]) -> T:
    """Run `story` on a simulated cluster of one hollow node, n-0 (in-process API server, the simulation's agent,
    no scheduler), on a virtual-time loop, from 10 s after the node's agent started; its result."""
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "restart", "duration": "5m", "nodePools": [{"name": "n", "count": 1}],
                                    "workloads": [{"name": "w", "kind": "Pod"}]}))
    scn = scenario.load(spec)
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)

    async def play() -> T:
        store = MemoryStore()
        server = ApiServer(store, clock)
        await server.start()
        client = InProcessClient(server)
        cluster = runner._Cluster(client, clock, scn, 1, tmp_path / "nodes")
        try:
            await cluster.add_node(scn.pools[0], "n-0", 0)
            await clock.sleep(10)
            return await story(client, cluster, clock)
        finally:
            await cluster.stop()
            await server.stop()
            await store.close()

    try:
        return loop.run_until_complete(play())
    finally:
        runner._cancel_leftovers(loop)
        loop.close()


async def restart_agent(cluster: runner._Cluster, clock: VirtualClock, down: float) -> None:
    """Stop n-0's agent, and start the next one `down` seconds later."""
    await cluster.stop_agent("n-0")
    await clock.sleep(down)
    cluster.start_agent("n-0", cluster._agent("n-0", 0))


@pytest.mark.parametrize("policy,command,phase,state,restarts,code,ended_in", CASES)
def test_a_restarted_hollow_agent_adopts_its_containers(tmp_path: Path, policy: str, command: list[str],
                                                       phase: str, state: str, restarts: int, code: int | None,
                                                       ended_in: tuple[float, float] | None) -> None:
    async def story(client: InProcessClient, cluster: runner._Cluster, clock: VirtualClock) -> tuple[Obj, float]:
        created = clock.now()
        await client.create("/api/v1/namespaces/default/pods", _pod(policy, command))
        await clock.sleep(STOP_AT)
        await restart_agent(cluster, clock, DOWN)
        await clock.sleep(30)
        return await client.get("/api/v1/namespaces/default/pods/p"), created

    pod, created = on_one_node(tmp_path, story)
    status = pod["status"]
    (container,) = status["containerStatuses"]
    assert (status["phase"], next(iter(container["state"])), container["restartCount"]) == (phase, state, restarts)
    ended = container["state"].get("terminated") or (container.get("lastState") or {}).get("terminated")
    if code is None:
        assert ended is None, container  # never killed nor restarted by the restart
        return
    assert ended is not None and ended["exitCode"] == code, container
    # when it ended, in seconds since the pod was created: its own time, not when the next agent looked (50 s)
    assert ended_in is not None and ended_in[0] <= parse_rfc3339(ended["finishedAt"]) - created <= ended_in[1]
