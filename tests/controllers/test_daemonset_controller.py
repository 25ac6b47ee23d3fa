"""The DaemonSet controller against a real API server (in-process client), named after
pkg/controller/daemon/daemon_controller_test.go and update_test.go.

Most tests drive `sync` directly over informers filled by one list, so what the controller sees is exactly
what the test set up; the last ones run the controller and let its informers and handlers do the work.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock, rfc3339
from kubelite.controllers import daemonset_util as du
from kubelite.controllers.daemonset import (
    BACKOFF_GC_INTERVAL,
    BACKOFF_INITIAL,
    BACKOFF_MAX,
    DaemonSetController,
    FailedPodsBackoff,
    backoff_key,
)
from kubelite.controllers.revisions import compute_hash
from kubelite.testing.builders import make_node
from tests.controllers.conftest import eventually, running

Obj = dict[str, Any]
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
DSS = f"/apis/apps/v1/namespaces/{NS}/daemonsets"
REVS = f"/apis/apps/v1/namespaces/{NS}/controllerrevisions"
NODES = "/api/v1/nodes"
MERGE = "application/merge-patch+json"


def daemon_set(name: str = "foo", strategy: Obj | None = None, **template_spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"name": name}},
                     **({"updateStrategy": strategy} if strategy else {}),
                     "template": {"metadata": {"labels": {"name": name}},
                                  "spec": {"containers": [{"name": "foo", "image": "foo/bar"}], **template_spec}}}}


async def add_nodes(client: InProcessClient, count: int, labels: dict[str, str] | None = None,
                    start: int = 0) -> None:
    for i in range(start, start + count):
        await client.create(NODES, make_node(f"node-{i}", labels=labels))


async def pods(client: InProcessClient) -> list[Obj]:
    return [p for p in (await client.get(PODS))["items"] if not p["metadata"].get("deletionTimestamp")]


async def sync(ctrl: DaemonSetController, name: str = "foo") -> None:
    for informer in (ctrl.sets, ctrl.pods, ctrl.nodes, ctrl.revisions):
        await informer.relist()
    await ctrl.sync((NS, name))


async def get_ds(client: InProcessClient, name: str = "foo") -> Obj:
    ds: Obj = await client.get(f"{DSS}/{name}")
    return ds


async def run_pods(client: InProcessClient, ready: bool = True) -> None:
    """Stand in for the scheduler and the agents: bind each pod to its node and report it running."""
    for pod in await pods(client):
        name = pod["metadata"]["name"]
        if not pod["spec"].get("nodeName"):
            await client.create(f"{PODS}/{name}/binding", {"apiVersion": "v1", "kind": "Binding",
                                                           "metadata": {"name": name},
                                                           "target": {"name": du.target_node_name(pod)}})
        fresh = await client.get(f"{PODS}/{name}")
        fresh["status"] = {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": rfc3339(0)}]}
        await client.request("PUT", f"{PODS}/{name}/status", fresh)


async def finish_deletions(client: InProcessClient) -> None:
    """Stand in for the agents: pods being deleted are removed."""
    for pod in (await client.get(PODS))["items"]:
        if pod["metadata"].get("deletionTimestamp"):
            await client.request("DELETE", f"{PODS}/{pod['metadata']['name']}", {"gracePeriodSeconds": 0})


def events(ctrl: DaemonSetController) -> list[str]:
    return [e.event["reason"] for q in ctrl.events.queues for e in q._queue]  # type: ignore[attr-defined]


def _node(labels: dict[str, str] | None = None, taints: list[Obj] | None = None, cpu: str = "4") -> Obj:
    out = make_node("node1", cpu=cpu, labels=labels)
    out["spec"] = {"taints": taints} if taints else {}
    return out


# Mirrors TestUpdateNode: a node update wakes the sets whose verdict on the node it changes.
@pytest.mark.parametrize(("old", "new", "node_selector", "enqueued"), [
    pytest.param(_node(), _node(), {"type": "production"}, False, id="Nothing changed, should not enqueue"),
    pytest.param(_node(), _node({"type": "production"}), {"type": "production"}, True, id="Node labels changed"),
    pytest.param(_node(taints=[{"key": "k", "effect": "NoSchedule"}]), _node(), None, True,
                 id="Node taints changed"),
    pytest.param(_node(), _node(cpu="8"), None, False, id="Node Allocatable changed"),
])
async def test_update_node(client: InProcessClient, old: Obj, new: Obj, node_selector: dict[str, str] | None,
                           enqueued: bool) -> None:
    ctrl = DaemonSetController(client, FakeClock())
    ds = daemon_set("ds", **({"nodeSelector": node_selector} if node_selector else {}))
    ds["metadata"]["namespace"] = NS
    ctrl.sets.add(ds)
    ctrl._node_updated(old, new)
    assert ctrl.runner.queue.queued() == ([(NS, "ds")] if enqueued else [])


def _set(name: str, uid: str | None = None) -> Obj:
    ds = daemon_set(name)
    ds["metadata"].update(namespace=NS, uid=uid or f"uid-{name}", resourceVersion="1")
    return ds


def _owned_by(name: str, uid: str | None = None) -> list[Obj]:
    return [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": uid or f"uid-{name}",
             "controller": True}]


def _pod(labels: dict[str, str] | None = None, owner: str | None = None, rv: str = "1", ready: bool = False,
         ip: str = "", node: str = "node-0") -> Obj:
    meta: Obj = {"name": "pod1", "namespace": NS, "resourceVersion": rv, "labels": labels or {"name": "foo"}}
    if owner:
        meta["ownerReferences"] = _owned_by(owner)
    status: Obj = {"phase": "Running", "podIP": ip, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": rfc3339(0)}]}
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


# Mirrors daemon_controller_test.go's TestUpdatePod* cases: which sets a pod update wakes. Two sets select the
# pod's labels name=foo (foo, foo2) and one selects name=bar.
@pytest.mark.parametrize(("old", "new", "woken"), [
    pytest.param(_pod(), _pod(rv="2", ip="10.0.0.1"), [], id="TestUpdatePodOrphanSameLabels"),
    pytest.param(_pod(), _pod({"name": "bar"}, rv="2"), ["bar"], id="TestUpdatePodOrphanWithNewLabels"),
    pytest.param(_pod(owner="foo"), _pod(owner="foo2", rv="2"), ["foo", "foo2"],
                 id="TestUpdatePodChangeControllerRef"),
    pytest.param(_pod(owner="foo"), _pod(rv="2"), ["foo", "foo2"], id="TestUpdatePodControllerRefRemoved"),
    pytest.param(_pod(owner="foo"), _pod(owner="foo", rv="2", ready=True), ["foo"], id="owned pod became ready"),
    pytest.param(_pod(owner="foo", node=""), _pod(owner="foo", rv="2"), ["foo"], id="owned pod bound"),
    pytest.param(_pod(owner="foo"), _pod(owner="foo", rv="2", ip="10.0.0.1"), [],
                 id="owned pod changed nothing its sync reads"),
    pytest.param(_pod(owner="foo"), _pod(owner="foo"), [], id="same resourceVersion (a resync)"),
])
async def test_update_pod(client: InProcessClient, old: Obj, new: Obj, woken: list[str]) -> None:
    ctrl = DaemonSetController(client, FakeClock())
    for name in ("foo", "foo2"):
        ds = _set(name)
        ds["spec"]["selector"] = {"matchLabels": {"name": "foo"}}
        ctrl.sets.add(ds)
    bar = _set("bar")
    bar["spec"]["selector"] = {"matchLabels": {"name": "bar"}}
    ctrl.sets.add(bar)
    ctrl._pod_updated(old, new)
    assert sorted(ctrl.runner.queue.queued()) == [(NS, n) for n in woken]


def _revision(owner: str | None = None, rv: str = "1", deleting: bool = False) -> Obj:
    meta: Obj = {"name": "foo-abc", "namespace": NS, "resourceVersion": rv, "labels": {"name": "foo"}}
    if owner:
        meta["ownerReferences"] = _owned_by(owner)
    if deleting:
        meta["deletionTimestamp"] = rfc3339(0)
    return {"metadata": meta, "data": {}, "revision": 1}


# Mirrors addHistory / updateHistory / deleteHistory: a set's own new snapshot does not wake it (its sync made it).
@pytest.mark.parametrize(("event", "woken"), [
    pytest.param(lambda c: c._revision_added(_revision("foo")), [], id="owned revision added"),
    pytest.param(lambda c: c._revision_added(_revision()), ["foo"], id="orphan revision added"),
    pytest.param(lambda c: c._revision_added(_revision("foo", deleting=True)), ["foo"],
                 id="owned revision added while being deleted"),
    pytest.param(lambda c: c._revision_updated(_revision("foo"), _revision("foo", rv="2")), ["foo"],
                 id="owned revision updated"),
    pytest.param(lambda c: c._revision_updated(_revision(), _revision(rv="2")), [],
                 id="orphan revision updated, same labels"),
    pytest.param(lambda c: c._revision_deleted(_revision("foo")), ["foo"], id="owned revision deleted"),
    pytest.param(lambda c: c._revision_deleted(_revision()), [], id="orphan revision deleted"),
])
async def test_history_events(client: InProcessClient, event: Any, woken: list[str]) -> None:
    ctrl = DaemonSetController(client, FakeClock())
    ctrl.sets.add(_set("foo"))
    event(ctrl)
    assert ctrl.runner.queue.queued() == [(NS, n) for n in woken]


async def test_update_daemonset_with_new_uid_drops_expectations(client: InProcessClient) -> None:
    """updateDaemonset: a set re-created under its name (a new uid, the delete event missed) starts with no
    expectations and no failed-pod back-off of the old one; it is synced."""
    ctrl = DaemonSetController(client, FakeClock())
    old, new = _set("foo"), _set("foo", uid="uid-new")
    ctrl.expectations.expect((NS, "foo"), 1, [])
    ctrl.backoff.next(backoff_key(old, "node-0"))
    ctrl._set_updated(old, new)
    assert ctrl.expectations.satisfied((NS, "foo"))
    assert len(ctrl.backoff) == 0
    assert ctrl.runner.queue.queued() == [(NS, "foo")]


async def test_simple_daemon_set_launches_pods(client: InProcessClient) -> None:
    """TestSimpleDaemonSetLaunchesPods / TestSimpleDaemonSetScheduleDaemonSetPodsLaunchesPods: one pod per node,
    pinned by node affinity, with the daemon tolerations, the revision labels and a controller reference."""
    await add_nodes(client, 5)
    ds = await client.create(DSS, daemon_set())
    ctrl = DaemonSetController(client, FakeClock())
    await sync(ctrl)
    created = await pods(client)
    assert sorted(du.target_node_name(p) for p in created) == [f"node-{i}" for i in range(5)]
    revision = (await client.get(REVS))["items"]
    assert [r["revision"] for r in revision] == [1]
    hash_ = revision[0]["metadata"]["labels"][du.REVISION_LABEL]
    for pod in created:
        assert pod["metadata"]["labels"] == {"name": "foo", du.GENERATION_LABEL: "1", du.REVISION_LABEL: hash_}
        assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "foo",
                                                      "uid": ds["metadata"]["uid"], "controller": True,
                                                      "blockOwnerDeletion": True}]
        assert {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                "effect": "NoExecute"} in pod["spec"]["tolerations"]
        assert not pod["spec"].get("nodeName")  # the scheduler binds it
    assert events(ctrl).count("SuccessfulCreate") == 5
    await sync(ctrl)
    status = (await get_ds(client))["status"]
    assert (status["desiredNumberScheduled"], status["currentNumberScheduled"], status["numberReady"],
            status["updatedNumberScheduled"], status["observedGeneration"]) == (5, 5, 0, 5, 1)


class Recording:
    """The client, recording the requests that write."""

    def __init__(self, client: InProcessClient) -> None:
        self.client = client
        self.writes: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        if method != "GET":
            self.writes.append((method, path))
        return await self.client.request(method, path, body, **kw)


async def test_an_unchanged_status_is_not_written(client: InProcessClient) -> None:
    """storeDaemonSetStatus: nothing to write when the counts and observedGeneration are as stored (counts of 0
    are omitted from the stored status and read as 0)."""
    await add_nodes(client, 1)
    await client.create(DSS, daemon_set())
    ctrl = DaemonSetController(client, FakeClock())
    await sync(ctrl)
    await sync(ctrl)
    recording = Recording(client)
    ctrl.client = recording  # type: ignore[assignment]
    await sync(ctrl)
    assert recording.writes == []


async def test_no_nodes_does_nothing(client: InProcessClient) -> None:
    """TestNoNodesDoesNothing."""
    await client.create(DSS, daemon_set())
    ctrl = DaemonSetController(client, FakeClock())
    await sync(ctrl)
    assert await pods(client) == []
    assert (await get_ds(client))["status"]["desiredNumberScheduled"] == 0


async def test_expectations_hold_back_a_second_sync(client: InProcessClient) -> None:
    """TestExpectationsOnRecreate's core: until the informer delivers the pods a sync created, the next sync
    creates none (but still writes the status)."""
    await add_nodes(client, 2)
    await client.create(DSS, daemon_set())
    ctrl = DaemonSetController(client, FakeClock())
    await sync(ctrl)
    await ctrl.sync((NS, "foo"))  # the pod informer has not seen the two pods
    assert len(await pods(client)) == 2
    await sync(ctrl)
    assert len(await pods(client)) == 2


async def test_node_selector_daemon_launches_pods(client: InProcessClient) -> None:
    """TestNodeSelectorDaemonLaunchesPods / TestSelectorDaemonDeletesUnselectedPods: only matching nodes get a
    pod; a node relabelled out of the selector loses it."""
    await add_nodes(client, 2, {"type": "production"})
    await add_nodes(client, 2, start=2)
    await client.create(DSS, daemon_set(nodeSelector={"type": "production"}))
    ctrl = DaemonSetController(client, FakeClock())
    await sync(ctrl)
    assert sorted(du.target_node_name(p) for p in await pods(client)) == ["node-0", "node-1"]
    await client.patch(f"{NODES}/node-1", {"metadata": {"labels": {"type": None}}}, MERGE)
    await sync(ctrl)
    assert [du.target_node_name(p) for p in await pods(client)] == ["node-0"]


async def test_daemon_set_respects_termination(client: InProcessClient) -> None:
    """TestDaemonSetRespectsTermination: a pod still terminating on its node is not replaced yet."""
    await add_nodes(client, 1)
    await client.create(DSS, daemon_set())
    ctrl = DaemonSetController(client, FakeClock())
    await sync(ctrl)
    await run_pods(client)
    await sync(ctrl)
    [pod] = await pods(client)
    await client.delete(f"{PODS}/{pod['metadata']['name']}")  # graceful: its agent has not finished yet
    await sync(ctrl)
    assert await pods(client) == []
    await finish_deletions(client)
    await sync(ctrl)
    assert len(await pods(client)) == 1


async def set_phase(client: InProcessClient, pod: Obj, phase: str) -> None:
    fresh = await client.get(f"{PODS}/{pod['metadata']['name']}")
    fresh["status"] = {"phase": phase}
    await client.request("PUT", f"{PODS}/{pod['metadata']['name']}/status", fresh)


async def test_daemon_kill_failed_pods(client: InProcessClient) -> None:
    """TestDaemonKillFailedPods / TestDaemonKillFailedPodsBackoff: a failed pod is deleted (FailedDaemonPod) and
    replaced; the next failure on that node waits out the back-off first."""
    await add_nodes(client, 1)
    await client.create(DSS, daemon_set())
    clock = FakeClock()
    ctrl = DaemonSetController(client, clock)
    await sync(ctrl)
    await run_pods(client)
    [pod] = await pods(client)
    await set_phase(client, pod, "Failed")
    await sync(ctrl)
    assert await pods(client) == []
    assert "FailedDaemonPod" in events(ctrl)
    await sync(ctrl)
    [replacement] = await pods(client)
    await run_pods(client)
    await set_phase(client, replacement, "Failed")
    await sync(ctrl)
    assert [p["metadata"]["name"] for p in await pods(client)] == [replacement["metadata"]["name"]]
    await clock.advance(2 * BACKOFF_INITIAL + 0.1)
    await sync(ctrl)
    assert await pods(client) == []


async def set_with_failed_pods(client: InProcessClient, ctrl: DaemonSetController, *names: str) -> None:
    """A set whose status has observed generation 1 (a sync before any node), then node-0 with failed pods of
    the set's current revision on it (an old one would also go as an unavailable pod in the rolling update)."""
    ds = await client.create(DSS, daemon_set())
    await sync(ctrl)
    await add_nodes(client, 1)
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "foo", "uid": ds["metadata"]["uid"],
             "controller": True}
    [revision] = (await client.get(REVS))["items"]
    labels = {"name": "foo", du.REVISION_LABEL: revision["metadata"]["labels"][du.REVISION_LABEL]}
    for name in names:
        await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "labels": labels, "ownerReferences": [owner]},
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "i"}]}})
        await set_phase(client, {"metadata": {"name": name}}, "Failed")


