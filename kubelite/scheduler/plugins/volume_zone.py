"""VolumeZone: mirrors pkg/scheduler/framework/plugins/volumezone.

A pod's bound volumes labelled with a zone or region (topology.kubernetes.io/zone|region and the
deprecated failure-domain.beta.kubernetes.io ones) admit only nodes with a matching label; a
label value may list several zones separated by "__" (volumehelpers.LabelZonesToSet). Unbound
claims of a delayed-binding class are skipped: VolumeBinding checks their volumes' node affinity.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubelite.api import volumes as vu
from kubelite.scheduler.cycle_state import CycleState, StateKey
from kubelite.scheduler.framework import SKIP, SUCCESS, Code, FilterResult, NodeVerdict, Rejection, Status
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.plugins.volume_cache import VolumeCache
from kubelite.scheduler.podinfo import PodInfo

NAME = "VolumeZone"
ERR_REASON_CONFLICT = "node(s) had no available volume zone"
TOPOLOGY_LABELS = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
                   "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
_STATE: StateKey[list[tuple[str, frozenset[str]]]] = StateKey("PreFilter" + NAME)

Obj = dict[str, Any]


class VolumeZone(NodeVerdict):
    name = NAME

    def __init__(self, cache: VolumeCache) -> None:
        self.cache = cache

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> Status:
        """getPVbyPod: the (label, allowed values) pairs of the pod's bound volumes."""
        names = vu.claim_names(pod.obj)
        if not names:
            return SKIP
        constraints: list[tuple[str, frozenset[str]]] = []
        for name in names:
            claim = self.cache.claim(pod.namespace, name)
            if claim is None:
                return Status(Code.UnschedulableAndUnresolvable, (f'persistentvolumeclaim "{name}" not found',),
                              NAME)
            pv_name = (claim.get("spec") or {}).get("volumeName")
            if not pv_name:
                if self.cache.delay_binding(claim):
                    continue
                return Status(Code.UnschedulableAndUnresolvable, ("PersistentVolumeClaim was not found or has no "
                                                                  "volume bound",), NAME)
            pv = self.cache.volume(pv_name)
            if pv is None:
                return Status(Code.UnschedulableAndUnresolvable, (f'persistentvolume "{pv_name}" not found',), NAME)
            labels = pv["metadata"].get("labels") or {}
            constraints += [(k, frozenset(str(labels[k]).split("__"))) for k in TOPOLOGY_LABELS if k in labels]
        state.write(_STATE, constraints)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        constraints: list[tuple[str, frozenset[str]]] | None = state.get(_STATE)
        if not constraints:
            return None
        ok = np.ones(table.n, np.bool_)
        for row in range(table.n):
            labels = table.labels[row]
            # a node without the topology label is not constrained by it (upstream's "node has no zone label")
            ok[row] = all(key not in labels or labels[key] in allowed for key, allowed in constraints)
        return FilterResult(ok, [Rejection(ERR_REASON_CONFLICT, ~ok, Code.UnschedulableAndUnresolvable)])
