"""The PV controller's decisions (pkg/controller/volume/persistentvolume/pv_controller.go): syncClaim, syncVolume.

`Binder` reads claims, volumes and classes from a `VolumeWorld` and writes through it, so the same
code runs against the API (persistentvolume.py) and against the in-memory world of the ported
binder_test.go tables. Every write is a full object with its resourceVersion: a concurrent change
makes it fail (409) and the key is synced again from fresh state, as upstream.

Phases: a volume is Available (no claim), Bound, Released (its claim is gone) or Failed (its
reclaim policy could not be carried out); a claim is Pending, Bound or Lost. Reclaim: Retain
keeps a Released volume; Delete of a dynamically provisioned one is its provisioner's (as upstream
leaves an external provisioner's volumes to it: kubelite's own deletes the directory, then the PV —
provisioner.py); Delete of any other volume and Recycle are refused (Failed), as upstream without a
deleter or recycler plugin.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from kubelite.api import volumes as vu

Obj = dict[str, Any]

CLAIM_LOST = "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
CLAIM_LOST_REFERENCE = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
CLAIM_MISBOUND = "Two claims are bound to the same volume, this one is bound incorrectly"
NO_VOLUMES = "no persistent volumes available for this claim and no storage class is set"
WAIT_FOR_CONSUMER = "waiting for first consumer to be created before binding"


class BindError(Exception):
    """An inconsistent binding the controller made itself; the sync fails (and is retried) as upstream's."""


class VolumeWorld(Protocol):
    """What the binder reads (a cache) and how it writes (each write returns the stored object)."""

    def volumes(self) -> list[Obj]: ...

    def volume(self, name: str) -> Obj | None: ...

    def claim(self, namespace: str, name: str) -> Obj | None: ...

    def storage_class(self, name: str) -> Obj | None: ...

    async def update_volume(self, pv: Obj) -> Obj: ...

    async def update_volume_status(self, pv: Obj) -> Obj: ...

    async def update_claim(self, claim: Obj) -> Obj: ...

    async def update_claim_status(self, claim: Obj) -> Obj: ...

    def event(self, obj: Obj, event_type: str, reason: str, message: str) -> None: ...

    def enqueue_claim(self, namespace: str, name: str) -> None: ...


def volume_satisfies_claim(pv: Obj, claim: Obj) -> str:
    """checkVolumeSatisfyClaim: '' when the volume fits the claim, else why not."""
    if vu.capacity(pv) < vu.requested(claim):
        return "requested PV is too small"
    if vu.storage_class(pv) != vu.storage_class(claim):
        return "storageClassName does not match"
    if vu.volume_mode_mismatch(claim, pv):
        return "incompatible volumeMode"
    if not vu.access_modes_fit(claim, pv):
        return "incompatible accessMode"
    return ""


def _ann(obj: Obj) -> dict[str, str]:
    annotations: dict[str, str] = obj["metadata"].setdefault("annotations", {})
    return annotations


def _has_ann(obj: Obj, key: str) -> bool:
    return key in (obj["metadata"].get("annotations") or {})


