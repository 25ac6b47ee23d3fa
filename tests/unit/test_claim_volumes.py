"""The agent's claim volumes (S5) against a real API server: a volume is mounted (linked for the sandbox) only
when its claim is bound, its node affinity admits this node and its attachment names this node as attached;
otherwise the reason is returned and any earlier link removed. The sandbox binds the linked directory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.container import ConfigError
from kubelite.agent.housekeeping import remove_pod_dir
from kubelite.agent.sandbox import _mounts, _volume_source
from kubelite.agent.volumes.claims import ClaimVolumes
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore

Obj = dict[str, Any]
NODE = "node-a"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[InProcessClient]:
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    yield InProcessClient(server)
    await server.stop()
    await store.close()


def _pv(driver: str, modes: list[str], node: str | None, path: str) -> Obj:
    source: Obj = {driver: {"path": path}} if driver in ("hostPath", "local") else \
        {"csi": {"driver": driver, "volumeHandle": "pv1", "volumeAttributes": {"path": path}}}
    spec: Obj = {"capacity": {"storage": "1Gi"}, "accessModes": modes, **source}
    if node:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"}, "spec": spec}


async def _world(client: InProcessClient, tmp_path: Path, bound: bool = True, driver: str = "kubelite.io/local-path",
                 modes: tuple[str, ...] = ("ReadWriteOnce",), pinned: str | None = NODE,
                 attached_to: str | None = NODE, attached: bool = True, path: str = "shared") -> None:
    await client.create("/api/v1/persistentvolumes", _pv(driver, list(modes), pinned, str(tmp_path / path)))
    claim = await client.create("/api/v1/namespaces/default/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": "1Gi"}}}})
    if bound:
        claim["spec"]["volumeName"] = "pv1"
        claim = await client.request("PUT", "/api/v1/namespaces/default/persistentvolumeclaims/data", claim)
        claim["status"] = {"phase": "Bound"}
        await client.request("PUT", "/api/v1/namespaces/default/persistentvolumeclaims/data/status", claim)
    if attached_to:
        va = await client.create("/apis/storage.k8s.io/v1/volumeattachments", {
            "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "kubelite-pv1"},
            "spec": {"attacher": "kubelite.io/attacher", "nodeName": attached_to,
                     "source": {"persistentVolumeName": "pv1"}}})
        if attached:
            await client.request("PUT", "/apis/storage.k8s.io/v1/volumeattachments/kubelite-pv1/status",
                                 {**va, "status": {"attached": True}})


POD: Obj = {"metadata": {"namespace": "default", "name": "p"},
            "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}}

NOT_READY = [
    pytest.param({"bound": False}, 'persistentvolumeclaim "data" is not bound', id="claim not bound"),
    pytest.param({"pinned": "node-b"}, "node affinity that does not admit node node-a",
                 id="local volume of another node"),
    pytest.param({"attached_to": None}, 'volumeattachment "kubelite-pv1" not found', id="no attachment yet"),
    pytest.param({"attached_to": "node-b"}, 'Multi-Attach error for volume "pv1" Volume is already exclusively '
                                            "attached to node node-b", id="attached to another node"),
    pytest.param({"attached": False}, 'volume "pv1" is not attached to node node-a yet',
                 id="attachment not confirmed yet"),
    pytest.param({"driver": "hostPath", "path": "agent/pods", "pinned": None},
                 "which holds the node's credentials and state and is never mounted",
                 id="hostPath PV into the data dir"),
    pytest.param({"driver": "hostPath", "path": "missing", "pinned": None}, "does not exist on node node-a",
                 id="hostPath PV that does not exist"),
]


@pytest.mark.parametrize(("world", "reason"), NOT_READY)
async def test_volume_not_usable_here_is_not_mounted(client: InProcessClient, tmp_path: Path, world: Obj,
                                                     reason: str) -> None:
    await _world(client, tmp_path, **world)
    root = tmp_path / "pod" / "volumes"
    root.mkdir(parents=True)
    (root / "v").symlink_to(tmp_path)  # mounted before: the link goes when the volume may no longer be used
    (tmp_path / "agent/pods").mkdir(parents=True)
    problem = await ClaimVolumes(client, NODE, tmp_path / "agent", [tmp_path / "agent"]).prepare(POD, root)
    assert reason in problem
    assert not (root / "v").is_symlink()
    with pytest.raises(ConfigError, match="is not mounted on this node"):
        _volume_source(POD["spec"]["volumes"][0], POD, root, [])


READY = [
    pytest.param({}, "agent/volumes/local-path/pv1", id="local-path directory under the agent's data dir"),
    pytest.param({"driver": "kubelite.io/shared-path", "pinned": None}, "shared",
                 id="shared-path directory at its volumeAttributes path"),
    pytest.param({"modes": ("ReadWriteMany",), "attached_to": None, "pinned": None,
                  "driver": "kubelite.io/shared-path"}, "shared", id="ReadWriteMany needs no attachment"),
]


@pytest.mark.parametrize(("world", "where"), READY)
async def test_usable_volume_is_created_and_linked(client: InProcessClient, tmp_path: Path, world: Obj,
                                                   where: str) -> None:
    await _world(client, tmp_path, **world)
    root = tmp_path / "pod" / "volumes"
    assert await ClaimVolumes(client, NODE, tmp_path / "agent").prepare(POD, root) == ""
    assert (tmp_path / where).is_dir()
    assert _volume_source(POD["spec"]["volumes"][0], POD, root, []) == (tmp_path / where).resolve()


async def test_removing_the_pod_dir_keeps_the_volume_data(client: InProcessClient, tmp_path: Path) -> None:
    """The pod's link is removed with its directory (housekeeping), never what it points to."""
    await _world(client, tmp_path)
    pod_dir = tmp_path / "pod"
    assert await ClaimVolumes(client, NODE, tmp_path / "agent").prepare(POD, pod_dir / "volumes") == ""
    data = tmp_path / "agent/volumes/local-path/pv1/file"
    data.write_text("kept")
    remove_pod_dir(pod_dir)
    assert not pod_dir.exists() and data.read_text() == "kept"


