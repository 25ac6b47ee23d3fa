"""NodeAffinity: mirrors pkg/scheduler/framework/plugins/nodeaffinity.

nodeSelector and required node-selector terms (terms ORed, expressions ANDed) filter;
preferred terms score by the sum of matching weights. Expressions are evaluated as
vector operations over the table's label columns.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import (
    Code,
    FilterResult,
    NodeVerdict,
    Rejection,
    default_normalize,
)
from kubelite.scheduler.nodetable import BoolArray, IntArray, NodeTable
from kubelite.scheduler.podinfo import PodInfo

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
Obj = dict[str, Any]


def _numeric(table: NodeTable, key: str) -> np.ndarray:  # type: ignore[type-arg]
    values = table.values(key)
    out = np.full(max(values.values(), default=-1) + 2, np.nan)
    for v, vid in values.items():
        with contextlib.suppress(ValueError):
            out[vid] = int(v)
    return out


def expression_mask(table: NodeTable, expr: Obj) -> BoolArray:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    col = table.column(key)
    if op in ("In", "NotIn"):
        ids = [table.value_id(key, v) for v in values]
        hit = np.isin(col, [i for i in ids if i >= 0])
        return hit if op == "In" else ~hit
    if op == "Exists":
        return col >= 0
    if op == "DoesNotExist":
        return col < 0
    if op in ("Gt", "Lt") and len(values) == 1:
        nums = _numeric(table, key)[col]
        try:
            bound = int(values[0])
        except ValueError:
            return np.zeros(table.n, np.bool_)
        with np.errstate(invalid="ignore"):
            return np.asarray((nums > bound) if op == "Gt" else (nums < bound)) & (col >= 0)
    return np.zeros(table.n, np.bool_)


def field_mask(table: NodeTable, expr: Obj) -> BoolArray:
    if expr.get("key") != "metadata.name":
        return np.zeros(table.n, np.bool_)
    names = set(expr.get("values") or [])
    hit = np.array([n in names for n in table.names], np.bool_)
    return hit if expr.get("operator") == "In" else ~hit


def term_mask(table: NodeTable, term: Obj) -> BoolArray:
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return np.zeros(table.n, np.bool_)  # an empty term matches nothing
    mask = np.ones(table.n, np.bool_)
    for e in exprs:
        mask &= expression_mask(table, e)
    for f in fields:
        mask &= field_mask(table, f)
    return mask


def selector_mask(table: NodeTable, node_selector: Obj | None) -> BoolArray:
    """A NodeSelector: its terms ORed."""
    terms = (node_selector or {}).get("nodeSelectorTerms") or []
    mask = np.zeros(table.n, np.bool_)
    for t in terms:
        mask |= term_mask(table, t)
    return mask


def required_mask(table: NodeTable, spec: Obj) -> BoolArray:
    """nodeSelector AND required node affinity: the pod's own placement constraint."""
    mask = np.ones(table.n, np.bool_)
    for key, value in (spec.get("nodeSelector") or {}).items():
        vid = table.value_id(key, value)
        mask &= (table.column(key) == vid) & (vid >= 0)
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        mask &= selector_mask(table, required)
    return mask


class NodeAffinity(NodeVerdict):
    name = NAME

    def __init__(self, added_affinity: Obj | None = None) -> None:
        self.added = added_affinity or {}

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        rejections = []
        passed = np.ones(table.n, np.bool_)
        added_required = self.added.get("requiredDuringSchedulingIgnoredDuringExecution")
        if added_required is not None:
            enforced = selector_mask(table, added_required)
            rejections.append(Rejection(ERR_REASON_ENFORCED, ~enforced, Code.UnschedulableAndUnresolvable))
            passed &= enforced
        spec = pod.spec
        if spec.get("nodeSelector") or (spec.get("affinity") or {}).get("nodeAffinity"):
            own = required_mask(table, spec)
            rejections.append(Rejection(ERR_REASON_POD, ~own & passed, Code.UnschedulableAndUnresolvable))
            passed &= own
        return FilterResult(passed, rejections) if rejections else None

    def score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        preferred = list(self.added.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
        preferred += ((pod.spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "preferredDuringSchedulingIgnoredDuringExecution") or []
        total = np.zeros(table.n, np.int64)
        for p in preferred:
            weight = int(p.get("weight", 0))
            if weight:
                total += np.where(term_mask(table, p.get("preference") or {}), weight, 0)
        return total[rows]

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return default_normalize(scores)
