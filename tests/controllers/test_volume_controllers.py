"""The volume controllers together against a real API server (SQLite, in-process client, fake clock):
binder + provisioner (dynamic provisioning, delayed binding, reclaim policy Delete on real directories),
attach/detach (the attach lock: one node at a time, detach only after the old pod object is gone or its node
fenced), pvc/pv-protection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.volumes.claims import LOCAL_PATH_DIR, ClaimVolumes
from kubelite.api import volumes as vu
from kubelite.api.errors import ApiError
from kubelite.controllers.attachdetach import FENCED_CONDITION, AttachDetachController, node_fenced
from kubelite.controllers.persistentvolume import PersistentVolumeController
from kubelite.controllers.provisioner import ProvisionerController, shared_directory
from kubelite.controllers.volume_protection import PVCProtectionController, PVProtectionController
from kubelite.testing.builders import make_node, make_pod
from tests.controllers.harness import Harness, running

Obj = dict[str, Any]
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"
PVS = "/api/v1/persistentvolumes"
PODS = "/api/v1/namespaces/default/pods"
SCS = "/apis/storage.k8s.io/v1/storageclasses"
VAS = "/apis/storage.k8s.io/v1/volumeattachments"
CONTROLLERS = (PersistentVolumeController, ProvisionerController, AttachDetachController, PVCProtectionController,
               PVProtectionController)


def claim(name: str, cls: str, modes: tuple[str, ...] = ("ReadWriteOnce",)) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": "1Gi"}},
                     "storageClassName": cls}}


def pod_using(name: str, claim_name: str, node: str) -> Obj:
    obj = make_pod(name).obj()
    obj["spec"]["nodeName"] = node
    obj["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return obj


async def _get(h: Harness, path: str) -> Obj | None:
    try:
        return await h.client.get(path)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise


async def _bound_claim(h: Harness, name: str) -> Obj:
    async def bound() -> bool:
        c = await _get(h, f"{PVCS}/{name}")
        return c is not None and (c.get("status") or {}).get("phase") == "Bound"
    await h.until(bound, f"claim {name} bound")
    got = await _get(h, f"{PVCS}/{name}")
    assert got is not None
    return got


async def _attachment_node(h: Harness, pv_name: str) -> str | None:
    va = await _get(h, f"{VAS}/{vu.attachment_name(pv_name)}")
    if va is None or not (va.get("status") or {}).get("attached"):
        return None
    return str(va["spec"]["nodeName"])


async def _setup(h: Harness, binding_mode: str = "Immediate") -> None:
    for n in ("n1", "n2"):
        await h.client.create("/api/v1/nodes", make_node(n))
    await h.client.create(SCS, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                "metadata": {"name": "shared"}, "provisioner": vu.SHARED_PATH,
                                "volumeBindingMode": binding_mode, "parameters": {"path": "/tmp/kubelite-test"}})


async def test_shared_path_claim_is_provisioned_and_bound(tmp_path: Path) -> None:
    async with running(tmp_path, *CONTROLLERS) as h:
        await _setup(h)
        await h.client.create(PVCS, claim("data", "shared"))
        got = await _bound_claim(h, "data")
        pv = await _get(h, f"{PVS}/{got['spec']['volumeName']}")
        assert pv is not None and pv["status"]["phase"] == "Bound"
        assert pv["spec"]["csi"] == {"driver": vu.SHARED_PATH, "volumeHandle": pv["metadata"]["name"],
                                     "volumeAttributes": {"path": f"/tmp/kubelite-test/{pv['metadata']['name']}"}}
        assert pv["spec"]["claimRef"]["uid"] == got["metadata"]["uid"]
        assert pv["metadata"]["annotations"][vu.ANN_DYNAMICALLY_PROVISIONED] == vu.SHARED_PATH


async def test_local_path_waits_for_the_scheduler_then_pins_the_node(tmp_path: Path) -> None:
    async with running(tmp_path, *CONTROLLERS) as h:
        await _setup(h)
        await h.client.create(SCS, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                    "metadata": {"name": "local"}, "provisioner": vu.LOCAL_PATH,
                                    "volumeBindingMode": "WaitForFirstConsumer"})
        await h.client.create(PVCS, claim("data", "local"))
        for _ in range(50):
            await h.clock.advance(0.01)
        c = await _get(h, f"{PVCS}/data")
        assert c is not None and c["status"]["phase"] == "Pending" and not c["spec"].get("volumeName")
        # what the scheduler's VolumeBinding PreBind writes for a claim to provision
        c["metadata"].setdefault("annotations", {})[vu.ANN_SELECTED_NODE] = "n2"
        await h.client.request("PUT", f"{PVCS}/data", c)
        got = await _bound_claim(h, "data")
        pv = await _get(h, f"{PVS}/{got['spec']['volumeName']}")
        assert pv is not None
        assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"] == [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]


async def test_rwo_volume_attaches_to_one_node_and_moves_only_after_the_pod_is_gone(tmp_path: Path) -> None:
    async with running(tmp_path, *CONTROLLERS) as h:
        await _setup(h)
        await h.client.create(PVCS, claim("data", "shared"))
        pv_name = (await _bound_claim(h, "data"))["spec"]["volumeName"]
        await h.client.create(PODS, pod_using("first", "data", "n1"))

        async def on(node: str) -> bool:
            return await _attachment_node(h, pv_name) == node
        await h.until(lambda: on("n1"), "attached to n1")
        await h.client.create(PODS, pod_using("second", "data", "n2"))
        for _ in range(100):  # the second node never gets it while the first pod exists
            await h.clock.advance(0.01)
            assert await _attachment_node(h, pv_name) in ("n1", None)
        # graceful deletion alone is not enough: the pod object still exists (its processes may run)
        await h.client.delete(f"{PODS}/first")
        for _ in range(50):
            await h.clock.advance(0.01)
        assert await _attachment_node(h, pv_name) == "n1"
        # the agent confirms termination by removing the object (grace 0): then the volume moves
        await h.client.delete(f"{PODS}/first", {"gracePeriodSeconds": 0})
        await h.until(lambda: on("n2"), "attached to n2")


async def test_fenced_node_releases_its_attachment(tmp_path: Path) -> None:
    async with running(tmp_path, *CONTROLLERS) as h:
        await _setup(h)
        await h.client.create(PVCS, claim("data", "shared"))
        pv_name = (await _bound_claim(h, "data"))["spec"]["volumeName"]
        await h.client.create(PODS, pod_using("first", "data", "n1"))

        async def on(node: str) -> bool:
            return await _attachment_node(h, pv_name) == node
        await h.until(lambda: on("n1"), "attached to n1")
        await h.client.create(PODS, pod_using("second", "data", "n2"))
        # the fencing controller's word: n1 is confirmed fenced, its pod object may still exist
        await h.client.patch("/api/v1/nodes/n1/status", {"status": {"conditions": [
            {"type": FENCED_CONDITION, "status": "True", "reason": "FenceConfirmed"}]}},
            "application/strategic-merge-patch+json")
        await h.until(lambda: on("n2"), "attached to n2")
        assert await _get(h, f"{PODS}/first") is not None


async def test_claim_in_use_is_kept_until_its_pod_is_gone(tmp_path: Path) -> None:
    async with running(tmp_path, *CONTROLLERS) as h:
        await _setup(h)
        await h.client.create(PVCS, claim("data", "shared"))
        await _bound_claim(h, "data")
        await h.client.create(PODS, pod_using("user", "data", "n1"))
        await h.client.delete(f"{PVCS}/data")
        for _ in range(50):
            await h.clock.advance(0.01)
        assert await _get(h, f"{PVCS}/data") is not None
        await h.client.delete(f"{PODS}/user", {"gracePeriodSeconds": 0})

        async def gone() -> bool:
            return await _get(h, f"{PVCS}/data") is None
        await h.until(gone, "claim removed")


@pytest.mark.parametrize(("node", "fenced"), [
    pytest.param(None, True, id="a deleted node counts as fenced"),
    pytest.param({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}, False,
                 id="an unreachable node is not fenced"),
    pytest.param({"status": {"conditions": [{"type": FENCED_CONDITION, "status": "False"}]}}, False,
                 id="a fence not confirmed is not a fence"),
    pytest.param({"status": {"conditions": [{"type": FENCED_CONDITION, "status": "True"}]}}, True,
                 id="a confirmed fence"),
])
def test_node_fenced(node: Obj | None, fenced: bool) -> None:
    assert node_fenced(node) is fenced


async def test_a_pod_its_agent_reported_finished_no_longer_holds_the_volume(tmp_path: Path) -> None:
    async with running(tmp_path, *CONTROLLERS) as h:
        await _setup(h)
        await h.client.create(PVCS, claim("data", "shared"))
        pv_name = (await _bound_claim(h, "data"))["spec"]["volumeName"]
        await h.client.create(PODS, pod_using("job", "data", "n1"))

        async def on(node: str) -> bool:
            return await _attachment_node(h, pv_name) == node
        await h.until(lambda: on("n1"), "attached to n1")
        await h.client.create(PODS, pod_using("next", "data", "n2"))
        await h.client.patch(f"{PODS}/job/status", {"status": {"phase": "Succeeded"}},
                             "application/strategic-merge-patch+json")
        await h.until(lambda: on("n2"), "attached to n2")


async def test_bound_volume_is_kept_until_released_then_retained_or_deleted(tmp_path: Path) -> None:
    """pv-protection holds a deleted volume while Bound; once its claim is gone it is Released and goes. A
    Delete-policy provisioned volume is removed (by its provisioner) when its claim is deleted."""
    async with running(tmp_path, *CONTROLLERS) as h:
        await _setup(h)
        await h.client.create(PVS, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "static"},
                                    "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                                             "hostPath": {"path": "/tmp/kubelite-static"}}})

        async def available() -> bool:
            pv = await _get(h, f"{PVS}/static")
            return pv is not None and pv["status"]["phase"] == "Available"
        await h.until(available, "the static volume Available")
        await h.client.create(PVCS, claim("mine", ""))
        assert (await _bound_claim(h, "mine"))["spec"]["volumeName"] == "static"
        await h.client.delete(f"{PVS}/static")
        for _ in range(50):
            await h.clock.advance(0.01)
        kept = await _get(h, f"{PVS}/static")
        assert kept is not None and kept["status"]["phase"] == "Bound" and kept["metadata"]["deletionTimestamp"]
        await h.client.delete(f"{PVCS}/mine")

        async def gone(path: str) -> bool:
            return await _get(h, path) is None
        await h.until(lambda: gone(f"{PVS}/static"), "the released volume removed")
        await h.client.create(PVCS, claim("dyn", "shared"))
        pv_name = (await _bound_claim(h, "dyn"))["spec"]["volumeName"]
        await h.client.delete(f"{PVCS}/dyn")
        await h.until(lambda: gone(f"{PVS}/{pv_name}"), "the provisioned volume deleted (reclaim policy Delete)")


async def _gone(h: Harness, path: str) -> bool:
    return await _get(h, path) is None


async def test_reclaim_delete_removes_a_shared_path_directory_then_the_volume(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    async with running(tmp_path, *CONTROLLERS) as h:
        await _setup(h)
        await h.client.create(SCS, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                    "metadata": {"name": "here"}, "provisioner": vu.SHARED_PATH,
                                    "parameters": {"path": str(root)}})
        for name in ("dropped", "kept"):
            await h.client.create(PVCS, claim(name, "here"))
        dirs = {}
        for name in ("dropped", "kept"):
            pv = await _get(h, f"{PVS}/{(await _bound_claim(h, name))['spec']['volumeName']}")
            assert pv is not None
            dirs[name] = Path(pv["spec"]["csi"]["volumeAttributes"]["path"])
            (dirs[name] / "sub").mkdir(parents=True)  # what the agent makes on first mount, and a pod writes
            (dirs[name] / "sub" / "data").write_text(name)
        pv_name = dirs["dropped"].name
        await h.client.delete(f"{PVCS}/dropped")
        await h.until(lambda: _gone(h, f"{PVS}/{pv_name}"), "the released volume deleted")
        assert not dirs["dropped"].exists(), "the PV went but its directory stayed"
        assert (dirs["kept"] / "sub" / "data").read_text() == "kept" and root.is_dir()


@pytest.mark.parametrize("name,path,sc,want", [
    ("a directory named after the volume under its class's root is ours", "/r/pvc-1", {"path": "/r"}, "/r/pvc-1"),
    ("a path not named after the volume is left alone", "/r/etc", {"path": "/r"}, None),
    ("a path outside the class's root is left alone", "/elsewhere/pvc-1", {"path": "/r"}, None),
    ("the class gone: the name alone decides", "/elsewhere/pvc-1", None, "/elsewhere/pvc-1"),
    ("no path at all is left alone", "", {"path": "/r"}, None),
])
def test_shared_directory_deletes_only_what_the_provisioner_made(name: str, path: str, sc: Obj | None,
                                                                 want: str | None) -> None:
    pv = {"metadata": {"name": "pvc-1"}, "spec": {"csi": {"volumeAttributes": {"path": path}}}}
    cls = None if sc is None else {"metadata": {"name": "c"}, "provisioner": vu.SHARED_PATH, "parameters": sc}
    got = shared_directory(pv, cls, Path("/default-root"))
    assert (str(got) if isinstance(got, Path) else None) == want


async def test_reclaim_delete_of_a_local_path_volume_goes_through_its_nodes_agent(tmp_path: Path) -> None:
    """The provisioner asks node n2 (annotation), n2's agent (the real ClaimVolumes on a real data dir) deletes
    the directory once no pod of its links to it and answers, then the PV goes and the request is withdrawn."""
    data_dir = tmp_path / "n2"
    async with running(tmp_path, *CONTROLLERS) as h:
        await _setup(h)
        await h.client.create(SCS, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                    "metadata": {"name": "local"}, "provisioner": vu.LOCAL_PATH,
                                    "volumeBindingMode": "WaitForFirstConsumer"})
        c = await h.client.create(PVCS, {**claim("data", "local"), "metadata": {
            "name": "data", "annotations": {vu.ANN_SELECTED_NODE: "n2"}}})
        pv_name = (await _bound_claim(h, c["metadata"]["name"]))["spec"]["volumeName"]
        directory = data_dir / LOCAL_PATH_DIR / pv_name
        (directory / "sub").mkdir(parents=True)
        (directory / "sub" / "data").write_text("x")
        link = data_dir / "pods" / "default_p_uid" / "volumes" / "data"  # a pod of n2 still mounts it
        link.parent.mkdir(parents=True)
        link.symlink_to(directory)
        agent = ClaimVolumes(h.client, "n2", data_dir)

        async def asked() -> bool:
            return pv_name in vu.annotation_names(await h.client.get("/api/v1/nodes/n2"), vu.ANN_LOCAL_PATH_DELETE)
        await h.client.delete(f"{PVCS}/data")
        await h.until(asked, "the provisioner asking n2")
        await agent.reclaim(await h.client.get("/api/v1/nodes/n2"))
        assert directory.is_dir() and await _get(h, f"{PVS}/{pv_name}") is not None, "deleted while in use"
        link.unlink()
        await agent.reclaim(await h.client.get("/api/v1/nodes/n2"))
        assert not directory.exists() and (data_dir / LOCAL_PATH_DIR).is_dir()
        await h.until(lambda: _gone(h, f"{PVS}/{pv_name}"), "the PV deleted after the agent's answer")

        async def withdrawn() -> bool:
            return not await asked()
        await h.until(withdrawn, "the request withdrawn")
        await agent.reclaim(await h.client.get("/api/v1/nodes/n2"))
        annotations = (await h.client.get("/api/v1/nodes/n2"))["metadata"].get("annotations") or {}
        assert vu.ANN_LOCAL_PATH_DELETE not in annotations and vu.ANN_LOCAL_PATH_DELETED not in annotations