async def test_failed_pods_on_one_node_are_deleted_one_back_off_step_apart(client: InProcessClient) -> None:
    """podsShouldBeOnNode: the first failed pod on a node starts its back-off, so a second one waits for it."""
    clock = FakeClock()
    ctrl = DaemonSetController(client, clock)
    await set_with_failed_pods(client, ctrl, "failed-a", "failed-b")
    await sync(ctrl)
    assert [p["metadata"]["name"] for p in await pods(client)] == ["failed-b"]
    assert events(ctrl).count("FailedDaemonPod") == 1
    await sync(ctrl)
    assert [p["metadata"]["name"] for p in await pods(client)] == ["failed-b"]
    await clock.advance(BACKOFF_INITIAL + 0.1)
    await sync(ctrl)
    assert await pods(client) == []


async def test_editing_the_set_starts_the_failed_pod_back_off_over(client: InProcessClient) -> None:
    """failedPodsBackoffKey holds the set's observedGeneration: once a sync has observed an edit, a failed pod
    that was waiting for the old generation's back-off is deleted at once."""
    ctrl = DaemonSetController(client, FakeClock())
    await set_with_failed_pods(client, ctrl, "failed-a", "failed-b")
    await sync(ctrl)
    assert [p["metadata"]["name"] for p in await pods(client)] == ["failed-b"]
    await client.patch(f"{DSS}/foo", {"spec": {"minReadySeconds": 5}}, MERGE)  # generation 2, same template
    await sync(ctrl)  # reads observedGeneration 1: still in back-off; writes observedGeneration 2
    assert [p["metadata"]["name"] for p in await pods(client)] == ["failed-b"]
    await sync(ctrl)
    assert await pods(client) == []


