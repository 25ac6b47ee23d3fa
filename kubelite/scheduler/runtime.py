"""The framework runtime of one profile (pkg/scheduler/framework/runtime/framework.go).

The profile's plugins are sorted into one list per extension point when the profile is built;
each `run_*` method calls one point's plugins in the profile's order and folds their results
the way frameworkImpl does: the first non-success PreFilter status ends the cycle, Filter masks
are attributed to the first plugin that rejects a node, Score vectors are normalised and
weighted, Reserve failures undo the plugins already reserved, and Bind stops at the first
plugin that does not Skip.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kubelite.scheduler.config import Profile
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import (
    FILTER_OUTCOME,
    SUCCESS,
    Code,
    FilterOutcome,
    FilterResult,
    NodeVerdict,
    ScoreOutcome,
    Status,
)
from kubelite.scheduler.interface import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from kubelite.scheduler.nodetable import BoolArray, IntArray, NodeTable
from kubelite.scheduler.podinfo import PodInfo


class DryRunPlugins(NamedTuple):
    changing: list[PreFilterExtensions]  # asked on every trial
    fixed_ok: BoolArray  # nodes every node-only plugin let through in the cycle


class Framework:
    def __init__(self, filters: list[Plugin], scores: list[tuple[Plugin, int]] | None = None,
                 post_filters: list[Plugin] | None = None, others: list[Plugin] | None = None,
                 config: Profile | None = None) -> None:
        self.config = config or Profile()
        scores = scores or []
        everything = [*filters, *(p for p, _ in scores), *(post_filters or []), *(others or [])]
        self.plugins: dict[str, Plugin] = {}
        for p in everything:
            self.plugins.setdefault(p.name, p)
        self.pre_filter = [p for p in filters if isinstance(p, PreFilterPlugin)]
        self.filter = [p for p in filters if isinstance(p, FilterPlugin)]
        self.filter_names = [p.name for p in self.filter]
        self.extensions: dict[str, PreFilterExtensions] = {
            p.name: p for p in self.filter if isinstance(p, PreFilterExtensions)}
        self.post_filter = [p for p in post_filters or [] if isinstance(p, PostFilterPlugin)]
        self.pre_score = [p for p, _ in scores if isinstance(p, PreScorePlugin)]
        self.score: list[tuple[ScorePlugin, int, ScoreExtensions | None]] = [
            (p, w, p if isinstance(p, ScoreExtensions) else None) for p, w in scores if isinstance(p, ScorePlugin)]
        self.reserve = [p for p in self.plugins.values() if isinstance(p, ReservePlugin)]
        self.permit = [p for p in self.plugins.values() if isinstance(p, PermitPlugin)]
        self.pre_bind = [p for p in self.plugins.values() if isinstance(p, PreBindPlugin)]
        self.bind = [p for p in self.plugins.values() if isinstance(p, BindPlugin)]

    def plugin(self, name: str) -> Plugin | None:
        return self.plugins.get(name)

    # --- scheduling cycle ------------------------------------------------------------------------

    def run_filters(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterOutcome:
        """RunPreFilterPlugins, then RunFilterPlugins over every node at once."""
        n = table.n
        failed_by = np.full(n, -1, np.int64)
        for p in self.pre_filter:
            status = p.pre_filter(state, pod, table)
            if not status.ok:
                # No Filter ran, but `results` stays parallel to `plugins` (one None each): preemption and
                # explain zip the two; the PreFilter's status speaks for every node (upstream's NodeToStatus).
                outcome = FilterOutcome(np.zeros(n, np.bool_), failed_by, self.filter_names,
                                        [None] * len(self.filter), Status(status.code, status.reasons, p.name))
                state.write(FILTER_OUTCOME, outcome)
                return outcome
        results: list[FilterResult | None] = []
        for i, f in enumerate(self.filter):
            res = f.filter(state, pod, table)
            results.append(res)
            if res is not None:
                newly = (failed_by == -1) & ~res.passed
                failed_by[newly] = i
        outcome = FilterOutcome(failed_by == -1, failed_by, self.filter_names, results)
        state.write(FILTER_OUTCOME, outcome)
        return outcome

    def run_post_filters(self, state: CycleState, pod: PodInfo, outcome: FilterOutcome) -> PostFilterResult | None:
        """RunPostFilterPlugins: the first plugin that finds a node wins; else the last one's verdict."""
        result = None
        for p in self.post_filter:
            result = p.post_filter(state, pod, outcome)
            if result.nominated_node is not None:
                return result
        return result

    def run_scores(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> ScoreOutcome:
        """RunPreScorePlugins then RunScorePlugins (with NormalizeScore and the weights) over `rows`."""
        skipped = {p.name for p in self.pre_score if p.pre_score(state, pod, table, rows).code is not Code.Success}
        total = np.zeros(len(rows), np.int64)
        per_plugin: dict[str, IntArray] = {}
        for p, weight, ext in self.score:
            if p.name in skipped:
                continue  # Skip: the plugin has nothing to say about this pod
            scores = p.score(state, pod, table, rows)
            if ext is not None:
                scores = ext.normalize(state, scores)
            per_plugin[p.name] = scores
            total += scores * weight
        return ScoreOutcome(rows, total, per_plugin)

    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        for i, p in enumerate(self.reserve):
            status = p.reserve(state, pod, node)
            if not status.ok:
                for q in reversed(self.reserve[:i]):
                    q.unreserve(state, pod, node)
                return Status(status.code, status.reasons, p.name)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for p in reversed(self.reserve):
            p.unreserve(state, pod, node)

    def run_permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """RunPermitPlugins. Partial: Wait is treated as a rejection (no waiting pods map yet)."""
        for p in self.permit:
            status = p.permit(state, pod, node)
            if status.code is not Code.Success:
                return Status(status.code, status.reasons, p.name)
        return SUCCESS

    # --- binding cycle ---------------------------------------------------------------------------

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        for p in self.pre_bind:
            status = await p.pre_bind(state, pod, node)
            if not status.ok:
                return Status(status.code, status.reasons, p.name)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        for p in self.bind:
            status = await p.bind(state, pod, node)
            if status.code is not Code.Skip:
                return status
        return Status(Code.Error, ("no bind plugin bound the pod",))

    # --- preemption's what-if (one node) --------------------------------------------------------

    def dry_run_extensions(self, outcome: FilterOutcome) -> DryRunPlugins | None:
        """The extensions of every Filter plugin that had a verdict for the pod, or None when one has none
        (the dry run must then edit the table and run the Filters over it). Node-only plugins
        (NodeVerdict) are not asked per trial: their cycle verdicts are folded into one mask.
        None too after a PreFilter rejected the pod: no Filter has a verdict yet, and only rerunning the
        PreFilters on the edited table can tell whether removing pods lifts the rejection."""
        if outcome.prefilter_status is not None and not outcome.prefilter_status.ok:
            return None
        changing: list[PreFilterExtensions] = []
        fixed_ok = np.ones(len(outcome.feasible), np.bool_)
        for name, res in zip(outcome.plugins, outcome.results, strict=True):
            if res is None:
                continue  # nothing to say about this pod: removing or adding pods cannot change that
            ext = self.extensions.get(name)
            if ext is None:
                return None
            if isinstance(ext, NodeVerdict):
                fixed_ok &= res.passed
            else:
                changing.append(ext)
        return DryRunPlugins(changing, fixed_ok)
