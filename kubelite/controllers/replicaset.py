"""The ReplicaSet controller: keeps `spec.replicas` pods matching each ReplicaSet's selector (S6).

A port of pkg/controller/replicaset/replica_set.go on the shared reconciler runner:
- **Expectations** (expectations.py): a sync that creates or deletes pods records how many
  it expects to see, and the next sync waits until the informer has delivered them, so a
  slow watch never makes it create twice.
- **Ownership** (ownership.py): matching pods without a controller are adopted, owned pods
  that stop matching are released; pods owned by another controller are never touched.
- **Availability first** (seed 002): a pod that has started terminating no longer counts, so
  its replacement is created at once — a ReplicaSet may briefly run both.
- **Scale down** deletes the pods upstream's ranking puts first (podutil.pods_to_delete),
  never more than `burstReplicas` per sync; creations go in slow-start batches (1, 2, 4, …)
  so a template the API refuses costs one failed request, not 500.
- **Status**: replicas, fullyLabeledReplicas, readyReplicas, availableReplicas (ready for
  minReadySeconds; a re-check is scheduled for when a pod becomes available),
  observedGeneration, and the ReplicaFailure condition when creating or deleting failed.
- **Events**: SuccessfulCreate / SuccessfulDelete / FailedCreate / FailedDelete.

The same code runs core/v1 ReplicationControllers (`ReplicationManager`), as upstream's replication manager is the
ReplicaSet controller over a conversion: only the kind's path, name and selector differ (`Replicated`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.api.selectors import LabelSelector, compile_label_selector
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import resource_path
from kubelite.client.informer import NAMESPACE_INDEX, OWNER_UID_INDEX, Handlers, Key, by_owner_uid, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, rfc3339
from kubelite.controllers import podutil
from kubelite.controllers.expectations import Expectations
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.ownership import (
    ORPHAN_INDEX,
    RefManager,
    controller_of,
    controller_ref,
    orphans_by_namespace,
    recheck_owner,
)
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.replicaset")

Obj = dict[str, Any]
BURST_REPLICAS = 500  # BurstReplicas: the most pods one sync creates or deletes
SLOW_START_INITIAL_BATCH = 1
WORKERS = 5  # --concurrent-replicaset-syncs (and --concurrent-rc-syncs)


@dataclass(frozen=True)
class Replicated:
    """What differs between the kinds this controller runs."""

    kind: str
    plural: str
    group_version: str
    name: str  # the controller's name (its work queue's, and --controllers')
    component: str  # its events' source
    selector: Callable[[Obj], LabelSelector]


REPLICA_SETS = Replicated("ReplicaSet", "replicasets", "apps/v1", "replicaset", "replicaset-controller",
                          lambda rs: compile_label_selector((rs.get("spec") or {}).get("selector")))
REPLICATION_CONTROLLERS = Replicated(  # a plain label map as selector
    "ReplicationController", "replicationcontrollers", "v1", "replicationcontroller", "replication-controller",
    lambda rc: compile_label_selector({"matchLabels": (rc.get("spec") or {}).get("selector") or {}}))
def pod_key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def pod_from_template(owner: Obj, template: Obj) -> Obj:
    """GetPodFromTemplate: the template's labels, annotations, finalizers and spec; a controller reference;
    a generated name prefixed by the owner's."""
    tmeta = template.get("metadata") or {}
    meta: Obj = {"generateName": f"{owner['metadata']['name']}-", "ownerReferences": [controller_ref(owner)]}
    for field in ("labels", "annotations", "finalizers"):
        if tmeta.get(field):
            meta[field] = dict(tmeta[field]) if isinstance(tmeta[field], dict) else list(tmeta[field])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec") or {}}


async def slow_start_batch(count: int, initial: int, fn: Callable[[], Awaitable[None]]) -> tuple[int, Exception | None]:
    """slowStartBatch: call fn `count` times in doubling batches, stopping after a batch with a failure.
    Returns (successes, the first error)."""
    remaining, batch, successes = count, min(count, initial), 0
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        successes += batch - len(errors)
        if errors:
            first = errors[0]
            if not isinstance(first, Exception):
                raise first
            return successes, first
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