async def test_failed_pods_back_off_gc() -> None:
    """Backoff.GC: a key idle for more than twice the maximum delay is dropped, a recent one kept; a deleted set's
    keys are forgotten at once."""
    clock = FakeClock()
    backoff = FailedPodsBackoff(clock)
    backoff.next("uid-a/1/node-0")
    await clock.advance(2 * BACKOFF_MAX + 1)
    backoff.next("uid-b/1/node-0")
    backoff.next("uid-c/1/node-0")
    backoff.gc()
    assert len(backoff) == 2 and backoff.in_backoff("uid-b/1/node-0") == BACKOFF_INITIAL
    backoff.forget("uid-b")
    assert len(backoff) == 1 and backoff.in_backoff("uid-b/1/node-0") == 0


async def test_failed_pods_back_off_is_collected_every_minute(client: InProcessClient) -> None:
    """The running controller runs the GC each BackoffGCInterval on its clock."""
    clock = FakeClock()
    ctrl = DaemonSetController(client, clock)
    ctrl.backoff.next("uid-a/1/node-0")
    async with running(ctrl.run()):
        await clock.advance(2 * BACKOFF_MAX - BACKOFF_GC_INTERVAL / 2)
        await eventually(lambda: _true(), clock=clock)
        assert len(ctrl.backoff) == 1
        await eventually(lambda: _empty(ctrl.backoff), clock=clock, step=BACKOFF_GC_INTERVAL / 4)


