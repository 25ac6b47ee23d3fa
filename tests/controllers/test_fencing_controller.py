"""The fencing controller against a real API server on SQLite, on the shared FakeClock: NodeFence
records, the Fenced condition, force deletion only after a confirmed fence, retries, ordering,
clearing, and each kind of fence agent (python, command, webhook, self)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubelite.api.errors import ApiError
from kubelite.controllers.fencing import FencingController
from kubelite.controllers.fencing_agents import Target
from kubelite.controllers.fencing_config import FencingConfig, parse
from kubelite.testing.builders import make_pod
from tests.controllers.fakecluster import Cluster, cluster

__all__ = ["cluster"]

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"
FENCES = "/apis/kubelite.io/v1alpha1/nodefences"
DELAY = 30.0

# The python fence agent of these tests: a scripted answer per call, and the calls it got.
SCRIPT: list[bool] = []
CALLS: list[str] = []


async def scripted_fence(target: Target) -> bool:
    CALLS.append(target.node)
    return SCRIPT.pop(0) if SCRIPT else True


def config(agents: list[Obj] | None = None, pool: bool = True, **extra: Any) -> FencingConfig:
    pools = [{"name": "all", "nodeSelector": {}, "agents": agents or [
        {"python": "tests.controllers.test_fencing_controller:scripted_fence"}]}] if pool else []
    return parse({"kind": "FencingConfiguration", "delay": DELAY, "period": 1, "retry": {"initial": 2, "max": 8},
                  "pools": pools, **extra})


async def unreachable_node(c: Cluster, name: str, labels: dict[str, str] | None = None,
                           annotations: dict[str, str] | None = None) -> None:
    node = await c.node(name, ready="Unknown", labels=labels)
    if annotations:
        await c.client.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": annotations}})
    assert node


async def stateful_pod(c: Cluster, name: str, node: str, priority: int = 0) -> Obj:
    builder = make_pod(name).node(node)
    if priority:
        with contextlib.suppress(ApiError):  # 409: the class exists already
            await c.client.create("/apis/scheduling.k8s.io/v1/priorityclasses", {
                "metadata": {"name": f"p{priority}"}, "value": priority})
        builder = builder.priority_class(f"p{priority}")
    obj = builder.obj()
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                           "uid": "00000000-0000-0000-0000-000000000001", "controller": True}]
    return await c.client.create(PODS, obj)


async def exists(c: Cluster, path: str) -> bool:
    try:
        await c.client.get(path)
    except ApiError as exc:
        if exc.code == 404:
            return False
        raise
    return True


async def fenced_condition(c: Cluster, node: str) -> str | None:
    obj = await c.client.get(f"/api/v1/nodes/{node}")
    return next((x["status"] for x in obj["status"].get("conditions", []) if x["type"] == "kubelite.io/Fenced"),
                None)


async def until(c: Cluster, check: Callable[[], Awaitable[bool]], what: str, step: float = 0.5,
                rounds: int = 400) -> None:
    for _ in range(rounds):
        if await check():
            return
        await c.clock.advance(step)
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


async def idle(c: Cluster, seconds: float, step: float = 0.5) -> None:
    for _ in range(int(seconds / step)):
        await c.clock.advance(step)
        await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def controller(c: Cluster, cfg: FencingConfig, witness: bool = True) -> AsyncIterator[FencingController]:
    """The controller running; with a Ready `witness` node, since with every node down the zone brake
    (rightly) fences nothing — as upstream's disruption tests keep a healthy node for the same reason."""
    SCRIPT.clear()
    CALLS.clear()
    if witness:
        await c.node("witness", ready="True")
    ctl = FencingController(c.client, c.clock, cfg)
    task = asyncio.create_task(ctl.run())
    try:
        yield ctl
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_confirmed_fence_is_recorded_then_the_pods_are_force_deleted(cluster: Cluster) -> None:
    c = cluster
    await unreachable_node(c, "a")
    await stateful_pod(c, "web-0", "a")
    async with controller(c, config()):
        await idle(c, DELAY - 5)
        assert CALLS == [] and await exists(c, f"{PODS}/web-0"), "fenced before the delay"
        await until(c, lambda: _gone(c, f"{PODS}/web-0"), "the pod force deleted")
        fence = await c.client.get(f"{FENCES}/a")
        assert fence["status"]["phase"] == "Succeeded" and fence["status"]["attempts"] == 1
        assert fence["status"]["agent"] == "python"
        assert await fenced_condition(c, "a") == "True"
        assert {e["reason"] for e in await _events(c)} >= {"FencingNode", "NodeFenced", "FencedNodePodDeleted"}
        await until(c, lambda: _tainted(c, "a"), "the fenced taint")


