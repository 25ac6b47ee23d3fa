"""VolumeZone: mirrors pkg/scheduler/framework/plugins/volumezone.

A pod's bound volumes labelled with a zone or region (topology.kubernetes.io/zone|region and the
deprecated failure-domain.beta.kubernetes.io ones) admit only nodes with a matching label; a
label value may list several zones separated by "__" (volumehelpers.LabelZonesToSet), and a
volume's beta label also matches the node's GA one. A node without any topology label is not in
a zone-aware cluster and passes. Unbound claims of a delayed-binding class are skipped:
VolumeBinding checks their volumes' node affinity.
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
_GA = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
       "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}
_STATE: StateKey[list[tuple[str, frozenset[str]]]] = StateKey("PreFilter" + NAME)

Obj = dict[str, Any]


def _value(labels: dict[str, str], key: str) -> str | None:
    """The node's value for a volume's topology key; a volume's beta key also matches the node's GA label."""
    if key in labels:
        return labels[key]
    return labels.get(_GA.get(key, ""))


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
                cls = vu.storage_class(claim)
                if not cls:
                    return Status(Code.UnschedulableAndUnresolvable,
                                  ("PersistentVolumeClaim had no pv name and storageClass name",), NAME)
                sc = self.cache.storage_class(cls)
                if sc is None:
                    return Status(Code.UnschedulableAndUnresolvable,
                                  (f'storageclasses.storage.k8s.io "{cls}" not found',), NAME)
                if sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                    continue  # the volume is chosen with the node: VolumeBinding checks its affinity
                return Status(Code.UnschedulableAndUnresolvable,
                              (f'VolumeBindingMode not set for StorageClass "{cls}"',), NAME)
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
            if not any(k in labels for k in TOPOLOGY_LABELS):
                continue  # no topology labels on the node: not a zone-aware cluster
            ok[row] = all(_value(labels, key) in allowed for key, allowed in constraints)
        return FilterResult(ok, [Rejection(ERR_REASON_CONFLICT, ~ok, Code.UnschedulableAndUnresolvable)])