def calculate_status(rs: Obj, pods: list[Obj], error: ApiError | None, reason: str, now: float) -> Obj:
    """calculateStatus: counts over the active pods the ReplicaSet owns, and the ReplicaFailure condition."""
    spec = rs.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    old = rs.get("status") or {}
    status: Obj = {
        "replicas": len(pods),
        "fullyLabeledReplicas": sum(1 for p in pods if all(
            (p["metadata"].get("labels") or {}).get(k) == v for k, v in template_labels.items())),
        "readyReplicas": sum(1 for p in pods if podutil.is_pod_ready(p)),
        "availableReplicas": sum(1 for p in pods if podutil.is_pod_available(p, min_ready, now)),
        "observedGeneration": rs["metadata"].get("generation", 1),
    }
    conditions = [c for c in old.get("conditions") or [] if c.get("type") != "ReplicaFailure"]
    failure = next((c for c in old.get("conditions") or [] if c.get("type") == "ReplicaFailure"), None)
    if error is not None:
        conditions.append(failure or {"type": "ReplicaFailure", "status": "True", "reason": reason,
                                      "message": error.message, "lastTransitionTime": rfc3339(now)})
    if conditions:
        status["conditions"] = conditions
    return status


class ReplicaSetController:
    replicated = REPLICA_SETS

    def __init__(self, client: Client, clock: Clock, burst_replicas: int = BURST_REPLICAS,
                 workers: int = WORKERS) -> None:
        self.client = client
        self.clock = clock
        self.burst = burst_replicas
        self.expectations = Expectations(clock)
        self.events = EventSink(client, clock)
        kind = self.replicated
        self.runner: Runner[Key] = Runner(kind.name, self.sync, clock, workers)
        self.replicasets = shared_informer(client, clock, resource_path(kind.plural, group_version=kind.group_version),
                                           Handlers(self._rs_added, self._rs_updated, self._rs_deleted))
        self.replicasets.add_index(OWNER_UID_INDEX, by_owner_uid)
        self.pods = shared_informer(client, clock, "/api/v1/pods",
                                    Handlers(self._pod_added, self._pod_updated, self._pod_deleted))
        self.pods.add_index(OWNER_UID_INDEX, by_owner_uid)
        self.pods.add_index(ORPHAN_INDEX, orphans_by_namespace)

    async def run(self) -> None:
        await run_synced((self.replicasets, self.pods), (self.runner.run,), alongside=(self.events.run,))

    # --- event handlers --------------------------------------------------------------------------

    def _rs_added(self, rs: Obj) -> None:
        self.runner.enqueue(key_of(rs))

    def _rs_updated(self, old: Obj, new: Obj) -> None:
        self.runner.enqueue(key_of(new))

    def _rs_deleted(self, rs: Obj) -> None:
        self.expectations.delete(key_of(rs))

    def _owner(self, pod: Obj, ref: Obj | None) -> Obj | None:
        """resolveControllerRef: the cached ReplicaSet `ref` names, if it is the one with that uid."""
        if ref is None or ref.get("kind") != self.replicated.kind:
            return None
        rs = self.replicasets.get(pod["metadata"].get("namespace", ""), ref.get("name", ""))
        return rs if rs is not None and rs["metadata"].get("uid") == ref.get("uid") else None

    def _selecting(self, pod: Obj) -> list[Obj]:
        """getPodReplicaSets: the ReplicaSets of the pod's namespace whose selector matches it."""
        labels = pod["metadata"].get("labels")
        out = []
        for rs in self.replicasets.by_index(NAMESPACE_INDEX, pod["metadata"].get("namespace", "")):
            try:
                if self.replicated.selector(rs).matches(labels):
                    out.append(rs)
            except ApiError:
                continue
        return out

    def _pod_added(self, pod: Obj) -> None:
        if pod["metadata"].get("deletionTimestamp"):
            self._pod_deleted(pod)  # seen for the first time while already terminating (after a relist)
            return
        rs = self._owner(pod, controller_of(pod))
        if rs is not None:
            self.expectations.creation_observed(key_of(rs))
            self.runner.enqueue(key_of(rs))
            return
        if controller_of(pod) is None:
            for candidate in self._selecting(pod):
                self.runner.enqueue(key_of(candidate))

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        labels_changed = old["metadata"].get("labels") != new["metadata"].get("labels")
        if new["metadata"].get("deletionTimestamp"):
            # A pod starting to terminate counts as gone at once: its replacement is created now.
            self._pod_deleted(new)
            if labels_changed:
                self._pod_deleted(old)
            return
        cur_ref, old_ref = controller_of(new), controller_of(old)
        if old_ref is not None and old_ref != cur_ref:
            rs = self._owner(old, old_ref)
            if rs is not None:
                self.runner.enqueue(key_of(rs))
        if cur_ref is not None:
            rs = self._owner(new, cur_ref)
            if rs is not None and (old_ref != cur_ref or labels_changed or _status_facts(old) != _status_facts(new)):
                self.runner.enqueue(key_of(rs))
                min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
                if min_ready > 0 and not podutil.is_pod_ready(old) and podutil.is_pod_ready(new):
                    self.runner.queue.add_after(key_of(rs), min_ready + 1)
            return
        if labels_changed or old_ref != cur_ref:
            for candidate in self._selecting(new):
                self.runner.enqueue(key_of(candidate))

    def _pod_deleted(self, pod: Obj) -> None:
        rs = self._owner(pod, controller_of(pod))
        if rs is None:
            return
        self.expectations.deletion_observed(key_of(rs), pod_key(pod))
        self.runner.enqueue(key_of(rs))

    # --- sync ------------------------------------------------------------------------------------

    async def sync(self, key: Key) -> None:
        rs = self.replicasets.store.get(key)
        if rs is None:
            self.expectations.delete(key)
            return
        try:
            selector = self.replicated.selector(rs)
        except ApiError as exc:
            log.warning("%s %s/%s: invalid selector: %s", self.replicated.name, key[0], key[1], exc.message)
            return
        needs_sync = self.expectations.satisfied(key) and not rs["metadata"].get("deletionTimestamp")
        pods = await self.claim_pods(rs, selector)
        error: ApiError | None = None
        reason = ""
        if needs_sync:
            error, reason = await self.manage_replicas(pods, rs)
        now = self.clock.now()
        status = calculate_status(rs, pods, error, reason, now)
        if status != (rs.get("status") or {}):
            await self.update_status(rs, status)
        min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
        if error is None and min_ready > 0 and status["readyReplicas"] != status["availableReplicas"]:
            self.runner.queue.add_after(key, float(min_ready))
        if error is not None:
            raise error

    async def update_status(self, rs: Obj, status: Obj) -> None:
        """updateReplicaSetStatus: on a conflict (the cache behind), once more on a fresh read."""
        kind = self.replicated
        path = resource_path(kind.plural, rs["metadata"]["namespace"], rs["metadata"]["name"], "status",
                             kind.group_version)
        try:
            await self.client.request("PUT", path, {**rs, "status": status})
        except ApiError as exc:
            if exc.code != 409:
                raise
            fresh = await self.client.get(path)
            if fresh["metadata"].get("uid") == rs["metadata"].get("uid"):
                await self.client.request("PUT", path, {**fresh, "status": status})

    async def claim_pods(self, rs: Obj, selector: LabelSelector) -> list[Obj]:
        """The active pods the ReplicaSet owns, after adopting matching orphans and releasing strays."""
        ns, uid = rs["metadata"].get("namespace", ""), rs["metadata"]["uid"]
        candidates = [p for p in (*self.pods.by_index(OWNER_UID_INDEX, uid), *self.pods.by_index(ORPHAN_INDEX, ns))
                      if podutil.is_pod_active(p)]
        rs_path = resource_path(self.replicated.plural, ns, rs["metadata"]["name"],
                                group_version=self.replicated.group_version)
        manager = RefManager(self.client, rs, selector,
                             lambda p: resource_path("pods", ns, p["metadata"]["name"]),
                             recheck_owner(self.client, rs_path, uid))
        return await manager.claim(candidates)

    def related_pods(self, rs: Obj, own: list[Obj]) -> list[Obj]:
        """getIndirectlyRelatedPods: the pods of every ReplicaSet under the same controller (a Deployment's
        old and new ReplicaSets), so scale-down prefers nodes crowded by the whole Deployment."""
        owner = controller_of(rs)
        if owner is None:
            return own
        related: dict[str, Obj] = {}
        for sibling in self.replicasets.by_index(OWNER_UID_INDEX, owner["uid"]):
            for pod in self.pods.by_index(OWNER_UID_INDEX, sibling["metadata"]["uid"]):
                related[pod["metadata"]["uid"]] = pod
        return list(related.values()) or own

    async def manage_replicas(self, pods: list[Obj], rs: Obj) -> tuple[ApiError | None, str]:
        key = key_of(rs)
        diff = len(pods) - int((rs.get("spec") or {}).get("replicas", 1))
        if diff < 0:
            wanted = min(-diff, self.burst)
            self.expectations.expect_creations(key, wanted)
            created, error = await slow_start_batch(wanted, SLOW_START_INITIAL_BATCH, lambda: self._create(rs))
            for _ in range(wanted - created):  # never created: their add events will not come
                self.expectations.creation_observed(key)
            return _api_error(error), "FailedCreate"
        if diff > 0:
            victims = podutil.pods_to_delete(pods, self.related_pods(rs, pods), min(diff, self.burst),
                                             self.clock.now())
            self.expectations.expect_deletions(key, [pod_key(p) for p in victims])
            results = await asyncio.gather(*(self._delete(rs, p) for p in victims), return_exceptions=True)
            errors = [r for r in results if isinstance(r, Exception)]
            return (_api_error(errors[0]) if errors else None), "FailedDelete"
        return None, ""

    async def _create(self, rs: Obj) -> None:
        ns = rs["metadata"]["namespace"]
        template = (rs.get("spec") or {}).get("template") or {}
        try:
            pod = await self.client.create(resource_path("pods", ns), pod_from_template(rs, template))
        except ApiError as exc:
            # Creating in a terminating namespace fails for every pod; upstream records no event for it.
            if exc.code != 403 or "being terminated" not in exc.message:
                self._event(rs, "FailedCreate", f"Error creating: {exc.message}", "Warning")
            raise
        self._event(rs, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")

    async def _delete(self, rs: Obj, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        try:
            await self.client.delete(resource_path("pods", rs["metadata"]["namespace"], name))
        except ApiError as exc:
            # The informer will not see this deletion: lower the expectation now (DeletionObserved).
            self.expectations.deletion_observed(key_of(rs), pod_key(pod))
            if exc.code == 404:
                return
            self._event(rs, "FailedDelete", f"Error deleting: {exc.message}", "Warning")
            raise
        self._event(rs, "SuccessfulDelete", f"Deleted pod: {name}")

    def _event(self, rs: Obj, reason: str, message: str, event_type: str = "Normal") -> None:
        self.events.post(event_for(rs, reason, message, self.replicated.kind, self.replicated.component,
                                   self.clock.now(), event_type))


class ReplicationManager(ReplicaSetController):
    """The ReplicationController controller: the ReplicaSet controller's code for core/v1 ReplicationControllers."""

    replicated = REPLICATION_CONTROLLERS


def _status_facts(pod: Obj) -> tuple[object, ...]:
    """What of a pod its ReplicaSet's sync depends on beyond labels and owner: whether it is active, ready
    (and since when), its restarts. A pod update that changes none of these (a binding, a status heartbeat)
    does not wake the ReplicaSet — upstream wakes it for every update, which at 5,000 pods costs a full
    sync per binding."""
    status = pod.get("status") or {}
    ready = podutil.ready_condition(pod) or {}
    return (status.get("phase"), ready.get("status"), ready.get("lastTransitionTime"),
            podutil.max_container_restarts(pod))


def _api_error(error: Exception | None) -> ApiError | None:
    if error is None or isinstance(error, ApiError):
        return error
    raise error
