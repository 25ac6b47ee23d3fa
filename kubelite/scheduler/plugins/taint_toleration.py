"""TaintToleration: mirrors pkg/scheduler/framework/plugins/tainttoleration (names, reasons, codes).

Nodes share few distinct taint sets, so each set is judged once per pod and the verdict
is spread to nodes through the table's taint-set ids.
"""

from __future__ import annotations

import numpy as np

from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import Code, FilterResult, NodeVerdict, Rejection, default_normalize
from kubelite.scheduler.nodetable import IntArray, NodeTable
from kubelite.scheduler.podinfo import PodInfo, Taint, Toleration

NAME = "TaintToleration"


def untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...],
                effects: tuple[str, ...]) -> Taint | None:
    for taint in taints:
        if taint.effect in effects and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


class TaintToleration(NodeVerdict):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        ids = table.view(table.taint_set)
        verdicts = [untolerated(ts, pod.tolerations, ("NoSchedule", "NoExecute")) for ts in table.taint_sets]
        if all(v is None for v in verdicts):
            return None
        passed = np.array([v is None for v in verdicts], np.bool_)[ids]
        rejections = [Rejection(f"node(s) had untolerated taint {taint}", ids == i, Code.UnschedulableAndUnresolvable)
                      for i, taint in enumerate(verdicts) if taint is not None]
        return FilterResult(passed, rejections)

    def score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        prefer = tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))
        per_set = np.array([sum(1 for taint in ts if taint.effect == "PreferNoSchedule"
                                and not any(t.tolerates(taint) for t in prefer)) for ts in table.taint_sets],
                           np.int64)
        scores: IntArray = per_set[table.view(table.taint_set)[rows]]
        return scores

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=True)
