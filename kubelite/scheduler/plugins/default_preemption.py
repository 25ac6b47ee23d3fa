"""DefaultPreemption: the PostFilter plugin (plugins/defaultpreemption/default_preemption.go).

It decides whether the pod may preempt at all (PodEligibleToPreemptOthers: not with
`preemptionPolicy: Never`, not while victims of its earlier preemption are still terminating)
and runs the evaluator, whose dry runs ask the profile's Filter plugins through the framework.
It has no side effects: the scheduling cycle nominates the node and the binder deletes the victims.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol

from kubelite.scheduler.candidate import PreemptionResult
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import FilterOutcome
from kubelite.scheduler.interface import PostFilterResult
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.podinfo import PodInfo
from kubelite.scheduler.preemption import Evaluator
from kubelite.scheduler.queue import Nominator
from kubelite.scheduler.runtime import Framework

NAME = "DefaultPreemption"
NEVER = "preemption: not eligible due to preemptionPolicy=Never."
TERMINATING = "preemption: not eligible due to a terminating pod on the nominated node."
Obj = dict[str, Any]


class ClusterView(Protocol):
    """What preemption reads from the scheduler (part of framework.Handle)."""

    @property
    def table(self) -> NodeTable: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def nominator(self) -> Nominator: ...

    def now(self) -> float: ...

    def disruption_budgets(self) -> list[Obj]: ...

    def pods_in_namespace(self, namespace: str) -> list[Obj]: ...


class PreemptionHandle(ClusterView, Protocol):
    @property
    def framework(self) -> Framework | None: ...


class DefaultPreemption:
    name = NAME

    def __init__(self, handle: PreemptionHandle) -> None:
        self.handle = handle

    def post_filter(self, state: CycleState, pod: PodInfo, outcome: FilterOutcome) -> PostFilterResult:
        h = self.handle
        if (pod.spec.get("preemptionPolicy") or "PreemptLowerPriority") == "Never":
            return self._result(PreemptionResult(None, NEVER))
        if h.nominator.waiting_for_victims(h.table, pod):
            return self._result(PreemptionResult(None, TERMINATING))
        assert h.framework is not None, "the profile sets its framework before any cycle runs"
        now: Callable[[], float] = h.now
        evaluator = Evaluator(h.table, h.framework, h.rng, now, h.disruption_budgets, h.pods_in_namespace)
        return self._result(evaluator.preempt(state, pod, outcome))

    @staticmethod
    def _result(result: PreemptionResult) -> PostFilterResult:
        node = result.candidate.node if result.candidate is not None else None
        return PostFilterResult(node, result.message, result)