async def _true() -> bool:
    return True


async def _empty(backoff: FailedPodsBackoff) -> bool:
    return len(backoff) == 0


async def roll(client: InProcessClient, ctrl: DaemonSetController, rounds: int = 20) -> list[int]:
    """Play scheduler and agents while the controller updates: the number of pods each round (to check the
    update never goes below its availability budget)."""
    counts = []
    for _ in range(rounds):
        await sync(ctrl)
        await finish_deletions(client)
        await run_pods(client)
        counts.append(len(await pods(client)))
    return counts


@pytest.mark.parametrize(("strategy", "fewest", "most"), [
    pytest.param({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}, 4, 5,
                 id="TestDaemonSetUpdatesPods"),
    pytest.param({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 2}}, 5, 7,
                 id="TestDaemonSetUpdatesPodsWithMaxSurge"),
])
async def test_rolling_update(client: InProcessClient, strategy: Obj, fewest: int, most: int) -> None:
    """A template change replaces every pod within the strategy's budget; the history holds both revisions
    and a rollback to the first template renumbers its revision instead of making a third."""
    await add_nodes(client, 5)
    await client.create(DSS, daemon_set(strategy=strategy))
    ctrl = DaemonSetController(client, FakeClock())
    await roll(client, ctrl, 2)
    first = {p["metadata"]["labels"][du.REVISION_LABEL] for p in await pods(client)}
    await client.patch(f"{DSS}/foo", {"spec": {"template": {"spec": {"containers": [
        {"name": "foo", "image": "foo/bar:2"}]}}}}, "application/strategic-merge-patch+json")
    counts = await roll(client, ctrl)
    assert fewest <= min(counts) and max(counts) <= most, counts
    now = await pods(client)
    assert len(now) == 5 and {p["spec"]["containers"][0]["image"] for p in now} == {"foo/bar:2"}
    assert {p["metadata"]["labels"][du.GENERATION_LABEL] for p in now} == {"2"}
    status = (await get_ds(client))["status"]
    assert (status["updatedNumberScheduled"], status["numberAvailable"], status["observedGeneration"]) == (5, 5, 2)
    revisions = sorted((await client.get(REVS))["items"], key=lambda r: r["revision"])
    assert [r["revision"] for r in revisions] == [1, 2]
    # `kubectl rollout undo`: the first revision's data patched back
    await client.patch(f"{DSS}/foo", revisions[0]["data"], "application/strategic-merge-patch+json")
    await roll(client, ctrl)
    assert {p["metadata"]["labels"][du.REVISION_LABEL] for p in await pods(client)} == first
    by_name = {r["metadata"]["name"]: r["revision"] for r in (await client.get(REVS))["items"]}
    assert by_name == {revisions[0]["metadata"]["name"]: 3, revisions[1]["metadata"]["name"]: 2}


