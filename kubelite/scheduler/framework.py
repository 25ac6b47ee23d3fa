"""The framework's values: status codes, filter and score outcomes, host selection.

Mirrors pkg/scheduler/framework/interface.go and types.go: results are values (a Status with a
code), a node's failure is attributed to the first Filter plugin that rejects it (as
RunFilterPlugins stops there), scores are normalised per plugin, weighted and summed, and ties are
broken at random with a seedable generator. Filters return masks and scores vectors over node rows.
The runtime that calls the plugins is `kubelite.scheduler.runtime`.
"""

from __future__ import annotations

import enum
import random
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kubelite.scheduler.cycle_state import CycleState, StateKey
from kubelite.scheduler.nodetable import BoolArray, IntArray, NodeTable
from kubelite.scheduler.podinfo import PodInfo

MAX_NODE_SCORE = 100


class Code(enum.IntEnum):
    """framework.Code, in upstream order."""

    Success = 0
    Error = 1
    Unschedulable = 2
    UnschedulableAndUnresolvable = 3
    Wait = 4
    Skip = 5
    Pending = 6


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code in (Code.Success, Code.Skip)


SUCCESS = Status(Code.Success)
SKIP = Status(Code.Skip)


@dataclass(slots=True)
class Rejection:
    """Nodes (a mask) that a filter rejects for one reason."""

    reason: str
    nodes: BoolArray
    code: Code = Code.Unschedulable


@dataclass(slots=True)
class FilterResult:
    passed: BoolArray
    rejections: list[Rejection] = field(default_factory=list)


FILTER_OUTCOME: StateKey[FilterOutcome] = StateKey("FilterOutcome")


class NodeVerdict:
    """PreFilterExtensions for a Filter plugin whose verdict depends only on the node (labels, taints,
    name): no pod leaving or joining changes it, so a dry run keeps the verdict of the cycle."""

    name = ""

    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, table: NodeTable, row: int) -> None:
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: PodInfo, table: NodeTable, row: int) -> None:
        return None

    def filter_node(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> bool:
        return state.read(FILTER_OUTCOME).passed_by(self.name, row)


def default_normalize(scores: IntArray, reverse: bool = False) -> IntArray:
    """helper.DefaultNormalizeScore."""
    top = int(scores.max()) if len(scores) else 0
    if top == 0:
        return np.full(len(scores), MAX_NODE_SCORE, np.int64) if reverse else scores
    out = scores * MAX_NODE_SCORE // top
    return MAX_NODE_SCORE - out if reverse else out


@dataclass
class FilterOutcome:
    feasible: BoolArray
    failed_by: npt.NDArray[np.int64]  # index into `plugins` of the first rejecting plugin, -1 if feasible
    plugins: list[str]
    results: list[FilterResult | None]
    prefilter_status: Status | None = None

    def passed_by(self, plugin: str, row: int) -> bool:
        """Whether `plugin` let node `row` through in this cycle (True if it had nothing to say)."""
        res = self.results[self.plugins.index(plugin)]
        return res is None or bool(res.passed[row])

    def unresolvable(self) -> BoolArray:
        """Nodes whose first rejection was UnschedulableAndUnresolvable (preemption skips them); a PreFilter
        rejection is every node's (upstream copies its status to all nodes)."""
        if self.prefilter_status is not None and not self.prefilter_status.ok:
            return np.full(len(self.feasible), self.prefilter_status.code is Code.UnschedulableAndUnresolvable)
        out = np.zeros(len(self.feasible), np.bool_)
        for i, res in enumerate(self.results):
            if res is None:
                continue
            mine = self.failed_by == i
            for rej in res.rejections:
                if rej.code is Code.UnschedulableAndUnresolvable:
                    out |= mine & rej.nodes
        return out

    def reasons(self) -> Counter[str]:
        """How many nodes failed for each reason (the FailedScheduling histogram)."""
        hist: Counter[str] = Counter()
        for i, res in enumerate(self.results):
            if res is None:
                continue
            mine = self.failed_by == i
            for rej in res.rejections:
                count = int(np.count_nonzero(mine & rej.nodes))
                if count:
                    hist[rej.reason] += count
        return hist


def fit_error_message(total: int, outcome: FilterOutcome) -> str:
    """FitError.Error(): "0/N nodes are available: <count reason>, … ." with the histogram sorted as strings."""
    if outcome.prefilter_status is not None and not outcome.prefilter_status.ok:
        reasons = "; ".join(outcome.prefilter_status.reasons)
        return f"0/{total} nodes are available: {reasons}."
    parts = sorted(f"{count} {reason}" for reason, count in outcome.reasons().items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


@dataclass
class ScoreOutcome:
    rows: IntArray
    total: IntArray
    per_plugin: dict[str, IntArray]


def select_host(outcome: ScoreOutcome, rng: random.Random) -> int:
    """The row with the highest total; ties broken uniformly at random (upstream's reservoir sampling)."""
    best = np.flatnonzero(outcome.total == outcome.total.max())
    return int(outcome.rows[best[rng.randrange(len(best))]])


def nodes_to_find(total: int, percentage: int) -> int:
    """numFeasibleNodesToFind: adaptive 50 - n/125 percent (floor 5) when unset, never below 100 nodes."""
    if total < 100 or percentage >= 100:
        return total
    pct = percentage
    if pct <= 0:
        pct = max(5, 50 - total // 125)
    return max(100, total * pct // 100)
