"""The ReplicationController controller (ReplicationManager): the ReplicaSet controller's code over core/v1
ReplicationControllers, against a real API server (in-process client). Upstream's replication manager has no tests
of its own beyond the ReplicaSet controller's (it runs that code through a conversion); these pin down what the
kind changes: the selector as a plain label map, the owner references' group and kind, the status subresource's
path, the scale subresource and the events' source."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock
from kubelite.controllers.replicaset import ReplicationManager
from kubelite.testing.builders import make_pod
from tests.controllers.conftest import eventually

Obj = dict[str, Any]
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
RCS = f"/api/v1/namespaces/{NS}/replicationcontrollers"


def controller(name: str = "web", replicas: int = 2) -> Obj:
    """A ReplicationController as `kubectl create` would send one: no selector (defaulted from the labels)."""
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name},
            "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": name}},
                                                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


async def live_pods(client: InProcessClient) -> list[Obj]:
    return [p for p in (await client.get(PODS))["items"] if not p["metadata"].get("deletionTimestamp")]


async def test_sync_creates_owned_pods_and_writes_status(client: InProcessClient) -> None:
    rc = await client.create(RCS, controller(replicas=3))
    ctrl = ReplicationManager(client, FakeClock())
    await ctrl.replicasets.relist()
    await ctrl.pods.relist()
    await ctrl.sync((NS, "web"))
    created = await live_pods(client)
    assert len(created) == 3
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in created} == {"ReplicationController"}
    assert created[0]["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "ReplicationController",
                                                          "name": "web", "uid": rc["metadata"]["uid"],
                                                          "controller": True, "blockOwnerDeletion": True}]
    events = [e.event for q in ctrl.events.queues for e in q._queue]  # type: ignore[attr-defined]
    assert {(e["reason"], e["source"]["component"], e["involvedObject"]["kind"]) for e in events} == {
        ("SuccessfulCreate", "replication-controller", "ReplicationController")}
    await ctrl.pods.relist()
    await ctrl.sync((NS, "web"))
    assert (await client.get(f"{RCS}/web"))["status"]["replicas"] == 3


async def test_orphans_matching_the_label_map_are_adopted_others_left(client: InProcessClient) -> None:
    await client.create(RCS, controller(replicas=1))
    await client.create(PODS, make_pod("mine").label("app", "web").obj())
    await client.create(PODS, make_pod("other").label("app", "db").obj())
    ctrl = ReplicationManager(client, FakeClock())
    await ctrl.replicasets.relist()
    await ctrl.pods.relist()
    await ctrl.sync((NS, "web"))
    owned = {p["metadata"]["name"]: bool(p["metadata"].get("ownerReferences")) for p in await live_pods(client)}
    assert owned == {"mine": True, "other": False}, "the adopted pod fills the one replica: none created"


async def test_manager_runs_over_watch_and_follows_the_scale_subresource(client: InProcessClient) -> None:
    """As it runs: a deleted pod is replaced, and `kubectl scale rc` (the scale subresource) scales it."""
    await client.create(RCS, controller(replicas=2))
    ctrl = ReplicationManager(client, FakeClock())
    task = asyncio.create_task(ctrl.run())
    try:
        async def count(n: int) -> bool:
            return len(await live_pods(client)) == n

        await eventually(lambda: count(2))
        await client.delete(f"{PODS}/{(await live_pods(client))[0]['metadata']['name']}")
        await eventually(lambda: count(2))
        await client.patch(f"{RCS}/web/scale", {"spec": {"replicas": 1}}, "application/merge-patch+json")
        await eventually(lambda: count(1))
        scale = await client.get(f"{RCS}/web/scale")
        assert (scale["spec"]["replicas"], scale["status"]["selector"]) == (1, "app=web")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.mark.parametrize(("body", "field", "message"), [
    pytest.param({"spec": {"selector": {"app": "x"}}}, "spec.template", "Required value",
                 id="no template: Required on the template itself (a pointer upstream)"),
    pytest.param({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}, "spec.selector",
                 "Required value", id="empty selector, template without labels (upstream's 'empty selector')"),
    pytest.param({"spec": {"selector": {"foo": "bar"}, "template": {
        "metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
        "spec.template.metadata.labels", "`selector` does not match template `labels`", id="selector_doesnt_match"),
    pytest.param({"spec": {"replicas": -1, "template": {
        "metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
        "spec.replicas", "must be greater than or equal to 0", id="negative_replicas"),
    pytest.param({"spec": {"template": {"metadata": {"labels": {"app": "x"}}, "spec": {
        "activeDeadlineSeconds": 5, "containers": [{"name": "c", "image": "i"}]}}}},
        "spec.template.spec.activeDeadlineSeconds", "Forbidden: activeDeadlineSeconds in ReplicationController is not "
        "Supported", id="activeDeadlineSeconds is forbidden"),
])
async def test_validate_replication_controller(client: InProcessClient, body: Obj, field: str, message: str) -> None:
    """TestValidateReplicationController's error cases by name, through the API (defaults applied first)."""
    from kubelite.api.errors import ApiError

    with pytest.raises(ApiError) as refused:
        await client.create(RCS, {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "bad"},
                                  **body})
    assert refused.value.code == 422
    assert f"is invalid: {field}: " in refused.value.message and message in refused.value.message, \
        refused.value.message


async def test_defaults_fill_the_selector_labels_and_replicas(client: InProcessClient) -> None:
    """SetDefaults_ReplicationController: the template's labels as selector and as the object's labels; 1 replica."""
    body = controller()
    del body["spec"]["replicas"]
    rc = await client.create(RCS, body)
    assert (rc["spec"]["selector"], rc["metadata"]["labels"], rc["spec"]["replicas"]) == (
        {"app": "web"}, {"app": "web"}, 1)