async def test_on_delete_update_strategy(client: InProcessClient) -> None:
    """OnDelete: a template change replaces nothing until a pod is deleted; its replacement is new."""
    await add_nodes(client, 2)
    await client.create(DSS, daemon_set(strategy={"type": "OnDelete"}))
    ctrl = DaemonSetController(client, FakeClock())
    await roll(client, ctrl, 2)
    await client.patch(f"{DSS}/foo", {"spec": {"template": {"spec": {"containers": [
        {"name": "foo", "image": "foo/bar:2"}]}}}}, "application/strategic-merge-patch+json")
    await roll(client, ctrl, 3)
    assert {p["spec"]["containers"][0]["image"] for p in await pods(client)} == {"foo/bar"}
    victim = (await pods(client))[0]
    await client.delete(f"{PODS}/{victim['metadata']['name']}")
    await roll(client, ctrl, 3)
    assert sorted(p["spec"]["containers"][0]["image"] for p in await pods(client)) == ["foo/bar", "foo/bar:2"]


async def test_orphan_pods_are_adopted(client: InProcessClient) -> None:
    """Adoption (ClaimPods): a matching pod without a controller on a node is adopted, not duplicated (OnDelete,
    so the update does not replace it for its older template)."""
    await add_nodes(client, 1)
    ds = await client.create(DSS, daemon_set(strategy={"type": "OnDelete"}))
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan",
                                                                               "labels": {"name": "foo"}},
                               "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "i"}]}})
    ctrl = DaemonSetController(client, FakeClock())
    await sync(ctrl)
    [pod] = await pods(client)
    assert pod["metadata"]["name"] == "orphan"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]


