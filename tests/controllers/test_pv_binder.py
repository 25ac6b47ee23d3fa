"""The PV controller's sync tables, ported by name from pkg/controller/volume/persistentvolume/binder_test.go.

Each case fills an in-memory world with volumes and claims, calls syncClaim or syncVolume once
(TestSync) or until nothing changes (TestMultiSync), and compares the binding fields, phases,
binding annotations and events with upstream's expectations. Unbound volumes start Available
(upstream's current tables; FindMatchingVolume skips volumes in other phases).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelite.api import volumes as vu
from kubelite.controllers.pv_binder import Binder, BindError

Obj = dict[str, Any]
NS = "default"
BBC, BC = vu.ANN_BOUND_BY_CONTROLLER, vu.ANN_BIND_COMPLETED
LABELS = {"foo": "true", "bar": "false"}


def volume(name: str, size: str, claim_uid: str = "", claim: str = "", phase: str = "Available",
           policy: str = "Retain", *anns: str, cls: str = "", labels: Obj | None = None) -> Obj:
    pv: Obj = {"metadata": {"name": name, "uid": f"pv-{name}", "annotations": {a: "yes" for a in anns},
                            "labels": labels or {}},
               "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                        "persistentVolumeReclaimPolicy": policy, "storageClassName": cls, "hostPath": {"path": "/x"}},
               "status": {"phase": phase}}
    if claim:
        pv["spec"]["claimRef"] = {"namespace": NS, "name": claim, **({"uid": claim_uid} if claim_uid else {})}
    return pv


def claim(name: str, uid: str, size: str, volume_name: str = "", phase: str = "Pending", *anns: str,
          cls: str = "", selector: Obj | None = None) -> Obj:
    c: Obj = {"metadata": {"name": name, "namespace": NS, "uid": uid, "annotations": {a: "yes" for a in anns}},
              "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                       "volumeName": volume_name, "storageClassName": cls},
              "status": {"phase": phase}}
    if selector is not None:
        c["spec"]["selector"] = {"matchLabels": selector}
    return c


@dataclass
class World:
    """A VolumeWorld in memory: writes replace the stored object, as upstream's fake reactor."""

    pvs: dict[str, Obj]
    pvcs: dict[str, Obj]
    events: list[str] = field(default_factory=list)
    changed: bool = False

    def volumes(self) -> list[Obj]:
        return list(self.pvs.values())

    def volume(self, name: str) -> Obj | None:
        return self.pvs.get(name)

    def claim(self, namespace: str, name: str) -> Obj | None:
        return self.pvcs.get(name)

    def storage_class(self, name: str) -> Obj | None:
        return None

    async def _write(self, store: dict[str, Obj], obj: Obj) -> Obj:
        self.changed = True
        store[obj["metadata"]["name"]] = copy.deepcopy(obj)
        return copy.deepcopy(obj)

    async def update_volume(self, pv: Obj) -> Obj:
        return await self._write(self.pvs, pv)

    async def update_volume_status(self, pv: Obj) -> Obj:
        return await self._write(self.pvs, pv)

    async def update_claim(self, c: Obj) -> Obj:
        return await self._write(self.pvcs, c)

    async def update_claim_status(self, c: Obj) -> Obj:
        return await self._write(self.pvcs, c)

    def event(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        self.events.append(f"{event_type} {reason}")

    def enqueue_claim(self, namespace: str, name: str) -> None:
        return None


def _volume_view(pv: Obj) -> tuple[Any, ...]:
    ref = pv["spec"].get("claimRef") or {}
    return (pv["metadata"]["name"], ref.get("name", ""), ref.get("uid", ""), pv["status"]["phase"],
            BBC in (pv["metadata"].get("annotations") or {}))


def _claim_view(c: Obj) -> tuple[Any, ...]:
    anns = c["metadata"].get("annotations") or {}
    return (c["metadata"]["name"], c["spec"].get("volumeName", ""), c["status"]["phase"], BBC in anns, BC in anns)


@dataclass
class Case:
    name: str
    volumes: list[Obj]
    expected_volumes: list[Obj]
    claims: list[Obj]
    expected_claims: list[Obj]
    events: list[str]
    sync: str  # "claim", "volume" or "claim-error"


SYNC_CASES = [
    Case("1-1 - successful bind", [volume("volume1-1", "1Gi")],
         [volume("volume1-1", "1Gi", "uid1-1", "claim1-1", "Bound", "Retain", BBC)],
         [claim("claim1-1", "uid1-1", "1Gi")], [claim("claim1-1", "uid1-1", "1Gi", "volume1-1", "Bound", BBC, BC)],
         [], "claim"),
    Case("1-2 - noop", [volume("volume1-2", "1Gi")], [volume("volume1-2", "1Gi")],
         [claim("claim1-2", "uid1-2", "10Gi")], [claim("claim1-2", "uid1-2", "10Gi")],
         ["Normal FailedBinding"], "claim"),
    Case("1-3 - reset to Pending", [volume("volume1-3", "1Gi")], [volume("volume1-3", "1Gi")],
         [claim("claim1-3", "uid1-3", "10Gi", "", "Bound")],
         [claim("claim1-3", "uid1-3", "10Gi")],
         ["Normal FailedBinding"], "claim"),
    Case("1-4 - smallest volume", [volume("volume1-4_1", "10Gi"), volume("volume1-4_2", "1Gi")],
         [volume("volume1-4_1", "10Gi"), volume("volume1-4_2", "1Gi", "uid1-4", "claim1-4", "Bound", "Retain", BBC)],
         [claim("claim1-4", "uid1-4", "1Gi")], [claim("claim1-4", "uid1-4", "1Gi", "volume1-4_2", "Bound", BBC, BC)],
         [], "claim"),
    Case("1-5 - prebound volume by name - success",
         [volume("volume1-5_1", "10Gi", "", "claim1-5", "Pending"), volume("volume1-5_2", "1Gi")],
         [volume("volume1-5_1", "10Gi", "uid1-5", "claim1-5", "Bound"), volume("volume1-5_2", "1Gi")],
         [claim("claim1-5", "uid1-5", "1Gi")], [claim("claim1-5", "uid1-5", "1Gi", "volume1-5_1", "Bound", BBC, BC)],
         [], "claim"),
    Case("1-6 - prebound volume by UID - success",
         [volume("volume1-6_1", "10Gi", "uid1-6", "claim1-6", "Pending"), volume("volume1-6_2", "1Gi")],
         [volume("volume1-6_1", "10Gi", "uid1-6", "claim1-6", "Bound"), volume("volume1-6_2", "1Gi")],
         [claim("claim1-6", "uid1-6", "1Gi")], [claim("claim1-6", "uid1-6", "1Gi", "volume1-6_1", "Bound", BBC, BC)],
         [], "claim"),
    Case("1-7 - prebound volume to different claim", [volume("volume1-7", "10Gi", "uid1-777", "claim1-7", "Pending")],
         [volume("volume1-7", "10Gi", "uid1-777", "claim1-7", "Pending")],
         [claim("claim1-7", "uid1-7", "1Gi")], [claim("claim1-7", "uid1-7", "1Gi")], ["Normal FailedBinding"], "claim"),
    Case("1-8 - complete bind after crash - PV bound",
         [volume("volume1-8", "1Gi", "uid1-8", "claim1-8", "Pending", "Retain", BBC)],
         [volume("volume1-8", "1Gi", "uid1-8", "claim1-8", "Bound", "Retain", BBC)],
         [claim("claim1-8", "uid1-8", "1Gi")], [claim("claim1-8", "uid1-8", "1Gi", "volume1-8", "Bound", BBC, BC)],
         [], "claim"),
    Case("1-9 - complete bind after crash - PV status saved",
         [volume("volume1-9", "1Gi", "uid1-9", "claim1-9", "Bound", "Retain", BBC)],
         [volume("volume1-9", "1Gi", "uid1-9", "claim1-9", "Bound", "Retain", BBC)],
         [claim("claim1-9", "uid1-9", "1Gi")], [claim("claim1-9", "uid1-9", "1Gi", "volume1-9", "Bound", BBC, BC)],
         [], "claim"),
    Case("1-10 - complete bind after crash - PVC bound",
         [volume("volume1-10", "1Gi", "uid1-10", "claim1-10", "Bound", "Retain", BBC)],
         [volume("volume1-10", "1Gi", "uid1-10", "claim1-10", "Bound", "Retain", BBC)],
         [claim("claim1-10", "uid1-10", "1Gi", "volume1-10", "Pending", BBC, BC)],
         [claim("claim1-10", "uid1-10", "1Gi", "volume1-10", "Bound", BBC, BC)], [], "claim"),
    Case("1-11 - bind when selector matches", [volume("volume1-1", "1Gi", labels=LABELS)],
         [volume("volume1-1", "1Gi", "uid1-1", "claim1-1", "Bound", "Retain", BBC, labels=LABELS)],
         [claim("claim1-1", "uid1-1", "1Gi", selector=LABELS)],
         [claim("claim1-1", "uid1-1", "1Gi", "volume1-1", "Bound", BBC, BC, selector=LABELS)], [], "claim"),
    Case("1-12 - do not bind when selector does not match", [volume("volume1-1", "1Gi")], [volume("volume1-1", "1Gi")],
         [claim("claim1-1", "uid1-1", "1Gi", selector=LABELS)], [claim("claim1-1", "uid1-1", "1Gi", selector=LABELS)],
         ["Normal FailedBinding"], "claim"),
    Case("2-1 - claim prebound to non-existing volume - noop", [], [],
         [claim("claim2-1", "uid2-1", "10Gi", "volume2-1")], [claim("claim2-1", "uid2-1", "10Gi", "volume2-1")],
         [], "claim"),
    Case("2-2 - claim prebound to non-existing volume - reset status", [], [],
         [claim("claim2-2", "uid2-2", "10Gi", "volume2-2", "Bound")],
         [claim("claim2-2", "uid2-2", "10Gi", "volume2-2")], [], "claim"),
    Case("2-3 - claim prebound to unbound volume", [volume("volume2-3", "1Gi", phase="Pending")],
         [volume("volume2-3", "1Gi", "uid2-3", "claim2-3", "Bound", "Retain", BBC)],
         [claim("claim2-3", "uid2-3", "1Gi", "volume2-3")],
         [claim("claim2-3", "uid2-3", "1Gi", "volume2-3", "Bound", BC)], [], "claim"),
    Case("2-4 - claim prebound to prebound volume by name", [volume("volume2-4", "1Gi", "", "claim2-4", "Pending")],
         [volume("volume2-4", "1Gi", "uid2-4", "claim2-4", "Bound")],
         [claim("claim2-4", "uid2-4", "1Gi", "volume2-4")],
         [claim("claim2-4", "uid2-4", "1Gi", "volume2-4", "Bound", BC)], [], "claim"),
    Case("2-5 - claim prebound to prebound volume by UID",
         [volume("volume2-5", "1Gi", "uid2-5", "claim2-5", "Pending")],
         [volume("volume2-5", "1Gi", "uid2-5", "claim2-5", "Bound")],
         [claim("claim2-5", "uid2-5", "1Gi", "volume2-5")],
         [claim("claim2-5", "uid2-5", "1Gi", "volume2-5", "Bound", BC)], [], "claim"),
    Case("2-6 - claim prebound to already bound volume",
         [volume("volume2-6", "1Gi", "uid2-6_1", "claim2-6_1", "Bound")],
         [volume("volume2-6", "1Gi", "uid2-6_1", "claim2-6_1", "Bound")],
         [claim("claim2-6", "uid2-6", "1Gi", "volume2-6", "Bound")],
         [claim("claim2-6", "uid2-6", "1Gi", "volume2-6")],
         [], "claim"),
    Case("2-7 - claim bound by controller to already bound volume",
         [volume("volume2-7", "1Gi", "uid2-7_1", "claim2-7_1", "Bound")],
         [volume("volume2-7", "1Gi", "uid2-7_1", "claim2-7_1", "Bound")],
         [claim("claim2-7", "uid2-7", "1Gi", "volume2-7", "Bound", BBC)],
         [claim("claim2-7", "uid2-7", "1Gi", "volume2-7", "Bound", BBC)], [], "claim-error"),
    Case("2-8 - claim prebound to unbound volume that does not match the selector",
         [volume("volume2-3", "1Gi", phase="Pending")],
         [volume("volume2-3", "1Gi", "uid2-3", "claim2-3", "Bound", "Retain", BBC)],
         [claim("claim2-3", "uid2-3", "1Gi", "volume2-3", selector=LABELS)],
         [claim("claim2-3", "uid2-3", "1Gi", "volume2-3", "Bound", BC, selector=LABELS)], [], "claim"),
    Case("3-1 - bound claim with missing VolumeName", [], [],
         [claim("claim3-1", "uid3-1", "10Gi", "", "Bound", BBC, BC)],
         [claim("claim3-1", "uid3-1", "10Gi", "", "Lost", BBC, BC)], ["Warning ClaimLost"], "claim"),
    Case("3-2 - bound claim with missing volume", [], [],
         [claim("claim3-2", "uid3-2", "10Gi", "volume3-2", "Bound", BBC, BC)],
         [claim("claim3-2", "uid3-2", "10Gi", "volume3-2", "Lost", BBC, BC)], ["Warning ClaimLost"], "claim"),
    Case("3-3 - bound claim with unbound volume", [volume("volume3-3", "10Gi", phase="Pending")],
         [volume("volume3-3", "10Gi", "uid3-3", "claim3-3", "Bound", "Retain", BBC)],
         [claim("claim3-3", "uid3-3", "10Gi", "volume3-3", "Pending", BBC, BC)],
         [claim("claim3-3", "uid3-3", "10Gi", "volume3-3", "Bound", BBC, BC)], [], "claim"),
    Case("3-4 - bound claim with prebound volume", [volume("volume3-4", "10Gi", "claim3-4-x", "claim3-4", "Pending")],
         [volume("volume3-4", "10Gi", "claim3-4-x", "claim3-4", "Pending")],
         [claim("claim3-4", "uid3-4", "10Gi", "volume3-4", "Pending", BBC, BC)],
         [claim("claim3-4", "uid3-4", "10Gi", "volume3-4", "Lost", BBC, BC)], ["Warning ClaimMisbound"], "claim"),
    Case("3-5 - bound claim with bound volume", [volume("volume3-5", "10Gi", "uid3-5", "claim3-5", "Pending")],
         [volume("volume3-5", "10Gi", "uid3-5", "claim3-5", "Bound")],
         [claim("claim3-5", "uid3-5", "10Gi", "volume3-5", "Pending", BC)],
         [claim("claim3-5", "uid3-5", "10Gi", "volume3-5", "Bound", BC)], [], "claim"),
    Case("3-6 - bound claim with bound volume", [volume("volume3-6", "10Gi", "uid3-6-x", "claim3-6-x", "Pending")],
         [volume("volume3-6", "10Gi", "uid3-6-x", "claim3-6-x", "Pending")],
         [claim("claim3-6", "uid3-6", "10Gi", "volume3-6", "Pending", BC)],
         [claim("claim3-6", "uid3-6", "10Gi", "volume3-6", "Lost", BC)], ["Warning ClaimMisbound"], "claim"),
    Case("3-7 - bound claim with unbound volume where selector doesn't match",
         [volume("volume3-3", "10Gi", phase="Pending")],
         [volume("volume3-3", "10Gi", "uid3-3", "claim3-3", "Bound", "Retain", BBC)],
         [claim("claim3-3", "uid3-3", "10Gi", "volume3-3", "Pending", BBC, BC, selector=LABELS)],
         [claim("claim3-3", "uid3-3", "10Gi", "volume3-3", "Bound", BBC, BC, selector=LABELS)], [], "claim"),
    Case("4-1 - pending volume", [volume("volume4-1", "10Gi", phase="Pending")], [volume("volume4-1", "10Gi")],
         [], [], [], "volume"),
    Case("4-2 - pending prebound volume", [volume("volume4-2", "10Gi", "", "claim4-2", "Pending")],
         [volume("volume4-2", "10Gi", "", "claim4-2", "Available")], [], [], [], "volume"),
    Case("4-3 - bound volume with missing claim", [volume("volume4-3", "10Gi", "uid4-3", "claim4-3", "Bound")],
         [volume("volume4-3", "10Gi", "uid4-3", "claim4-3", "Released")], [], [], [], "volume"),
    Case("4-4 - volume bound to claim with different UID",
         [volume("volume4-4", "10Gi", "uid4-4", "claim4-4", "Bound")],
         [volume("volume4-4", "10Gi", "uid4-4", "claim4-4", "Released")],
         [claim("claim4-4", "uid4-4-x", "10Gi", "volume4-4", "Bound", BC)],
         [claim("claim4-4", "uid4-4-x", "10Gi", "volume4-4", "Bound", BC)], [], "volume"),
    Case("4-5 - volume bound by controller to unbound claim",
         [volume("volume4-5", "10Gi", "uid4-5", "claim4-5", "Bound", "Retain", BBC)],
         [volume("volume4-5", "10Gi", "uid4-5", "claim4-5", "Bound", "Retain", BBC)],
         [claim("claim4-5", "uid4-5", "10Gi")], [claim("claim4-5", "uid4-5", "10Gi")], [], "volume"),
    Case("4-5 - volume bound by user to bound claim", [volume("volume4-5", "10Gi", "uid4-5", "claim4-5", "Bound")],
         [volume("volume4-5", "10Gi", "uid4-5", "claim4-5", "Bound")],
         [claim("claim4-5", "uid4-5", "10Gi")], [claim("claim4-5", "uid4-5", "10Gi")], [], "volume"),
    Case("4-6 - volume bound by to bound claim", [volume("volume4-6", "10Gi", "uid4-6", "claim4-6", "Available")],
         [volume("volume4-6", "10Gi", "uid4-6", "claim4-6", "Bound")],
         [claim("claim4-6", "uid4-6", "10Gi", "volume4-6", "Bound")],
         [claim("claim4-6", "uid4-6", "10Gi", "volume4-6", "Bound")], [], "volume"),
    Case("4-7 - volume bound by controller to claim bound somewhere else",
         [volume("volume4-7", "10Gi", "uid4-7", "claim4-7", "Bound", "Retain", BBC)], [volume("volume4-7", "10Gi")],
         [claim("claim4-7", "uid4-7", "10Gi", "volume4-7-x", "Bound")],
         [claim("claim4-7", "uid4-7", "10Gi", "volume4-7-x", "Bound")], [], "volume"),
    Case("4-8 - volume bound by user to claim bound somewhere else",
         [volume("volume4-8", "10Gi", "uid4-8", "claim4-8", "Bound")],
         [volume("volume4-8", "10Gi", "", "claim4-8", "Available")],
         [claim("claim4-8", "uid4-8", "10Gi", "volume4-8-x", "Bound")],
         [claim("claim4-8", "uid4-8", "10Gi", "volume4-8-x", "Bound")], [], "volume"),
    Case("13-1 - binding to class", [volume("volume13-1-1", "1Gi"), volume("volume13-1-2", "10Gi", cls="gold")],
         [volume("volume13-1-1", "1Gi"),
          volume("volume13-1-2", "10Gi", "uid13-1", "claim13-1", "Bound", "Retain", BBC, cls="gold")],
         [claim("claim13-1", "uid13-1", "1Gi", cls="gold")],
         [claim("claim13-1", "uid13-1", "1Gi", "volume13-1-2", "Bound", BBC, BC, cls="gold")], [], "claim"),
    Case("13-2 - binding without a class", [volume("volume13-2-1", "1Gi", cls="gold"), volume("volume13-2-2", "10Gi")],
         [volume("volume13-2-1", "1Gi", cls="gold"),
          volume("volume13-2-2", "10Gi", "uid13-2", "claim13-2", "Bound", "Retain", BBC)],
         [claim("claim13-2", "uid13-2", "1Gi")],
         [claim("claim13-2", "uid13-2", "1Gi", "volume13-2-2", "Bound", BBC, BC)], [], "claim"),
    Case("13-3 - binding to specific a class",
         [volume("volume13-3-1", "1Gi", cls="silver"), volume("volume13-3-2", "10Gi", cls="gold")],
         [volume("volume13-3-1", "1Gi", cls="silver"),
          volume("volume13-3-2", "10Gi", "uid13-3", "claim13-3", "Bound", "Retain", BBC, cls="gold")],
         [claim("claim13-3", "uid13-3", "1Gi", cls="gold")],
         [claim("claim13-3", "uid13-3", "1Gi", "volume13-3-2", "Bound", BBC, BC, cls="gold")], [], "claim"),
]

MULTI_SYNC_CASES = [
    Case("10-1 - successful bind", [volume("volume10-1", "1Gi")],
         [volume("volume10-1", "1Gi", "uid10-1", "claim10-1", "Bound", "Retain", BBC)],
         [claim("claim10-1", "uid10-1", "1Gi")],
         [claim("claim10-1", "uid10-1", "1Gi", "volume10-1", "Bound", BBC, BC)], [], "claim"),
    Case("10-2 - bind PV race",
         [volume("volume10-2-1", "1Gi", "uid10-2", "claim10-2", "Bound", "Retain", BBC),
          volume("volume10-2-2", "1Gi", "uid10-2", "claim10-2", "Bound", "Retain", BBC)],
         [volume("volume10-2-1", "1Gi", "uid10-2", "claim10-2", "Bound", "Retain", BBC),
          volume("volume10-2-2", "1Gi")],
         [claim("claim10-2", "uid10-2", "1Gi", "volume10-2-1", "Bound", BBC, BC)],
         [claim("claim10-2", "uid10-2", "1Gi", "volume10-2-1", "Bound", BBC, BC)], [], "claim"),
    Case("4-3 with Delete - a released dynamically provisioned volume is left to its (external) provisioner",
         [volume("pvc-1", "1Gi", "uid-gone", "gone", "Bound", "Delete")],
         [volume("pvc-1", "1Gi", "uid-gone", "gone", "Released", "Delete")], [], [], [], "volume"),
]
for _pv in (*MULTI_SYNC_CASES[2].volumes, *MULTI_SYNC_CASES[2].expected_volumes):
    _pv["metadata"]["annotations"][vu.ANN_DYNAMICALLY_PROVISIONED] = vu.LOCAL_PATH


def _world(case: Case) -> World:
    return World({v["metadata"]["name"]: copy.deepcopy(v) for v in case.volumes},
                 {c["metadata"]["name"]: copy.deepcopy(c) for c in case.claims})


def _check(world: World, case: Case) -> None:
    assert sorted(map(_volume_view, world.pvs.values())) == sorted(map(_volume_view, case.expected_volumes))
    assert sorted(map(_claim_view, world.pvcs.values())) == sorted(map(_claim_view, case.expected_claims))


@pytest.mark.parametrize("case", SYNC_CASES, ids=lambda c: c.name)
async def test_sync(case: Case) -> None:
    world = _world(case)
    binder = Binder(world)
    if case.sync == "volume":
        await binder.sync_volume(copy.deepcopy(case.volumes[0]))
    elif case.sync == "claim-error":
        with pytest.raises(BindError):
            await binder.sync_claim(copy.deepcopy(case.claims[0]))
    else:
        await binder.sync_claim(copy.deepcopy(case.claims[0]))
    _check(world, case)
    assert world.events == case.events


@pytest.mark.parametrize("case", MULTI_SYNC_CASES, ids=lambda c: c.name)
async def test_multi_sync(case: Case) -> None:
    """runMultisyncTests: the first call, then every volume and claim synced again until nothing changes."""
    world = _world(case)
    binder = Binder(world)
    if case.sync == "volume":
        await binder.sync_volume(copy.deepcopy(case.volumes[0]))
    else:
        await binder.sync_claim(copy.deepcopy(case.claims[0]))
    for _ in range(20):
        world.changed = False
        for pv in list(world.pvs.values()):
            await binder.sync_volume(copy.deepcopy(pv))
        for c in list(world.pvcs.values()):
            await binder.sync_claim(copy.deepcopy(c))
        if not world.changed:
            break
    else:
        pytest.fail("the syncs never settled")
    _check(world, case)
