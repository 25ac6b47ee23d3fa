"""NodeResourcesFit and NodeResourcesBalancedAllocation: mirror plugins/noderesources.

Fit filters on requests (pods count first, then each requested resource, with upstream's
"Insufficient <resource>" and "Too many pods" reasons) and scores with the configured
strategy: LeastAllocated (default), MostAllocated or RequestedToCapacityRatio. Scoring
uses the non-zero requests for cpu and memory; BalancedAllocation uses the actual ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubelite.scheduler.cycle_state import CycleState, StateKey
from kubelite.scheduler.framework import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    FilterResult,
    Rejection,
    Status,
)
from kubelite.scheduler.nodetable import IntArray, NodeTable
from kubelite.scheduler.podinfo import CPU, MEMORY, PODS, PodInfo

FIT = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
LEAST, MOST, RATIO = "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"
DEFAULT_RESOURCES = ({"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1})


@dataclass
class FitArgs:
    strategy: str = LEAST
    resources: tuple[dict[str, Any], ...] = DEFAULT_RESOURCES
    shape: tuple[tuple[int, int], ...] = ((0, 10), (100, 0))  # utilization → score (0..10)
    ignored_resources: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_config(cls, args: dict[str, Any]) -> FitArgs:
        strategy = args.get("scoringStrategy") or {}
        kind = strategy.get("type", LEAST)
        if kind not in (LEAST, MOST, RATIO):
            raise ValueError(f"scoringStrategy.type: Unsupported value: {kind!r}: supported values: "
                             f'"{LEAST}", "{MOST}", "{RATIO}"')
        resources = tuple(strategy.get("resources") or DEFAULT_RESOURCES)
        shape = tuple((int(p["utilization"]), int(p["score"]))
                      for p in ((strategy.get("requestedToCapacityRatio") or {}).get("shape") or []))
        return cls(kind, resources, shape or cls.shape, frozenset(args.get("ignoredResources") or []))


def _requested(table: NodeTable, pod: PodInfo, resource: str, rows: IntArray, non_zero: bool) -> IntArray:
    if non_zero and resource == CPU:
        return table.view(table.nz_cpu)[rows] + pod.non_zero_cpu
    if non_zero and resource == MEMORY:
        return table.view(table.nz_mem)[rows] + pod.non_zero_memory
    base = table.view(table.requested[resource])[rows] if resource in table.requested else np.zeros(len(rows),
                                                                                                     np.int64)
    return base + pod.requests.get(resource, 0)


def _alloc(table: NodeTable, resource: str, rows: IntArray) -> IntArray:
    if resource in table.alloc:
        return table.view(table.alloc[resource])[rows]
    return np.zeros(len(rows), np.int64)


def _broken_linear(shape: tuple[tuple[int, int], ...], utilization: IntArray) -> IntArray:
    xs = np.array([p[0] for p in shape], np.float64)
    ys = np.array([p[1] * MAX_NODE_SCORE // 10 for p in shape], np.float64)
    return np.interp(utilization, xs, ys).astype(np.int64)


@dataclass(slots=True)
class FitDraft:
    """What one node has left of each resource the pod asks for, and of pod slots, in a dry run."""

    row: int
    left: dict[str, int]
    slots: int

    def change(self, requests: dict[str, int], sign: int) -> None:  # sign +1: a pod leaves the node, -1: joins
        self.slots += sign
        left = self.left
        for r in left:
            amount = requests.get(r)
            if amount:
                left[r] += sign * amount

    def clone(self) -> FitDraft:
        return FitDraft(self.row, dict(self.left), self.slots)


FIT_DRAFT: StateKey[FitDraft] = StateKey("Draft" + FIT)


class NodeResourcesFit:
    name = FIT

    def __init__(self, args: FitArgs | None = None) -> None:
        self.args = args or FitArgs()

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        rows = np.arange(table.n)
        too_many = table.view(table.pod_count) + 1 > table.view(table.alloc[PODS])
        rejections = [Rejection("Too many pods", too_many)] if too_many.any() else []
        failed = too_many.copy()
        for resource, want in pod.requests.items():
            if want <= 0 or resource == PODS or resource in self.args.ignored_resources:
                continue
            short = _requested(table, pod, resource, rows, False) > _alloc(table, resource, rows)
            if short.any():
                rejections.append(Rejection(f"Insufficient {resource}", short))
                failed |= short
        return FilterResult(~failed, rejections) if rejections else None

    # --- PreFilterExtensions: what-if on one node, as Filter on upstream's NodeInfo copy ---------

    def _draft(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> FitDraft:
        draft: FitDraft | None = state.get(FIT_DRAFT)
        if draft is not None and draft.row == row:
            return draft
        return self._new_draft(state, pod, table, row)

    def _new_draft(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> FitDraft:
        wanted = [r for r, v in pod.requests.items() if v > 0 and r != PODS and r not in self.args.ignored_resources]
        left = {r: (int(table.alloc[r][row]) if r in table.alloc else 0)
                - (int(table.requested[r][row]) if r in table.requested else 0) for r in wanted}
        draft = FitDraft(row, left, int(table.alloc[PODS][row]) - int(table.pod_count[row]))
        state.write(FIT_DRAFT, draft)
        return draft

    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, table: NodeTable, row: int) -> None:
        draft: FitDraft | None = state.get(FIT_DRAFT)
        if draft is None or draft.row != row:
            draft = self._new_draft(state, pod, table, row)
        draft.change(added.requests, -1)

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: PodInfo, table: NodeTable, row: int) -> None:
        draft: FitDraft | None = state.get(FIT_DRAFT)
        if draft is None or draft.row != row:
            draft = self._new_draft(state, pod, table, row)
        draft.change(removed.requests, 1)

    def filter_node(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> bool:
        draft = self._draft(state, pod, table, row)
        if draft.slots < 1:
            return False
        want = pod.requests
        return all(left >= want[r] for r, left in draft.left.items())

    def score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        total = np.zeros(len(rows), np.int64)
        weights = np.zeros(len(rows), np.int64)
        for spec in self.args.resources:
            resource, weight = spec["name"], int(spec.get("weight", 1))
            alloc = _alloc(table, resource, rows)
            req = _requested(table, pod, resource, rows, True)
            present = alloc > 0
            safe = np.where(present, alloc, 1)
            if self.args.strategy == LEAST:
                s = np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // safe)
            elif self.args.strategy == MOST:
                s = np.minimum(req, alloc) * MAX_NODE_SCORE // safe
            else:
                s = _broken_linear(self.args.shape, np.minimum(req, alloc) * MAX_NODE_SCORE // safe)
            total += np.where(present, s * weight, 0)
            weights += np.where(present, weight, 0)
        return np.where(weights > 0, total // np.where(weights > 0, weights, 1), 0)


class NodeResourcesBalancedAllocation:
    name = BALANCED

    def __init__(self, resources: tuple[str, ...] = (CPU, MEMORY)) -> None:
        self.resources = resources

    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> Status:
        if all(pod.requests.get(r, 0) == 0 for r in self.resources):
            return SKIP  # best-effort pods are not scored by balance
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        fractions = []
        present = []
        for r in self.resources:
            alloc = _alloc(table, r, rows)
            req = _requested(table, pod, r, rows, False)
            has = alloc > 0
            fractions.append(np.where(has, np.minimum(req / np.where(has, alloc, 1), 1.0), 0.0))
            present.append(has)
        f = np.array(fractions)
        p = np.array(present)
        count = p.sum(axis=0)
        mean = np.where(count > 0, (f * p).sum(axis=0) / np.maximum(count, 1), 0.0)
        if len(self.resources) == 2:
            std = np.where(count == 2, np.abs(f[0] - f[1]) / 2, 0.0)
        else:
            var = (((f - mean) ** 2) * p).sum(axis=0) / np.maximum(count, 1)
            std = np.where(count > 2, np.sqrt(var), 0.0)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
