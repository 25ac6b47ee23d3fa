"""The Deployment controller: rolls a Deployment's template out through ReplicaSets.

A port of pkg/controller/deployment (deployment_controller.go, sync.go, rolling.go,
recreate.go, progress.go); the arithmetic is in rollout.py. Each sync:
- claims the ReplicaSets the Deployment's selector matches (adopting orphans, releasing strays);
- finds the *new* ReplicaSet — the one whose template equals the Deployment's, ignoring the
  `pod-template-hash` label — or creates it, named `<deployment>-<hash>`, with the revision
  one above the old ones (`deployment.kubernetes.io/revision`; a rolled-back ReplicaSet keeps
  its earlier revisions in `revision-history`);
- a paused Deployment, or a change of spec.replicas alone, is only scaled (proportionally
  over the active ReplicaSets, by their `max-replicas` annotations);
- RollingUpdate scales the new ReplicaSet up within maxSurge and the old ones down within
  maxUnavailable; Recreate scales the old ones to zero, waits until none of their pods is
  left running, then scales the new one up;
- once complete, old ReplicaSets beyond revisionHistoryLimit are deleted;
- status (replicas, updated, ready, available, unavailable) and the Available, Progressing
  (with progressDeadlineSeconds) and ReplicaFailure conditions; ScalingReplicaSet events.
Rollback is kubectl's own (`rollout undo` copies an old ReplicaSet's template into the Deployment).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from kubelite.api.errors import ApiError
from kubelite.api.selectors import compile_label_selector
from kubelite.api.strconv import int_or_none
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import resource_path
from kubelite.client.informer import NAMESPACE_INDEX, OWNER_UID_INDEX, Handlers, Key, by_owner_uid, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_rfc3339
from kubelite.controllers import rollout as ro
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.ownership import (
    ORPHAN_INDEX,
    RefManager,
    controller_of,
    controller_ref,
    orphans_by_namespace,
    recheck_owner,
)
from kubelite.controllers.revisions import (
    compute_hash,
    equal_ignore_hash,
    revision,
    set_new_rs_annotations,
    set_replicas_annotations,
)
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.deployment")

Obj = dict[str, Any]
COMPONENT = "deployment-controller"
WORKERS = 5  # --concurrent-deployment-syncs
class DeploymentController:
    def __init__(self, client: Client, clock: Clock, workers: int = WORKERS) -> None:
        self.client = client
        self.clock = clock
        self.events = EventSink(client, clock)
        self.runner: Runner[Key] = Runner("deployment", self.sync, clock, workers)
        self.deployments = shared_informer(client, clock, "/apis/apps/v1/deployments",
                                           Handlers(self._enqueue, lambda o, n: self._enqueue(n)))
        self.replicasets = shared_informer(client, clock, "/apis/apps/v1/replicasets",
                                           Handlers(self._rs_changed, self._rs_updated, self._rs_changed))
        self.replicasets.add_index(OWNER_UID_INDEX, by_owner_uid)
        self.replicasets.add_index(ORPHAN_INDEX, orphans_by_namespace)
        self.pods = shared_informer(client, clock, "/api/v1/pods", Handlers(on_delete=self._pod_deleted))
        self.pods.add_index(OWNER_UID_INDEX, by_owner_uid)

    async def run(self) -> None:
        await run_synced((self.deployments, self.replicasets, self.pods), (self.runner.run,),
                         alongside=(self.events.run,))

    # --- event handlers --------------------------------------------------------------------------

    def _enqueue(self, d: Obj) -> None:
        self.runner.enqueue(key_of(d))

    def _owner(self, obj: Obj) -> Obj | None:
        ref = controller_of(obj)
        if ref is None or ref.get("kind") != "Deployment":
            return None
        d = self.deployments.get(obj["metadata"].get("namespace", ""), ref.get("name", ""))
        return d if d is not None and d["metadata"]["uid"] == ref.get("uid") else None

    def _rs_changed(self, rs: Obj) -> None:
        owner = self._owner(rs)
        if owner is not None:
            self._enqueue(owner)
        elif controller_of(rs) is None:  # an orphan: any Deployment that may adopt it
            labels = rs["metadata"].get("labels")
            for d in self.deployments.by_index(NAMESPACE_INDEX, rs["metadata"].get("namespace", "")):
                selector = (d.get("spec") or {}).get("selector")
                if selector and compile_label_selector(selector).matches(labels):
                    self._enqueue(d)

    def _rs_updated(self, old: Obj, new: Obj) -> None:
        if controller_of(old) != controller_of(new):
            self._rs_changed(old)
        self._rs_changed(new)

    def _pod_deleted(self, pod: Obj) -> None:
        """A Recreate rollout waits for the old pods to be gone."""
        ref = controller_of(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.replicasets.get(pod["metadata"].get("namespace", ""), ref.get("name", ""))
        d = self._owner(rs) if rs is not None else None
        if d is not None and ((d.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate":
            self._enqueue(d)

    # --- sync ------------------------------------------------------------------------------------

    async def sync(self, key: Key) -> None:
        d = self.deployments.store.get(key)
        if d is None:
            return
        d = orjson.loads(orjson.dumps(d))  # this sync's own copy: status is updated along the way
        if not ((d.get("spec") or {}).get("selector") or {}):
            self._event(d, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is "
                                           "required.", "Warning")
            return
        rss = await self.claim_replicasets(d)
        if d["metadata"].get("deletionTimestamp"):
            new_rs, old_rss = await self.new_and_old(d, rss, create=False)
            await self.write_status(d, ro.calculate_status(d, [*old_rss, *_some(new_rs)], new_rs, self.clock.now()))
            return
        await self.check_paused_conditions(d)
        if (d.get("spec") or {}).get("paused") or await self.is_scaling_event(d, rss):
            await self.scale_only(d, rss)
            return
        if ((d.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate":
            await self.rollout_recreate(d, rss)
        else:
            await self.rollout_rolling(d, rss)

    async def claim_replicasets(self, d: Obj) -> list[Obj]:
        ns, uid = d["metadata"]["namespace"], d["metadata"]["uid"]
        candidates = [*self.replicasets.by_index(OWNER_UID_INDEX, uid), *self.replicasets.by_index(ORPHAN_INDEX, ns)]
        manager = RefManager(self.client, d, compile_label_selector(d["spec"]["selector"]),
                             lambda rs: _rs_path(ns, rs["metadata"]["name"]),
                             recheck_owner(self.client, _path(ns, d["metadata"]["name"]), uid))
        return await manager.claim(candidates)

    async def new_and_old(self, d: Obj, rss: list[Obj], create: bool) -> tuple[Obj | None, list[Obj]]:
        """getAllReplicaSetsAndSyncRevision."""
        template = d["spec"]["template"]
        existing = next((rs for rs in sorted(rss, key=ro.created)
                         if equal_ignore_hash(rs["spec"]["template"], template)), None)
        old_rss = [rs for rs in rss if rs is not existing]
        new_revision = max((revision(rs) for rs in old_rss), default=0) + 1
        if existing is not None:
            return await self._sync_existing(d, existing, new_revision), old_rss
        if not create:
            return None, old_rss
        return await self._create_new(d, old_rss, new_revision), old_rss

    async def _sync_existing(self, d: Obj, rs: Obj, new_revision: int) -> Obj:
        rs = orjson.loads(orjson.dumps(rs))
        changed = set_new_rs_annotations(d, rs, new_revision, exists=True)
        min_ready = int(d["spec"].get("minReadySeconds") or 0)
        if changed or int(rs["spec"].get("minReadySeconds") or 0) != min_ready:
            rs["spec"]["minReadySeconds"] = min_ready
            rs = await self.client.request("PUT", _rs_path(rs["metadata"]["namespace"], rs["metadata"]["name"]), rs)
        needs_update = self._set_revision(d, (rs["metadata"].get("annotations") or {}).get(ro.REVISION, ""))
        if self._has_deadline(d) and ro.condition(d.get("status") or {}, "Progressing") is None:
            ro.set_condition(d.setdefault("status", {}), ro.new_condition(
                "Progressing", "True", "FoundNewReplicaSet", f'Found new replica set "{rs["metadata"]["name"]}"',
                self.clock.now()))
            needs_update = True
        if needs_update:
            await self.write_status(d, d["status"])
        return rs

    async def _create_new(self, d: Obj, old_rss: list[Obj], new_revision: int) -> Obj:
        ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
        status = d.setdefault("status", {})
        template = orjson.loads(orjson.dumps(d["spec"]["template"]))
        pod_hash = compute_hash(template, status.get("collisionCount"))
        template.setdefault("metadata", {})["labels"] = {**(template["metadata"].get("labels") or {}),
                                                         ro.HASH_LABEL: pod_hash}
        selector = orjson.loads(orjson.dumps(d["spec"]["selector"]))
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), ro.HASH_LABEL: pod_hash}
        new_rs: Obj = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                       "metadata": {"name": f"{name}-{pod_hash}", "namespace": ns,
                                    "labels": template["metadata"]["labels"], "ownerReferences": [controller_ref(d)]},
                       "spec": {"replicas": 0, "minReadySeconds": int(d["spec"].get("minReadySeconds") or 0),
                                "selector": selector, "template": template}}
        size = ro.new_rs_new_replicas(d, [*old_rss, new_rs], new_rs)
        new_rs["spec"]["replicas"] = size
        set_new_rs_annotations(d, new_rs, new_revision, exists=False)
        try:
            created = await self.client.create(_rs_path(ns), new_rs)
        except ApiError as exc:
            if exc.code == 409 and exc.reason == "AlreadyExists":
                return await self._collision(d, new_rs)
            msg = f'Failed to create new replica set "{new_rs["metadata"]["name"]}": {exc.message}'
            if self._has_deadline(d) and "being terminated" not in exc.message:
                ro.set_condition(status, ro.new_condition("Progressing", "False", "ReplicaSetCreateError", msg,
                                                          self.clock.now()))
                await self.write_status(d, status)
            self._event(d, "ReplicaSetCreateError", msg, "Warning")
            raise
        if size > 0:
            self._event(d, "ScalingReplicaSet", f"Scaled up replica set {created['metadata']['name']} from 0 to {size}")
        self._set_revision(d, str(new_revision))
        if self._has_deadline(d):
            ro.set_condition(status, ro.new_condition("Progressing", "True", "NewReplicaSetCreated",
                                                      f'Created new replica set "{created["metadata"]["name"]}"',
                                                      self.clock.now()))
        await self.write_status(d, status)
        created_obj: Obj = created
        return created_obj

    async def _collision(self, d: Obj, wanted: Obj) -> Obj:
        """An existing ReplicaSet has the name: ours with our template is the new one; otherwise bump
        collisionCount (a new hash next time) and fail this sync."""
        ns = d["metadata"]["namespace"]
        rs = await self.client.get(_rs_path(ns, wanted["metadata"]["name"]))
        ref = controller_of(rs)
        if ref is not None and ref.get("uid") == d["metadata"]["uid"] and \
                equal_ignore_hash(rs["spec"]["template"], d["spec"]["template"]):
            return rs
        status = d.setdefault("status", {})
        status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
        await self.write_status(d, status)
        raise ApiError(409, "AlreadyExists", f"hash collision for replica set {wanted['metadata']['name']}")

    def _set_revision(self, d: Obj, value: str) -> bool:
        annotations = d["metadata"].setdefault("annotations", {})
        if not value or annotations.get(ro.REVISION) == value:
            return False
        current, wanted = int_or_none(annotations.get(ro.REVISION, "")), int_or_none(value)
        if current is not None and wanted is not None and current > wanted:
            return False
        annotations[ro.REVISION] = value
        return True

    @staticmethod
    def _has_deadline(d: Obj) -> bool:
        return (d.get("spec") or {}).get("progressDeadlineSeconds") is not None

    async def is_scaling_event(self, d: Obj, rss: list[Obj]) -> bool:
        new_rs, old_rss = await self.new_and_old(d, rss, create=False)
        for rs in [*old_rss, *_some(new_rs)]:
            if ro.replicas(rs) > 0:
                desired = int_or_none((rs["metadata"].get("annotations") or {}).get(ro.DESIRED_REPLICAS, ""), 32)
                if desired is not None and desired != ro.replicas(d):
                    return True
        return False

    async def check_paused_conditions(self, d: Obj) -> None:
        if not self._has_deadline(d):
            return
        status = d.setdefault("status", {})
        cond = ro.condition(status, "Progressing")
        if cond is not None and cond.get("reason") == ro.TIMED_OUT:
            return
        paused_cond = cond is not None and cond.get("reason") == ro.PAUSED
        paused = bool(d["spec"].get("paused"))
        if paused and not paused_cond:
            new = ro.new_condition("Progressing", "Unknown", ro.PAUSED, "Deployment is paused", self.clock.now())
        elif not paused and paused_cond:
            new = ro.new_condition("Progressing", "Unknown", ro.RESUMED, "Deployment is resumed", self.clock.now())
        else:
            return
        ro.set_condition(status, new)
        await self.write_status(d, status)

    async def scale_only(self, d: Obj, rss: list[Obj]) -> None:
        """sync(): scale for a paused Deployment or a change of replicas alone; no rollout."""
        new_rs, old_rss = await self.new_and_old(d, rss, create=False)
        await self.scale(d, new_rs, old_rss)
        if d["spec"].get("paused"):
            await self.cleanup(d, old_rss)
        new_rs, old_rss = await self.new_and_old(d, await self.claim_replicasets(d), create=False)
        await self.write_status(d, ro.calculate_status(d, [*old_rss, *_some(new_rs)], new_rs, self.clock.now()))

    async def scale(self, d: Obj, new_rs: Obj | None, old_rss: list[Obj]) -> None:
        """sync.go scale()."""
        active = [rs for rs in [*_some(new_rs), *old_rss] if ro.replicas(rs) > 0]
        if len(active) <= 1:
            latest = active[0] if active else (new_rs or max(old_rss, key=ro.created, default=None))
            if latest is not None and ro.replicas(latest) != ro.replicas(d):
                await self.scale_rs(d, latest, ro.replicas(d))
            return
        if new_rs is not None and ro.replicas(new_rs) == ro.replicas(d) and \
                (new_rs.get("status") or {}).get("availableReplicas") == ro.replicas(d):
            for rs in old_rss:
                if ro.replicas(rs) > 0:
                    await self.scale_rs(d, rs, 0)
            return
        if ro.is_rolling(d):
            for name, size in ro.proportional_scale(d, active).items():
                rs = next(r for r in active if r["metadata"]["name"] == name)
                await self.scale_rs(d, rs, size)

    async def scale_rs(self, d: Obj, rs: Obj, size: int) -> Obj:
        """scaleReplicaSetAndRecordEvent."""
        old_size = ro.replicas(rs)
        updated = orjson.loads(orjson.dumps(rs))
        annotations_changed = set_replicas_annotations(updated, d)
        if old_size == size and not annotations_changed:
            return rs
        updated["spec"]["replicas"] = size
        out: Obj = await self.client.request("PUT", _rs_path(rs["metadata"]["namespace"], rs["metadata"]["name"]),
                                             updated)
        if old_size != size:
            op = "up" if size > old_size else "down"
            self._event(d, "ScalingReplicaSet", f"Scaled {op} replica set {rs['metadata']['name']} from {old_size} "
                                                f"to {size}")
        return out

    async def apply_plan(self, d: Obj, rss: list[Obj], plan: dict[str, int]) -> list[Obj]:
        out = []
        for rs in rss:
            name = rs["metadata"]["name"]
            out.append(await self.scale_rs(d, rs, plan[name]) if name in plan else rs)
        return out

    async def rollout_rolling(self, d: Obj, rss: list[Obj]) -> None:
        new_rs, old_rss = await self.new_and_old(d, rss, create=True)
        assert new_rs is not None
        size = ro.reconcile_new(d, [*old_rss, new_rs], new_rs)
        if size is not None:
            new_rs = await self.scale_rs(d, new_rs, size)
            await self.sync_rollout_status(d, [*old_rss, new_rs], new_rs)
            return
        active_old = [rs for rs in old_rss if ro.replicas(rs) > 0]
        plan = ro.reconcile_old(d, [*old_rss, new_rs], active_old, new_rs)
        if plan:
            old_rss = await self.apply_plan(d, old_rss, plan)
            await self.sync_rollout_status(d, [*old_rss, new_rs], new_rs)
            return
        if ro.complete(d, d.get("status") or {}):
            await self.cleanup(d, old_rss)
        await self.sync_rollout_status(d, [*old_rss, new_rs], new_rs)

    async def rollout_recreate(self, d: Obj, rss: list[Obj]) -> None:
        new_rs, old_rss = await self.new_and_old(d, rss, create=False)
        active_old = [rs for rs in old_rss if ro.replicas(rs) > 0]
        if active_old:
            old_rss = await self.apply_plan(d, old_rss, {rs["metadata"]["name"]: 0 for rs in active_old})
            await self.sync_rollout_status(d, [*old_rss, *_some(new_rs)], new_rs)
            return
        if self.old_pods_running(new_rs, old_rss):
            await self.sync_rollout_status(d, [*old_rss, *_some(new_rs)], new_rs)
            return
        if new_rs is None:
            new_rs, old_rss = await self.new_and_old(d, rss, create=True)
            assert new_rs is not None
        new_rs = await self.scale_rs(d, new_rs, ro.replicas(d))
        if ro.complete(d, d.get("status") or {}):
            await self.cleanup(d, old_rss)
        await self.sync_rollout_status(d, [*old_rss, new_rs], new_rs)

    def old_pods_running(self, new_rs: Obj | None, old_rss: list[Obj]) -> bool:
        """oldPodsRunning: an old ReplicaSet still reports pods, or one of its pods is not finished."""
        if ro.total_status(list(old_rss), "replicas") > 0:
            return True
        for rs in old_rss:
            if new_rs is not None and rs["metadata"]["uid"] == new_rs["metadata"]["uid"]:
                continue
            for pod in self.pods.by_index(OWNER_UID_INDEX, rs["metadata"]["uid"]):
                if (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded"):
                    return True
        return False

    async def cleanup(self, d: Obj, old_rss: list[Obj]) -> None:
        """cleanupDeployment: delete the oldest idle ReplicaSets beyond revisionHistoryLimit."""
        limit = d["spec"].get("revisionHistoryLimit")
        if limit is None:
            return
        alive = sorted((rs for rs in old_rss if not rs["metadata"].get("deletionTimestamp")),
                       key=lambda rs: (revision(rs), ro.created(rs)))
        for rs in alive[:max(0, len(alive) - int(limit))]:
            status = rs.get("status") or {}
            if int(status.get("replicas") or 0) or ro.replicas(rs) or \
                    rs["metadata"].get("generation", 1) > int(status.get("observedGeneration") or 0):
                continue
            try:
                await self.client.delete(_rs_path(rs["metadata"]["namespace"], rs["metadata"]["name"]),
                                         {"preconditions": {"uid": rs["metadata"]["uid"]}})
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise

    async def sync_rollout_status(self, d: Obj, all_rss: list[Obj], new_rs: Obj | None) -> None:
        now = self.clock.now()
        status = ro.rollout_status(d, all_rss, new_rs, now)
        if status != (d.get("status") or {}):
            await self.write_status(d, status)
        self._requeue_stuck(d, status, now)

    def _requeue_stuck(self, d: Obj, status: Obj, now: float) -> None:
        """requeueStuckDeployment: look again when the progress deadline would pass."""
        cond = ro.condition(status, "Progressing")
        deadline = d["spec"].get("progressDeadlineSeconds")
        if cond is None or deadline is None or cond.get("reason") in (ro.NEW_RS_AVAILABLE, ro.TIMED_OUT) or \
                ro.complete(d, status):
            return
        after = parse_rfc3339(cond["lastUpdateTime"]) + int(deadline) - now
        self.runner.queue.add_after(key_of(d), max(after, 0.0) + 1.0)

    async def write_status(self, d: Obj, status: Obj) -> None:
        d["status"] = status
        ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
        updated = await self.client.request("PUT", _path(ns, name, "status"), d)
        d["metadata"]["resourceVersion"] = updated["metadata"]["resourceVersion"]

    def _event(self, d: Obj, reason: str, message: str, event_type: str = "Normal") -> None:
        self.events.post(event_for(d, reason, message, "Deployment", COMPONENT, self.clock.now(), event_type))


def _some(rs: Obj | None) -> list[Obj]:
    return [rs] if rs is not None else []


def _path(ns: str, name: str, sub: str = "") -> str:
    return resource_path("deployments", ns, name, sub, "apps/v1")


def _rs_path(ns: str, name: str = "") -> str:
    return resource_path("replicasets", ns, name, group_version="apps/v1")
