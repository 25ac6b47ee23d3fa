"""The node lifecycle controller, ported from pkg/controller/nodelifecycle/node_lifecycle_controller_test.go.

The pure health and zone functions are tested as tables; the controller is stepped pass by pass
(monitor, tainting) against a real API server on the test's FakeClock.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kubelite.clock import rfc3339
from kubelite.controllers import node_health as nh
from kubelite.controllers.nodelifecycle import NodeLifecycleController, NodeLifecycleOptions
from kubelite.testing.builders import make_pod
from tests.controllers.fakecluster import Cluster, cluster, settle, sync

__all__ = ["cluster"]

Obj = dict[str, Any]
GRACE, STARTUP_GRACE = 50.0, 60.0  # testNodeMonitorGracePeriod, testNodeStartupGracePeriod
T0 = 1_420_113_600.0  # fakeNow: 2015-01-01 12:00 UTC
LONG_AGO = rfc3339(1_325_419_200.0)  # 2012-01-01
OPTIONS = NodeLifecycleOptions(node_monitor_grace_period=GRACE, node_startup_grace_period=STARTUP_GRACE,
                               node_eviction_rate=100_000.0)


def _ready(status: str, heartbeat: str, transition: str) -> Obj:
    return {"type": "Ready", "status": status, "lastHeartbeatTime": heartbeat, "lastTransitionTime": transition}


def _node(created: str, conditions: list[Obj] | None) -> Obj:
    node: Obj = {"metadata": {"name": "node0", "creationTimestamp": created}, "spec": {}}
    if conditions is not None:
        node["status"] = {"conditions": conditions}
    return node


def _unknown(kind: str, reason: str, message: str, heartbeat: str, transition: str) -> Obj:
    return {"type": kind, "status": "Unknown", "reason": reason, "message": message,
            "lastHeartbeatTime": heartbeat, "lastTransitionTime": transition}


NEVER = [_unknown(k, "NodeStatusNeverUpdated", "Kubelet never posted node status.", LONG_AGO, rfc3339(T0))
         for k in nh.SILENCED_CONDITIONS]


@pytest.mark.parametrize(("node", "time_to_pass", "expected"), [
    pytest.param(_node(rfc3339(T0), None), 0.0, None,
                 id="Node created recently, with no status (happens only at cluster startup)."),
    pytest.param(_node(LONG_AGO, None), 0.0, NEVER, id="Node created long time ago, and kubelet never posted status."),
    pytest.param(_node(LONG_AGO, [_ready("True", rfc3339(T0 - 10), rfc3339(T0 - 10))]), 0.0, None,
                 id="Node created long time ago, with status updated recently."),
    pytest.param(_node(LONG_AGO, [_ready("True", LONG_AGO, LONG_AGO)]), 60.0,
                 [{**_ready("Unknown", LONG_AGO, rfc3339(T0 + 60)), "reason": "NodeStatusUnknown",
                   "message": "Kubelet stopped posting node status."}]
                 + [_unknown(k, "NodeStatusNeverUpdated", "Kubelet never posted node status.", LONG_AGO,
                             rfc3339(T0 + 60)) for k in nh.SILENCED_CONDITIONS[1:]],
                 id="Node created long time ago, with status updated by kubelet exceeds grace period."),
])
def test_monitor_node_health_update_status(node: Obj, time_to_pass: float, expected: list[Obj] | None) -> None:
    """TestMonitorNodeHealthUpdateStatus: a first look at fakeNow, a second `time_to_pass` later."""
    cached = copy.deepcopy(node)
    first = nh.try_update_node_health(node, None, None, T0, GRACE, STARTUP_GRACE)
    update = first
    if time_to_pass:
        update = nh.try_update_node_health(node, None, first.health, T0 + time_to_pass, GRACE, STARTUP_GRACE)
    written = update.write["status"]["conditions"] if update.write is not None else None
    assert written == expected
    assert node == cached  # the informer's object is never changed: the write is a copy


@pytest.mark.parametrize(("lease_renewed", "expect_unknown"), [
    pytest.param(True, False, id="Node created long time ago, status not updated by kubelet, lease renewed "
                                 "within grace period: no update"),
    pytest.param(False, True, id="Node created long time ago, status not updated by kubelet, lease not renewed "
                                 "and exceeds grace period: Unknown"),
])
def test_monitor_node_health_with_lease(lease_renewed: bool, expect_unknown: bool) -> None:
    """TestMonitorNodeHealthUpdateNodeAndPodStatusWithLease: a renewed Lease alone keeps a node alive."""
    node = _node(LONG_AGO, [_ready("True", LONG_AGO, LONG_AGO)])
    lease = {"spec": {"renewTime": rfc3339(T0).replace("Z", ".000000Z")}}
    first = nh.try_update_node_health(node, lease, None, T0, GRACE, STARTUP_GRACE)
    later = {"spec": {"renewTime": rfc3339(T0 + 50).replace("Z", ".000000Z")}} if lease_renewed else lease
    update = nh.try_update_node_health(node, later, first.health, T0 + 60, GRACE, STARTUP_GRACE)
    assert (update.current_ready or {}).get("status") == ("Unknown" if expect_unknown else "True")


def _conds(*statuses: str | None) -> list[Obj | None]:
    return [None if s is None else {"type": "Ready", "status": s} for s in statuses]


@pytest.mark.parametrize(("conditions", "state"), [
    pytest.param(_conds("True", "True"), nh.ZoneState.NORMAL, id="all Ready: normal"),
    pytest.param(_conds("Unknown", "Unknown"), nh.ZoneState.FULL_DISRUPTION, id="no Ready node: full disruption"),
    pytest.param(_conds(None, "False"), nh.ZoneState.FULL_DISRUPTION, id="no Ready condition counts as not Ready"),
    pytest.param(_conds("Unknown", "Unknown", "True"), nh.ZoneState.NORMAL,
                 id="two down of three: normal (partial needs more than two)"),
    pytest.param(_conds("Unknown", "Unknown", "Unknown", "True", "True"), nh.ZoneState.PARTIAL_DISRUPTION,
                 id="three down of five (60% >= 55%): partial disruption"),
    pytest.param(_conds("Unknown", "Unknown", "Unknown", "True", "True", "True"), nh.ZoneState.NORMAL,
                 id="three down of six (50% < 55%): normal"),
])
def test_compute_zone_state(conditions: list[Obj | None], state: nh.ZoneState) -> None:
    assert nh.compute_zone_state(conditions, 0.55)[1] is state


def test_zone_tainter_paces_nodes_by_its_token_bucket() -> None:
    """RateLimitedTimedQueue with EvictionRateLimiterBurst 1: one node at once, the next after 1/qps."""
    tainter = nh.ZoneTainter(qps=0.1, now=0.0)
    for name in ("a", "b"):
        assert tainter.add(name, "uid")
    assert tainter.due(0.0) == ["a"]
    tainter.done.add("a")
    assert not tainter.add("a", "uid"), "a tainted node is not queued again until removed"
    assert tainter.due(5.0) == []
    assert tainter.due(10.0) == ["b"]
    tainter.swap_limiter(0.0, 10.0)
    tainter.add("c", "uid")
    assert tainter.due(1000.0) == [], "a rate of 0 stops tainting"
    tainter.swap_limiter(0.1, 1000.0)
    assert tainter.due(1000.0) == [], "resumed from a rate of 0: the new bucket starts drained (SwapLimiter)"
    assert tainter.due(1010.0) == ["c"], "and gives its token 1/qps later"


SWAP_CASES = {  # RateLimitedTimedQueue.SwapLimiter with EvictionRateLimiterBurst 1
    "same rate: the bucket is kept, with its state": (0.1, True, 0.1, False),
    "paused (0) to a rate: drained, a token only after 1/qps": (0.0, True, 0.1, False),
    "old bucket with a token: the new one starts full": (0.1, False, 0.01, True),
    "old bucket spent: the new one starts drained": (0.1, True, 0.01, False),
}


@pytest.mark.parametrize(("old_qps", "old_spent", "qps", "token_at_once"), SWAP_CASES.values(), ids=SWAP_CASES.keys())
def test_swap_limiter(old_qps: float, old_spent: bool, qps: float, token_at_once: bool) -> None:
    old = nh.TokenBucket(old_qps, 1, 0.0)
    if old_spent:
        old.try_accept(0.0)
    assert nh.swapped(old, qps, 1, 0.0).try_accept(0.0) is token_at_once


# --- the controller, pass by pass ----------------------------------------------------------------

ZONE1 = {"topology.kubernetes.io/region": "region1", "topology.kubernetes.io/zone": "zone1"}
ZONE2 = {"topology.kubernetes.io/region": "region1", "topology.kubernetes.io/zone": "zone2"}


async def _pass(ctrl: NodeLifecycleController) -> None:
    await sync(ctrl.nodes, ctrl.leases, ctrl.pods)
    await ctrl.monitor_node_health()
    await sync(ctrl.nodes)
    await ctrl.do_no_execute_tainting_pass()


def _zone(labels: dict[str, str]) -> str:
    return nh.zone_key({"metadata": {"labels": labels}})


@pytest.mark.parametrize(("nodes", "recover", "initial", "following"), [
    pytest.param([({}, "True")], ["node0"], {"": nh.ZoneState.NORMAL}, {"": nh.ZoneState.NORMAL},
                 id="No Disruption: Node created recently without failure domain labels "
                    "(happens only at cluster startup)"),
    pytest.param([(ZONE1, "Unknown"), (ZONE2, "Unknown")], ["node1"],
                 {_zone(ZONE1): nh.ZoneState.FULL_DISRUPTION, _zone(ZONE2): nh.ZoneState.FULL_DISRUPTION},
                 {_zone(ZONE1): nh.ZoneState.FULL_DISRUPTION, _zone(ZONE2): nh.ZoneState.NORMAL},
                 id="No Disruption: Initially both zones down, one comes back"),
    pytest.param([(ZONE1, "Unknown"), (ZONE1, "Unknown"), (ZONE1, "True"), (ZONE1, "True"), (ZONE1, "True")],
                 ["node3", "node4"], {_zone(ZONE1): nh.ZoneState.NORMAL},
                 {_zone(ZONE1): nh.ZoneState.PARTIAL_DISRUPTION},
                 id="Partial Disruption: one Node failed leading to the number of healthy Nodes to exceed "
                    "the configured threshold"),
    pytest.param([(ZONE1, "Unknown"), (ZONE1, "True")], [],
                 {_zone(ZONE1): nh.ZoneState.NORMAL}, {_zone(ZONE1): nh.ZoneState.FULL_DISRUPTION},
                 id="Full Disruption: the zone has less than 2 Nodes down, the last healthy Node has failed"),
])
async def test_monitor_node_health_zone_states(cluster: Cluster, nodes: list[tuple[dict[str, str], str]],
                                               recover: list[str], initial: dict[str, nh.ZoneState],
                                               following: dict[str, nh.ZoneState]) -> None:
    """TestMonitorNodeHealth: zone states after a first pass, and after two minutes in which only `recover`
    posted status (each with a fresh heartbeat) and every other node stayed silent."""
    for i, (labels, ready) in enumerate(nodes):
        await cluster.node(f"node{i}", ready, labels)
    ctrl = NodeLifecycleController(cluster.client, cluster.clock, OPTIONS)
    await _pass(ctrl)
    assert ctrl.zone_states == initial
    await cluster.clock.advance(120)  # upstream: an hour; any time past the grace period
    for name in recover:
        await cluster.post_status(name, "True")
    await _pass(ctrl)
    assert ctrl.zone_states == following


def _taints(node: Obj) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in node["spec"].get("taints") or []}


UNREACHABLE = {("node.kubernetes.io/unreachable", "NoExecute"), ("node.kubernetes.io/unreachable", "NoSchedule")}
NOT_READY = {("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/not-ready", "NoSchedule")}


async def _settle(ctrl: NodeLifecycleController) -> None:
    """Run the controller's NoSchedule reconciles queued by the last sync (the runner is not running)."""
    await sync(ctrl.nodes)
    for name in ctrl.no_schedule.queue.queued():
        await ctrl.reconcile_no_schedule(name)


