"""Explanations (G6): why a pod went where it did, or why it is pending, and what single change would help.

Built from a scheduling attempt: every filter plugin's verdict for every node (nodes
grouped by reason), the scored nodes' per-plugin and total scores, and for a pending pod
suggestions drawn from nodes that exactly one plugin rejected ("fits on node-3 if 200m
cpu were free", "fits in zone zoneB if maxSkew were 2").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubelite.clock import rfc3339
from kubelite.scheduler.candidate import PreemptionResult
from kubelite.scheduler.framework import FilterOutcome, ScoreOutcome
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.plugins.pod_topology_spread import PodTopologySpread
from kubelite.scheduler.plugins.taint_toleration import untolerated
from kubelite.scheduler.podinfo import CPU, MEMORY, PODS, PodInfo

Obj = dict[str, Any]
NODES_LISTED = 50
SCORES_LISTED = 20
SUGGESTIONS = 3
API_VERSION = "kubelite.io/v1alpha1"


def _quantity(resource: str, amount: int) -> str:
    if resource == CPU:
        return f"{amount}m cpu"
    if resource == MEMORY or resource.endswith("storage"):
        return f"{-(-amount // 2**20)}Mi {resource}"
    if resource == PODS:
        return f"{amount} more pod slot{'s' if amount > 1 else ''}"
    return f"{amount} {resource}"


def filter_verdicts(outcome: FilterOutcome, table: NodeTable) -> list[Obj]:
    out = []
    for i, name in enumerate(outcome.plugins):
        res = outcome.results[i] if i < len(outcome.results) else None
        rejected: Obj = {}
        passed = table.n if res is None else int(np.count_nonzero(res.passed))
        for rej in res.rejections if res is not None else []:
            rows = np.flatnonzero(rej.nodes)
            if len(rows):
                rejected[rej.reason] = {"count": len(rows), "nodes": [table.names[r] for r in rows[:NODES_LISTED]]}
        out.append({"plugin": name, "passed": passed, "rejected": rejected})
    return out


def top_scores(scores: ScoreOutcome | None, table: NodeTable) -> list[Obj]:
    if scores is None:
        return []
    order = np.argsort(-scores.total, kind="stable")[:SCORES_LISTED]
    return [{"node": table.names[int(scores.rows[i])], "total": int(scores.total[i]),
             "plugins": {p: int(v[i]) for p, v in scores.per_plugin.items()}} for i in order]


def suggestions(pod: PodInfo, outcome: FilterOutcome, table: NodeTable,
                spread: PodTopologySpread | None) -> list[str]:
    """Single changes that would let the pod fit: nodes rejected by exactly one plugin, cheapest first."""
    if not outcome.results or table.n == 0:
        return []
    fails = np.array([~r.passed if r is not None else np.zeros(table.n, np.bool_) for r in outcome.results])
    only = fails.sum(axis=0) == 1
    found: list[tuple[float, str]] = []
    for i, name in enumerate(outcome.plugins):
        rows = np.flatnonzero(only & fails[i])
        if not len(rows):
            continue
        if name == "NodeResourcesFit":
            found += _resource_hints(pod, table, rows)
        elif name == "PodTopologySpread" and spread is not None:
            found += _spread_hints(pod, table, rows, spread)
        elif name == "TaintToleration":
            for r in rows[:SUGGESTIONS]:
                taint = untolerated(table.taints[r], pod.tolerations, ("NoSchedule", "NoExecute"))
                found.append((1.0, f"fits on {table.names[r]} if the pod tolerated taint {taint}"))
        else:
            change = {"NodeUnschedulable": "it were uncordoned",
                      "NodeAffinity": "it matched the pod's node affinity/selector",
                      "NodePorts": "the pod's host ports were free there",
                      "InterPodAffinity": "the pod's (anti-)affinity rules allowed it",
                      "NodeName": "the pod named it"}.get(name, f"{name} allowed it")
            found += [(2.0, f"fits on {table.names[r]} if {change}") for r in rows[:SUGGESTIONS]]
    found.sort(key=lambda p: p[0])
    seen: list[str] = []
    for _, text in found:
        if text not in seen:
            seen.append(text)
    return seen[:SUGGESTIONS]


def _resource_hints(pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[tuple[float, str]]:  # type: ignore[type-arg]
    """The nodes closest to fitting (smallest relative shortfall), vectorised over `rows`."""
    want = {**{r: a for r, a in pod.requests.items() if a > 0 and r != PODS}, PODS: 1}
    shorts: dict[str, np.ndarray] = {}  # type: ignore[type-arg]
    cost = np.zeros(len(rows))
    for resource, amount in want.items():
        alloc = table.alloc[resource][rows] if resource in table.alloc else np.zeros(len(rows), np.int64)
        if resource == PODS:
            used = table.pod_count[rows]
        else:
            used = table.requested[resource][rows] if resource in table.requested else np.zeros(len(rows), np.int64)
        short = used + amount - alloc
        shorts[resource] = short
        cost = np.maximum(cost, np.where(short > 0, short / np.maximum(alloc, 1), 0.0))
    out = []
    for i in np.argsort(cost, kind="stable")[:SUGGESTIONS]:
        missing = [_quantity(r, int(s[i])) for r, s in shorts.items() if s[i] > 0]
        if missing:
            out.append((float(cost[i]), f"fits on {table.names[int(rows[i])]} if {' and '.join(missing)} were free"))
    return out


def _spread_hints(pod: PodInfo, table: NodeTable, rows: np.ndarray,  # type: ignore[type-arg]
                  spread: PodTopologySpread) -> list[tuple[float, str]]:
    out = []
    for c, skew in spread.skews(pod, table):
        for r in rows:
            if skew[r] > c.max_skew:
                domain = table.labels[r].get(c.topology_key, "")
                where = f"on {table.names[r]}" if c.topology_key == "kubernetes.io/hostname" else \
                    f"in {c.topology_key} {domain}"
                out.append((1.0 + int(skew[r]) - c.max_skew, f"fits {where} if maxSkew were {int(skew[r])}"))
    return out


def preemption_summary(result: PreemptionResult) -> Obj:
    out: Obj = {"candidates": [{"node": c.node, "victims": [f"{v.namespace}/{v.name}" for v in c.victims],
                                "victimPriorities": [v.priority for v in c.victims],
                                "pdbViolations": c.pdb_violations} for c in result.candidates[:NODES_LISTED]]}
    if result.candidate is not None:
        out["nominatedNode"] = result.candidate.node
        out["decidedBy"] = result.decided_by
    else:
        out["message"] = result.message
    return out


def explanation(pod: PodInfo, outcome: FilterOutcome, scores: ScoreOutcome | None, node: str | None, message: str,
                table: NodeTable, spread: PodTopologySpread | None, now: float,
                preemption: PreemptionResult | None = None) -> Obj:
    """The SchedulingExplanation object for one attempt."""
    body: Obj = {
        "apiVersion": API_VERSION, "kind": "SchedulingExplanation",
        "metadata": {"name": pod.name, "namespace": pod.namespace,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid}]},
        "pod": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "time": rfc3339(now), "result": "Scheduled" if node else "Unschedulable", "nodes": table.n,
        "filters": filter_verdicts(outcome, table), "scores": top_scores(scores, table),
    }
    if node:
        body["node"] = node
    else:
        body["message"] = message
        body["suggestions"] = suggestions(pod, outcome, table, spread)
    if preemption is not None:
        body["preemption"] = preemption_summary(preemption)
    return body
