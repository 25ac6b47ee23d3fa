"""Building node tables and running plugins the way the scheduler does, for table tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import FilterOutcome
from kubelite.scheduler.interface import Plugin
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.podinfo import PodInfo, pod_info
from kubelite.scheduler.runtime import Framework
from kubelite.testing.builders import make_node

Obj = dict[str, Any]


def node(name: str, labels: dict[str, str] | None = None, taints: list[Obj] | None = None, cpu: str = "4",
         memory: str = "32Gi", pods: str = "110", unschedulable: bool = False) -> Obj:
    n = make_node(name, cpu, memory, pods, labels)
    n["spec"] = {}
    if taints:
        n["spec"]["taints"] = taints
    if unschedulable:
        n["spec"]["unschedulable"] = True
    return n


def pod(obj: Obj, uid: str | None = None) -> PodInfo:
    obj.setdefault("metadata", {}).setdefault("uid", uid or f"uid-{obj['metadata']['namespace']}-"
                                                             f"{obj['metadata']['name']}")
    return pod_info(obj)


def table(nodes: list[Obj], pods: list[Obj] | None = None) -> NodeTable:
    t = NodeTable()
    for n in nodes:
        t.upsert_node(n)
    for p in pods or []:
        t.add_pod(pod(p))
    return t


def filter_verdicts(plugin: Plugin, t: NodeTable, incoming: Obj) -> dict[str, str]:
    """node name → "" when it passes, else the reason(s) the plugin gave."""
    outcome: FilterOutcome = Framework([plugin]).run_filters(CycleState(), pod(incoming), t)
    if outcome.prefilter_status is not None:
        return {n: "; ".join(outcome.prefilter_status.reasons) for n in t.names}
    res = outcome.results[0]
    out = {}
    for row, name in enumerate(t.names):
        if res is None or res.passed[row]:
            out[name] = ""
        else:
            out[name] = ", ".join(r.reason for r in res.rejections if r.nodes[row])
    return out


def scores(plugin: Plugin, t: NodeTable, incoming: Obj, names: list[str] | None = None) -> dict[str, int]:
    rows = np.array([t.index[n] for n in (names or t.names)], np.int64)
    outcome = Framework([], [(plugin, 1)]).run_scores(CycleState(), pod(incoming), t, rows)
    values = outcome.per_plugin.get(plugin.name, np.zeros(len(rows), np.int64))
    return {t.names[int(r)]: int(v) for r, v in zip(rows, values, strict=True)}
