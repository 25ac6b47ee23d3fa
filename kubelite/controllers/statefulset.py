"""The StatefulSet controller: stable identities, ordered start, rolling updates (pkg/controller/statefulset).

Each sync claims the set's pods and ControllerRevisions (ownership.RefManager, as upstream's
ControllerRefManager: orphans that match the selector — and, for pods, are named after the set —
are adopted, owned ones that no longer match are released), reads its claims from an indexed
informer, works out the current and update revisions (creating a ControllerRevision for a new
template, reusing an equal older one, bumping `collisionCount` on a hash clash), runs
`StatefulSetControl` (statefulset_control.py: the decisions and the S1 rule) with the API as its
pod control, writes the status through the status subresource and trims the revision history to
`revisionHistoryLimit`.

Writes are plain creates and graceful deletes. A create refused with AlreadyExists means a pod
of that name still exists in the API — the replacement simply waits for it to be gone.

Not done: stale-claim detection (PodClaimIsStale).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.api.selectors import LabelSelector, compile_label_selector
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import resource_path
from kubelite.client.informer import NAMESPACE_INDEX, OWNER_UID_INDEX, Handlers, Key, by_owner_uid, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers import podcontrol as pc
from kubelite.controllers import statefulset_utils as su
from kubelite.controllers.informers import SharedInformerHandle, shared_informer
from kubelite.controllers.ownership import ORPHAN_INDEX, RefManager, controller_of, orphans_by_namespace, recheck_owner
from kubelite.controllers.runner import Runner, run_synced
from kubelite.controllers.statefulset_control import StatefulSetControl

log = logging.getLogger("kubelite.controllers.statefulset")

Obj = dict[str, Any]
COMPONENT = "statefulset-controller"
WORKERS = 5  # --concurrent-statefulset-syncs
ALREADY_EXISTS_RETRY = 1.0
MERGE = "application/merge-patch+json"


def _selector_matches(set_: Obj, pod: Obj) -> bool:
    try:
        return compile_label_selector(set_["spec"].get("selector")).matches(pod["metadata"].get("labels"))
    except ApiError:
        return False


def _is_already_exists(exc: ApiError) -> bool:
    return exc.code == 409 and exc.reason == "AlreadyExists"


class ApiPodControl:
    """StatefulPodControl over the API: claims before pods, events as upstream's recordPodEvent."""

    def __init__(self, ctl: StatefulSetController) -> None:
        self.ctl = ctl
        self.client = ctl.client

    def event(self, set_: Obj, kind: str, reason: str, message: str) -> None:
        self.ctl.events.post(event_for({**set_, "apiVersion": "apps/v1"}, reason, message, "StatefulSet", COMPONENT,
                                       self.ctl.clock.now(), kind))

    async def create_pod(self, set_: Obj, pod: Obj) -> bool:
        await self._create_claims(set_, pod)
        name, set_name = pod["metadata"]["name"], set_["metadata"]["name"]
        ns = set_["metadata"].get("namespace", "")
        try:
            await self.client.create(resource_path("pods", ns), pod)
        except ApiError as exc:
            if not _is_already_exists(exc):
                self.event(set_, "Warning", "FailedCreate",
                           f"create Pod {name} in StatefulSet {set_name} failed error: {exc}")
                raise
            # A pod of this name still exists (terminating, or not yet in our cache): wait for it (S1).
            if self.ctl.pods.get(ns, name) is None:
                self.ctl.runner.queue.add_after(key_of(set_), ALREADY_EXISTS_RETRY)
            return False
        self.event(set_, "Normal", "SuccessfulCreate", f"create Pod {name} in StatefulSet {set_name} successful")
        return True

    async def _create_claims(self, set_: Obj, pod: Obj) -> None:
        for claim in su.pod_claims(set_, pod).values():
            ns, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
            if self.ctl.claims.get(ns, name) is not None:
                continue
            su.update_claim_owner_refs(claim, set_, pod)
            try:
                await self.client.create(resource_path("persistentvolumeclaims", ns), claim)
            except ApiError as exc:
                if _is_already_exists(exc):
                    continue
                self.event(set_, "Warning", "FailedCreate", f"create Claim {name} for Pod {pod['metadata']['name']} "
                                                            f"in StatefulSet {set_['metadata']['name']} failed error: "
                                                            f"{exc}")
                raise
            self.event(set_, "Normal", "SuccessfulCreate", f"create Claim {name} Pod {pod['metadata']['name']} in "
                                                           f"StatefulSet {set_['metadata']['name']} success")

    async def delete_pod(self, set_: Obj, pod: Obj) -> None:
        """A graceful delete (no grace period override): the object stays until its agent confirms (S2)."""
        meta = pod["metadata"]
        try:
            await self.client.delete(resource_path("pods", meta.get("namespace", ""), meta["name"]))
        except ApiError as exc:
            if exc.code == 404:
                return
            self.event(set_, "Warning", "FailedDelete",
                       f"delete Pod {meta['name']} in StatefulSet {set_['metadata']['name']} failed error: {exc}")
            raise
        self.event(set_, "Normal", "SuccessfulDelete",
                   f"delete Pod {meta['name']} in StatefulSet {set_['metadata']['name']} successful")

    async def update_pod(self, set_: Obj, pod: Obj) -> None:
        """UpdateStatefulPod, for what a pod may change: its identity labels; then its claims' owners."""
        if not su.identity_matches(set_, pod):
            fixed = copy.deepcopy(pod)
            su.update_identity(set_, fixed)
            labels = {k: fixed["metadata"]["labels"][k] for k in (su.POD_NAME_LABEL, su.POD_INDEX_LABEL)}
            meta = pod["metadata"]
            await self.client.patch(resource_path("pods", meta.get("namespace", ""), meta["name"]),
                                    {"metadata": {"labels": labels}}, MERGE)
        await self.update_claims_for_policy(set_, pod)

    def _claims_needing_update(self, set_: Obj, pod: Obj) -> list[Obj]:
        out = []
        for claim in su.pod_claims(set_, pod).values():
            current = self.ctl.claims.get(claim["metadata"]["namespace"], claim["metadata"]["name"])
            if current is None:
                continue
            wanted = copy.deepcopy(current)
            if su.update_claim_owner_refs(wanted, set_, pod):
                out.append(wanted)
        return out

    def claims_match_policy(self, set_: Obj, pod: Obj) -> bool:
        return not self._claims_needing_update(set_, pod)

    async def update_claims_for_policy(self, set_: Obj, pod: Obj) -> None:
        for claim in self._claims_needing_update(set_, pod):
            meta = claim["metadata"]
            await self.client.patch(resource_path("persistentvolumeclaims", meta["namespace"], meta["name"]),
                                    {"metadata": {"ownerReferences": meta.get("ownerReferences") or None}}, MERGE)


