"""The `pvc-protection` and `pv-protection` controllers (pkg/controller/volume/pvcprotection, pvprotection).

The API server puts `kubernetes.io/pvc-protection` on every claim and `kubernetes.io/pv-protection`
on every volume when they are created (registry/storage.py). A deleted claim keeps its finalizer
while a pod that is not terminated (phase neither Succeeded nor Failed) names it; a deleted volume
keeps its finalizer while it is Bound. So a volume in use is never removed from under a pod.
"""

from __future__ import annotations

import logging
from typing import Any

from kubelite.api import volumes as vu
from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.informer import NAMESPACE_INDEX, Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.volume_protection")

Obj = dict[str, Any]


def pod_uses_claim(pod: Obj, claim_name: str) -> bool:
    """A pod that is not terminated and names the claim (isPodUsingPVC / podIsShutDown)."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    return claim_name in vu.claim_names(pod)


async def remove_finalizer(client: Client, path: str, obj: Obj, finalizer: str) -> None:
    """A merge patch of the finalizer list without `finalizer`, guarded by the resourceVersion it was read at."""
    rest = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
    try:
        await client.patch(path, {"metadata": {"finalizers": rest,
                                               "resourceVersion": obj["metadata"]["resourceVersion"]}},
                           "application/merge-patch+json")
    except ApiError as exc:
        if exc.code != 404:
            raise


class PVCProtectionController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.runner: Runner[Key] = Runner("pvc-protection", self._sync, clock)
        enqueue = self.runner.enqueue
        self.claims = shared_informer(client, clock, "/api/v1/persistentvolumeclaims", Handlers(
            lambda o: enqueue(key_of(o)), lambda _, n: enqueue(key_of(n))))
        self.pods = shared_informer(client, clock, "/api/v1/pods", Handlers(
            lambda o: None, lambda _, n: self._pod_changed(n), self._pod_changed))

    def _pod_changed(self, pod: Obj) -> None:
        ns = pod["metadata"].get("namespace", "")
        for name in vu.claim_names(pod):
            self.runner.enqueue((ns, name))

    async def run(self) -> None:
        await run_synced((self.claims, self.pods), (self.runner.run,))

    async def _sync(self, key: Key) -> None:
        claim = self.claims.get(*key)
        if claim is None or not claim["metadata"].get("deletionTimestamp") or \
                vu.PVC_PROTECTION not in (claim["metadata"].get("finalizers") or []):
            return
        ns, name = key
        if any(pod_uses_claim(p, name) for p in self.pods.by_index(NAMESPACE_INDEX, ns)):
            return
        # upstream re-checks with a live list of the namespace's pods before letting the claim go
        live = await self.client.get(resource_path("pods", ns))
        if any(pod_uses_claim(p, name) for p in live.get("items") or []):
            return
        await remove_finalizer(self.client, resource_path("persistentvolumeclaims", ns, name), claim, vu.PVC_PROTECTION)


class PVProtectionController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.runner: Runner[Key] = Runner("pv-protection", self._sync, clock)
        enqueue = self.runner.enqueue
        self.volumes = shared_informer(client, clock, "/api/v1/persistentvolumes", Handlers(
            lambda o: enqueue(key_of(o)), lambda _, n: enqueue(key_of(n))))

    async def run(self) -> None:
        await run_synced((self.volumes,), (self.runner.run,))

    async def _sync(self, key: Key) -> None:
        pv = self.volumes.get(*key)
        if pv is None or not pv["metadata"].get("deletionTimestamp") or \
                vu.PV_PROTECTION not in (pv["metadata"].get("finalizers") or []):
            return
        if (pv.get("status") or {}).get("phase") == "Bound":
            return
        await remove_finalizer(self.client, resource_path("persistentvolumes", name=key[1]), pv, vu.PV_PROTECTION)