async def test_silent_node_goes_unknown_after_grace_is_tainted_and_recovers(cluster: Cluster) -> None:
    """S3: a node whose Lease stops being renewed is Unknown only after the grace period, its pods are
    Ready=False, it carries the unreachable NoExecute and NoSchedule taints, and loses them when Ready again."""
    for name in ("lost", "healthy"):
        await cluster.node(name)
        await cluster.renew_lease(name)
    pod = await cluster.client.create("/api/v1/namespaces/default/pods", make_pod("web").node("lost").obj())
    await cluster.client.patch("/api/v1/namespaces/default/pods/web/status", {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    ctrl = NodeLifecycleController(cluster.client, cluster.clock, OPTIONS)
    sink = asyncio.create_task(ctrl.events.run())
    await _pass(ctrl)
    for _ in range(5):  # 50 s: "healthy" renews every 10 s, "lost" has gone silent
        await cluster.clock.advance(10)
        await cluster.renew_lease("healthy")
        await _pass(ctrl)
    lost = await cluster.get("/api/v1/nodes/lost")
    assert lost["status"]["conditions"][0]["status"] == "True", "not before the grace period has passed"
    await cluster.clock.advance(1)
    await cluster.renew_lease("healthy")
    await _pass(ctrl)  # marks Unknown
    await _pass(ctrl)  # sees Unknown: queues for tainting, taints
    await _settle(ctrl)
    lost = await cluster.get("/api/v1/nodes/lost")
    ready = lost["status"]["conditions"][0]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    assert _taints(lost) == UNREACHABLE
    assert _taints(await cluster.get("/api/v1/nodes/healthy")) == set()
    web = await cluster.get("/api/v1/namespaces/default/pods/web")
    assert next(c for c in web["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"
    assert web["metadata"]["uid"] == pod["metadata"]["uid"] and not web["metadata"].get("deletionTimestamp"), \
        "the node controller never deletes a pod"
    for _ in range(20):
        await asyncio.sleep(0)
    events = await cluster.events("NodeNotReady")
    assert sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events) == [
        ("Node", "lost"), ("Pod", "web")]
    registered = {e["involvedObject"]["name"]: e["message"] for e in await cluster.events("RegisteredNode")}
    assert registered == {n: f"Node {n} event: Registered Node {n} in Controller" for n in ("healthy", "lost")}, \
        "RecordNodeEvent's form"
    # The agent comes back: a fresh Ready heartbeat removes the taints.
    await cluster.clock.advance(1)
    await cluster.post_status("lost", "True")
    await cluster.renew_lease("lost")
    await _pass(ctrl)
    await _settle(ctrl)
    assert _taints(await cluster.get("/api/v1/nodes/lost")) == set()
    sink.cancel()


async def test_swap_unreachable_not_ready_taints(cluster: Cluster) -> None:
    """TestSwapUnreachableNotReadyTaints: an unreachable-tainted node that reports Ready=False gets the
    not-ready taint in place of the unreachable one at once (no queue, no rate limit)."""
    await cluster.node("node0", "True")
    await cluster.node("node1", "True")
    ctrl = NodeLifecycleController(cluster.client, cluster.clock, OPTIONS)
    await _pass(ctrl)
    await cluster.clock.advance(GRACE + 1)
    await cluster.post_status("node1", "True")
    await _pass(ctrl)
    await _pass(ctrl)
    assert ("node.kubernetes.io/unreachable", "NoExecute") in _taints(await cluster.get("/api/v1/nodes/node0"))
    await cluster.clock.advance(1)
    await cluster.post_status("node0", "False")
    await cluster.post_status("node1", "True")
    await _pass(ctrl)
    await _settle(ctrl)
    assert _taints(await cluster.get("/api/v1/nodes/node0")) == NOT_READY


async def test_no_taints_when_every_zone_is_fully_disrupted(cluster: Cluster) -> None:
    """handleDisruption: when every node of every zone is down the controller suspects itself (its own
    network) and adds no NoExecute taint, so no pod is evicted."""
    for name in ("node0", "node1"):
        await cluster.node(name, "True", ZONE1)
    ctrl = NodeLifecycleController(cluster.client, cluster.clock, OPTIONS)
    await _pass(ctrl)
    await cluster.clock.advance(GRACE + 1)
    for _ in range(3):
        await _pass(ctrl)
    assert ctrl.zone_states == {_zone(ZONE1): nh.ZoneState.FULL_DISRUPTION}
    for name in ("node0", "node1"):
        node = await cluster.get(f"/api/v1/nodes/{name}")
        assert node["status"]["conditions"][0]["status"] == "Unknown"
        assert not any(t["effect"] == "NoExecute" for t in node["spec"].get("taints") or [])



async def _running(cluster: Cluster, grace: float) -> tuple[NodeLifecycleController, asyncio.Task[None]]:
    """The running controller (informers, monitor and tainting loops), its first monitor pass at t=0: fake
    time starts once the informers are synced."""
    ctrl = NodeLifecycleController(cluster.client, cluster.clock, NodeLifecycleOptions(node_monitor_grace_period=grace))
    task = asyncio.create_task(ctrl.run())
    for _ in range(100):
        if all(i.synced.is_set() for i in (ctrl.nodes, ctrl.leases, ctrl.pods)):
            break
        await settle(cluster.clock)
    await settle(cluster.clock)
    return ctrl, task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _at(cluster: Cluster, t: float) -> None:
    await settle(cluster.clock, t - cluster.clock.monotonic())


async def _renew_seen(cluster: Cluster, name: str) -> None:
    """A renewal the running controller's watch delivers at the instant it is written (the controller counts
    a renewal from when it sees it), not after the next step of fake time."""
    await cluster.renew_lease(name)
    await settle(cluster.clock)


async def test_running_controller_taints_as_the_grace_period_ends_not_at_the_next_period(cluster: Cluster) -> None:
    """A Lease renewal counts when it is seen, and the monitor wakes when a grace period ends, so the taint
    lands within moments of it rather than up to a 5 s monitor period later."""
    for name in ("lost", "healthy"):
        await cluster.node(name)
        await cluster.renew_lease(name)
    ctrl, task = await _running(cluster, grace=12)
    assert "lost" in ctrl.health, "the controller did not start"

    async def at(t: float) -> None:
        await _at(cluster, t)

    async def renew(name: str) -> None:
        await _renew_seen(cluster, name)

    await at(3)  # "lost" renews once more between monitor passes (t=0, 5), then goes silent: grace ends at t=15
    await renew("lost")
    for t in (4, 8, 12, 14.9):
        await at(t)
        await renew("healthy")
    assert _taints(await cluster.get("/api/v1/nodes/lost")) == set()
    await at(15.1)  # past the grace period, before the next 5 s pass (t=20)
    await at(15.2)
    assert _taints(await cluster.get("/api/v1/nodes/lost")) == UNREACHABLE
    assert _taints(await cluster.get("/api/v1/nodes/healthy")) == set()
    await _stop(task)


async def test_running_controller_counts_the_renewals_of_a_node_added_between_passes(cluster: Cluster) -> None:
    """A node that registers after a pass is looked at when it is added, so its renewals count from then on:
    one that renews at t=2 and goes silent is tainted as its grace period ends (t=14), not a grace period
    after the next 5 s pass (t=17)."""
    await cluster.node("healthy")
    await cluster.renew_lease("healthy")
    _, task = await _running(cluster, grace=12)
    await _at(cluster, 1)
    await cluster.node("new")
    await _renew_seen(cluster, "new")
    await _at(cluster, 2)
    await _renew_seen(cluster, "new")
    for t in (4, 8, 12):
        await _at(cluster, t)
        await _renew_seen(cluster, "healthy")
    await _at(cluster, 13.9)
    assert _taints(await cluster.get("/api/v1/nodes/new")) == set()
    await _at(cluster, 14.1)
    await _at(cluster, 14.2)
    assert _taints(await cluster.get("/api/v1/nodes/new")) == UNREACHABLE
    assert _taints(await cluster.get("/api/v1/nodes/healthy")) == set()
    await _stop(task)


# --- a pass looks only at the nodes whose outcome can change (nodelifecycle module doc, Cost) --------

def test_deadline_queue_finds_expired_nodes_from_real_deadlines() -> None:
    """Entries are lazy: renewals move a node's real deadline later without touching the queue; the head is
    checked against the real deadline, so a renewed node is not expired and a gone one is dropped."""
    real = {"a": 10.0, "b": 20.0, "c": 30.0}
    queue = nh.DeadlineQueue(real.get)
    for name, deadline in real.items():
        queue.schedule(name, deadline)
    assert queue.pop_expired(10.0) == [], "a deadline reached is not passed"
    assert queue.earliest() == 10.0
    real["a"] = 25.0  # renewed
    del real["b"]  # gone
    assert queue.pop_expired(26.0) == ["a"]
    assert queue.earliest() == 30.0
    queue.schedule("c", 28.0)  # an earlier deadline replaces the queued one; a later one is left to the lazy check
    real["c"] = 28.0
    queue.schedule("c", 40.0)
    assert queue.earliest() == 28.0
    assert queue.pop_expired(29.0) == ["c"]
    assert queue.earliest() is None


@pytest.mark.parametrize(("moves", "zones"), [
    pytest.param([("n0", "z1", True), ("n1", "z1", False)], {"z1": [1, 1]}, id="counts Ready and not Ready"),
    pytest.param([("n0", "z1", True), ("n0", "z1", False)], {"z1": [0, 1]}, id="a node counts once, as last seen"),
    pytest.param([("n0", "z1", True), ("n0", "z2", True)], {"z2": [1, 0]}, id="a relabelled node moves zone"),
    pytest.param([("n0", "z1", True), ("n0", None, False)], {}, id="a zone with no node counted is gone"),
])
def test_zone_counts_follow_each_node(moves: list[tuple[str, str | None, bool]], zones: dict[str, list[int]]) -> None:
    counts = nh.ZoneCounts()
    for name, zone, ready in moves:
        counts.set(name, zone, ready)
    assert counts.zones == zones


async def _renew(cluster: Cluster, ctrl: NodeLifecycleController, name: str) -> None:
    """A renewal the controller sees at once (it counts a renewal from when it sees it)."""
    await cluster.renew_lease(name)
    await sync(ctrl.leases)


async def _ready_status(cluster: Cluster, name: str) -> str:
    node = await cluster.get(f"/api/v1/nodes/{name}")
    return str(next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"])


@pytest.mark.parametrize(("renewals", "heartbeats", "passes"), [
    pytest.param([], [], [(10.0, "True"), (10.5, "Unknown")],
                 id="silent from registration: Unknown at the first pass after the grace period, not at its end"),
    pytest.param([4.0, 8.0], [], [(5.0, "True"), (10.0, "True"), (18.0, "True"), (18.5, "Unknown")],
                 id="Lease renewals push the deadline to the last renewal plus the grace period"),
    pytest.param([], [4.0, 8.0], [(5.0, "True"), (10.0, "True"), (18.0, "True"), (18.5, "Unknown")],
                 id="status heartbeats count when they are seen, as Lease renewals do"),
    pytest.param([9.0], [8.0], [(5.0, "True"), (10.0, "True"), (19.0, "True"), (19.01, "Unknown")],
                 id="a heartbeat before a renewal does not outlast it"),
    pytest.param([9.0], [], [(5.0, "True"), (15.0, "True"), (19.0, "True"), (19.01, "Unknown")],
                 id="a renewal after a pass moves a deadline the queue already holds"),
])
async def test_node_is_unknown_at_exactly_the_pass_after_its_grace_period(
        cluster: Cluster, renewals: list[float], heartbeats: list[float], passes: list[tuple[float, str]]) -> None:
    """With nodes skipped until their grace period ends, the Unknown write still lands at the first pass after
    it (last sign of life + grace < now), as when every node is looked at on every pass."""
    await cluster.node("node0")
    await cluster.node("other", labels=ZONE1)  # another zone stays Ready: no master disruption mode
    await cluster.renew_lease("node0")
    ctrl = NodeLifecycleController(cluster.client, cluster.clock, NodeLifecycleOptions(node_monitor_grace_period=10))
    await _pass(ctrl)
    events = sorted([(t, "renew") for t in renewals] + [(t, "post") for t in heartbeats]
                    + [(t, "pass") for t, _ in passes])
    expected = dict(passes)
    for t, what in events:
        await cluster.clock.advance(t - cluster.clock.monotonic())
        await cluster.post_status("other", "True")
        if what == "renew":
            await _renew(cluster, ctrl, "node0")
        elif what == "post":
            await cluster.post_status("node0", "True")
            await sync(ctrl.nodes)
        else:
            await _pass(ctrl)
            assert await _ready_status(cluster, "node0") == expected[t], f"at t={t}"


async def test_idle_pass_looks_at_no_node(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Healthy nodes renewing their Leases are not looked at again; a node is looked at when its object
    changes, and every pass once its grace period has ended (not Ready: as upstream, every pass)."""
    names = [f"node{i}" for i in range(6)]
    for name in names:
        await cluster.node(name)
        await cluster.renew_lease(name)
    ctrl = NodeLifecycleController(cluster.client, cluster.clock, NodeLifecycleOptions(node_monitor_grace_period=10))
    looked: list[str] = []
    update = ctrl._update_node

    async def counting(node: Obj) -> Obj | None:
        looked.append(node["metadata"]["name"])
        return await update(node)

    monkeypatch.setattr(ctrl, "_update_node", counting)

    async def step(posting: str | None = None, silent: str = "node5") -> list[str]:
        await cluster.clock.advance(5)
        for name in names:
            if name != silent:
                await _renew(cluster, ctrl, name)
        if posting is not None:
            await cluster.post_status(posting, "True")
        looked.clear()
        await _pass(ctrl)
        return list(looked)

    await _pass(ctrl)
    assert sorted(looked) == names, "the first pass looks at every node"
    assert await step() == [], "Lease renewals alone: nothing to look at"
    assert await step(posting="node2") == ["node2"], "a changed Node object is looked at"
    assert await step() == ["node5"], "node5's grace period (renewed last at t=0) has ended: it goes Unknown"
    assert await step() == ["node5"], "an Unknown node is looked at every pass"
    assert _taints(await cluster.get("/api/v1/nodes/node5")) >= {("node.kubernetes.io/unreachable", "NoExecute")}
    assert ctrl.zone_states == {"": nh.ZoneState.NORMAL}


async def test_zone_states_follow_deleted_and_relabelled_nodes(cluster: Cluster) -> None:
    """The per-zone counts change with the nodes that are looked at: a deleted node leaves its zone's count,
    a relabelled one moves, so the zone states are those a pass over every node computes."""
    await cluster.node("a0", "True", ZONE1)
    await cluster.node("a1", "Unknown", ZONE1)
    await cluster.node("b0", "True", ZONE2)
    ctrl = NodeLifecycleController(cluster.client, cluster.clock, OPTIONS)
    await _pass(ctrl)
    assert ctrl.zone_states == {_zone(ZONE1): nh.ZoneState.NORMAL, _zone(ZONE2): nh.ZoneState.NORMAL}
    await cluster.client.delete("/api/v1/nodes/a0")
    await _pass(ctrl)
    assert ctrl.zone_states == {_zone(ZONE1): nh.ZoneState.FULL_DISRUPTION, _zone(ZONE2): nh.ZoneState.NORMAL}
    assert [e["involvedObject"]["name"] for e in await cluster.events("RemovingNode")] in ([], ["a0"])
    await cluster.client.patch("/api/v1/nodes/a1", {"metadata": {"labels": ZONE2}})
    await _pass(ctrl)
    assert ctrl.zone_states == {_zone(ZONE2): nh.ZoneState.NORMAL}
    assert ctrl.zone_counts.zones == {_zone(ZONE2): [1, 1]}


UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
OWN = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}


@pytest.mark.parametrize(("others", "want"), [
    pytest.param([], None, id="uncordon removes the last taint: no taints: [] is left (NodeSpec.Taints omitempty)"),
    pytest.param([OWN], [OWN], id="uncordon keeps an administrator's taint"),
])
async def test_uncordon_removes_the_unschedulable_taint(cluster: Cluster, others: list[Obj],
                                                       want: list[Obj] | None) -> None:
    """doNoScheduleTaintingPass on spec.unschedulable: cordon taints the node, uncordon takes the taint away."""
    await cluster.node("node0", "True", taints=copy.deepcopy(others))
    ctrl = NodeLifecycleController(cluster.client, cluster.clock, OPTIONS)
    for unschedulable in (True, False):
        await cluster.client.patch("/api/v1/nodes/node0", {"spec": {"unschedulable": unschedulable}})
        await sync(ctrl.nodes)
        await ctrl.reconcile_no_schedule("node0")
        spec = (await cluster.get("/api/v1/nodes/node0"))["spec"]
        if unschedulable:
            assert UNSCHEDULABLE in spec["taints"]
    assert spec.get("taints") == want
