"""The scheduler cache as a columnar table over nodes (DESIGN.md "Columnar snapshot").

Every per-node fact a plugin filters or scores on lives in a numpy array indexed by node
row: allocatable and requested per resource, pod counts, label values as integer ids per
key, taint-set ids. Pods (bound and assumed) update the arrays incrementally, so a
scheduling cycle is a handful of vector operations rather than a Python loop over nodes.
Cycles run synchronously between informer events, so the live table is the cycle's
snapshot.

`counts(key, predicate)` is an incrementally maintained per-node count of pods matching a
predicate (a selector in a namespace set), registered on first use; topology spread and
inter-pod affinity aggregate it by domain with `np.bincount`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from kubelite.scheduler.podinfo import (
    CPU,
    MEMORY,
    PODS,
    AffinityTerm,
    PodInfo,
    Taint,
    compile_taints,
    quantity_units,
)

Obj = dict[str, Any]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
MAX_COUNTERS = 512
BASE_RESOURCES = (CPU, MEMORY, "ephemeral-storage", PODS)

Predicate = Callable[[PodInfo], bool]
TERM_KINDS = ("affinity", "anti_affinity", "preferred_affinity", "preferred_anti_affinity")


class NodeTable:
    def __init__(self) -> None:
        self.n = 0
        self._cap = 0
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.nodes: list[Obj] = []
        self.labels: list[dict[str, str]] = []
        self.taints: list[tuple[Taint, ...]] = []
        self.ports: list[set[tuple[str, str, int]]] = []
        self.pods: list[dict[str, PodInfo]] = []
        self.alloc: dict[str, IntArray] = {}
        self.requested: dict[str, IntArray] = {}
        self.nz_cpu: IntArray = np.zeros(0, np.int64)
        self.nz_mem: IntArray = np.zeros(0, np.int64)
        self.pod_count: IntArray = np.zeros(0, np.int64)
        self.unschedulable: BoolArray = np.zeros(0, np.bool_)
        self.taint_set: IntArray = np.zeros(0, np.int64)
        self.taint_sets: list[tuple[Taint, ...]] = []
        self._taint_set_ids: dict[tuple[Taint, ...], int] = {}
        self._cols: dict[str, IntArray] = {}
        self._value_ids: dict[str, dict[str, int]] = {}
        self._counters: OrderedDict[Hashable, tuple[Predicate, IntArray]] = OrderedDict()
        self.pod_node: dict[str, int] = {}  # uid → row
        self.orphans: dict[str, dict[str, PodInfo]] = {}  # node name → pods bound to a node not (yet) known
        # distinct (kind, term) pairs carried by existing pods, with how many pods carry each
        self.terms: dict[tuple[str, AffinityTerm], int] = {}
        for r in BASE_RESOURCES:
            self._resource(r)

    # --- storage ---------------------------------------------------------------------------------

    def _grow(self) -> None:
        cap = max(64, self._cap * 2)

        def grown(a: npt.NDArray[Any], fill: Any = 0) -> npt.NDArray[Any]:
            out = np.full(cap, fill, dtype=a.dtype)
            out[: self._cap] = a[: self._cap]
            return out

        for d in (self.alloc, self.requested, self._cols):
            for k, arr in d.items():
                d[k] = grown(arr, -1 if d is self._cols else 0)
        for key, (pred, arr) in self._counters.items():
            self._counters[key] = (pred, grown(arr))
        self.nz_cpu, self.nz_mem, self.pod_count = grown(self.nz_cpu), grown(self.nz_mem), grown(self.pod_count)
        self.unschedulable, self.taint_set = grown(self.unschedulable), grown(self.taint_set)
        self._cap = cap

    def _resource(self, name: str) -> None:
        if name not in self.alloc:
            self.alloc[name] = np.zeros(self._cap, np.int64)
            self.requested[name] = np.zeros(self._cap, np.int64)

    def resources(self) -> list[str]:
        return list(self.alloc)

    # --- nodes -----------------------------------------------------------------------------------

    def upsert_node(self, node: Obj) -> int:
        name = node["metadata"]["name"]
        row = self.index.get(name)
        if row is None:
            if self.n == self._cap:
                self._grow()
            row = self.n
            self.n += 1
            self.index[name] = row
            self.names.append(name)
            self.nodes.append(node)
            self.labels.append({})
            self.taints.append(())
            self.ports.append(set())
            self.pods.append({})
            adopted = self.orphans.pop(name, {})
        else:
            adopted = {}
        self.nodes[row] = node
        labels = node["metadata"].get("labels") or {}
        self.labels[row] = labels
        for key, col in self._cols.items():
            col[row] = self._value_id(key, labels[key]) if key in labels else -1
        alloc = (node.get("status") or {}).get("allocatable") or {}
        for r in alloc:
            self._resource(r)
        for r, arr in self.alloc.items():
            arr[row] = quantity_units(r, alloc[r]) if r in alloc else 0
        spec = node.get("spec") or {}
        self.unschedulable[row] = bool(spec.get("unschedulable"))
        taints = compile_taints(spec.get("taints"))
        self.taints[row] = taints
        self.taint_set[row] = self._taint_set_id(taints)
        for pod in adopted.values():
            self.add_pod(pod)
        return row

    def remove_node(self, name: str) -> None:
        """Swap-remove: the last row moves into the hole, so arrays stay dense."""
        row = self.index.pop(name, None)
        if row is None:
            return
        last = self.n - 1
        for uid in list(self.pods[row]):
            pod = self.remove_pod(uid)
            if pod is not None:
                self.orphans.setdefault(name, {})[uid] = pod
        if row != last:
            moved = self.names[last]
            self.index[moved] = row
            for lst in self._row_lists():
                lst[row] = lst[last]
            arrays = [*self.alloc.values(), *self.requested.values(), *self._cols.values(), self.nz_cpu,
                      self.nz_mem, self.pod_count, self.unschedulable, self.taint_set,
                      *(arr for _, arr in self._counters.values())]
            for arr in arrays:
                arr[row] = arr[last]
            for uid in self.pods[row]:
                self.pod_node[uid] = row
        for lst in self._row_lists():
            lst.pop()
        self.n -= 1
        for arr in [*self.alloc.values(), *self.requested.values(), self.nz_cpu, self.nz_mem, self.pod_count,
                    *(arr for _, arr in self._counters.values())]:
            arr[last] = 0
        for col in self._cols.values():
            col[last] = -1

    def _row_lists(self) -> list[list[Any]]:
        return [self.names, self.nodes, self.labels, self.taints, self.ports, self.pods]

    def _taint_set_id(self, taints: tuple[Taint, ...]) -> int:
        tid = self._taint_set_ids.get(taints)
        if tid is None:
            tid = len(self.taint_sets)
            self.taint_sets.append(taints)
            self._taint_set_ids[taints] = tid
        return tid

    # --- labels ----------------------------------------------------------------------------------

    def _value_id(self, key: str, value: str) -> int:
        ids = self._value_ids.setdefault(key, {})
        vid = ids.get(value)
        if vid is None:
            vid = len(ids)
            ids[value] = vid
        return vid

    def column(self, key: str) -> IntArray:
        """Value ids of label `key` per node row (-1 where the node lacks the label)."""
        col = self._cols.get(key)
        if col is None:
            col = np.full(self._cap, -1, np.int64)
            for row, labels in enumerate(self.labels):
                if key in labels:
                    col[row] = self._value_id(key, labels[key])
            self._cols[key] = col
        return col[: self.n]

    def value_id(self, key: str, value: str) -> int:
        self.column(key)
        return self._value_ids.get(key, {}).get(value, -1)

    def values(self, key: str) -> dict[str, int]:
        self.column(key)
        return self._value_ids.get(key, {})

    # --- pods ------------------------------------------------------------------------------------

    def add_pod(self, pod: PodInfo) -> None:
        """Account a bound or assumed pod on its node (replacing an earlier version of it)."""
        self.remove_pod(pod.uid)
        row = self.index.get(pod.node_name)
        if row is None:
            self.orphans.setdefault(pod.node_name, {})[pod.uid] = pod
            return
        self.pods[row][pod.uid] = pod
        self.pod_node[pod.uid] = row
        self._account(row, pod, 1)

    def remove_pod(self, uid: str) -> PodInfo | None:
        row = self.pod_node.pop(uid, None)
        if row is None:
            for pods in self.orphans.values():
                if uid in pods:
                    return pods.pop(uid)
            return None
        pod = self.pods[row].pop(uid)
        self._account(row, pod, -1)
        return pod

    def pod(self, uid: str) -> PodInfo | None:
        row = self.pod_node.get(uid)
        return self.pods[row].get(uid) if row is not None else None

    def _account(self, row: int, pod: PodInfo, sign: int) -> None:
        for r, v in pod.requests.items():
            if r not in self.requested:
                self._resource(r)
            self.requested[r][row] += sign * v
        self.nz_cpu[row] += sign * pod.non_zero_cpu
        self.nz_mem[row] += sign * pod.non_zero_memory
        self.pod_count[row] += sign
        if pod.host_ports:
            if sign > 0:
                self.ports[row].update(pod.host_ports)
            else:
                self.ports[row] = {p for other in self.pods[row].values() for p in other.host_ports}
        for kind in TERM_KINDS:
            for term in getattr(pod, kind):
                key = (kind, term)
                left = self.terms.get(key, 0) + sign
                if left > 0:
                    self.terms[key] = left
                else:
                    self.terms.pop(key, None)
        for pred, arr in self._counters.values():
            if pred(pod):
                arr[row] += sign

    def counts(self, key: Hashable, predicate: Predicate) -> IntArray:
        """Per-node count of pods matching `predicate`, maintained incrementally once registered."""
        entry = self._counters.get(key)
        if entry is None:
            arr = np.zeros(self._cap, np.int64)
            for row in range(self.n):
                arr[row] = sum(1 for p in self.pods[row].values() if predicate(p))
            entry = (predicate, arr)
            self._counters[key] = entry
            if len(self._counters) > MAX_COUNTERS:
                self._counters.popitem(last=False)
        else:
            self._counters.move_to_end(key)
        return entry[1][: self.n]

    def domain_totals(self, key: str, per_node: IntArray, include: BoolArray | None = None) -> IntArray:
        """Sum per-node values over the domains (label values) of `key`, indexed by value id.

        Only nodes that have the key (and are in `include`, when given) contribute.
        """
        col = self.column(key)
        mask = col >= 0 if include is None else include & (col >= 0)
        size = max(len(self._value_ids.get(key, {})), 1)
        return np.bincount(col[mask], weights=per_node[mask], minlength=size).astype(np.int64)

    def spread_to_nodes(self, key: str, totals: IntArray) -> IntArray:
        """Give every node its domain's total (0 for nodes without the key)."""
        col = self.column(key)
        return np.where(col >= 0, totals[np.maximum(col, 0)], 0)

    def requests_fit(self, requests: dict[str, int], row: int) -> bool:
        """Whether `requests` fit in what `row` has left of each resource (pod count not included)."""
        for r, amount in requests.items():
            if amount <= 0 or r == PODS:
                continue
            used, cap = self.requested.get(r), self.alloc.get(r)
            if (int(used[row]) if used is not None else 0) + amount > (int(cap[row]) if cap is not None else 0):
                return False
        return True

    def carriers(self, kind: str, term: AffinityTerm) -> IntArray:
        """Per-node count of existing pods that carry `term` among their `kind` terms."""
        return self.counts(("carrier", kind, term), lambda p: term in getattr(p, kind))

    def view(self, arr: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return arr[: self.n]