def test_protected_dirs_stay_masked_under_a_claim_volume(tmp_path: Path) -> None:
    """A hostPath PV of "/" (an administrator's choice) still hides the node's protected directories."""
    root = tmp_path / "pod" / "volumes"
    root.mkdir(parents=True)
    (root / "v").symlink_to("/")
    container = {"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/host"}]}
    args = _mounts(POD, container, root, [tmp_path / "agent"])
    assert args[:3] == ["--bind", "/", "/host"]
    assert ["--tmpfs", f"/host{tmp_path}/agent"] == args[3:5]


@pytest.mark.parametrize("name,asked,answered,in_use,want_answer,want_deleted", [
    ("an asked directory is deleted and answered", "pvc-1", "", False, "pvc-1", ["pvc-1"]),
    ("one a pod of this node links to is kept, and not answered", "pvc-1", "", True, None, []),
    ("a name that is not a volume's (a path) is never deleted", "../../../etc pvc-1", "", False, "pvc-1", ["pvc-1"]),
    ("a never-made directory is answered all the same", "pvc-2", "", False, "pvc-2", []),
    ("an answer no longer asked for is withdrawn", "", "pvc-9", False, "", []),
    ("nothing asked, nothing answered: no write", "", "", False, None, []),
])
async def test_reclaim_of_local_path_directories(client: InProcessClient, tmp_path: Path, name: str, asked: str,
                                                 answered: str, in_use: bool, want_answer: str | None,
                                                 want_deleted: list[str]) -> None:
    annotations = {k: v for k, v in (("kubelite.io/local-path-delete", asked),
                                     ("kubelite.io/local-path-deleted", answered)) if v}
    node = await client.create("/api/v1/nodes", {"metadata": {"name": NODE, "annotations": annotations}})
    root = tmp_path / "data" / "volumes" / "local-path"
    (root / "pvc-1").mkdir(parents=True)
    (root / "pvc-1" / "f").write_text("x")
    outside = tmp_path / "etc"
    outside.mkdir()
    if in_use:
        link = tmp_path / "data" / "pods" / "default_p_u" / "volumes" / "data"
        link.parent.mkdir(parents=True)
        link.symlink_to(root / "pvc-1")
    await ClaimVolumes(client, NODE, tmp_path / "data").reclaim(node)
    after = (await client.get(f"/api/v1/nodes/{NODE}"))["metadata"]
    got = (after.get("annotations") or {}).get("kubelite.io/local-path-deleted")
    if want_answer is None:
        assert after["resourceVersion"] == node["metadata"]["resourceVersion"], "wrote the Node for nothing"
    else:
        assert (got or "") == want_answer
    assert (not (root / "pvc-1").exists()) == ("pvc-1" in want_deleted) and outside.is_dir()
