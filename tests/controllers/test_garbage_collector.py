"""The garbage collector and the namespace controller against a real API server, with the ReplicaSet
controller where owners need dependents. Named after test/integration/garbagecollector cases."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock
from kubelite.controllers.garbagecollector import GarbageCollector
from kubelite.controllers.namespace import NamespaceController
from kubelite.controllers.replicaset import ReplicaSetController
from kubelite.testing.builders import make_pod
from tests.controllers.conftest import eventually, running

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"
RSS = "/apis/apps/v1/namespaces/default/replicasets"
CMS = "/api/v1/namespaces/default/persistentvolumeclaims"


def replicaset(name: str = "web", replicas: int = 2) -> Obj:
    return {"metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def owned_pod(name: str, owner: Obj, block: bool = True, controller: bool = False) -> Obj:
    body = make_pod(name).obj()
    body["metadata"]["ownerReferences"] = [{"apiVersion": owner.get("apiVersion", "apps/v1"),
                                            "kind": owner.get("kind", "ReplicaSet"),
                                            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                            "blockOwnerDeletion": block, "controller": controller}]
    return body


async def names(client: InProcessClient, path: str = PODS) -> set[str]:
    return {o["metadata"]["name"] for o in (await client.get(path))["items"]}


async def gone(client: InProcessClient, path: str) -> bool:
    try:
        await client.get(path)
    except Exception as exc:
        return getattr(exc, "code", None) == 404
    return False


async def test_cascading_deletion(client: InProcessClient) -> None:
    """TestCascadingDeletion: deleting an owner (background, kubectl's default) deletes its dependents; a pod
    with another, solid owner loses only the reference to the deleted one."""
    clock = FakeClock()
    rs = await client.create(RSS, replicaset("to-be-deleted", replicas=0))
    keeper = await client.create(RSS, replicaset("remaining", replicas=0))
    await client.create(PODS, owned_pod("dependent", rs))
    both = owned_pod("two-owners", rs)
    both["metadata"]["ownerReferences"].append(owned_pod("x", keeper)["metadata"]["ownerReferences"][0])
    await client.create(PODS, both)
    async with running(GarbageCollector(client, clock).run()):
        await client.delete(f"{RSS}/to-be-deleted", {"propagationPolicy": "Background"})

        async def collected() -> bool:
            return await names(client) == {"two-owners"}

        await eventually(collected, clock=clock)

        async def reference_dropped() -> bool:
            refs = (await client.get(f"{PODS}/two-owners"))["metadata"]["ownerReferences"]
            return [r["name"] for r in refs] == ["remaining"]

        await eventually(reference_dropped, clock=clock)


async def test_create_with_non_existent_owner(client: InProcessClient) -> None:
    """TestCreateWithNonExistentOwner: an object created with an owner that does not exist is collected."""
    clock = FakeClock()
    ghost = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "ghost", "uid": "no-such-uid"}}
    async with running(GarbageCollector(client, clock).run()):
        await client.create(PODS, owned_pod("orphaned", ghost))

        async def collected() -> bool:
            return await gone(client, f"{PODS}/orphaned")

        await eventually(collected, clock=clock)


async def test_orphaning(client: InProcessClient) -> None:
    """TestOrphaning: propagationPolicy=Orphan keeps the dependents without their owner reference, then the
    owner goes (its `orphan` finalizer removed)."""
    clock = FakeClock()
    rs = await client.create(RSS, replicaset(replicas=2))
    async with running(ReplicaSetController(client, clock).run(), GarbageCollector(client, clock).run()):
        async def two_pods() -> bool:
            return len(await names(client)) == 2

        await eventually(two_pods, clock=clock)
        deleting = await client.delete(f"{RSS}/web", {"propagationPolicy": "Orphan"})
        assert deleting["metadata"]["finalizers"] == ["orphan"]

        async def owner_gone() -> bool:
            return await gone(client, f"{RSS}/web")

        await eventually(owner_gone, clock=clock)
    pods = (await client.get(PODS))["items"]
    assert len(pods) == 2
    assert all(not p["metadata"].get("ownerReferences") for p in pods), rs["metadata"]["uid"]


async def test_blocking_owner_ref_does_block(client: InProcessClient) -> None:
    """TestBlockingOwnerRefDoesBlock / foreground deletion: the owner stays (foregroundDeletion) while a
    dependent that blocks it exists — a bound pod terminates gracefully, never forced — and goes after."""
    clock = FakeClock()
    rs = await client.create(RSS, replicaset(replicas=0))
    await client.create(PODS, owned_pod("blocker", rs, block=True))
    await client.create("/api/v1/namespaces/default/pods/blocker/binding",
                        {"metadata": {"name": "blocker"}, "target": {"name": "n1"}})
    async with running(GarbageCollector(client, clock).run()):
        deleting = await client.delete(f"{RSS}/web", {"propagationPolicy": "Foreground"})
        assert deleting["metadata"]["finalizers"] == ["foregroundDeletion"]

        async def pod_terminating() -> bool:
            return bool((await client.get(f"{PODS}/blocker"))["metadata"].get("deletionTimestamp"))

        await eventually(pod_terminating, clock=clock)
        for _ in range(20):
            await clock.advance(0.1)
        assert not await gone(client, f"{RSS}/web")  # still blocked by the terminating pod
        pod = await client.get(f"{PODS}/blocker")
        assert pod["metadata"]["deletionGracePeriodSeconds"] == 30  # graceful: the agent confirms the kill
        await client.delete(f"{PODS}/blocker", {"gracePeriodSeconds": 0})  # as the agent does, once it is dead

        async def owner_gone() -> bool:
            return await gone(client, f"{RSS}/web")

        await eventually(owner_gone, clock=clock)


async def test_non_blocking_owner_ref_does_not_block(client: InProcessClient) -> None:
    """TestNonBlockingOwnerRefDoesNotBlock: a dependent without blockOwnerDeletion does not hold a foreground
    deletion; it is deleted all the same."""
    clock = FakeClock()
    rs = await client.create(RSS, replicaset(replicas=0))
    await client.create(PODS, owned_pod("free", rs, block=False))
    await client.create("/api/v1/namespaces/default/pods/free/binding",
                        {"metadata": {"name": "free"}, "target": {"name": "n1"}})
    async with running(GarbageCollector(client, clock).run()):
        await client.delete(f"{RSS}/web", {"propagationPolicy": "Foreground"})

        async def owner_gone() -> bool:
            return await gone(client, f"{RSS}/web")

        await eventually(owner_gone, clock=clock)

        async def pod_terminating() -> bool:
            return bool((await client.get(f"{PODS}/free"))["metadata"].get("deletionTimestamp"))

        await eventually(pod_terminating, clock=clock)


async def test_namespace_deletion_removes_content(client: InProcessClient) -> None:
    """The namespace controller (moved out of the API server): Terminating, new content refused, content
    deleted through the API, then the namespace removed."""
    clock = FakeClock()
    await client.create("/api/v1/namespaces", {"metadata": {"name": "gone"}})
    await client.create("/api/v1/namespaces/gone/pods", make_pod("p", "gone").obj())
    await client.create("/apis/apps/v1/namespaces/gone/replicasets", replicaset(replicas=0))
    ns = await client.delete("/api/v1/namespaces/gone")
    assert ns["status"]["phase"] == "Terminating"
    with pytest.raises(Exception, match="being terminated"):
        await client.create("/api/v1/namespaces/gone/pods", make_pod("q", "gone").obj())
    async with running(NamespaceController(client, clock).run()):
        async def namespace_gone() -> bool:
            return await gone(client, "/api/v1/namespaces/gone")

        await eventually(namespace_gone, clock=clock, step=0.5)
    assert await names(client, "/api/v1/pods") == set()


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FOOS = "/apis/example.com/v1/namespaces/{ns}/foos"


async def install_foos(client: InProcessClient) -> None:
    """A CRD of namespaced `foos`, once it is Established (its resources are served)."""
    await client.create(CRDS, {"metadata": {"name": "foos.example.com"}, "spec": {
        "group": "example.com", "scope": "Namespaced", "names": {"plural": "foos", "kind": "Foo"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})

    async def established() -> bool:
        crd = await client.get(f"{CRDS}/foos.example.com")
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    await eventually(established)


async def test_custom_resource_cascading_deletion(client: InProcessClient) -> None:
    """TestCustomResourceCascadingDeletion: a custom resource owned by another is collected with it — here with
    the CRD created after the collector started, which finds it at its next discovery."""
    clock = FakeClock()
    async with running(GarbageCollector(client, clock).run()):
        await install_foos(client)
        await clock.advance(30)
        owner = await client.create(FOOS.format(ns="default"), {"apiVersion": "example.com/v1", "kind": "Foo",
                                                                "metadata": {"name": "owner"}})
        ref = {"apiVersion": "example.com/v1", "kind": "Foo", "name": "owner", "uid": owner["metadata"]["uid"]}
        dependent = {"apiVersion": "example.com/v1", "kind": "Foo",
                     "metadata": {"name": "dependent", "ownerReferences": [ref]}}
        await client.create(FOOS.format(ns="default"), dependent)
        await client.delete(f"{FOOS.format(ns='default')}/owner")

        async def collected() -> bool:
            return await names(client, FOOS.format(ns="default")) == set()

        await eventually(collected, clock=clock)


async def test_namespace_deletion_removes_custom_resources(client: InProcessClient) -> None:
    """The namespace controller's discovery at each deletion finds the custom resources in the namespace."""
    clock = FakeClock()
    await install_foos(client)
    await client.create("/api/v1/namespaces", {"metadata": {"name": "crs"}})
    await client.create(FOOS.format(ns="crs"), {"apiVersion": "example.com/v1", "kind": "Foo",
                                                "metadata": {"name": "f"}})
    await client.delete("/api/v1/namespaces/crs")
    async with running(NamespaceController(client, clock).run()):
        async def namespace_gone() -> bool:
            return await gone(client, "/api/v1/namespaces/crs")

        await eventually(namespace_gone, clock=clock, step=0.5)
    assert await names(client, "/apis/example.com/v1/foos") == set()