async def test_new_nodes_get_a_pod_and_deleted_sets_stop(client: InProcessClient) -> None:
    """The running controller: a node added later gets its pod through the node informer; once the set is
    deleted, its expectations and back-off go and a further node gets nothing."""
    clock = FakeClock()
    ctrl = DaemonSetController(client, clock)
    await add_nodes(client, 1)
    ds = await client.create(DSS, daemon_set())
    async with running(ctrl.run()):
        async def settled(count: int, desired: int) -> bool:
            status = (await get_ds(client)).get("status") or {}
            return len(await pods(client)) == count and status.get("desiredNumberScheduled") == desired and \
                status.get("currentNumberScheduled") == desired

        await eventually(lambda: settled(1, 1), clock=clock)
        await add_nodes(client, 1, start=1)
        await eventually(lambda: settled(2, 2), clock=clock)
        ctrl.backoff.next(backoff_key(ds, "node-0"))
        await client.delete(f"{DSS}/foo")  # no garbage collector here: its pods stay, orphaned by nobody

        async def forgotten() -> bool:
            return ctrl.sets.store.get((NS, "foo")) is None

        await eventually(forgotten, clock=clock)
        assert len(ctrl.backoff) == 0 and ctrl.expectations.satisfied((NS, "foo"))
        await add_nodes(client, 1, start=2)

        async def node_seen() -> bool:
            return len(ctrl.nodes.store) == 3

        await eventually(node_seen, clock=clock)
        assert ctrl.runner.queue.queued() == []
        assert sorted(du.target_node_name(p) for p in await pods(client)) == ["node-0", "node-1"]