async def test_a_failed_fence_is_retried_with_back_off_and_nothing_is_deleted_meanwhile(cluster: Cluster) -> None:
    c = cluster
    await unreachable_node(c, "a")
    await stateful_pod(c, "web-0", "a")
    async with controller(c, config()):
        SCRIPT.extend([False, False, True])
        await until(c, lambda: _phase(c, "a", "Failed"), "the first attempt failing")
        assert await exists(c, f"{PODS}/web-0") and await fenced_condition(c, "a") is None
        await until(c, lambda: _gone(c, f"{PODS}/web-0"), "the pod force deleted after the third attempt")
        assert CALLS == ["a", "a", "a"]
        assert (await c.client.get(f"{FENCES}/a"))["status"]["attempts"] == 3
        assert "FenceFailed" in {e["reason"] for e in await _events(c)}


async def test_without_a_pool_nothing_is_fenced(cluster: Cluster) -> None:
    c = cluster
    await unreachable_node(c, "a")
    await stateful_pod(c, "web-0", "a")
    async with controller(c, config(pool=False)):
        await idle(c, DELAY * 4)
        assert await exists(c, f"{PODS}/web-0") and not await exists(c, f"{FENCES}/a")
        assert await fenced_condition(c, "a") is None


async def test_higher_priority_first_and_no_more_at_once_than_configured(cluster: Cluster) -> None:
    c = cluster
    for name, prio in (("low", 1), ("high", 1000)):
        await unreachable_node(c, name)
        await stateful_pod(c, f"p-{name}", name, prio)
    async with controller(c, config(maxConcurrent=1)):
        SCRIPT.extend([False])  # the first fence (high) fails once: low must still wait for it
        await until(c, lambda: _phase(c, "high", "Failed"), "high's first attempt")
        assert not await exists(c, f"{FENCES}/low")
        await until(c, lambda: _gone(c, f"{PODS}/p-low"), "both fenced in turn")
        assert CALLS == ["high", "high", "low"]


async def test_a_node_back_before_the_fence_is_confirmed_is_not_fenced(cluster: Cluster) -> None:
    c = cluster
    await unreachable_node(c, "a")
    await stateful_pod(c, "web-0", "a")
    async with controller(c, config()):
        SCRIPT.extend([False])
        await until(c, lambda: _phase(c, "a", "Failed"), "the first attempt failing")
        await c.post_status("a", "True")
        await until(c, lambda: _gone(c, f"{FENCES}/a"), "the NodeFence abandoned")
        assert await exists(c, f"{PODS}/web-0") and await fenced_condition(c, "a") is None


async def test_deleting_the_node_fence_clears_the_condition(cluster: Cluster) -> None:
    c = cluster
    await unreachable_node(c, "a")
    await stateful_pod(c, "web-0", "a")
    async with controller(c, config()):
        await until(c, lambda: _gone(c, f"{PODS}/web-0"), "the fence")
        await c.post_status("a", "True")  # the node's agent is back (its old pods are gone from the API)
        await idle(c, 5)
        assert await fenced_condition(c, "a") == "True", "cleared without the administrator's word"
        await c.client.delete(f"{FENCES}/a")
        await until(c, lambda: _cleared(c, "a"), "the Fenced condition cleared")
        await until(c, lambda: _untainted(c, "a"), "the fenced taint removed")
        assert "FenceCleared" in {e["reason"] for e in await _events(c)}


