"""The scheduling cycle: scheduleOne (pkg/scheduler/schedule_one.go) in upstream's numbered steps.

1. Take the popped pod; drop it if it was bound, deleted or belongs to no profile meanwhile.
2. Filter every node at once (vector masks), with nominated pods of equal or higher priority
   holding their nodes (RunFilterPluginsWithNominatedPods).
3. No feasible node: run the PostFilter plugins (DefaultPreemption), nominate the node they found,
   evict its victims, report FailedScheduling, park the pod until a cluster event might help.
4. Keep up to numFeasibleNodesToFind feasible nodes, starting where the previous cycle stopped;
   score them and select the host (random among ties).
5. Assume the pod on that node in the node table, so the next cycle sees it.
6. Reserve, then Permit; a failure undoes the assumption and retries the pod after backoff.
7. Start the binding cycle in the background (the binder).

`evaluate` is steps 2-4 without side effects; `kubelite explain` runs it too.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubelite.clock import Clock
from kubelite.scheduler import explain
from kubelite.scheduler.binder import Binder
from kubelite.scheduler.candidate import PreemptionResult
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import FilterOutcome, ScoreOutcome, fit_error_message, nodes_to_find, select_host
from kubelite.scheduler.metrics import SchedulerMetrics
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.plugins.pod_topology_spread import PodTopologySpread
from kubelite.scheduler.podinfo import PodInfo
from kubelite.scheduler.queue import QueuedPod, SchedulingQueue
from kubelite.scheduler.runtime import Framework

Obj = dict[str, Any]


@dataclass
class Attempt:
    """What a cycle decided for a pod: what `explain` (kubelite explain, the unschedulable report) is made of."""

    pod: PodInfo
    filters: FilterOutcome
    scores: ScoreOutcome | None
    node: str | None
    message: str
    preemption: PreemptionResult | None = None


class SchedulingCycle:
    def __init__(self, table: NodeTable, queue: SchedulingQueue, profiles: dict[str, Framework], binder: Binder,
                 current: Callable[[str, str], Obj | None], rng: random.Random, clock: Clock,
                 percentage_of_nodes_to_score: int, metrics: SchedulerMetrics | None = None) -> None:
        self.table = table
        self.queue = queue
        self.profiles = profiles
        self.binder = binder
        self.current = current  # the informer's latest version of a pod
        self.rng = rng
        self.clock = clock
        self.percentage = percentage_of_nodes_to_score
        self.next_start = 0
        self.metrics = metrics or SchedulerMetrics()

    def schedule_one(self, qp: QueuedPod) -> str | None:
        """One synchronous scheduling cycle; returns the chosen node (binding continues in the background)."""
        # 1. the pod as the informer sees it now, and its profile
        started = self.clock.monotonic()
        pod = qp.info
        current = self.current(pod.namespace, pod.name)
        if current is None or current["metadata"].get("uid") != pod.uid or current["spec"].get("nodeName"):
            self.queue.delete(pod.uid)
            return None
        fw = self.profiles.get(pod.spec.get("schedulerName", "default-scheduler"))
        if fw is None:
            self.queue.delete(pod.uid)
            return None
        # 2-4. filter, post-filter or score
        state = CycleState()
        attempt = self.evaluate(fw, pod, state)
        profile = fw.config.scheduler_name
        if attempt.preemption is not None:
            self.metrics.preemption(attempt.preemption)
        if attempt.node is None:
            self.metrics.attempt("unschedulable", profile, self.clock.monotonic() - started)
            # 3. unschedulable: act on the nomination PostFilter found, report, park
            self._nominate(current, pod, attempt.preemption)
            rejecting = {attempt.filters.plugins[i] for i in set(attempt.filters.failed_by.tolist()) if i >= 0}
            self.queue.unschedulable(qp, rejecting)
            self.binder.unschedulable(current, attempt.message, lambda: self.explain(attempt, fw))
            return None
        if self.binder.was_reported(pod.uid):  # it was pending before: replace the stale explanation
            self.binder.spawn(self.binder.record(self.explain(attempt, fw)))
        # 5. assume
        node = attempt.node
        assumed = dataclasses.replace(pod, node_name=node)
        self.table.add_pod(assumed)
        self._settle_nominations(assumed)
        # 6. reserve and permit
        status = fw.run_reserve(state, pod, node)
        if status.ok:
            status = fw.run_permit(state, pod, node)
            if not status.ok:
                fw.run_unreserve(state, pod, node)
        if not status.ok:
            self.table.remove_pod(pod.uid)
            self.queue.error(qp)
            self.metrics.attempt("error", profile, self.clock.monotonic() - started)
            return None
        # 7. the binding cycle, in the background
        self.binder.spawn(self._bind(fw, state, qp, current, node, started))
        return node

    async def _bind(self, fw: Framework, state: CycleState, qp: QueuedPod, pod: Obj, node: str,
                    started: float) -> None:
        """The binding cycle, counted as the attempt's end (upstream's PodScheduled / error metrics)."""
        bound = await self.binder.binding_cycle(fw, state, qp, pod, node)
        now = self.clock.monotonic()
        if bound:
            self.metrics.scheduled(fw.config.scheduler_name, now - started, qp.attempts + 1, now - qp.enqueued)
        else:
            self.metrics.attempt("error", fw.config.scheduler_name, now - started)

    def evaluate(self, fw: Framework, pod: PodInfo, state: CycleState | None = None) -> Attempt:
        """Filter, then post-filter or score, without side effects."""
        state = state if state is not None else CycleState()
        with self.queue.nominator.holding(self.table, pod):
            filters = fw.run_filters(state, pod, self.table)
            feasible = np.flatnonzero(filters.feasible)
            if len(feasible) == 0:
                message = fit_error_message(self.table.n, filters)
                post = fw.run_post_filters(state, pod, filters)
                if post is not None and post.message:
                    message = f"{message} {post.message}"
                return Attempt(pod, filters, None, None, message, post.preemption if post else None)
        rows = self._nodes_to_score(feasible)
        if len(rows) == 1:
            return Attempt(pod, filters, None, self.table.names[int(rows[0])], "")
        scores = fw.run_scores(state, pod, self.table, rows)
        return Attempt(pod, filters, scores, self.table.names[select_host(scores, self.rng)], "")

    def _nodes_to_score(self, feasible: np.ndarray[Any, np.dtype[np.int64]]) -> np.ndarray[Any, np.dtype[np.int64]]:
        """numFeasibleNodesToFind of the feasible rows, in node order from where the last cycle stopped."""
        n = self.table.n
        want = nodes_to_find(n, self.percentage)
        if len(feasible) <= want:
            return feasible
        start = self.next_start % n
        order = (feasible - start) % n
        chosen = np.argsort(order, kind="stable")[:want]
        self.next_start = (start + int(order[chosen[-1]]) + 1) % n
        return feasible[chosen]

    def _nominate(self, pod_obj: Obj, pod: PodInfo, result: PreemptionResult | None) -> None:
        """Nominate the node preemption chose; lower-priority pods nominated there lose it; victims go."""
        if result is None or result.candidate is None:
            return
        node = result.candidate.node
        nominator = self.queue.nominator
        nominator.add(pod, node)
        self.binder.spawn(self.binder.set_nomination(pod_obj, node))
        for info in nominator.on_node(node):
            if info.priority < pod.priority:
                self._clear_nomination(info)
        self.binder.preempt(pod_obj, result.candidate)

    def _settle_nominations(self, placed: PodInfo) -> None:
        """The placed pod's own nomination is done; lower-priority ones that no longer fit are cleared."""
        nominator = self.queue.nominator
        nominator.delete(placed.uid)
        for info in nominator.displaced(self.table, placed):
            self._clear_nomination(info)

    def _clear_nomination(self, info: PodInfo) -> None:
        self.queue.nominator.delete(info.uid)
        self.queue.add(info)
        self.queue.move_all()
        self.binder.spawn(self.binder.set_nomination(info.obj, None))

    def explain(self, attempt: Attempt, fw: Framework) -> Obj:
        spread = fw.plugin("PodTopologySpread")
        return explain.explanation(attempt.pod, attempt.filters, attempt.scores, attempt.node, attempt.message,
                                   self.table, spread if isinstance(spread, PodTopologySpread) else None,
                                   self.clock.now(), attempt.preemption)