async def test_revision_name_collision_bumps_collision_count(client: InProcessClient) -> None:
    """snapshot's hash-collision handling: a ControllerRevision of another template under
    the name the set's hash gives fails the sync and bumps status.collisionCount; the next sync hashes anew."""
    await add_nodes(client, 1)
    ds = await client.create(DSS, daemon_set())
    taken = f"foo-{compute_hash(ds['spec']['template'], None)}"
    await client.create(REVS, {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": taken},
                               "data": {"spec": {"template": {"other": True}}}, "revision": 1})
    ctrl = DaemonSetController(client, FakeClock())
    with pytest.raises(ApiError):
        await sync(ctrl)
    assert (await get_ds(client))["status"]["collisionCount"] == 1
    await sync(ctrl)
    ours = [r for r in (await client.get(REVS))["items"] if r["metadata"]["name"] != taken]
    assert [r["metadata"]["name"] for r in ours] == [f"foo-{compute_hash(ds['spec']['template'], 1)}"]
    assert len(await pods(client)) == 1


async def test_delete_unscheduled_pod_for_not_existing_node(client: InProcessClient) -> None:
    """TestDeleteUnscheduledPodForNotExistingNode: an unbound pod of the set pinned to a node that does not exist
    is deleted; the existing node gets its own pod."""
    await add_nodes(client, 1)
    await client.create(DSS, daemon_set(strategy={"type": "OnDelete"}))
    pinned = du.replace_node_name_affinity(None, "node-gone")
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stray",
                                                                               "labels": {"name": "foo"}},
                               "spec": {"affinity": pinned, "containers": [{"name": "c", "image": "i"}]}})
    ctrl = DaemonSetController(client, FakeClock())
    await sync(ctrl)
    assert [du.target_node_name(p) for p in await pods(client)] == ["node-0"]


async def test_a_surge_rollout_over_the_watch_deletes_each_old_pod_once(client: InProcessClient) -> None:
    """Running over live informers, a pod that manage deletes is seen terminating (its expectation met) before
    the rolling update runs, which then lists afresh as upstream's does, instead of deleting it a second time
    from the sync's first list (QA saw `SuccessfulDelete (x2)` for every replaced pod)."""
    await add_nodes(client, 3)
    await client.create(DSS, daemon_set(strategy={"type": "RollingUpdate",
                                                  "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}))
    ctrl = DaemonSetController(client, FakeClock())

    async def settled(image: str) -> bool:
        await finish_deletions(client)
        await run_pods(client)
        now = await pods(client)
        return len(now) == 3 and all(p["spec"]["containers"][0]["image"] == image for p in now)

    async with running(ctrl.run()):
        await eventually(lambda: settled("foo/bar"))
        await client.patch(f"{DSS}/foo", {"spec": {"template": {"spec": {"containers": [
            {"name": "foo", "image": "foo/bar:2"}]}}}}, "application/strategic-merge-patch+json")
        await eventually(lambda: settled("foo/bar:2"), timeout=30)
    deletes: Counter[str] = Counter()
    for e in (await client.get("/api/v1/namespaces/default/events"))["items"]:  # sent, aggregated by count
        if e["reason"] == "SuccessfulDelete":
            deletes[e["message"]] += e.get("count", 1)
    for q in ctrl.events.queues:  # not sent yet
        deletes.update(e.event["message"] for e in q._queue if e.event["reason"] == "SuccessfulDelete")  # type: ignore[attr-defined]
    assert len(deletes) == 3 and set(deletes.values()) == {1}, deletes
