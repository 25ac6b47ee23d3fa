"""InterPodAffinity: mirrors pkg/scheduler/framework/plugins/interpodaffinity.

Filter, in upstream's order: existing pods' required anti-affinity that matches the
incoming pod (symmetry), the incoming pod's required affinity (an existing pod counts only
if it matches all the terms; "first pod of a collection" exception), then its required
anti-affinity. Score: the incoming pod's preferred
terms against existing pods, plus existing pods' preferred terms (and required affinity
x hardPodAffinityWeight) that match the incoming pod; min-max normalised.

Existing pods are never looped over per cycle: the table keeps the distinct terms they
carry and per-node counts of their carriers, so each distinct term is judged once and
its effect spread over its topology domains with `np.bincount`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

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
from kubelite.scheduler.podinfo import AffinityTerm, PodInfo

NAME = "InterPodAffinity"
ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"

NamespaceLabels = Mapping[str, Mapping[str, str]]
SCORE_STATE: StateKey[IntArray] = StateKey("PreScore" + NAME)


def _per_domain(table: NodeTable, key: str, per_node: IntArray) -> IntArray:
    """Each node gets the total of its topology domain (0 without the key)."""
    return table.spread_to_nodes(key, table.domain_totals(key, per_node))


class InterPodAffinity:
    name = NAME

    def __init__(self, hard_pod_affinity_weight: int = 1, namespace_labels: NamespaceLabels | None = None) -> None:
        self.hard_weight = hard_pod_affinity_weight
        self.namespace_labels: NamespaceLabels = namespace_labels if namespace_labels is not None else {}

    def _matching(self, table: NodeTable, term: AffinityTerm) -> IntArray:
        labels = self.namespace_labels
        return table.counts(("affinity-match", term.cache_key), lambda p: term.matches(p, labels))

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        n = table.n
        existing = np.zeros(n, np.bool_)
        for (kind, term), _ in list(table.terms.items()):
            if kind == "anti_affinity" and term.matches(pod, self.namespace_labels):
                existing |= _per_domain(table, term.topology_key, table.carriers(kind, term)) > 0
        affinity_ok = self._affinity_ok(pod, table)
        anti = np.zeros(n, np.bool_)
        for term in pod.anti_affinity:
            anti |= _per_domain(table, term.topology_key, self._matching(table, term)) > 0
        if not existing.any() and affinity_ok is None and not anti.any():
            return None
        # Filter's order (filtering.go since 1.22): the pod's own affinity, its own anti-affinity, then the
        # existing pods' anti-affinity — a node failing several is rejected for the first
        r_affinity = ~affinity_ok if affinity_ok is not None else np.zeros(n, np.bool_)
        r_anti = anti & ~r_affinity
        r_existing = existing & ~r_affinity & ~r_anti
        passed = ~(r_existing | r_affinity | r_anti)
        return FilterResult(passed, [Rejection(ERR_REASON_AFFINITY, r_affinity, Code.UnschedulableAndUnresolvable),
                                     Rejection(ERR_REASON_ANTI_AFFINITY, r_anti),
                                     Rejection(ERR_REASON_EXISTING_ANTI_AFFINITY, r_existing)])

    def _affinity_ok(self, pod: PodInfo, table: NodeTable) -> BoolArray | None:
        """satisfyPodAffinity: a topology domain counts only if one pod in it matches *all* the terms
        (upstream's updateWithAffinityTerms); when no such pod exists on any node that has a term's
        topology key and the pod matches its own terms, it is the first of its collection."""
        if not pod.affinity:
            return None
        labels = self.namespace_labels
        terms = pod.affinity
        if len(terms) == 1:
            per_node = self._matching(table, terms[0])
        else:
            per_node = table.counts(("affinity-match-all", tuple(t.cache_key for t in terms)),
                                    lambda p: all(t.matches(p, labels) for t in terms))
        all_keys = np.ones(table.n, np.bool_)
        pods_exist = np.ones(table.n, np.bool_)
        any_match = False
        for term in terms:
            col = table.column(term.topology_key)
            all_keys &= col >= 0
            if (per_node[col >= 0] > 0).any():
                any_match = True
            pods_exist &= _per_domain(table, term.topology_key, per_node) > 0
        if not any_match and all(t.matches(pod, labels) for t in terms):
            return all_keys  # the first pod of a collection that has affinity to itself
        return all_keys & pods_exist

    # --- score -----------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> Status:
        total = np.zeros(table.n, np.int64)
        touched = False
        for sign, terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
            for term in terms:
                total += sign * term.weight * _per_domain(table, term.topology_key, self._matching(table, term))
                touched = True
        for (kind, term), _ in list(table.terms.items()):
            if kind == "preferred_affinity":
                weight = term.weight
            elif kind == "preferred_anti_affinity":
                weight = -term.weight
            elif kind == "affinity" and self.hard_weight > 0:
                weight = self.hard_weight
            else:
                continue
            if term.matches(pod, self.namespace_labels):
                total += weight * _per_domain(table, term.topology_key, table.carriers(kind, term))
                touched = True
        if not touched:
            return SKIP
        state.write(SCORE_STATE, total)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        scores: IntArray = state.read(SCORE_STATE)[rows]
        return scores

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        if not len(scores):
            return scores
        lo, hi = int(scores.min()), int(scores.max())
        if hi - lo <= 0:
            return np.zeros(len(scores), np.int64)
        return (MAX_NODE_SCORE * (scores - lo) / (hi - lo)).astype(np.int64)