class Binder:
    def __init__(self, world: VolumeWorld) -> None:
        self.world = world

    # --- claims ----------------------------------------------------------------------------------------

    async def sync_claim(self, claim: Obj) -> None:
        if claim["metadata"].get("deletionTimestamp") and not claim["spec"].get("volumeName"):
            return
        if _has_ann(claim, vu.ANN_BIND_COMPLETED):
            await self._sync_bound_claim(claim)
        else:
            await self._sync_unbound_claim(claim)

    def _delay_binding(self, claim: Obj) -> bool:
        """IsDelayBindingMode without a selected node: the scheduler picks the node first."""
        if _has_ann(claim, vu.ANN_SELECTED_NODE):
            return False
        sc = self.world.storage_class(vu.storage_class(claim))
        return sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer"

    async def _sync_unbound_claim(self, claim: Obj) -> None:
        name = claim["spec"].get("volumeName")
        if not name:
            delay = self._delay_binding(claim)
            pv = vu.find_best_match(claim, self.world.volumes(), delay_binding=delay)
            if pv is not None:
                await self._bind(pv, claim)
                return
            cls = vu.storage_class(claim)
            sc = self.world.storage_class(cls) if cls else None
            if delay:
                self.world.event(claim, "Normal", "WaitForFirstConsumer", WAIT_FOR_CONSUMER)
            elif sc is not None:
                await self._provision(claim, sc)
            elif cls:
                self.world.event(claim, "Warning", "ProvisioningFailed",
                                 f'storageclass.storage.k8s.io "{cls}" not found')
            else:
                self.world.event(claim, "Normal", "FailedBinding", NO_VOLUMES)
            await self._claim_phase(claim, "Pending")
            return
        pv = self.world.volume(name)
        if pv is None:
            await self._claim_phase(claim, "Pending")
        elif not (pv.get("spec") or {}).get("claimRef"):
            mismatch = volume_satisfies_claim(pv, claim)
            if mismatch:  # the user's choice does not fit: say so and wait
                self.world.event(claim, "Warning", "VolumeMismatch",
                                 f'Cannot bind to requested volume "{name}": {mismatch}')
                await self._claim_phase(claim, "Pending")
            else:
                await self._bind(pv, claim)
        elif vu.bound_to_claim(pv, claim):
            await self._bind(pv, claim)  # a binding to finish
        elif _has_ann(claim, vu.ANN_BOUND_BY_CONTROLLER):
            ref = pv["spec"]["claimRef"]
            raise BindError(f'Invalid binding of claim "{claim["metadata"].get("namespace")}/'
                            f'{claim["metadata"]["name"]}" to volume "{name}": volume already claimed by '
                            f'"{ref.get("namespace")}/{ref.get("name")}"')
        else:
            await self._claim_phase(claim, "Pending")  # the volume is bound elsewhere: wait for the user

    async def _sync_bound_claim(self, claim: Obj) -> None:
        name = claim["spec"].get("volumeName")
        if not name:
            await self._lose(claim, "ClaimLost", CLAIM_LOST_REFERENCE)
            return
        pv = self.world.volume(name)
        if pv is None:
            await self._lose(claim, "ClaimLost", CLAIM_LOST)
            return
        ref = (pv.get("spec") or {}).get("claimRef")
        if not ref or vu.bound_to_claim(pv, claim):
            await self._bind(pv, claim)
        else:
            await self._lose(claim, "ClaimMisbound", CLAIM_MISBOUND)

    async def _provision(self, claim: Obj, sc: Obj) -> None:
        """provisionClaim for an external provisioner: name it on the claim and wait for its volume."""
        provisioner = str(sc.get("provisioner", ""))
        if _ann(claim).get(vu.ANN_STORAGE_PROVISIONER) == provisioner:
            return
        updated = copy.deepcopy(claim)
        _ann(updated)[vu.ANN_STORAGE_PROVISIONER] = provisioner
        _ann(updated)[vu.ANN_BETA_STORAGE_PROVISIONER] = provisioner
        claim.update(await self.world.update_claim(updated))
        self.world.event(claim, "Normal", "ExternalProvisioning",
                         f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or "
                         "manually by the system administrator. If volume creation is delayed, please verify that "
                         "the provisioner is running and correctly registered.")

    async def _lose(self, claim: Obj, reason: str, message: str) -> None:
        if (claim.get("status") or {}).get("phase") != "Lost":
            self.world.event(claim, "Warning", reason, message)
        await self._claim_phase(claim, "Lost")

    async def _claim_phase(self, claim: Obj, phase: str) -> None:
        if (claim.get("status") or {}).get("phase") == phase:
            return
        updated = copy.deepcopy(claim)
        status = updated.setdefault("status", {})
        status["phase"] = phase
        if phase != "Bound":
            status.pop("capacity", None)
            status.pop("accessModes", None)
        claim.update(await self.world.update_claim_status(updated))

    async def _bind(self, pv: Obj, claim: Obj) -> None:
        """bind(): the volume to the claim, the volume Bound, the claim to the volume, the claim Bound."""
        pv = await self._bind_volume_to_claim(pv, claim)
        pv = await self._volume_phase(pv, "Bound", "")
        claim = await self._bind_claim_to_volume(claim, pv)
        spec = pv.get("spec") or {}
        status = claim.get("status") or {}
        if status.get("phase") != "Bound" or status.get("capacity") != spec.get("capacity") or \
                status.get("accessModes") != spec.get("accessModes"):
            updated = copy.deepcopy(claim)
            updated["status"] = {**status, "phase": "Bound", "accessModes": spec.get("accessModes"),
                                 "capacity": spec.get("capacity")}
            await self.world.update_claim_status(updated)

    async def _bind_volume_to_claim(self, pv: Obj, claim: Obj) -> Obj:
        meta = claim["metadata"]
        ref = (pv.get("spec") or {}).get("claimRef")
        if ref and ref.get("uid") == meta.get("uid") and vu.bound_to_claim(pv, claim):
            return pv
        updated = copy.deepcopy(pv)
        if not ref:
            _ann(updated)[vu.ANN_BOUND_BY_CONTROLLER] = "yes"
        updated["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                       "namespace": meta.get("namespace"), "name": meta["name"],
                                       "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        return await self.world.update_volume(updated)

    async def _bind_claim_to_volume(self, claim: Obj, pv: Obj) -> Obj:
        name = pv["metadata"]["name"]
        if claim["spec"].get("volumeName") == name and _has_ann(claim, vu.ANN_BIND_COMPLETED):
            return claim
        updated = copy.deepcopy(claim)
        if updated["spec"].get("volumeName") != name:
            _ann(updated)[vu.ANN_BOUND_BY_CONTROLLER] = "yes"
            updated["spec"]["volumeName"] = name
        _ann(updated)[vu.ANN_BIND_COMPLETED] = "yes"
        return await self.world.update_claim(updated)

    async def _volume_phase(self, pv: Obj, phase: str, message: str, reason: str = "") -> Obj:
        status = pv.get("status") or {}
        if status.get("phase") == phase and status.get("message", "") == message:
            return pv
        updated = copy.deepcopy(pv)
        updated["status"] = {"phase": phase, **({"message": message} if message else {}),
                             **({"reason": reason} if reason else {})}
        return await self.world.update_volume_status(updated)

    # --- volumes ---------------------------------------------------------------------------------------

    async def sync_volume(self, pv: Obj) -> None:
        ref = (pv.get("spec") or {}).get("claimRef")
        if not ref:
            await self._volume_phase(pv, "Available", "")
            return
        if not ref.get("uid"):
            await self._volume_phase(pv, "Available", "")  # pre-bound to a claim that is not bound yet
            return
        claim = self.world.claim(str(ref.get("namespace", "")), str(ref.get("name", "")))
        if claim is None or claim["metadata"].get("uid") != ref.get("uid"):
            if (pv.get("status") or {}).get("phase") not in ("Released", "Failed"):
                pv = await self._volume_phase(pv, "Released", "")
            await self._reclaim(pv)
            return
        volume_name = claim["spec"].get("volumeName")
        if not volume_name:
            self.world.enqueue_claim(claim["metadata"]["namespace"], claim["metadata"]["name"])
        elif volume_name == pv["metadata"]["name"]:
            await self._volume_phase(pv, "Bound", "")
        else:
            await self._unbind(pv)  # the claim is bound to another volume

    async def _unbind(self, pv: Obj) -> None:
        """unbindVolume: a controller-made binding is dropped; a user's pre-binding keeps the claim's name."""
        updated = copy.deepcopy(pv)
        if _has_ann(updated, vu.ANN_BOUND_BY_CONTROLLER):
            updated["spec"].pop("claimRef", None)
            _ann(updated).pop(vu.ANN_BOUND_BY_CONTROLLER, None)
        else:
            updated["spec"]["claimRef"].pop("uid", None)
        pv = await self.world.update_volume(updated)
        await self._volume_phase(pv, "Available", "")

    async def _reclaim(self, pv: Obj) -> None:
        policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy", "Retain")
        if policy == "Retain":
            return
        if policy == "Delete" and _has_ann(pv, vu.ANN_DYNAMICALLY_PROVISIONED):
            return  # an external provisioner's volume (kubelite's own included): it deletes the storage, then the PV
        if (pv.get("status") or {}).get("phase") == "Failed":
            return
        reason, message = ("VolumeFailedDelete", "error getting deleter volume plugin for volume "
                                                 f"\"{pv['metadata']['name']}\": no deletable volume plugin matched") \
            if policy == "Delete" else ("VolumeFailedRecycle", "No recycler plugin found for the volume!")
        self.world.event(pv, "Warning", reason, message)
        await self._volume_phase(pv, "Failed", message, reason)
