"""The PersistentVolume binder controller (kube-controller-manager's `persistentvolume-binder`).

Informers over volumes, claims and classes; one work queue of claim keys and one of volume keys
(upstream's claimQueue and volumeQueue), each reconciled by `pv_binder.Binder` with this module's
`ApiWorld` as its cache and writer. A periodic resync (15 s, upstream's default) re-checks every
object, so a binding step lost to a conflict or a crash is finished later.
"""

from __future__ import annotations

import logging
from typing import Any

from kubelite.client.events import EventSink, event_for
from kubelite.client.http import resource_path
from kubelite.client.informer import Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.informers import SharedInformerHandle, shared_informer
from kubelite.controllers.pv_binder import Binder
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.persistentvolume")

Obj = dict[str, Any]
COMPONENT = "persistentvolume-controller"
RESYNC_PERIOD = 15.0


class ApiWorld:
    """The binder's VolumeWorld over informer caches and the API."""

    def __init__(self, ctl: PersistentVolumeController) -> None:
        self.ctl = ctl
        self.client = ctl.client

    def volumes(self) -> list[Obj]:
        return list(self.ctl.volumes.store.values())

    def volume(self, name: str) -> Obj | None:
        return self.ctl.volumes.get("", name)

    def claim(self, namespace: str, name: str) -> Obj | None:
        return self.ctl.claims.get(namespace, name)

    def storage_class(self, name: str) -> Obj | None:
        return self.ctl.classes.get("", name) if name else None

    async def _put(self, path: str, obj: Obj, informer: SharedInformerHandle) -> Obj:
        out: Obj = await self.client.request("PUT", path, obj)
        # As upstream's storeObjectUpdate: later syncs see our own write at once. The cache is shared: the other
        # controllers see the newer object too, and its watch event reaches them as an update from itself.
        informer.add(out)
        return out

    async def update_volume(self, pv: Obj) -> Obj:
        return await self._put(resource_path("persistentvolumes", name=pv["metadata"]["name"]), pv, self.ctl.volumes)

    async def update_volume_status(self, pv: Obj) -> Obj:
        return await self._put(resource_path("persistentvolumes", name=pv["metadata"]["name"], subresource="status"),
                               pv, self.ctl.volumes)

    async def update_claim(self, claim: Obj) -> Obj:
        ns, name = key_of(claim)
        return await self._put(resource_path("persistentvolumeclaims", ns, name), claim, self.ctl.claims)

    async def update_claim_status(self, claim: Obj) -> Obj:
        ns, name = key_of(claim)
        return await self._put(resource_path("persistentvolumeclaims", ns, name, "status"), claim, self.ctl.claims)

    def event(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        kind = "PersistentVolumeClaim" if obj["metadata"].get("namespace") else "PersistentVolume"
        self.ctl.events.post(event_for({**obj, "apiVersion": "v1"}, reason, message, kind, COMPONENT,
                                       self.ctl.clock.now(), event_type))

    def enqueue_claim(self, namespace: str, name: str) -> None:
        self.ctl.claim_runner.enqueue((namespace, name))


class PersistentVolumeController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.events = EventSink(client, clock)
        self.claim_runner: Runner[Key] = Runner("persistentvolume-binder claims", self._sync_claim, clock)
        self.volume_runner: Runner[Key] = Runner("persistentvolume-binder volumes", self._sync_volume, clock)
        on_claim = self.claim_runner.enqueue
        on_volume = self.volume_runner.enqueue
        self.claims = shared_informer(client, clock, "/api/v1/persistentvolumeclaims", Handlers(
            lambda o: on_claim(key_of(o)), lambda _, n: on_claim(key_of(n)), lambda o: self._claim_deleted(o)))
        self.volumes = shared_informer(client, clock, "/api/v1/persistentvolumes", Handlers(
            lambda o: on_volume(key_of(o)), lambda _, n: on_volume(key_of(n)), lambda o: None))
        self.classes = shared_informer(client, clock, "/apis/storage.k8s.io/v1/storageclasses", Handlers(
            lambda o: self._resync_claims(), lambda o, n: None, lambda o: None))
        self.binder = Binder(ApiWorld(self))

    def _claim_deleted(self, claim: Obj) -> None:
        """A deleted claim releases its volume: sync the volume that was bound to it."""
        name = (claim.get("spec") or {}).get("volumeName")
        if name:
            self.volume_runner.enqueue(("", name))

    def _resync_claims(self) -> None:
        for key in list(self.claims.store):
            self.claim_runner.enqueue(key)

    async def run(self) -> None:
        await run_synced((self.classes, self.volumes, self.claims),
                         (self.claim_runner.run, self.volume_runner.run, self._resync),
                         alongside=(self.events.run,))

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(RESYNC_PERIOD)
            self._resync_claims()
            for key in list(self.volumes.store):
                self.volume_runner.enqueue(key)

    async def _sync_claim(self, key: Key) -> None:
        claim = self.claims.get(*key)
        if claim is not None:
            await self.binder.sync_claim(claim)

    async def _sync_volume(self, key: Key) -> None:
        pv = self.volumes.get(*key)
        if pv is not None:
            await self.binder.sync_volume(pv)
