"""Storage kinds through the API: PV/PVC/StorageClass/VolumeAttachment validation and defaults (cases from
pkg/apis/core/validation TestValidatePersistentVolumes / TestValidatePersistentVolumeClaim and
pkg/apis/storage/validation TestValidateStorageClass / TestVolumeAttachmentValidation), the protection
finalizers, Table columns, and the VolumeAttachment create as the attach lock's compare-and-swap (S5)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]
PVS = "/api/v1/persistentvolumes"
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"
SCS = "/apis/storage.k8s.io/v1/storageclasses"
VAS = "/apis/storage.k8s.io/v1/volumeattachments"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def pv(name: str = "pv1", **spec: Any) -> Obj:
    base: Obj = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/x"}}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {k: v for k, v in base.items() if v is not None}}


def pvc(name: str = "c1", **spec: Any) -> Obj:
    base: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {k: v for k, v in base.items() if v is not None}}


def sc(name: str = "fast", **fields: Any) -> Obj:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "kubelite.io/local-path", **fields}


def va(name: str = "kubelite-pv1", node: str = "n1", pv_name: str | None = "pv1", **spec: Any) -> Obj:
    source = {"persistentVolumeName": pv_name} if pv_name else {}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
            "spec": {"attacher": "kubelite.io/attacher", "nodeName": node, "source": source, **spec}}


def _fields(out: Obj) -> list[str]:
    return [c.get("field", "") for c in out["details"]["causes"]]


INVALID = [
    pytest.param(PVS, pv(accessModes=None), "spec.accessModes", id="pv missing-accessmodes"),
    pytest.param(PVS, pv(accessModes=["ReadWriteOncePod", "ReadWriteOnce"]), "spec.accessModes",
                 id="pv ReadWriteOncePod with other modes"),
    pytest.param(PVS, pv(accessModes=["Sometimes"]), "spec.accessModes", id="pv unsupported access mode"),
    pytest.param(PVS, pv(capacity=None), "spec.capacity[storage]", id="pv missing-capacity"),
    pytest.param(PVS, pv(hostPath=None), "spec", id="pv missing-volume-source"),
    pytest.param(PVS, pv(nfs={"server": "s", "path": "/p"}), "spec.nfs", id="pv too-many-sources"),
    pytest.param(PVS, pv(persistentVolumeReclaimPolicy="fakeReclaimPolicy"), "spec.persistentVolumeReclaimPolicy",
                 id="pv invalid-reclaim-policy"),
    pytest.param(PVS, pv(volumeMode="Raw"), "spec.volumeMode", id="pv invalid-volume-mode"),
    pytest.param(PVS, pv(hostPath=None, local={"path": "/mnt/disk"}), "spec.nodeAffinity",
                 id="pv local volume without node affinity"),
    pytest.param(PVS, pv(hostPath={"path": "relative"}), "spec.hostPath.path", id="pv host path not absolute"),
    pytest.param(PVCS, pvc(accessModes=None), "spec.accessModes", id="pvc missing-access-modes"),
    pytest.param(PVCS, pvc(resources={"requests": {}}), "spec.resources.requests[storage]",
                 id="pvc no-resource-requests"),
    pytest.param(PVCS, pvc(resources={"requests": {"storage": "0"}}), "spec.resources.requests[storage]",
                 id="pvc zero storage request"),
    pytest.param(PVCS, pvc(storageClassName="Not_A_Name"), "spec.storageClassName", id="pvc invalid class name"),
    pytest.param(SCS, {**sc(), "provisioner": ""}, "provisioner", id="sc empty provisioner"),
    pytest.param(SCS, sc(reclaimPolicy="Recycle"), "reclaimPolicy", id="sc invalid reclaimpolicy"),
    pytest.param(SCS, sc(volumeBindingMode="Sometimes"), "volumeBindingMode", id="sc invalid binding mode"),
    pytest.param(VAS, va(node=""), "spec.nodeName", id="va empty node name"),
    pytest.param(VAS, va(pv_name=None), "spec.source", id="va no source"),
    pytest.param(VAS, {**va(), "spec": {**va()["spec"], "attacher": ""}}, "spec.attacher", id="va empty attacher"),
]


@pytest.mark.parametrize(("path", "body", "field"), INVALID)
async def test_invalid_objects_are_422_naming_the_field(api: Client, path: str, body: Obj, field: str) -> None:
    out = await call(api, "POST", path, body, expect=422)
    assert out["reason"] == "Invalid" and field in _fields(out), out


async def test_defaults_and_protection_finalizers(api: Client) -> None:
    await call(api, "POST", SCS, sc(metadata={"name": "std", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}), expect=201)
    got_sc = await call(api, "GET", f"{SCS}/std", expect=200)
    assert (got_sc["reclaimPolicy"], got_sc["volumeBindingMode"]) == ("Delete", "Immediate")
    got_pv = await call(api, "POST", PVS, pv(), expect=201)
    assert got_pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert got_pv["spec"]["volumeMode"] == "Filesystem"
    assert got_pv["status"] == {"phase": "Pending"}
    assert got_pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    got_pvc = await call(api, "POST", PVCS, pvc(), expect=201)
    assert got_pvc["spec"]["storageClassName"] == "std"  # DefaultStorageClass admission
    assert got_pvc["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]


async def test_claim_spec_is_immutable_except_binding(api: Client) -> None:
    claim = await call(api, "POST", PVCS, pvc(), expect=201)
    claim["spec"]["volumeName"] = "pv1"  # binding: volumeName set while empty
    claim = await call(api, "PUT", f"{PVCS}/c1", claim, expect=200)
    claim["spec"]["volumeName"] = "pv2"
    out = await call(api, "PUT", f"{PVCS}/c1", claim, expect=422)
    assert "spec" in _fields(out)


async def test_storage_class_parameters_are_immutable(api: Client) -> None:
    obj = await call(api, "POST", SCS, sc(parameters={"path": "/a"}), expect=201)
    obj["parameters"] = {"path": "/b"}
    out = await call(api, "PUT", f"{SCS}/fast", obj, expect=422)
    assert "parameters" in _fields(out)


async def test_second_attachment_of_a_volume_is_409_already_exists(api: Client) -> None:
    """The attach lock: one name per volume, so a second node's create fails while the first holds it."""
    await call(api, "POST", VAS, va(node="node-a"), expect=201)
    out = await call(api, "POST", VAS, va(node="node-b"), expect=409)
    assert out["reason"] == "AlreadyExists"
    held = await call(api, "GET", f"{VAS}/kubelite-pv1", expect=200)
    assert held["spec"]["nodeName"] == "node-a"
    held["spec"]["nodeName"] = "node-b"  # nor can the holder be rewritten
    out = await call(api, "PUT", f"{VAS}/kubelite-pv1", held, expect=422)
    assert "spec" in _fields(out)
    await call(api, "DELETE", f"{VAS}/kubelite-pv1", expect=200)
    await call(api, "POST", VAS, va(node="node-b"), expect=201)


async def test_tables_have_upstream_columns(api: Client) -> None:
    await call(api, "POST", SCS, sc(), expect=201)
    await call(api, "POST", VAS, va(), expect=201)
    for path, columns in [(SCS, ["Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion",
                                 "Age"]),
                          (VAS, ["Name", "Attacher", "PV", "Node", "Attached", "Age"])]:
        resp = await api.get(path, headers={"Accept": TABLE})
        table = await resp.json()
        assert [c["name"] for c in table["columnDefinitions"]] == columns
        assert len(table["rows"]) == 1


async def test_attachments_of_a_node_by_field_selector(api: Client) -> None:
    """What a fencing policy asks: which volumes does this node hold?"""
    await call(api, "POST", VAS, va("kubelite-pv1", "node-a", "pv1"), expect=201)
    await call(api, "POST", VAS, va("kubelite-pv2", "node-b", "pv2"), expect=201)
    out = await call(api, "GET", f"{VAS}?fieldSelector=spec.nodeName%3Dnode-a", expect=200)
    assert [i["metadata"]["name"] for i in out["items"]] == ["kubelite-pv1"]
