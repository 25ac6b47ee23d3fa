"""Shared informers (SharedInformerFactory): one watch per collection for every controller on a client, each
controller's handlers called for every change, replay for late handles, failures isolated, clean unsubscribe.
Against a real API server through the in-process client."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.client.informer import Handlers
from kubelite.clock import FakeClock
from kubelite.controllers.attachdetach import AttachDetachController
from kubelite.controllers.endpoints import EndpointsController
from kubelite.controllers.endpointslice import EndpointSliceController
from kubelite.controllers.garbagecollector import GarbageCollector
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.namespace import NamespaceController
from kubelite.controllers.persistentvolume import PersistentVolumeController
from kubelite.controllers.provisioner import ProvisionerController
from kubelite.controllers.replicaset import ReplicaSetController
from kubelite.controllers.rootcacertpublisher import RootCACertPublisher
from kubelite.controllers.serviceaccount import ServiceAccountsController
from kubelite.controllers.statefulset import StatefulSetController
from kubelite.controllers.volume_protection import PVCProtectionController, PVProtectionController
from tests.controllers.conftest import eventually, running

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"


class CountingClient(InProcessClient):
    """The in-process client, counting the watches opened (and recording their paths)."""

    watches = 0

    def __init__(self, server: ApiServer) -> None:
        super().__init__(server)
        self.paths: list[str] = []

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        self.watches += 1
        self.paths.append(path)
        async for event in super().watch(path, params):
            yield event


def pod(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


class Seen:
    def __init__(self, fail: bool = False) -> None:
        self.added: list[str] = []
        self.fail = fail

    def on_add(self, obj: Obj) -> None:
        self.added.append(obj["metadata"]["name"])
        if self.fail:
            raise RuntimeError("a controller's bug")


async def test_controllers_share_one_watch_and_each_sees_every_change(client: InProcessClient) -> None:
    counting = CountingClient(client.server)
    clock = FakeClock()
    a, b = Seen(fail=True), Seen()
    first = shared_informer(counting, clock, "/api/v1/pods", Handlers(a.on_add))
    second = shared_informer(counting, clock, "/api/v1/pods", Handlers(b.on_add))
    first.add_index("by-name", lambda o: [o["metadata"]["name"]])
    second.add_index("by-name", lambda o: [o["metadata"]["name"]])  # already there: kept, no conflict
    async with running(first.run(), second.run()):
        await first.synced.wait()
        await second.synced.wait()
        await counting.create(PODS, pod("p1"))

        async def both_saw_it() -> bool:
            return a.added == ["p1"] and b.added == ["p1"]  # a's handler raising did not keep it from b
        await eventually(both_saw_it)
        assert counting.watches == 1
        assert first.store is second.store and [p["metadata"]["name"] for p in second.by_index("by-name", "p1")] == \
            ["p1"]


async def test_a_handle_made_after_the_list_is_replayed_the_cache(client: InProcessClient) -> None:
    clock = FakeClock()
    await client.create(PODS, pod("p1"))
    early = shared_informer(client, clock, "/api/v1/pods")
    async with running(early.run()):
        await early.synced.wait()
        late_seen = Seen()
        late = shared_informer(client, clock, "/api/v1/pods", Handlers(late_seen.on_add))  # a restarted controller
        async with running(late.run()):
            await late.synced.wait()
            assert late_seen.added == ["p1"]
            await client.create(PODS, pod("p2"))

            async def sees_new() -> bool:
                return late_seen.added == ["p1", "p2"]
            await eventually(sees_new)


async def test_a_stopped_handle_is_unsubscribed_and_the_last_one_stops_the_watch(client: InProcessClient) -> None:
    clock = FakeClock()
    stopped_seen, running_seen = Seen(), Seen()
    stopped = shared_informer(client, clock, "/api/v1/pods", Handlers(stopped_seen.on_add))
    kept = shared_informer(client, clock, "/api/v1/pods", Handlers(running_seen.on_add))
    keep = asyncio.create_task(kept.run())
    async with running(stopped.run()):
        await stopped.synced.wait()
    await client.create(PODS, pod("p1"))

    async def kept_saw_it() -> bool:
        return running_seen.added == ["p1"]
    await eventually(kept_saw_it)
    assert stopped_seen.added == []  # a dead controller's handlers are never called again
    shared = kept._shared
    keep.cancel()
    await asyncio.gather(keep, return_exceptions=True)
    assert shared.task is None and len(shared.subscribers) == 0


SHARED = ["/api/v1/pods", "/api/v1/services", "/api/v1/endpoints", "/apis/discovery.k8s.io/v1/endpointslices",
          "/api/v1/nodes", "/api/v1/namespaces", "/api/v1/serviceaccounts", "/api/v1/configmaps"]


async def test_service_and_account_controllers_use_the_shared_watches(client: InProcessClient) -> None:
    """The EndpointSlice, Endpoints, serviceaccount and root-CA controllers beside the garbage collector (which
    watches every collection), the ReplicaSet and namespace controllers: one watch per collection in all."""
    counting = CountingClient(client.server)
    clock = FakeClock()
    controllers = [EndpointSliceController(counting, clock), EndpointsController(counting, clock),
                   ServiceAccountsController(counting, clock), RootCACertPublisher(counting, clock, b"ca"),
                   ReplicaSetController(counting, clock), NamespaceController(counting, clock),
                   GarbageCollector(counting, clock)]
    async with running(*(c.run() for c in controllers)):
        await counting.create("/api/v1/namespaces", {"metadata": {"name": "fresh"}})

        async def account_and_ca_published() -> bool:
            accounts = (await counting.get("/api/v1/namespaces/fresh/serviceaccounts"))["items"]
            configmaps = (await counting.get("/api/v1/namespaces/fresh/configmaps"))["items"]
            return [a["metadata"]["name"] for a in accounts] == ["default"] and \
                [c["metadata"]["name"] for c in configmaps] == ["kube-root-ca.crt"]
        await eventually(account_and_ca_published)
        watched = Counter(counting.paths)
        assert {path: watched[path] for path in SHARED} == dict.fromkeys(SHARED, 1), watched


STORAGE = ["/api/v1/pods", "/api/v1/persistentvolumeclaims", "/api/v1/persistentvolumes", "/api/v1/nodes",
           "/apis/storage.k8s.io/v1/storageclasses", "/apis/storage.k8s.io/v1/volumeattachments"]


async def test_storage_controllers_use_the_shared_watches(client: InProcessClient, tmp_path: Path) -> None:
    """The PV binder, provisioner, attach/detach and protection controllers beside the StatefulSet and ReplicaSet
    controllers (pods, claims): one watch per collection in all — pods were watched once per storage controller."""
    counting = CountingClient(client.server)
    clock = FakeClock()
    controllers = [PersistentVolumeController(counting, clock), ProvisionerController(counting, clock, tmp_path),
                   AttachDetachController(counting, clock), PVCProtectionController(counting, clock),
                   PVProtectionController(counting, clock), StatefulSetController(counting, clock),
                   ReplicaSetController(counting, clock)]
    async with running(*(c.run() for c in controllers)):
        await counting.create(PODS, pod("p1"))

        async def every_controller_saw_the_pod() -> bool:
            return all(c.pods.get("default", "p1") is not None and c.pods.synced.is_set()
                       for c in (controllers[2], controllers[3], *controllers[5:]))
        await eventually(every_controller_saw_the_pod)
        watched = Counter(counting.paths)
        assert {path: watched[path] for path in STORAGE} == dict.fromkeys(STORAGE, 1), watched
