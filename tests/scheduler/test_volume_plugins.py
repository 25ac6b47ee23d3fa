"""Volume plugin tables ported by name from pkg/scheduler/framework/plugins/volumebinding/volume_binding_test.go
(TestVolumeBinding's PreFilter/Filter verdicts), volumezone/volume_zone_test.go (TestSingleZone, TestMultiZone,
TestWithBinding) and volumerestrictions/volume_restrictions_test.go (ReadWriteOncePod, disk conflicts)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelite.api import volumes as vu
from kubelite.clock import FakeClock
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.plugins.volume_binding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_PV_NOT_EXIST,
    STATE,
    UNBOUND_IMMEDIATE,
    VolumeBinding,
)
from kubelite.scheduler.plugins.volume_cache import VolumeCache
from kubelite.scheduler.plugins.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_RWOP_CONFLICT,
    VolumeRestrictions,
)
from kubelite.scheduler.plugins.volume_zone import ERR_REASON_CONFLICT, VolumeZone
from kubelite.testing.builders import make_pod
from tests.scheduler.helpers import filter_verdicts, node, table
from tests.scheduler.helpers import pod as pod_of

Obj = dict[str, Any]
WAIT_SC = "wait-sc"
IMMEDIATE_SC = "immediate-sc"
PROVISION_SC = "provision-sc"
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
CLASSES = {
    WAIT_SC: {"metadata": {"name": WAIT_SC}, "volumeBindingMode": "WaitForFirstConsumer"},
    IMMEDIATE_SC: {"metadata": {"name": IMMEDIATE_SC}, "volumeBindingMode": "Immediate"},
    PROVISION_SC: {"metadata": {"name": PROVISION_SC}, "volumeBindingMode": "WaitForFirstConsumer",
                   "provisioner": vu.LOCAL_PATH},
}


def pvc(name: str, cls: str = WAIT_SC, bound_pv: str = "", phase: str = "Pending", size: str = "1Gi",
        modes: tuple[str, ...] = ("ReadWriteOnce",)) -> Obj:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"storageClassName": cls, "volumeName": bound_pv, "accessModes": list(modes),
                     "resources": {"requests": {"storage": size}}},
            "status": {"phase": phase}}


def pv(name: str, cls: str = WAIT_SC, phase: str = "Available", affinity: dict[str, list[str]] | None = None,
       labels: dict[str, str] | None = None, size: str = "1Gi") -> Obj:
    spec: Obj = {"storageClassName": cls, "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"]}
    if affinity:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": k, "operator": "In", "values": v} for k, v in affinity.items()]}]}}
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": {"phase": phase}}


def pod_with(*claims: str, name: str = "pod-a") -> Obj:
    obj = make_pod(name).obj()
    obj["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                              for i, c in enumerate(claims)]
    return obj


def cache(pvcs: list[Obj], pvs: list[Obj]) -> VolumeCache:
    return VolumeCache({("default", c["metadata"]["name"]): c for c in pvcs},
                       {("", v["metadata"]["name"]): v for v in pvs},
                       {("", name): sc for name, sc in CLASSES.items()})


@dataclass
class BindingCase:
    name: str
    pod: Obj
    nodes: list[Obj]
    pvcs: list[Obj] = field(default_factory=list)
    pvs: list[Obj] = field(default_factory=list)
    want: dict[str, str] = field(default_factory=dict)  # node → "" (passes) or its reason(s)


BINDING_CASES = [
    BindingCase("pod has not pvcs", make_pod("pod-a").obj(), [node("node-a")], want={"node-a": ""}),
    BindingCase("all bound", pod_with("pvc-a"), [node("node-a")], [pvc("pvc-a", bound_pv="pv-a")], [pv("pv-a")],
                {"node-a": ""}),
    BindingCase("all bound with local volumes", pod_with("pvc-a", "pvc-b"), [node("node-a"), node("node-b")],
                [pvc("pvc-a", bound_pv="pv-a"), pvc("pvc-b", bound_pv="pv-b")],
                [pv("pv-a", phase="Bound", affinity={"kubernetes.io/hostname": ["node-a"]}),
                 pv("pv-b", phase="Bound", affinity={"kubernetes.io/hostname": ["node-a"]})],
                {"node-a": "", "node-b": ERR_REASON_NODE_CONFLICT}),
    BindingCase("PVC does not exist", pod_with("pvc-a"), [node("node-a")],
                want={"node-a": 'persistentvolumeclaim "pvc-a" not found'}),
    BindingCase("Part of PVCs do not exist", pod_with("pvc-a", "pvc-b"), [node("node-a")],
                [pvc("pvc-a", bound_pv="pv-a")], want={"node-a": 'persistentvolumeclaim "pvc-b" not found'}),
    BindingCase("immediate claims not bound", pod_with("pvc-a"), [node("node-a")], [pvc("pvc-a", IMMEDIATE_SC)],
                want={"node-a": UNBOUND_IMMEDIATE}),
    BindingCase("unbound claims no matches", pod_with("pvc-a"), [node("node-a")], [pvc("pvc-a")],
                want={"node-a": ERR_REASON_BIND_CONFLICT}),
    BindingCase("bound and unbound unsatisfied", pod_with("pvc-a", "pvc-b"),
                [node("node-a", labels={"foo": "barbar"})], [pvc("pvc-a", bound_pv="pv-a"), pvc("pvc-b")],
                [pv("pv-a", affinity={"foo": ["bar"]})],
                {"node-a": f"{ERR_REASON_NODE_CONFLICT}, {ERR_REASON_BIND_CONFLICT}"}),
    BindingCase("pvc not found", pod_with("pvc-a"), [node("node-a")],
                want={"node-a": 'persistentvolumeclaim "pvc-a" not found'}),
    BindingCase("pv not found", pod_with("pvc-a"), [node("node-a")], [pvc("pvc-a", bound_pv="pv-a")],
                want={"node-a": ERR_REASON_PV_NOT_EXIST}),
    BindingCase("pv not found claim lost", pod_with("pvc-a"), [node("node-a")],
                [pvc("pvc-a", bound_pv="pv-a", phase="Lost")],
                want={"node-a": 'persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"'}),
    BindingCase("delayed claim matches a local volume on one node only", pod_with("pvc-a"),
                [node("node-a"), node("node-b")], [pvc("pvc-a")],
                [pv("pv-a", affinity={"kubernetes.io/hostname": ["node-a"]})],
                {"node-a": "", "node-b": ERR_REASON_BIND_CONFLICT}),
    BindingCase("delayed claim of a class with a provisioner fits every node", pod_with("pvc-a"),
                [node("node-a"), node("node-b")], [pvc("pvc-a", PROVISION_SC)], [], {"node-a": "", "node-b": ""}),
]


@pytest.mark.parametrize("case", BINDING_CASES, ids=lambda c: c.name)
def test_volume_binding_filter(case: BindingCase) -> None:
    plugin = VolumeBinding(cache(case.pvcs, case.pvs), None)  # type: ignore[arg-type]  # no PreBind here
    assert filter_verdicts(plugin, table(case.nodes), case.pod) == case.want


class _Handle:
    def __init__(self, client: Any, clock: FakeClock) -> None:
        self.client = client
        self.clock = clock


class _Client:
    """Records the PreBind writes."""

    def __init__(self) -> None:
        self.puts: list[Obj] = []

    async def request(self, method: str, path: str, body: Any = None) -> Obj:
        self.puts.append(body)
        return dict(body)


def test_reserve_assumes_and_prebind_writes_the_chosen_bindings() -> None:
    """A second pod sees the volume the first one reserved as taken; PreBind writes the PV's claimRef and the
    claim to provision gets the selected-node annotation; Unreserve forgets the assumptions."""
    vc = cache([pvc("pvc-a"), pvc("pvc-b"), pvc("pvc-p", PROVISION_SC)], [pv("pv-1")])
    client = _Client()
    plugin = VolumeBinding(vc, _Handle(client, FakeClock()))
    t = table([node("node-a")])
    first, state = pod_of(pod_with("pvc-a", "pvc-p")), CycleState()
    assert plugin.pre_filter(state, first, t).ok
    assert plugin.filter(state, first, t).passed.all()  # type: ignore[union-attr]
    assert plugin.reserve(state, first, "node-a").ok
    assert vc.volume("pv-1")["spec"]["claimRef"]["name"] == "pvc-a"  # type: ignore[index]
    assert filter_verdicts(plugin, t, pod_with("pvc-b", name="pod-b")) == {"node-a": ERR_REASON_BIND_CONFLICT}
    for name in ("pvc-a", "pvc-p"):  # what the claim informer shows once the PV controller has bound them
        vc.stored_claim("default", name)["metadata"]["annotations"] = {vu.ANN_BIND_COMPLETED: "yes"}  # type: ignore[index]
    status = asyncio.run(plugin.pre_bind(state, first, "node-a"))
    assert status.ok, status
    assert [b["metadata"]["name"] for b in client.puts] == ["pv-1", "pvc-p"]
    assert client.puts[1]["metadata"]["annotations"][vu.ANN_SELECTED_NODE] == "node-a"
    assert not vc.assumed_volumes and not vc.assumed_claims
    state2 = CycleState()
    second = pod_of(pod_with("pvc-b", name="pod-c"))
    plugin.pre_filter(state2, second, t)
    plugin.filter(state2, second, t)
    plugin.reserve(state2, second, "node-a")
    assert state2.read(STATE).reserved is not None
    plugin.unreserve(state2, second, "node-a")
    assert not vc.assumed_volumes


ZONE_PVS = [pv("Vol_1", labels={BETA_ZONE: "us-west1-a"}),
            pv("Vol_2", labels={BETA_REGION: "us-west1", "uselessLabel": "none"}),
            pv("Vol_3", labels={BETA_ZONE: "us-west1-c__us-west1-a"}),
            pv("Vol_Stable_1", labels={ZONE: "us-west1-a"}),
            pv("Vol_Stable_2", labels={REGION: "us-west1", "uselessLabel": "none"}),
            pv("Vol_Stable_3", labels={ZONE: "us-west1-a", REGION: "us-west1-a"}),
            pv("Vol_Stable_Multi", labels={ZONE: "us-west1-c__us-west1-a"})]
ZONE_PVCS = [pvc("PVC_1", bound_pv="Vol_1"), pvc("PVC_2", bound_pv="Vol_2"), pvc("PVC_3", bound_pv="Vol_3"),
             pvc("PVC_4", bound_pv="Vol_not_exist"), pvc("PVC_Stable_1", bound_pv="Vol_Stable_1"),
             pvc("PVC_Stable_2", bound_pv="Vol_Stable_2"), pvc("PVC_Stable_3", bound_pv="Vol_Stable_3"),
             pvc("PVC_Stable_Multi", bound_pv="Vol_Stable_Multi"), pvc("PVC_NoSC", cls="Class_0"),
             pvc("PVC_EmptySC", cls=""), pvc("PVC_WaitSC", cls=WAIT_SC), pvc("PVC_ImmediateSC", cls=IMMEDIATE_SC)]
U = {"uselessLabel": "none"}
ZONE_CASES = [
    # TestSingleZone
    pytest.param(make_pod("pod_1").obj(), {BETA_ZONE: "us-west1-a"}, "", id="pod without volume"),
    pytest.param(pod_with("PVC_1"), {}, "", id="node without labels"),
    pytest.param(pod_with("PVC_1"), {BETA_ZONE: "us-west1-a", **U}, "", id="beta zone label matched"),
    pytest.param(pod_with("PVC_2"), {BETA_REGION: "us-west1", **U}, "", id="beta region label matched"),
    pytest.param(pod_with("PVC_2"), {BETA_REGION: "no_us-west1", **U}, ERR_REASON_CONFLICT,
                 id="beta region label doesn't match"),
    pytest.param(pod_with("PVC_1"), {BETA_ZONE: "no_us-west1-a", **U}, ERR_REASON_CONFLICT,
                 id="beta zone label doesn't match"),
    pytest.param(pod_with("PVC_Stable_1"), {ZONE: "us-west1-a", **U}, "", id="zone label matched"),
    pytest.param(pod_with("PVC_Stable_2"), {REGION: "us-west1", **U}, "", id="region label matched"),
    pytest.param(pod_with("PVC_Stable_2"), {REGION: "no_us-west1", **U}, ERR_REASON_CONFLICT,
                 id="region label doesn't match"),
    pytest.param(pod_with("PVC_Stable_1"), {ZONE: "no_us-west1-a", **U}, ERR_REASON_CONFLICT,
                 id="zone label doesn't match"),
    pytest.param(pod_with("PVC_Stable_3"), {ZONE: "us-west1-a"}, ERR_REASON_CONFLICT,
                 id="pv with zone and region, node with only zone"),
    pytest.param(pod_with("PVC_Stable_1"), {BETA_ZONE: "us-west1-a"}, ERR_REASON_CONFLICT,
                 id="pv with zone,node with beta zone"),
    pytest.param(pod_with("PVC_1"), {ZONE: "us-west1-a"}, "", id="pv with beta label,node with ga label, matched"),
    pytest.param(pod_with("PVC_1"), {ZONE: "us-west1-b"}, ERR_REASON_CONFLICT,
                 id="pv with beta label,node with ga label, don't match"),
    # TestMultiZone
    pytest.param(pod_with("PVC_3"), {BETA_ZONE: "us-west1-a", **U}, "", id="multi: beta zone label matched"),
    pytest.param(pod_with("PVC_1"), {BETA_ZONE: "us-west1-b", **U}, ERR_REASON_CONFLICT,
                 id="multi: beta zone label doesn't match"),
    pytest.param(pod_with("PVC_Stable_Multi"), {ZONE: "us-west1-a", **U}, "", id="multi: zone label matched"),
    # TestWithBinding
    pytest.param(pod_with("PVC_1"), {BETA_ZONE: "us-west1-a", **U}, "", id="label zone failure domain matched"),
    pytest.param(pod_with("PVC_EmptySC"), {BETA_ZONE: "us-west1-a", **U},
                 "PersistentVolumeClaim had no pv name and storageClass name", id="unbound volume empty storage class"),
    pytest.param(pod_with("PVC_NoSC"), {BETA_ZONE: "us-west1-a", **U},
                 'storageclasses.storage.k8s.io "Class_0" not found', id="unbound volume no storage class"),
    pytest.param(pod_with("PVC_ImmediateSC"), {BETA_ZONE: "us-west1-a", **U},
                 f'VolumeBindingMode not set for StorageClass "{IMMEDIATE_SC}"',
                 id="unbound volume immediate binding mode"),
    pytest.param(pod_with("PVC_WaitSC"), {BETA_ZONE: "us-west1-a", **U}, "", id="unbound volume wait binding mode"),
    pytest.param(pod_with("PVC_4"), {BETA_ZONE: "us-west1-a"}, 'persistentvolume "Vol_not_exist" not found',
                 id="volume not found"),
]


@pytest.mark.parametrize(("incoming", "labels", "want"), ZONE_CASES)
def test_volume_zone(incoming: Obj, labels: dict[str, str], want: str) -> None:
    verdicts = filter_verdicts(VolumeZone(cache(ZONE_PVCS, ZONE_PVS)), table([node("host1", labels=labels)]),
                               incoming)
    assert verdicts == {"host1": want}


DISKS = {
    "GCE": ({"gcePersistentDisk": {"pdName": "foo"}}, {"gcePersistentDisk": {"pdName": "bar"}}),
    "AWS": ({"awsElasticBlockStore": {"volumeID": "foo"}}, {"awsElasticBlockStore": {"volumeID": "bar"}}),
    "RBD": ({"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}},
            {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}),
    "ISCSI": ({"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}},
              {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "lun": 0}}),
}


def _disk_pod(name: str, source: Obj | None) -> Obj:
    obj = make_pod(name).obj()
    obj["spec"]["volumes"] = [{"name": "d", **source}] if source else []
    return obj


# Test{GCE,AWS,RBD,ISCSI}DiskConflicts: (incoming volume, existing pod's volume on the node, conflict)
DISK_CASES = [pytest.param(kind, incoming, existing, conflict, id=f"{kind}: {name}")
              for kind, (state, state2) in DISKS.items()
              for name, incoming, existing, conflict in [("nothing", None, "none", False),
                                                         ("one state", None, state, False),
                                                         ("same state", state, state, True),
                                                         ("different state", state2, state, False)]]


@pytest.mark.parametrize(("kind", "incoming", "existing", "conflict"), DISK_CASES)
def test_disk_conflicts(kind: str, incoming: Obj | None, existing: Obj | str, conflict: bool) -> None:
    pods = [] if existing == "none" else [_scheduled(_disk_pod("holder", existing), "node-a")]  # type: ignore[arg-type]
    verdicts = filter_verdicts(VolumeRestrictions(cache([], [])), table([node("node-a")], pods),
                               _disk_pod("p", incoming))
    assert verdicts == {"node-a": ERR_REASON_DISK_CONFLICT if conflict else ""}


def _scheduled(obj: Obj, node_name: str) -> Obj:
    obj["spec"]["nodeName"] = node_name
    return obj


# TestAccessModeConflicts
ACCESS_MODE_CASES = [
    pytest.param(make_pod("p").obj(), [], True, "", id="nothing"),
    pytest.param(pod_with("claim-with-rwop"), [], False, 'persistentvolumeclaim "claim-with-rwop" not found',
                 id="failed to get PVC"),
    pytest.param(pod_with("claim-with-rwop"), [_scheduled(pod_with("claim-with-rwx", name="pod-with-rwx"), "node-a")],
                 True, "", id="no access mode conflict"),
    pytest.param(pod_with("claim-with-rwop"), [_scheduled(pod_with("claim-with-rwop", name="pod-with-rwop"), "node-a"),
                                               _scheduled(pod_with("claim-with-rwx", name="pod-with-rwx"), "node-a")],
                 True, ERR_REASON_RWOP_CONFLICT, id="access mode conflict"),
    pytest.param(pod_with("claim-with-rwo"), [_scheduled(pod_with("claim-with-rwo", name="holder"), "node-a")], True,
                 "", id="ReadWriteOnce is not a scheduling conflict (the attach lock enforces it)"),
]


@pytest.mark.parametrize(("incoming", "existing", "claims_exist", "want"), ACCESS_MODE_CASES)
def test_access_mode_conflicts(incoming: Obj, existing: list[Obj], claims_exist: bool, want: str) -> None:
    claims = [pvc("claim-with-rwop", modes=("ReadWriteOncePod",)), pvc("claim-with-rwx", modes=("ReadWriteMany",)),
              pvc("claim-with-rwo")] if claims_exist else []
    verdicts = filter_verdicts(VolumeRestrictions(cache(claims, [])), table([node("node-a")], existing), incoming)
    assert verdicts == {"node-a": want}
