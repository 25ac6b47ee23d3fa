"""kubelite's built-in dynamic provisioners: `kubelite.io/local-path` and `kubelite.io/shared-path`.

Like an external provisioner (sig-storage-lib-external-provisioner), it acts on claims the PV
controller annotated with `volume.kubernetes.io/storage-provisioner` naming one of ours, and
creates a PersistentVolume pre-bound to the claim (claimRef with its uid), named `pvc-<claim uid>`
so a retried create is a harmless 409. The binder then completes the binding.

- local-path: a CSI volume of driver `kubelite.io/local-path` whose directory lives under the data
  dir of one agent (`<data-dir>/volumes/local-path/<pv name>`); its node affinity pins it to the
  node the scheduler selected (`volume.kubernetes.io/selected-node`), so the class must use
  `volumeBindingMode: WaitForFirstConsumer`. The agent creates the directory when it first mounts
  the volume: only the agent can reach its node's filesystem, and it is the one component that
  knows its data dir; a volume never mounted costs nothing.
- shared-path: a CSI volume of driver `kubelite.io/shared-path` whose directory
  (`volumeAttributes.path`, under the class parameter `path` or the provisioner's shared root)
  stands for network storage: any node may mount it. The attach lock
  (attachdetach.py) is what keeps a ReadWriteOnce one on a single node.

Reclaim policy Delete (as an external provisioner does it: the PV controller leaves our volumes to us,
pv_binder.py): a Released volume's directory is deleted, then the PV object (uid precondition).
- shared-path: here, by this controller, which chose the path — only a directory named after the PV
  directly under its class's root (or, the class gone, named after the PV) is ever deleted;
- local-path: by the node's agent, the one component that reaches the node's disk. The controller
  asks through the Node (annotation `kubelite.io/local-path-delete`, the PV names), the agent
  deletes each directory no pod of its uses and answers (`kubelite.io/local-path-deleted`), then
  the controller deletes the PV and takes the name off its request. (Upstream's
  rancher/local-path-provisioner runs a helper pod with a hostPath instead; here the agent's data
  dir is known only to the agent and is never mounted into a pod.) A node that is down or gone keeps
  its volumes' PVs Released until its agent answers: the data may still be there.
A deletion that fails is a VolumeFailedDelete event on the PV and retried with back-off.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kubelite.api import volumes as vu
from kubelite.api.errors import ApiError
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import resource_path
from kubelite.client.informer import Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.provisioner")

Obj = dict[str, Any]
PROVISIONERS = (vu.LOCAL_PATH, vu.SHARED_PATH)
DEFAULT_SHARED_ROOT = Path(tempfile.gettempdir()) / "kubelite-shared-volumes"
COMPONENT = "kubelite-provisioner"


def reclaimable(pv: Obj) -> bool:
    """A Released volume of ours with reclaim policy Delete, not being deleted yet."""
    meta = pv["metadata"]
    return ((meta.get("annotations") or {}).get(vu.ANN_DYNAMICALLY_PROVISIONED) in PROVISIONERS
            and (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete"
            and (pv.get("status") or {}).get("phase") == "Released" and not meta.get("deletionTimestamp"))


def shared_directory(pv: Obj, sc: Obj | None, shared_root: Path) -> Path | str:
    """The directory of a shared-path volume, or why it is not one this provisioner made (then it is left
    alone: a PV anyone can write must not make this controller delete an arbitrary path)."""
    name = pv["metadata"]["name"]
    path = Path(str((((pv.get("spec") or {}).get("csi") or {}).get("volumeAttributes") or {}).get("path") or ""))
    if path.name != name:
        return f"its path {path} is not named after the volume"
    if sc is not None and sc.get("provisioner") == vu.SHARED_PATH:
        root = Path((sc.get("parameters") or {}).get("path") or shared_root)
        if path.parent != root:
            return f"its path {path} is not under {root}, the root of StorageClass {sc['metadata']['name']}"
    return path


def provisioned_volume(claim: Obj, sc: Obj, shared_root: Path) -> Obj | str:
    """The PersistentVolume for `claim` of class `sc`, or why it cannot be provisioned (ProvisioningFailed)."""
    provisioner = sc.get("provisioner")
    meta, spec = claim["metadata"], claim.get("spec") or {}
    name = f"pvc-{meta['uid']}"
    if spec.get("selector") is not None:
        return "claim Selector is not supported"
    pv_spec: Obj = {
        "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage")},
        "accessModes": spec.get("accessModes"),
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "storageClassName": sc["metadata"]["name"],
        "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy", "Delete"),
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta["namespace"],
                     "name": meta["name"], "uid": meta["uid"]},
        "csi": {"driver": provisioner, "volumeHandle": name},
    }
    if provisioner == vu.LOCAL_PATH:
        node = (meta.get("annotations") or {}).get(vu.ANN_SELECTED_NODE)
        if not node:
            return ("kubelite.io/local-path needs the node the scheduler selected: use a StorageClass with "
                    "volumeBindingMode WaitForFirstConsumer")
        pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": vu.HOSTNAME_LABEL, "operator": "In", "values": [node]}]}]}}
    else:
        root = Path((sc.get("parameters") or {}).get("path") or shared_root)
        pv_spec["csi"]["volumeAttributes"] = {"path": str(root / name)}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {vu.ANN_DYNAMICALLY_PROVISIONED: provisioner}},
            "spec": pv_spec}


class ProvisionerController:
    def __init__(self, client: Client, clock: Clock, shared_root: Path = DEFAULT_SHARED_ROOT) -> None:
        self.client = client
        self.clock = clock
        self.shared_root = shared_root
        self.events = EventSink(client, clock)
        self.runner: Runner[Key] = Runner("kubelite-provisioner", self._sync, clock)
        enqueue = self.runner.enqueue
        self.claims = shared_informer(client, clock, "/api/v1/persistentvolumeclaims", Handlers(
            lambda o: enqueue(key_of(o)), lambda _, n: enqueue(key_of(n))))
        self.classes = shared_informer(client, clock, "/apis/storage.k8s.io/v1/storageclasses")
        self.reclaimer: Runner[Key] = Runner("kubelite-provisioner-reclaim", self._reclaim, clock)
        self.volumes = shared_informer(client, clock, "/api/v1/persistentvolumes", Handlers(
            self._volume_changed, lambda _, n: self._volume_changed(n)))
        self.nodes = shared_informer(client, clock, "/api/v1/nodes", Handlers(
            self._node_changed, lambda _, n: self._node_changed(n)))

    async def run(self) -> None:
        await run_synced((self.classes, self.claims, self.volumes, self.nodes), (self.runner.run, self.reclaimer.run),
                         alongside=(self.events.run,))

    # --- reclaim policy Delete: keys are (the local-path volume's node or "", the PV name) ----------------

    def _volume_changed(self, pv: Obj) -> None:
        if reclaimable(pv):
            self.reclaimer.enqueue((vu.pinned_node(pv) or "", pv["metadata"]["name"]))

    def _node_changed(self, node: Obj) -> None:
        """An agent answered, or a node came (back): its volumes' reclaims go on; names of volumes gone are
        taken off its request."""
        name = node["metadata"]["name"]
        for pv_name in vu.annotation_names(node, vu.ANN_LOCAL_PATH_DELETE):
            self.reclaimer.enqueue((name, pv_name))
        for pv in self.volumes.store.values():
            if reclaimable(pv) and vu.pinned_node(pv) == name:
                self.reclaimer.enqueue((name, pv["metadata"]["name"]))

    async def _reclaim(self, key: Key) -> None:
        node_name, name = key
        pv = self.volumes.get("", name)
        if pv is None:  # deleted: nothing more to ask of its node
            await self._set_request(node_name, name, False)
            return
        if not reclaimable(pv):
            return
        driver = pv["metadata"]["annotations"][vu.ANN_DYNAMICALLY_PROVISIONED]
        if driver == vu.SHARED_PATH:
            directory = shared_directory(pv, self.classes.get("", vu.storage_class(pv)), self.shared_root)
            if isinstance(directory, str):
                self._volume_event(pv, "VolumeFailedDelete", f"not deleting the volume's directory: {directory}")
                return
            try:
                await asyncio.to_thread(shutil.rmtree, directory)
            except FileNotFoundError:
                pass  # never mounted (the agent makes it on first use), or deleted before a retry
            except OSError as exc:
                self._volume_event(pv, "VolumeFailedDelete", f"deleting {directory}: {exc}")
                raise
            await self._delete_volume(pv)
            return
        node = self.nodes.get("", node_name) if node_name else None
        if node is None:
            self._volume_event(pv, "VolumeFailedDelete", f"the volume's node {node_name or '(none)'} is not "
                                                         "registered: its directory is deleted when it is back")
        elif name in vu.annotation_names(node, vu.ANN_LOCAL_PATH_DELETED):
            await self._delete_volume(pv)
            await self._set_request(node_name, name, False)
        else:
            await self._set_request(node_name, name, True)

    async def _set_request(self, node_name: str, pv_name: str, wanted: bool) -> None:
        """Put `pv_name` on (or take it off) the node's list of directories to delete; the resourceVersion
        makes the write a compare-and-swap (409 on a concurrent change: the runner retries from fresh)."""
        node = self.nodes.get("", node_name) if node_name else None
        if node is None:
            return
        names = vu.annotation_names(node, vu.ANN_LOCAL_PATH_DELETE)
        if (pv_name in names) == wanted:
            return
        names = [*names, pv_name] if wanted else [n for n in names if n != pv_name]
        updated = await self.client.patch(resource_path("nodes", name=node_name), {"metadata": {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "annotations": {vu.ANN_LOCAL_PATH_DELETE: " ".join(names) or None}}})
        self.nodes.add(updated)

    async def _delete_volume(self, pv: Obj) -> None:
        try:
            await self.client.delete(resource_path("persistentvolumes", name=pv["metadata"]["name"]),
                                     {"preconditions": {"uid": pv["metadata"]["uid"]}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
        log.info("reclaim policy Delete: deleted volume %s and its directory", pv["metadata"]["name"])

    def _volume_event(self, pv: Obj, reason: str, message: str) -> None:
        self.events.post(event_for({**pv, "apiVersion": "v1"}, reason, message, "PersistentVolume", COMPONENT,
                                   self.clock.now(), "Warning"))

    def _event(self, claim: Obj, event_type: str, reason: str, message: str) -> None:
        self.events.post(event_for({**claim, "apiVersion": "v1"}, reason, message, "PersistentVolumeClaim",
                                   COMPONENT, self.clock.now(), event_type))

    async def _sync(self, key: Key) -> None:
        claim = self.claims.get(*key)
        if claim is None or claim["metadata"].get("deletionTimestamp") or (claim.get("spec") or {}).get("volumeName"):
            return
        provisioner = (claim["metadata"].get("annotations") or {}).get(vu.ANN_STORAGE_PROVISIONER)
        if provisioner not in PROVISIONERS:
            return
        sc = self.classes.get("", vu.storage_class(claim))
        if sc is None or sc.get("provisioner") != provisioner:
            return
        pv = provisioned_volume(claim, sc, self.shared_root)
        if isinstance(pv, str):
            self._event(claim, "Warning", "ProvisioningFailed", f"failed to provision volume with StorageClass "
                                                                f"\"{sc['metadata']['name']}\": {pv}")
            return
        self._event(claim, "Normal", "Provisioning", f"External provisioner is provisioning volume for claim "
                                                     f"\"{key[0]}/{key[1]}\"")
        try:
            await self.client.create(resource_path("persistentvolumes"), pv)
        except ApiError as exc:
            if exc.code != 409:
                raise
            return  # provisioned before (a retry): the binder finishes the binding
        self._event(claim, "Normal", "ProvisioningSucceeded",
                    f"Successfully provisioned volume {pv['metadata']['name']}")
