"""Agent bugs the chaos suite found, each pinned by a focused reproduction (a strict xfail while the bug
is open; the marker is removed with the fix, and the test stays as its regression test).

Half-open connection (chaos seed 7, `--duration 60`): a link goes half-open for 1.8 s — the server's side
of every connection closed, the agent's side never told, as after a NAT/conntrack reset. The agent's
pod watch sits on the dead connection until its 150 s watch read timeout, and its Lease renewal until its
30 s request read timeout: the node goes Unknown (its pods are evicted) though the network is back, and a
pod deleted meanwhile keeps running ~150 s past its grace period. Upstream closes every connection of the
client when a heartbeat fails (kubelet's closeAllConns on repeated heartbeat failure), gives the heartbeat
client a timeout of the status update frequency (10 s), and detects dead HTTP/2 connections by ping
(client-go ReadIdleTimeout 30 s). Fixed the kubelet way: a heartbeat that gets no answer within its 10 s
deadline closes every connection of the agent's client (`ApiClient.close_connections`), so the blind watch
fails at once and its informer resumes; the deletion is now seen within ~20 s of the link going half-open.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from kubelite.api.errors import ApiError
from kubelite.client.http import ApiClient
from kubelite.clock import RealClock
from kubelite.testing.chaos.cluster import Cluster

pytestmark = pytest.mark.e2e

NODE = "node-a"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "victim"}, "spec": {
    "nodeName": NODE, "terminationGracePeriodSeconds": 2,
    "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "trap 'exit 0' TERM; "
                                                                    "while true; do sleep 0.2; done"]}]}}
PODS = "/api/v1/namespaces/default/pods"
DEADLINE = 45.0  # worst case by the timings ~20 s (next heartbeat + its 10 s deadline) + grace + load; bug: ~150 s


async def _until(clock: RealClock, seconds: float, predicate: Callable[[], Awaitable[bool]]) -> bool:
    waited = 0.0
    while waited < seconds:
        if await predicate():
            return True
        await clock.sleep(0.5)
        waited += 0.5
    return False


@pytest.mark.timeout(180)
async def test_a_pod_deleted_after_a_healed_half_open_link_terminates_within_its_grace(tmp_path: Path) -> None:
    clock = RealClock()
    cluster = Cluster(tmp_path, "known-bugs", clock=clock, nodes=[NODE])
    await cluster.start()
    client = ApiClient.from_kubeconfig(cluster.kubeconfig)
    try:
        await client.request("POST", PODS, POD)

        async def running() -> bool:
            pod = await client.request("GET", f"{PODS}/victim")
            return bool((pod.get("status") or {}).get("phase") == "Running")

        assert await _until(clock, 60, running)
        cluster.links[NODE].set("half_open")
        await clock.sleep(1.8)
        cluster.links[NODE].set("ok")
        await clock.sleep(2)
        await client.request("DELETE", f"{PODS}/victim")

        async def gone() -> bool:
            try:
                await client.request("GET", f"{PODS}/victim")
            except ApiError as exc:
                return exc.code == 404
            return False

        assert await _until(clock, DEADLINE, gone), "the agent never saw the deletion"
    finally:
        await client.close()
        await cluster.stop()
