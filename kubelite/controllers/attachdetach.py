"""The attach/detach controller (S5): a ReadWriteOnce volume is attached to at most one node, by compare-and-swap.

Each volume that needs it (`api.volumes.needs_attach`: ReadWriteOnce or ReadWriteOncePod) has one
VolumeAttachment, named `kubelite-<pv name>` (`api.volumes.attachment_name`). Its spec is
immutable, so the API server's create is the compare-and-swap: whoever creates that name first
holds the volume for `spec.nodeName`; every other create is 409 AlreadyExists until it is deleted.

Per volume (the work-queue key) the controller:
- **attaches**: when no attachment exists and a scheduled pod that is not terminating uses the
  volume on a node that is not fenced, it creates the attachment for that pod's node (the oldest
  such pod's, when several race) and then marks `status.attached: true` — for kubelite's directory
  volumes there is no device to attach, the object is the lock;
- **detaches** only when no pod object using the volume remains on the attachment's node — a pod
  object is gone only after its agent confirmed its processes dead (S1/S2); a pod the agent
  reported Succeeded or Failed has stopped every container and counts as gone — or when that node is
  confirmed fenced (`node_fenced`) or deleted (node deletion = confirmed permanent partition, S2).
  The delete carries the attachment's uid and resourceVersion as preconditions, so a detach never
  removes a newer attachment;
- reports a pod waiting for a volume held elsewhere with upstream's `FailedAttachVolume`
  "Multi-Attach error" event.

The agent (kubelite/agent/volumes/) starts a pod's containers only when the attachment names its
node and says attached, so a second node never mounts the volume while the first holds it.
"""

from __future__ import annotations

import logging
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

log = logging.getLogger("kubelite.controllers.attachdetach")

Obj = dict[str, Any]
ATTACHER = "kubelite.io/attacher"
STORAGE_V1 = "storage.k8s.io/v1"
COMPONENT = "attachdetach-controller"
CLAIM_INDEX = "claims"
# The fencing seam: the fencing controller (issue 13 item 4) sets this Node condition to True once a
# fence of the node is confirmed (the node is powered off, cut off its storage, or its agent has
# provably killed every container). Only then may a volume be detached while pods still name it.
FENCED_CONDITION = "kubelite.io/Fenced"
RESYNC_PERIOD = 10.0


