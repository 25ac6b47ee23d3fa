"""PodTopologySpread: mirrors pkg/scheduler/framework/plugins/podtopologyspread (T1-T5).

Filter (DoNotSchedule constraints): a node passes a constraint when it has the topology
key and `matching pods in its domain + self-match - global minimum <= maxSkew`; the
minimum is over the domains of nodes that count (all constraint keys present, and the
nodeAffinityPolicy / nodeTaintsPolicy inclusion rules), and is 0 when fewer domains
exist than minDomains. Only pods in the incoming pod's namespace that are not terminating
count. Score (ScheduleAnyway constraints): count x log(domains + 2) + maxSkew - 1 per
constraint, normalised so fewer matching pods score higher. Pods without constraints
get the cluster defaults (System or List) with a selector taken from their owning
ReplicaSet / StatefulSet / ReplicationController.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubelite.api.selectors import LabelSelector, Requirement, compile_label_selector
from kubelite.scheduler.cycle_state import CycleState, StateKey
from kubelite.scheduler.framework import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    Code,
    FilterResult,
    Rejection,
    Status,
)
from kubelite.scheduler.nodetable import BoolArray, IntArray, NodeTable
from kubelite.scheduler.plugins.node_affinity import required_mask
from kubelite.scheduler.plugins.taint_toleration import untolerated
from kubelite.scheduler.podinfo import PodInfo

NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
SYSTEM_DEFAULTS = (
    {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
    {"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
)

Obj = dict[str, Any]
OwnerSelector = Callable[[PodInfo], LabelSelector | None]
ScorePart = tuple[IntArray, float, int, BoolArray]  # per-node count, domain weight, maxSkew, has the key
SCORE_STATE: StateKey[tuple[BoolArray, list[ScorePart]]] = StateKey("PreScore" + NAME)


@dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def _compile(raw: Obj, pod: PodInfo, selector: LabelSelector | None = None) -> Constraint:
    if selector is None:
        selector = compile_label_selector(raw.get("labelSelector"))
        extra = [Requirement(k, "In", frozenset([pod.labels[k]])) for k in raw.get("matchLabelKeys") or []
                 if k in pod.labels]
        if extra and not selector.nothing:
            selector = LabelSelector(selector.requirements + tuple(extra))
    return Constraint(int(raw.get("maxSkew", 1)), raw.get("topologyKey", ""), selector,
                      int(raw.get("minDomains") or 1), raw.get("nodeAffinityPolicy", "Honor") == "Honor",
                      raw.get("nodeTaintsPolicy", "Ignore") == "Honor")


class PodTopologySpread:
    name = NAME

    def __init__(self, defaults: tuple[Obj, ...] = SYSTEM_DEFAULTS,
                 owner_selector: OwnerSelector = lambda pod: None) -> None:
        self.defaults = defaults
        self.owner_selector = owner_selector

    def constraints(self, pod: PodInfo, when: str) -> list[Constraint]:
        raw = pod.spec.get("topologySpreadConstraints") or []
        if raw:
            return [_compile(c, pod) for c in raw if c.get("whenUnsatisfiable") == when]
        selector = self.owner_selector(pod) if self.defaults else None
        if selector is None or selector.empty:
            return []
        return [_compile(c, pod, selector) for c in self.defaults if c.get("whenUnsatisfiable") == when]

    def _require_all_topologies(self, pod: PodInfo) -> bool:
        """Upstream relaxes "every node has every key" only for the System default constraints."""
        return bool(pod.spec.get("topologySpreadConstraints")) or self.defaults is not SYSTEM_DEFAULTS

    # --- shared counting -------------------------------------------------------------------------

    def _eligible(self, pod: PodInfo, table: NodeTable, constraints: list[Constraint]) -> tuple[BoolArray,
                                                                                                 list[BoolArray]]:
        has_keys = np.ones(table.n, np.bool_)
        for c in constraints:
            has_keys &= table.column(c.topology_key) >= 0
        affinity = required_mask(table, pod.spec) if any(c.honor_affinity for c in constraints) else None
        taints = None
        if any(c.honor_taints for c in constraints):
            ok_sets = np.array([untolerated(ts, pod.tolerations, ("NoSchedule", "NoExecute")) is None
                                for ts in table.taint_sets], np.bool_)
            taints = ok_sets[table.view(table.taint_set)]
        per_constraint = []
        for c in constraints:
            mask = has_keys.copy()
            if c.honor_affinity and affinity is not None:
                mask &= affinity
            if c.honor_taints and taints is not None:
                mask &= taints
            per_constraint.append(mask)
        return has_keys, per_constraint

    def _counts(self, pod: PodInfo, table: NodeTable, c: Constraint) -> IntArray:
        ns, selector = pod.namespace, c.selector
        return table.counts(("spread", ns, selector),
                            lambda p: p.namespace == ns and not p.terminating and selector.matches(p.labels))

    def _domain_counts(self, table: NodeTable, c: Constraint, counts: IntArray, include: BoolArray) -> tuple[
            IntArray, IntArray]:
        """Matching pods per domain of the counted nodes, and which domains those nodes span."""
        col = table.column(c.topology_key)
        return table.domain_totals(c.topology_key, counts, include), np.unique(col[include & (col >= 0)])

    # --- filter ----------------------------------------------------------------------------------

    def skews(self, pod: PodInfo, table: NodeTable) -> list[tuple[Constraint, IntArray]]:
        """Per hard constraint, the skew placing the pod on each node would create (-1: node lacks the key)."""
        constraints = self.constraints(pod, "DoNotSchedule")
        if not constraints:
            return []
        _, include = self._eligible(pod, table, constraints)
        out = []
        for c, inc in zip(constraints, include, strict=True):
            col = table.column(c.topology_key)
            sums, present = self._domain_counts(table, c, self._counts(pod, table, c), inc)
            min_match = int(sums[present].min()) if len(present) else 0
            if len(present) < c.min_domains:
                min_match = 0
            self_match = 1 if c.selector.matches(pod.labels) else 0
            skew = sums[np.maximum(col, 0)] + self_match - min_match
            out.append((c, np.where(col < 0, -1, skew)))
        return out

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        skews = self.skews(pod, table)
        if not skews:
            return None
        passed = np.ones(table.n, np.bool_)
        missing = np.zeros(table.n, np.bool_)
        skewed = np.zeros(table.n, np.bool_)
        for c, skew in skews:
            no_key = skew < 0
            too_skewed = skew > c.max_skew
            missing |= no_key & passed
            skewed |= too_skewed & passed
            passed &= ~no_key & ~too_skewed
        return FilterResult(passed, [Rejection(ERR_REASON_NODE_LABEL_NOT_MATCH, missing,
                                               Code.UnschedulableAndUnresolvable),
                                     Rejection(ERR_REASON_CONSTRAINTS_NOT_MATCH, skewed)])

    # --- score -----------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> Status:
        constraints = self.constraints(pod, "ScheduleAnyway")
        if not constraints:
            return SKIP
        has_keys, include = self._eligible(pod, table, constraints)
        require_all = self._require_all_topologies(pod)
        ignored = ~has_keys[rows] if require_all else np.zeros(len(rows), np.bool_)
        scored = rows[~ignored]
        parts: list[ScorePart] = []
        for c, inc in zip(constraints, include, strict=True):
            col = table.column(c.topology_key)
            if not require_all:  # count on every node that has this constraint's own key
                inc = self._eligible(pod, table, [c])[1][0]
            present = col[rows] >= 0
            if c.topology_key == HOSTNAME:
                size = len(scored)
                per_node = self._counts(pod, table, c)[rows]
            else:
                size = len(np.unique(col[scored]))  # a missing key is its own ("") domain, as upstream
                sums, _ = self._domain_counts(table, c, self._counts(pod, table, c), inc)
                per_node = table.spread_to_nodes(c.topology_key, sums)[rows]
            parts.append((per_node, math.log(size + 2), c.max_skew, present))
        state.write(SCORE_STATE, (ignored, parts))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        ignored, parts = state.read(SCORE_STATE)
        total = np.zeros(len(rows), np.float64)
        for per_node, weight, max_skew, present in parts:
            total += np.where(present, per_node * weight + (max_skew - 1), 0.0)
        scores = np.floor(total + 0.5).astype(np.int64)  # math.Round: half away from zero
        return np.where(ignored, -1, scores)

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        valid = scores >= 0
        if not valid.any():
            return np.zeros(len(scores), np.int64)
        lo, hi = int(scores[valid].min()), int(scores[valid].max())
        if hi == 0:
            return np.where(valid, MAX_NODE_SCORE, 0)
        return np.where(valid, MAX_NODE_SCORE * (hi + lo - scores) // hi, 0)
