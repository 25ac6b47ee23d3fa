"""The scheduler: informers feed the node table and the queue; one loop schedules one pod at a time.

scheduleOne in numbered steps (pkg/scheduler/schedule_one.go):
1. pop the highest-priority pod; skip it if it was bound or deleted meanwhile;
2. filter every node (vector masks), keep up to numFeasibleNodesToFind feasible nodes,
   starting where the previous cycle stopped;
3. score them, pick the best (random among ties);
4. assume the pod on that node in the table, so the next cycle sees it;
5. bind through the API in the background; on failure forget the assumption and retry
   after backoff. On no feasible node: FailedScheduling event and the PodScheduled
   condition, and the pod is parked until a cluster event could help.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubelite.api.errors import ApiError
from kubelite.api.selectors import LabelSelector, compile_label_selector
from kubelite.client.events import event_for
from kubelite.client.http import STRATEGIC_PATCH, ApiClient, resource_path
from kubelite.client.informer import Handlers, Informer
from kubelite.clock import Clock, rfc3339
from kubelite.scheduler import explain
from kubelite.scheduler.config import SchedulerConfig
from kubelite.scheduler.framework import (
    FilterOutcome,
    ScoreOutcome,
    fit_error_message,
    nodes_to_find,
    run_filters,
    run_scores,
    select_host,
)
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.plugins.pod_topology_spread import PodTopologySpread
from kubelite.scheduler.podinfo import PodInfo, pod_info, status_start_time
from kubelite.scheduler.preemption import Evaluator, PreemptionResult
from kubelite.scheduler.profile import ProfileRuntime, build
from kubelite.scheduler.queue import QueuedPod, SchedulingQueue

log = logging.getLogger("kubelite.scheduler")

Obj = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")
EXPLANATIONS_KEPT = 10_000
OWNER_KINDS = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets"}


@dataclass
class Attempt:
    """What the last cycle decided for a pod, kept for explanations."""

    pod: PodInfo
    filters: FilterOutcome
    scores: ScoreOutcome | None
    node: str | None
    message: str
    preemption: PreemptionResult | None = None


class Scheduler:
    def __init__(self, client: ApiClient, clock: Clock, config: SchedulerConfig | None = None,
                 seed: int | None = None) -> None:
        self.client = client
        self.clock = clock
        self.config = config or SchedulerConfig()
        self.rng = random.Random(seed)
        self.table = NodeTable()
        self.queue = SchedulingQueue(clock, self.config.initial_backoff, self.config.max_backoff)
        self._namespace_labels: dict[str, dict[str, str]] = {}
        self.profiles: dict[str, ProfileRuntime] = {p.scheduler_name: build(p, self) for p in self.config.profiles}
        self.next_start = 0
        self.attempts: OrderedDict[str, Attempt] = OrderedDict()
        self._reported: dict[str, str] = {}
        self.nominated: dict[str, tuple[PodInfo, str]] = {}  # uid → (pod, nominated node)
        self._tasks: set[asyncio.Task[Any]] = set()
        self.pods = Informer(client, "/api/v1/pods", clock,
                             Handlers(self._pod_added, lambda old, new: self._pod_added(new), self._pod_deleted))
        self.nodes = Informer(client, "/api/v1/nodes", clock,
                              Handlers(self._node_changed, lambda old, new: self._node_changed(new),
                                       self._node_deleted))
        self.namespaces = Informer(client, "/api/v1/namespaces", clock,
                                   Handlers(self._namespace_changed, lambda o, n: self._namespace_changed(n)))
        self.owners = {kind: Informer(client, f"/apis/apps/v1/{plural}", clock)
                       for kind, plural in OWNER_KINDS.items()}
        self.pdbs = Informer(client, "/apis/policy/v1/poddisruptionbudgets", clock)

    # --- Handle (for plugins) --------------------------------------------------------------------

    @property
    def namespace_labels(self) -> dict[str, dict[str, str]]:
        return self._namespace_labels

    def owner_selector(self, pod: PodInfo) -> LabelSelector | None:
        """The selector of the controller owning the pod (for default spread constraints)."""
        for ref in pod.obj["metadata"].get("ownerReferences") or []:
            informer = self.owners.get(ref.get("kind", ""))
            if informer is not None and ref.get("controller"):
                owner = informer.get(pod.namespace, ref.get("name", ""))
                if owner is not None:
                    return compile_label_selector((owner.get("spec") or {}).get("selector"))
        return None

    # --- informer handlers -----------------------------------------------------------------------

    def _responsible(self, obj: Obj) -> bool:
        return (obj.get("spec") or {}).get("schedulerName", "default-scheduler") in self.profiles

    def _pod_added(self, obj: Obj) -> None:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        node = spec.get("nodeName")
        if node:
            uid = meta.get("uid", "")
            self.queue.done(uid)
            self.nominated.pop(uid, None)
            if phase in TERMINAL:
                if self.table.remove_pod(uid) is not None:
                    self.queue.move_all()
                return
            known = self.table.pod(uid)
            if known is not None and known.node_name == node and known.labels == (meta.get("labels") or {}) \
                    and known.terminating == bool(meta.get("deletionTimestamp")):
                # the binding confirmed the assumption, or a status write: nothing the table counts changed,
                # but preemption orders victims by the start time the agent writes (GetPodStartTime)
                known.obj = obj
                known.started = status_start_time(obj)
            else:
                self.table.add_pod(pod_info(obj))
            return
        info = pod_info(obj)
        nominated = (obj.get("status") or {}).get("nominatedNodeName")
        if nominated and not info.terminating:
            self.nominated[info.uid] = (info, nominated)
        else:
            self.nominated.pop(info.uid, None)
        gated = bool(obj["spec"].get("schedulingGates"))
        if self._responsible(obj) and not info.terminating and phase not in TERMINAL and not gated:
            self.queue.add(info)
        else:
            self.queue.delete(info.uid)

    def _pod_deleted(self, obj: Obj) -> None:
        uid = obj["metadata"].get("uid", "")
        self.queue.delete(uid)
        self._reported.pop(uid, None)
        self.nominated.pop(uid, None)
        if self.table.remove_pod(uid) is not None:
            self.queue.move_all()

    def _node_changed(self, obj: Obj) -> None:
        self.table.upsert_node(obj)
        self.queue.move_all()

    def _node_deleted(self, obj: Obj) -> None:
        self.table.remove_node(obj["metadata"]["name"])

    def _namespace_changed(self, obj: Obj) -> None:
        self._namespace_labels[obj["metadata"]["name"]] = obj["metadata"].get("labels") or {}

    # --- the loop --------------------------------------------------------------------------------

    async def run(self) -> None:
        informers = [self.namespaces, *self.owners.values(), self.pdbs, self.nodes, self.pods]
        runners = [asyncio.create_task(i.run(), name=f"informer {i.path}") for i in informers]
        try:
            for i in informers:
                await i.synced.wait()
            ticker = asyncio.create_task(self._tick())
            runners.append(ticker)
            while True:
                qp = await self.queue.pop()
                try:
                    self.schedule_one(qp)
                except Exception:  # a bug in one cycle must not stop scheduling
                    log.exception("scheduling %s/%s", qp.info.namespace, qp.info.name)
                    self.queue.error(qp)
                await self.clock.sleep(0)  # let binds and informers run between cycles
        finally:
            for t in runners:
                t.cancel()
            for t in list(self._tasks):
                t.cancel()

    async def _tick(self) -> None:
        """Wake the queue once a second so parked pods time out and backoffs expire."""
        while True:
            await self.clock.sleep(1.0)
            self.queue.flush()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def schedule_one(self, qp: QueuedPod) -> str | None:
        """One synchronous scheduling cycle; returns the chosen node (binding continues in the background)."""
        pod = qp.info
        current = self.pods.get(pod.namespace, pod.name)
        if current is None or current["metadata"].get("uid") != pod.uid or current["spec"].get("nodeName"):
            self.queue.delete(pod.uid)
            return None
        profile = self.profiles.get(pod.spec.get("schedulerName", "default-scheduler"))
        if profile is None:
            self.queue.delete(pod.uid)
            return None
        attempt = self.evaluate(profile, pod)
        self._remember(attempt)
        if attempt.node is None:
            rejecting = {attempt.filters.plugins[i] for i in set(attempt.filters.failed_by.tolist()) if i >= 0}
            if attempt.preemption is not None and attempt.preemption.candidate is not None:
                self._act_on_preemption(current, pod, attempt.preemption)
            self.queue.unschedulable(qp, rejecting)
            self._report_unschedulable(current, attempt, profile)
            return None
        if pod.uid in self._reported:  # it was pending before: replace the stale explanation
            self._spawn(self._record(self.explain(attempt, profile)))
        assumed = dataclasses.replace(pod, node_name=attempt.node)
        self.table.add_pod(assumed)
        self.nominated.pop(pod.uid, None)
        self._drop_displaced_nominations(assumed)
        self._spawn(self._bind(qp, current, attempt.node))
        return attempt.node

    def evaluate(self, profile: ProfileRuntime, pod: PodInfo) -> Attempt:
        """Filter, then preempt or score, without side effects (also what `kubelite explain` runs).

        Nominated pods of equal or higher priority hold their nominated nodes' resources while
        filtering (and while looking for preemption victims), as upstream's
        RunFilterPluginsWithNominatedPods.
        """
        state: dict[str, Any] = {}
        held = self._hold_nominated(pod)
        try:
            filters = run_filters(profile.filters, state, pod, self.table)
            feasible = np.flatnonzero(filters.feasible)
            if len(feasible) == 0:
                message = fit_error_message(self.table.n, filters)
                preemption = None
                if profile.preemption and self._waiting_for_victims(pod):
                    preemption = PreemptionResult(None, "preemption: not eligible due to a terminating pod on the "
                                                        "nominated node.")
                    message = f"{message} {preemption.message}"
                elif profile.preemption:
                    preemption = Evaluator(self.table, profile.filters, self.rng, self.clock.now,
                                           self.pdbs_in_namespace, self.pods_in_namespace).preempt(pod, filters)
                    if preemption.message:
                        message = f"{message} {preemption.message}"
                return Attempt(pod, filters, None, None, message, preemption)
        finally:
            for info in held:
                self.table.remove_pod(info.uid)
        n = self.table.n
        want = nodes_to_find(n, self.config.percentage_of_nodes_to_score)
        start = self.next_start % n if n else 0
        if len(feasible) > want:
            order = (feasible - start) % n
            chosen = np.argsort(order, kind="stable")[:want]
            rows = feasible[chosen]
            self.next_start = (start + int(order[chosen[-1]]) + 1) % n
        else:
            rows = feasible
        if len(rows) == 1:
            return Attempt(pod, filters, None, self.table.names[int(rows[0])], "")
        scores = run_scores(profile.scores, state, pod, self.table, rows)
        return Attempt(pod, filters, scores, self.table.names[select_host(scores, self.rng)], "")

    def _waiting_for_victims(self, pod: PodInfo) -> bool:
        """PodEligibleToPreemptOthers: a pod whose earlier victims are still terminating does not preempt again."""
        entry = self.nominated.get(pod.uid)
        row = self.table.index.get(entry[1]) if entry else None
        if row is None:
            return False
        return any(p.terminating and p.priority < pod.priority for p in self.table.pods[row].values())

    def _hold_nominated(self, pod: PodInfo) -> list[PodInfo]:
        held = []
        for uid, (info, node) in self.nominated.items():
            if uid != pod.uid and info.priority >= pod.priority and node in self.table.index \
                    and self.table.pod(uid) is None:
                placed = dataclasses.replace(info, node_name=node)
                self.table.add_pod(placed)
                held.append(placed)
        return held

    def pdbs_in_namespace(self) -> list[Obj]:
        return list(self.pdbs.store.values())

    def pods_in_namespace(self, namespace: str) -> list[Obj]:
        return [p for (ns, _), p in self.pods.store.items() if ns == namespace]

    def _remember(self, attempt: Attempt) -> None:
        self.attempts[attempt.pod.uid] = attempt
        self.attempts.move_to_end(attempt.pod.uid)
        while len(self.attempts) > EXPLANATIONS_KEPT:
            self.attempts.popitem(last=False)

    # --- writes ----------------------------------------------------------------------------------

    async def _bind(self, qp: QueuedPod, pod: Obj, node: str) -> None:
        meta = pod["metadata"]
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"], "uid": meta["uid"]},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            await self.client.create(resource_path("pods", meta["namespace"], meta["name"], "binding"), binding)
        except ApiError as exc:
            self.table.remove_pod(qp.info.uid)  # forget the assumption
            if exc.code == 404 or (exc.code == 409 and "already assigned" in exc.message):
                self.queue.delete(qp.info.uid)
            else:
                log.info("binding %s/%s to %s failed: %s", meta["namespace"], meta["name"], node, exc)
                self.queue.error(qp)
            return
        except Exception:  # transport errors: forget and retry after backoff
            self.table.remove_pod(qp.info.uid)
            self.queue.error(qp)
            log.exception("binding %s/%s", meta["namespace"], meta["name"])
            return
        self.queue.done(qp.info.uid)
        self._reported.pop(qp.info.uid, None)
        await self._event(pod, "Scheduled", f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
                          "Normal", "Binding")

    def explain(self, attempt: Attempt, profile: ProfileRuntime) -> Obj:
        spread = profile.plugin("PodTopologySpread")
        return explain.explanation(attempt.pod, attempt.filters, attempt.scores, attempt.node, attempt.message,
                                   self.table, spread if isinstance(spread, PodTopologySpread) else None,
                                   self.clock.now(), attempt.preemption)

    # --- preemption (P4, P5) ---------------------------------------------------------------------

    def _act_on_preemption(self, pod_obj: Obj, pod: PodInfo, result: PreemptionResult) -> None:
        """Nominate the node, then for each victim: DisruptionTarget condition, Preempted event, graceful delete."""
        candidate = result.candidate
        assert candidate is not None
        self.nominated[pod.uid] = (pod, candidate.node)
        self._spawn(self._set_nomination(pod_obj, candidate.node))
        for info, node in list(self.nominated.values()):
            if node == candidate.node and info.priority < pod.priority:
                self._clear_nomination(info)  # lower-priority pods nominated here lose the spot
        for victim in candidate.victims:
            self._spawn(self._preempt_victim(victim, pod_obj, candidate.node))

    def _drop_displaced_nominations(self, placed: PodInfo) -> None:
        """A pod taking a node clears the nominations of lower-priority pods that no longer fit there."""
        row = self.table.index.get(placed.node_name)
        if row is None:
            return
        for info, node in list(self.nominated.values()):
            if node != placed.node_name or info.priority >= placed.priority:
                continue
            if not self.table.requests_fit(info.requests, row):
                self._clear_nomination(info)

    def _clear_nomination(self, info: PodInfo) -> None:
        self.nominated.pop(info.uid, None)
        self.queue.add(info)
        self.queue.move_all()
        self._spawn(self._set_nomination(info.obj, None))

    async def _set_nomination(self, pod: Obj, node: str | None) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            await self.client.patch(resource_path("pods", meta["namespace"], meta["name"], "status"),
                                    {"status": {"nominatedNodeName": node}})

    async def _preempt_victim(self, victim: PodInfo, preemptor: Obj, node: str) -> None:
        meta, pmeta = victim.obj["metadata"], preemptor["metadata"]
        scheduler_name = preemptor["spec"].get("schedulerName", "default-scheduler")
        path = resource_path("pods", meta["namespace"], meta["name"])
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                     "message": f"{scheduler_name}: preempting to accommodate a higher priority pod "
                                f"({pmeta['namespace']}/{pmeta['name']})",
                     "lastTransitionTime": rfc3339(self.clock.now())}
        try:
            await self.client.patch(f"{path}/status", {"status": {"conditions": [condition]}}, STRATEGIC_PATCH)
            await self._event(victim.obj, "Preempted", f"Preempted by pod {pmeta['namespace']}/{pmeta['name']} "
                                                       f"({pmeta['uid']}) on node {node}", "Normal", "Preempting")
            await self.client.delete(path, {"preconditions": {"uid": meta["uid"]}})
        except ApiError as exc:
            if exc.code != 404:
                log.info("preempting %s/%s: %s", meta["namespace"], meta["name"], exc)

    def _report_unschedulable(self, pod: Obj, attempt: Attempt, profile: ProfileRuntime) -> None:
        uid, message = pod["metadata"]["uid"], attempt.message
        if self._reported.get(uid) == message:
            return  # the same verdict again: no new event, condition or explanation write
        self._reported[uid] = message
        self._spawn(self._event(pod, "FailedScheduling", message, "Warning", "Scheduling"))
        self._spawn(self._condition(pod, message))
        self._spawn(self._record(self.explain(attempt, profile)))

    async def _record(self, body: Obj) -> None:
        """Store the explanation (replace, or create on first write) where `kubectl get --raw` can read it."""
        meta = body["metadata"]
        path = resource_path("schedulingexplanations", meta["namespace"], group_version=explain.API_VERSION)
        try:
            await self.client.request("PUT", f"{path}/{meta['name']}", body)
        except ApiError as exc:
            if exc.code != 404:
                return
            with contextlib.suppress(ApiError):
                await self.client.create(path, body)

    async def _condition(self, pod: Obj, message: str) -> None:
        meta = pod["metadata"]
        patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": message, "lastProbeTime": None,
                                            "lastTransitionTime": rfc3339(self.clock.now())}]}}
        with contextlib.suppress(ApiError):
            await self.client.patch(resource_path("pods", meta["namespace"], meta["name"], "status"), patch,
                                    STRATEGIC_PATCH)

    async def _event(self, pod: Obj, reason: str, message: str, kind: str, action: str) -> None:
        name = (pod.get("spec") or {}).get("schedulerName", "default-scheduler")
        ev = event_for(pod, reason, message, "Pod", name, self.clock.now(), kind, action=action)
        with contextlib.suppress(ApiError):
            await self.client.create(resource_path("events", pod["metadata"]["namespace"]), ev)
