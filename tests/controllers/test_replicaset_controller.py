"""The ReplicaSet controller against a real API server (in-process client), named after replica_set_test.go.

Most tests drive `sync` directly over informers filled by one list, so what the controller
sees is exactly what the test set up (a watch that lags is an informer not yet refreshed).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubelite.api.errors import ApiError, forbidden
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock, rfc3339
from kubelite.controllers.expectations import EXPECTATIONS_TIMEOUT
from kubelite.controllers.replicaset import ReplicaSetController
from kubelite.testing.builders import make_pod
from tests.controllers.conftest import eventually

Obj = dict[str, Any]
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
RSS = f"/apis/apps/v1/namespaces/{NS}/replicasets"


def replicaset(name: str = "web", replicas: int = 3, min_ready: int = 0) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "minReadySeconds": min_ready,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name, "tier": "front"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


async def refresh(ctrl: ReplicaSetController) -> None:
    await ctrl.replicasets.relist()
    await ctrl.pods.relist()


async def pods(client: InProcessClient) -> list[Obj]:
    return list((await client.get(PODS))["items"])


async def bind(client: InProcessClient, name: str, node: str = "n1") -> None:
    await client.create(f"{PODS}/{name}/binding", {"apiVersion": "v1", "kind": "Binding",
                                                   "metadata": {"name": name}, "target": {"name": node}})


async def sync(ctrl: ReplicaSetController, name: str = "web") -> None:
    await refresh(ctrl)
    await ctrl.sync((NS, name))


async def test_sync_replica_set_creates_pods_with_controller_refs(client: InProcessClient) -> None:
    """TestSyncReplicaSetCreateFailures' happy path / TestControllerBurstReplicas: pods from the template,
    owned by the ReplicaSet (controller, blockOwnerDeletion), SuccessfulCreate events."""
    rs = await client.create(RSS, replicaset(replicas=3))
    ctrl = ReplicaSetController(client, FakeClock())
    await sync(ctrl)
    created = await pods(client)
    assert len(created) == 3
    for p in created:
        assert p["metadata"]["labels"] == {"app": "web", "tier": "front"}
        assert p["metadata"]["name"].startswith("web-")
        assert p["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                                      "uid": rs["metadata"]["uid"], "controller": True,
                                                      "blockOwnerDeletion": True}]
    reasons = [e.event["reason"] for q in ctrl.events.queues for e in q._queue]  # type: ignore[attr-defined]
    assert reasons.count("SuccessfulCreate") == 3


async def test_rs_sync_expectations(client: InProcessClient) -> None:
    """TestRSSyncExpectations / TestSyncReplicaSetDormancy: while the informer has not delivered the pods
    it created, a second sync creates nothing; once they are seen it syncs again; a lost event stops
    blocking after the expectations timeout."""
    await client.create(RSS, replicaset(replicas=2))
    clock = FakeClock()
    ctrl = ReplicaSetController(client, clock)
    await sync(ctrl)
    await ctrl.sync((NS, "web"))  # the informer is behind: no pod seen yet
    assert len(await pods(client)) == 2
    assert not ctrl.expectations.satisfied((NS, "web"))
    for p in await pods(client):  # the watch catches up
        ctrl._pod_added(p)
    assert ctrl.expectations.satisfied((NS, "web"))
    ctrl.expectations.expect_creations((NS, "web"), 1)  # an add that will never be observed
    assert not ctrl.expectations.satisfied((NS, "web"))
    await clock.advance(EXPECTATIONS_TIMEOUT + 1)
    assert ctrl.expectations.satisfied((NS, "web"))


async def test_sync_replica_set_does_nothing(client: InProcessClient) -> None:
    """TestSyncReplicaSetDoesNothing: as many pods as replicas: nothing created or deleted."""
    await client.create(RSS, replicaset(replicas=2))
    ctrl = ReplicaSetController(client, FakeClock())
    await sync(ctrl)
    before = {p["metadata"]["name"] for p in await pods(client)}
    await sync(ctrl)
    assert {p["metadata"]["name"] for p in await pods(client)} == before


async def test_pod_adoption_and_release(client: InProcessClient) -> None:
    """TestPatchPodFails' counterpart / TestUpdateLabelsRemoveControllerRef: a matching orphan is adopted and
    counts; an owned pod whose labels stop matching is released (its controller reference removed)."""
    await client.create(PODS, make_pod("orphan").label("app", "web").obj())
    rs = await client.create(RSS, replicaset(replicas=1))
    ctrl = ReplicaSetController(client, FakeClock())
    await sync(ctrl)
    listed = await pods(client)
    assert [p["metadata"]["name"] for p in listed] == ["orphan"]
    assert listed[0]["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    await client.patch(f"{PODS}/orphan", {"metadata": {"labels": {"app": "other"}}},
                       "application/merge-patch+json")
    await sync(ctrl)
    released = await client.get(f"{PODS}/orphan")
    assert not released["metadata"].get("ownerReferences")
    assert len(await pods(client)) == 2  # and a replacement was created


async def test_do_not_patch_pod_with_other_control_ref(client: InProcessClient) -> None:
    """TestDoNotPatchPodWithOtherControlRef: a matching pod owned by another controller is left alone."""
    other = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "other", "uid": "other-uid", "controller": True}
    body = make_pod("taken").label("app", "web").obj()
    body["metadata"]["ownerReferences"] = [other]
    await client.create(PODS, body)
    await client.create(RSS, replicaset(replicas=1))
    ctrl = ReplicaSetController(client, FakeClock())
    await sync(ctrl)
    assert (await client.get(f"{PODS}/taken"))["metadata"]["ownerReferences"] == [other]
    assert len(await pods(client)) == 2


async def test_do_not_adopt_or_create_if_being_deleted(client: InProcessClient) -> None:
    """TestDoNotAdoptOrCreateIfBeingDeleted: a ReplicaSet being deleted neither adopts nor creates."""
    await client.create(PODS, make_pod("orphan").label("app", "web").obj())
    body = replicaset(replicas=3)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await client.create(RSS, body)
    await client.delete(f"{RSS}/web")
    ctrl = ReplicaSetController(client, FakeClock())
    await sync(ctrl)
    listed = await pods(client)
    assert [p["metadata"]["name"] for p in listed] == ["orphan"]
    assert not listed[0]["metadata"].get("ownerReferences")


async def test_deletion_timestamp_replaced_at_once(client: InProcessClient) -> None:
    """TestDeletionTimestamp (seed 002: availability first): a pod that starts terminating no longer counts,
    so its replacement is created while it is still there."""
    await client.create(RSS, replicaset(replicas=1))
    ctrl = ReplicaSetController(client, FakeClock())
    await sync(ctrl)
    await refresh(ctrl)  # the creation is observed
    (first,) = await pods(client)
    await bind(client, first["metadata"]["name"])
    await client.delete(f"{PODS}/{first['metadata']['name']}")  # bound: graceful, it stays terminating
    await refresh(ctrl)
    terminating = ctrl.pods.get(NS, first["metadata"]["name"])
    assert terminating is not None
    ctrl._pod_updated(first, terminating)
    await ctrl.sync((NS, "web"))
    listed = await pods(client)
    assert len(listed) == 2
    assert sum(1 for p in listed if not p["metadata"].get("deletionTimestamp")) == 1


async def test_scale_down_deletes_ranked_first(client: InProcessClient) -> None:
    """TestGetPodsToDelete through a sync: scaling 3 → 1 deletes the unscheduled and the pending pod and keeps
    the running ready one; SuccessfulDelete events."""
    await client.create(RSS, replicaset(replicas=3))
    ctrl = ReplicaSetController(client, FakeClock())
    await sync(ctrl)
    names = sorted(p["metadata"]["name"] for p in await pods(client))
    keep, pending, _unscheduled = names
    for name in (keep, pending):
        await bind(client, name)
    await client.patch(f"{PODS}/{keep}/status", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(1_700_000_000)}]}},
        "application/merge-patch+json")
    await client.patch(f"{RSS}/web", {"spec": {"replicas": 1}}, "application/merge-patch+json")
    for p in await pods(client):
        ctrl._pod_added(p)
    await sync(ctrl)
    remaining = [p for p in await pods(client) if not p["metadata"].get("deletionTimestamp")]
    assert [p["metadata"]["name"] for p in remaining] == [keep]


@pytest.mark.parametrize(("min_ready", "elapsed", "want_available"), [
    pytest.param(0, 0.0, 1, id="TestReadyReplicas: ready counts as available without minReadySeconds"),
    pytest.param(60, 10.0, 0, id="TestAvailableReplicas: ready for less than minReadySeconds"),
    pytest.param(60, 61.0, 1, id="TestReplicaSetAvailabilityCheck: available after minReadySeconds"),
])
async def test_status_counts(client: InProcessClient, min_ready: int, elapsed: float, want_available: int) -> None:
    await client.create(RSS, replicaset(replicas=2, min_ready=min_ready))
    clock = FakeClock()
    ctrl = ReplicaSetController(client, clock)
    await sync(ctrl)
    ready = sorted(p["metadata"]["name"] for p in await pods(client))[0]
    await client.patch(f"{PODS}/{ready}/status", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(clock.now())}]}},
        "application/merge-patch+json")
    await client.patch(f"{PODS}/{ready}", {"metadata": {"labels": {"tier": None}}}, "application/merge-patch+json")
    for p in await pods(client):
        ctrl._pod_added(p)
    await clock.advance(elapsed)
    await sync(ctrl)
    status = (await client.get(f"{RSS}/web"))["status"]  # a count of 0 is omitted (omitempty), as upstream's
    assert (status["replicas"], status["fullyLabeledReplicas"], status["readyReplicas"],
            status.get("availableReplicas", 0), status["observedGeneration"]) == (2, 1, 1, want_available, 1)


class RefusingCreates(InProcessClient):
    async def create(self, path: str, obj: Obj) -> Obj:
        if path.endswith("/pods"):
            raise forbidden('pods "web-x" is forbidden: exceeded quota')
        return await super().create(path, obj)


async def test_sync_replica_set_create_failures(client: InProcessClient) -> None:
    """TestSyncReplicaSetCreateFailures: a refused create sets ReplicaFailure (FailedCreate), records a
    FailedCreate event, lowers the expectations (slow start: one request, not three) and is retried."""
    await client.create(RSS, replicaset(replicas=3))
    refusing = RefusingCreates(client.server)  # type: ignore[attr-defined]
    ctrl = ReplicaSetController(refusing, FakeClock())
    with pytest.raises(ApiError):
        await sync(ctrl)
    status = (await client.get(f"{RSS}/web"))["status"]
    (cond,) = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("ReplicaFailure", "True", "FailedCreate")
    reasons = [e.event["reason"] for q in ctrl.events.queues for e in q._queue]  # type: ignore[attr-defined]
    assert reasons == ["FailedCreate"]
    assert ctrl.expectations.satisfied((NS, "web"))


async def test_controller_runs_over_watch(client: InProcessClient) -> None:
    """The controller as it runs: informers over the watch, the runner, a pod deleted outright is replaced."""
    await client.create(RSS, replicaset(replicas=2))
    ctrl = ReplicaSetController(client, FakeClock())
    task = asyncio.create_task(ctrl.run())
    try:
        async def two_live() -> bool:
            return sum(1 for p in await pods(client) if not p["metadata"].get("deletionTimestamp")) == 2

        await eventually(two_live)
        victim = (await pods(client))[0]["metadata"]["name"]
        await client.delete(f"{PODS}/{victim}")

        async def replaced() -> bool:
            names = {p["metadata"]["name"] for p in await pods(client)}
            return victim not in names and len(names) == 2

        await eventually(replaced)
        await client.patch(f"{RSS}/web/scale", {"spec": {"replicas": 4}}, "application/merge-patch+json")

        async def four() -> bool:
            status = (await client.get(f"{RSS}/web")).get("status") or {}
            return status.get("replicas") == 4

        await eventually(four)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert len(await pods(client)) == 4