class StatefulSetController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[Key] = Runner("statefulset", self.reconcile, clock, workers=WORKERS)
        self.events = EventSink(client, clock)
        self.sets = shared_informer(client, clock, "/apis/apps/v1/statefulsets",
                                    Handlers(self._set_changed, lambda o, n: self._set_changed(n)))
        self.pods = shared_informer(client, clock, "/api/v1/pods",
                                    Handlers(self._pod_changed, self._pod_updated, self._pod_changed))
        self.revisions = shared_informer(client, clock, "/apis/apps/v1/controllerrevisions")
        for informer in (self.pods, self.revisions):
            informer.add_index(OWNER_UID_INDEX, by_owner_uid)
            informer.add_index(ORPHAN_INDEX, orphans_by_namespace)
        self.claims = shared_informer(client, clock, "/api/v1/persistentvolumeclaims")
        self.control = StatefulSetControl(ApiPodControl(self))
        self.written: dict[Key, Obj] = {}  # each set as our last status write returned it

    def _set_changed(self, set_: Obj) -> None:
        self.runner.enqueue(key_of(set_))

    def _pod_changed(self, pod: Obj) -> None:
        """The owning set; for an orphan, every set whose selector matches it (getStatefulSetsForPod), to adopt it."""
        ns = pod["metadata"].get("namespace", "")
        name = pc.controller_of(pod, "StatefulSet")
        if name:
            self.runner.enqueue((ns, name))
        elif controller_of(pod) is None and not pod["metadata"].get("deletionTimestamp"):
            for set_ in self.sets.by_index(NAMESPACE_INDEX, ns):
                if _selector_matches(set_, pod):
                    self.runner.enqueue(key_of(set_))

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        """Also the set a pod was released from (its labels or references changed), as upstream's updatePod."""
        if old["metadata"].get("labels") != new["metadata"].get("labels") or \
                controller_of(old) != controller_of(new):
            self._pod_changed(old)
        self._pod_changed(new)

    async def run(self) -> None:
        await run_synced((self.sets, self.pods, self.revisions, self.claims), (self.runner.run,),
                         alongside=(self.events.run,))

    async def _claim(self, set_: Obj, selector: LabelSelector, informer: SharedInformerHandle, resource: str,
                     belongs: Callable[[Obj], bool] = lambda obj: True) -> list[Obj]:
        """getPodsForStatefulSet / adoptOrphanRevisions: what the set owns once matching orphans are adopted and
        owned objects that no longer match (or, for pods, are not named after it) are released."""
        ns, uid = set_["metadata"].get("namespace", ""), set_["metadata"]["uid"]
        group_version = "apps/v1" if resource == "controllerrevisions" else "v1"
        candidates = {key_of(o): o for o in (*informer.by_index(OWNER_UID_INDEX, uid),
                                            *informer.by_index(ORPHAN_INDEX, ns))}
        set_path = resource_path("statefulsets", ns, set_["metadata"]["name"], group_version="apps/v1")
        manager = RefManager(self.client, {**set_, "apiVersion": "apps/v1", "kind": "StatefulSet"}, selector,
                             lambda o: resource_path(resource, ns, o["metadata"]["name"], group_version=group_version),
                             recheck_owner(self.client, set_path, uid), belongs)
        return await manager.claim(list(candidates.values()))

    async def reconcile(self, key: Key) -> None:
        set_ = pc.newest(self.sets.store.get(key), self.written.get(key))
        if set_ is None:
            self.written.pop(key, None)
            return
        try:
            selector = compile_label_selector(set_["spec"].get("selector"))
        except ApiError as exc:  # validation refuses such a set; one stored before that is left alone
            log.warning("statefulset %s/%s: invalid selector: %s", key[0], key[1], exc)
            return
        pods = await self._claim(set_, selector, self.pods, "pods", lambda p: su.is_member_of(set_, p))
        revisions = sorted(await self._claim(set_, selector, self.revisions, "controllerrevisions"),
                           key=lambda r: r.get("revision", 0))
        current, update = await self._revisions(set_, revisions)
        status = await self.control.update(set_, current, update, pods, self.clock.now())
        await self._write_status(set_, status)
        await self._truncate_history(set_, pods, revisions, current, update)
        min_ready = int(set_["spec"].get("minReadySeconds", 0))
        if min_ready > 0 and status["availableReplicas"] != status["readyReplicas"]:
            self.runner.queue.add_after(key, min_ready)

    async def _revisions(self, set_: Obj, revisions: list[Obj]) -> tuple[Obj, Obj]:
        """getStatefulSetRevisions: (current, update); the update revision is created or re-numbered as needed."""
        ns = set_["metadata"].get("namespace", "")
        path = resource_path("controllerrevisions", ns, group_version="apps/v1")
        collisions = (set_.get("status") or {}).get("collisionCount")
        number = (revisions[-1].get("revision", 0) + 1) if revisions else 1
        update = su.new_revision(set_, number, collisions)
        equal = [r for r in revisions if su.equal_revision(r, update)]
        if equal and equal[-1] is revisions[-1]:
            update = revisions[-1]
        elif equal:  # back to an older template: that revision becomes the newest
            update = await self.client.patch(f"{path}/{equal[-1]['metadata']['name']}", {"revision": number}, MERGE)
        else:
            try:
                update = await self.client.create(path, update)
            except ApiError as exc:
                if not _is_already_exists(exc):
                    raise
                existing = await self.client.get(f"{path}/{update['metadata']['name']}")
                if not su.equal_revision(existing, update):  # a hash collision: probe with the next count
                    body = {**set_, "status": {**(set_.get("status") or {}), "collisionCount": (collisions or 0) + 1}}
                    await self.client.request("PUT", resource_path("statefulsets", ns, set_["metadata"]["name"],
                                                                   "status", group_version="apps/v1"), body)
                    raise
                update = existing
        wanted = (set_.get("status") or {}).get("currentRevision")
        current = next((r for r in revisions if r["metadata"]["name"] == wanted), update)
        return current, update

    async def _write_status(self, set_: Obj, status: Obj) -> None:
        old = set_.get("status") or {}
        if all(old.get(k) == v for k, v in status.items()):
            return
        meta = set_["metadata"]
        self.written[key_of(set_)] = await self.client.request(
            "PUT", resource_path("statefulsets", meta.get("namespace", ""), meta["name"], "status",
                                 group_version="apps/v1"), {**set_, "status": {**old, **status}})

    async def _truncate_history(self, set_: Obj, pods: list[Obj], revisions: list[Obj], current: Obj,
                                update: Obj) -> None:
        """truncateHistory: keep revisionHistoryLimit revisions besides those in use."""
        live = {current["metadata"]["name"], update["metadata"]["name"]} | {su.pod_revision(p) for p in pods}
        history = [r for r in revisions if r["metadata"]["name"] not in live]
        excess = len(history) - int(set_["spec"].get("revisionHistoryLimit", 10))
        for rev in history[:max(0, excess)]:
            try:
                await self.client.delete(resource_path("controllerrevisions", rev["metadata"].get("namespace", ""),
                                                       rev["metadata"]["name"], group_version="apps/v1"))
            except ApiError as exc:
                if exc.code != 404:
                    raise