def node_fenced(node: Obj | None) -> bool:
    """Whether `node` is confirmed fenced: its `kubelite.io/Fenced` condition is True. A node object that no
    longer exists (None) counts as fenced: deleting a node declares it permanently gone (seed 002, S2)."""
    if node is None:
        return True
    return any(c.get("type") == FENCED_CONDITION and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _claim_keys(pod: Obj) -> list[str]:
    ns = pod["metadata"].get("namespace", "")
    return [f"{ns}/{name}" for name in vu.claim_names(pod)]


def attachment_for(pv_name: str, node: str) -> Obj:
    return {"apiVersion": STORAGE_V1, "kind": "VolumeAttachment",
            "metadata": {"name": vu.attachment_name(pv_name)},
            "spec": {"attacher": ATTACHER, "nodeName": node, "source": {"persistentVolumeName": pv_name}}}


class AttachDetachController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.events = EventSink(client, clock)
        self.runner: Runner[Key] = Runner("attachdetach", self._sync, clock)
        self.pods = shared_informer(client, clock, "/api/v1/pods", Handlers(
            self._pod_changed, lambda _, n: self._pod_changed(n), self._pod_changed))
        self.pods.add_index(CLAIM_INDEX, _claim_keys)
        self.claims = shared_informer(client, clock, "/api/v1/persistentvolumeclaims", Handlers(
            self._claim_changed, lambda _, n: self._claim_changed(n)))
        self.volumes = shared_informer(client, clock, "/api/v1/persistentvolumes", Handlers(
            self._volume_changed, lambda _, n: self._volume_changed(n)))
        self.attachments = shared_informer(client, clock, f"/apis/{STORAGE_V1}/volumeattachments", Handlers(
            self._attachment_changed, lambda _, n: self._attachment_changed(n), self._attachment_changed))
        self.nodes = shared_informer(client, clock, "/api/v1/nodes", Handlers(
            lambda o: None, lambda _, n: self._node_changed(n), self._node_changed))
        self.informers = (self.nodes, self.volumes, self.claims, self.attachments, self.pods)

    # --- event handlers: everything maps to the volume it concerns ------------------------------------

    def _enqueue(self, pv_name: str) -> None:
        if pv_name:
            self.runner.enqueue(("", pv_name))

    def _pod_changed(self, pod: Obj) -> None:
        ns = pod["metadata"].get("namespace", "")
        for name in vu.claim_names(pod):
            claim = self.claims.get(ns, name)
            if claim is not None:
                self._enqueue((claim.get("spec") or {}).get("volumeName", ""))

    def _claim_changed(self, claim: Obj) -> None:
        self._enqueue((claim.get("spec") or {}).get("volumeName", ""))

    def _volume_changed(self, pv: Obj) -> None:
        self._enqueue(pv["metadata"]["name"])

    def _attachment_changed(self, va: Obj) -> None:
        if (va.get("spec") or {}).get("attacher") == ATTACHER:
            self._enqueue(((va.get("spec") or {}).get("source") or {}).get("persistentVolumeName", ""))

    def _node_changed(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        for va in list(self.attachments.store.values()):
            if (va.get("spec") or {}).get("nodeName") == name:
                self._attachment_changed(va)

    async def run(self) -> None:
        await run_synced(self.informers, (self.runner.run, self._resync), alongside=(self.events.run,))

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(RESYNC_PERIOD)
            for key in list(self.volumes.store):
                self.runner.enqueue(key)

    # --- the reconcile --------------------------------------------------------------------------------

    def users(self, pv: Obj) -> list[Obj]:
        """Scheduled pod objects naming the volume's claim (terminating ones included: not yet confirmed gone)."""
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        claim = self.claims.get(str(ref.get("namespace", "")), str(ref.get("name", "")))
        if claim is None or (claim.get("spec") or {}).get("volumeName") != pv["metadata"]["name"]:
            return []
        key = f"{ref.get('namespace')}/{ref.get('name')}"
        return [p for p in self.pods.by_index(CLAIM_INDEX, key) if (p.get("spec") or {}).get("nodeName")]

    async def _sync(self, key: Key) -> None:
        pv_name = key[1]
        pv = self.volumes.get("", pv_name)
        va = self.attachments.get("", vu.attachment_name(pv_name))
        users = self.users(pv) if pv is not None and vu.needs_attach(pv) else []
        if va is not None:
            holder = va["spec"]["nodeName"]
            # a terminal phase is written by the agent after every container stopped: such a pod no longer holds
            on_holder = [p for p in users if p["spec"]["nodeName"] == holder and not _terminal(p)]
            if on_holder and not node_fenced(self.nodes.get("", holder)):
                await self._mark_attached(va)
                self._report_multi_attach(pv_name, holder, users, on_holder)
                return
            await self._detach(va)
            return
        wanting = sorted((p for p in users if not p["metadata"].get("deletionTimestamp") and not _terminal(p)
                          and not node_fenced(self.nodes.get("", p["spec"]["nodeName"]))),
                         key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        if wanting:
            await self._attach(pv_name, wanting[0]["spec"]["nodeName"])

    async def _attach(self, pv_name: str, node: str) -> None:
        try:
            va = await self.client.create(resource_path("volumeattachments", group_version=STORAGE_V1),
                                          attachment_for(pv_name, node))
        except ApiError as exc:
            if exc.code == 409:  # lost the race: the informer brings the holder, which is synced then
                return
            raise
        log.info("attached volume %s to node %s", pv_name, node)
        self.attachments.add(va)
        await self._mark_attached(va)

    async def _mark_attached(self, va: Obj) -> None:
        """The attacher's part: a directory needs no device attach, so the holder is attached at once."""
        if (va.get("status") or {}).get("attached"):
            return
        out = await self.client.request(
            "PUT", resource_path("volumeattachments", name=va["metadata"]["name"], subresource="status",
                                 group_version=STORAGE_V1), {**va, "status": {"attached": True}})
        self.attachments.add(out)

    async def _detach(self, va: Obj) -> None:
        meta = va["metadata"]
        try:
            path = resource_path("volumeattachments", name=meta["name"], group_version=STORAGE_V1)
            await self.client.delete(path, {"preconditions": {"uid": meta["uid"],
                                                              "resourceVersion": meta["resourceVersion"]}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
            return
        log.info("detached volume %s from node %s", va["spec"]["source"].get("persistentVolumeName"),
                 va["spec"]["nodeName"])
        self.attachments.remove(key_of(va))
        self._enqueue(va["spec"]["source"].get("persistentVolumeName", ""))

    def _report_multi_attach(self, pv_name: str, holder: str, users: list[Obj], on_holder: list[Obj]) -> None:
        held_by = ", ".join(f"{p['metadata']['name']}" for p in on_holder)
        for pod in users:
            if pod["spec"]["nodeName"] != holder and not pod["metadata"].get("deletionTimestamp"):
                self.events.post(event_for(
                    {**pod, "apiVersion": "v1"}, "FailedAttachVolume",
                    f'Multi-Attach error for volume "{pv_name}" Volume is already used by pod(s) {held_by}',
                    "Pod", COMPONENT, self.clock.now(), "Warning"))
