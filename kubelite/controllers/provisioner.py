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

Not done: deleting the backing directory on reclaim (the PV object goes, the directory stays).
"""

from __future__ import annotations

import logging
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

    async def run(self) -> None:
        await run_synced((self.classes, self.claims), (self.runner.run,), alongside=(self.events.run,))

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