async def _set_ready(c: Cluster, pod: Obj, ready: bool) -> None:
    await c.client.patch(f"{PODS}/{pod['metadata']['name']}/status", {"metadata": {"uid": pod["metadata"]["uid"]},
                         "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}})


async def test_a_budget_holds_a_fence_only_while_the_fence_would_take_pods_it_counts_healthy(cluster: Cluster) -> None:
    """A NotReady node whose pod still reads Ready: fencing it would be a voluntary disruption, and its
    PodDisruptionBudget (minAvailable 1 of 1) allows none — held, with an event. Once the pod is marked
    NotReady (as the node lifecycle controller does) the outage has happened and the fence goes."""
    c = cluster
    await c.node("a", ready="False")
    pod = await stateful_pod(c, "web-0", "a")
    await _set_ready(c, pod, True)
    await c.client.create("/apis/policy/v1/namespaces/default/poddisruptionbudgets", {
        "metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {}}})
    async with controller(c, config()):
        await idle(c, DELAY + 10)
        assert CALLS == [] and not await exists(c, f"{FENCES}/a"), "fenced through a budget allowing 0"
        held = [e for e in await _events(c) if e["reason"] == "FenceHeldByDisruptionBudget"]
        assert len(held) == 1 and "PodDisruptionBudget default/web allows 0" in held[0]["message"]
        await _set_ready(c, pod, False)
        await until(c, lambda: _gone(c, f"{PODS}/web-0"), "the fence once the pod was counted unhealthy")


ZONE_A = {"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "a"}
ZONE_B = {"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "b"}


async def _held_events(c: Cluster, reason: str) -> list[str]:
    return sorted(e["involvedObject"]["name"] for e in await _events(c) if e["reason"] == reason)


async def test_a_whole_zone_partition_holds_its_fences_while_a_single_lost_node_is_fenced(cluster: Cluster) -> None:
    """The zone brake against a real API server: zone a loses both its nodes, zone b one of three. b1 is
    fenced; a1 and a2 are not — one FenceHeldByZoneDisruption event each, no NodeFence, their pods kept.
    Once a2 is back, zone a is Normal again and a1 is fenced, no sooner than 1/fenceRate later (the limiter
    swapped in from 0 starts drained)."""
    c = cluster
    for name, labels, ready in (("a1", ZONE_A, "Unknown"), ("a2", ZONE_A, "Unknown"), ("b1", ZONE_B, "Unknown"),
                                ("b2", ZONE_B, "True"), ("b3", ZONE_B, "True")):
        await c.node(name, ready=ready, labels=labels)
    for name in ("a1", "a2", "b1"):
        await stateful_pod(c, f"web-{name}", name)
    async with controller(c, config(maxConcurrent=3), witness=False):
        await until(c, lambda: _gone(c, f"{PODS}/web-b1"), "the single lost node of zone b fenced")
        await idle(c, DELAY)
        assert CALLS == ["b1"]
        for name in ("a1", "a2"):
            assert await exists(c, f"{PODS}/web-{name}") and not await exists(c, f"{FENCES}/{name}")
        held = [e for e in await _events(c) if e["reason"] == "FenceHeldByZoneDisruption"]
        assert sorted(e["involvedObject"]["name"] for e in held) == ["a1", "a2"], "one event per hold, not per pass"
        assert "zone r/a is in FullDisruption" in held[0]["message"]
        back = c.clock.monotonic()
        await c.post_status("a2", "True")
        await until(c, lambda: _gone(c, f"{PODS}/web-a1"), "a1 fenced once its zone is not fully disrupted")
        assert c.clock.monotonic() - back >= 10.0, "fenced before the zone's drained limiter had a token"
        assert CALLS == ["b1", "a1"] and await exists(c, f"{PODS}/web-a2")


async def test_with_every_node_down_nothing_is_fenced_until_a_node_is_back_and_the_delay_has_run_again(
        cluster: Cluster) -> None:
    """All zones fully disrupted: the control plane is the likely one cut off, so nothing is fenced (one
    FenceHeldByClusterDisruption per node). When one node reports Ready the others are candidates again
    only after the delay counted from then — they may simply not have reported back yet."""
    c = cluster
    for name in ("a", "b", "c"):
        await unreachable_node(c, name)
        await stateful_pod(c, f"web-{name}", name)
    async with controller(c, config(maxConcurrent=3), witness=False):
        await idle(c, DELAY * 3)
        assert CALLS == [] and await _held_events(c, "FenceHeldByClusterDisruption") == ["a", "b", "c"]
        await c.post_status("c", "True")
        back = c.clock.monotonic()
        await until(c, lambda: _gone(c, f"{PODS}/web-a"), "a fence once the delay ran again")
        assert c.clock.monotonic() - back >= DELAY
        assert CALLS[0] in ("a", "b") and await exists(c, f"{PODS}/web-c")


async def test_a_fence_not_yet_confirmed_is_abandoned_when_its_zone_goes_down(cluster: Cluster) -> None:
    """A fence decided while its zone was Normal, failing, whose zone then loses its last Ready node: the
    next attempt does not run — the NodeFence is deleted (nothing was fenced) and the node waits as a
    candidate held by the zone brake, with its slot free."""
    c = cluster
    await c.node("a1", ready="Unknown", labels=ZONE_A)
    await c.node("a2", ready="True", labels=ZONE_A)
    await stateful_pod(c, "web-0", "a1")
    async with controller(c, config()):
        SCRIPT.extend([False])
        await until(c, lambda: _phase(c, "a1", "Failed"), "the first attempt failing")
        await c.post_status("a2", "Unknown")
        await until(c, lambda: _gone(c, f"{FENCES}/a1"), "the NodeFence abandoned")
        await idle(c, DELAY)
        assert CALLS == ["a1"] and await exists(c, f"{PODS}/web-0") and await fenced_condition(c, "a1") is None
        assert await _held_events(c, "FenceHeldByZoneDisruption") == ["a1"]


@pytest.mark.parametrize("name,exit_code,fenced", [
    ("a command exiting 0 confirms the fence", 0, True),
    ("a command exiting 1 is a failed attempt", 1, False),
])
async def test_command_agent(cluster: Cluster, tmp_path: Path, name: str, exit_code: int, fenced: bool) -> None:
    c = cluster
    record = tmp_path / "calls"
    script = f"import sys; open({str(record)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n'); sys.exit({exit_code})"
    await c.node("a", ready="Unknown")
    await c.client.request("PUT", "/api/v1/nodes/a/status", {**(await c.client.get("/api/v1/nodes/a")), "status": {
        **(await c.client.get("/api/v1/nodes/a"))["status"], "addresses": [{"type": "InternalIP",
                                                                             "address": "10.1.2.3"}]}})
    await stateful_pod(c, "web-0", "a")
    agents = [{"command": [sys.executable, "-c", script, "{node}", "{address}"], "timeout": 20}]
    async with controller(c, config(agents)):
        await until(c, lambda: _phase(c, "a", "Succeeded" if fenced else "Failed"), name, step=1.0)
        await asyncio.sleep(0.2)
        assert record.read_text().splitlines()[0] == "a 10.1.2.3"
        if fenced:
            await until(c, lambda: _gone(c, f"{PODS}/web-0"), "the pod force deleted")
        else:
            assert await exists(c, f"{PODS}/web-0")


@pytest.mark.parametrize("name,status,phase", [
    ("a 2xx answer confirms the fence", 204, "Succeeded"),
    ("a 500 answer is a failed attempt", 500, "Failed"),
])
async def test_webhook_agent(cluster: Cluster, name: str, status: int, phase: str) -> None:
    c = cluster
    bodies: list[Obj] = []

    async def handle(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        return web.Response(status=status)

    app = web.Application()
    app.router.add_post("/fence", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        await unreachable_node(c, "a")
        await stateful_pod(c, "web-0", "a")
        async with controller(c, config([{"webhook": f"http://127.0.0.1:{port}/fence"}])):
            await until(c, lambda: _phase(c, "a", phase), name, step=1.0)
        assert bodies[0] == {"node": "a", "address": "", "fence": "a"}
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("name,advertised,renew,fenced", [
    ("a self-fencing node silent for D + margin is fenced", "10", False, True),
    ("a node that does not self-fence is never fenced by the self agent", None, False, False),
    ("a node still renewing its Lease is not self-fenced", "10", True, False),
])
async def test_self_agent(cluster: Cluster, name: str, advertised: str | None, renew: bool, fenced: bool) -> None:
    c = cluster
    await unreachable_node(c, "a", annotations={"kubelite.io/self-fence-after": advertised} if advertised else None)
    await c.renew_lease("a")
    await stateful_pod(c, "web-0", "a")
    async with controller(c, config([{"self": {}}], selfFenceMargin=5)) as ctl:
        fence_started = None
        for _ in range(240):  # 120 s of fake time: the delay (30 s), then the self agent's wait
            if renew:
                await c.renew_lease("a")
            await idle(c, 0.5)
            if fence_started is None and await exists(c, f"{FENCES}/a"):
                fence_started = c.clock.monotonic()
        assert fence_started is not None, "the policy never started the fence"
        done = not await exists(c, f"{PODS}/web-0")
        assert done is fenced
        if fenced:
            seen = ctl.last_renewal_seen("a")
            fence = await c.client.get(f"{FENCES}/a")
            assert seen is not None and "no Lease renewal seen for 10 s + 5 s" in fence["status"]["message"]


async def _gone(c: Cluster, path: str) -> bool:
    return not await exists(c, path)


async def _exists_async(c: Cluster, path: str) -> bool:
    return await exists(c, path)


async def _phase(c: Cluster, node: str, phase: str) -> bool:
    try:
        return bool((await c.client.get(f"{FENCES}/{node}")).get("status", {}).get("phase") == phase)
    except ApiError:
        return False


async def _tainted(c: Cluster, node: str) -> bool:
    taints = (await c.client.get(f"/api/v1/nodes/{node}"))["spec"].get("taints") or []
    return any(t["key"] == "kubelite.io/fenced" and t["effect"] == "NoSchedule" for t in taints)


async def _untainted(c: Cluster, node: str) -> bool:
    return not await _tainted(c, node)


async def _cleared(c: Cluster, node: str) -> bool:
    return await fenced_condition(c, node) is None


async def _events(c: Cluster) -> list[Obj]:
    await asyncio.sleep(0.3)
    for _ in range(10):
        await c.clock.advance(1)
        await asyncio.sleep(0.02)
    items: list[Obj] = (await c.client.get("/api/v1/events"))["items"]
    return items

