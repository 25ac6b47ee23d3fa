"""VolumeRestrictions: mirrors pkg/scheduler/framework/plugins/volumerestrictions.

- ReadWriteOncePod: a claim with that access mode is used by at most one pod in the cluster; a pod
  naming one that a scheduled (or assumed) pod already uses is unschedulable everywhere (PreFilter).
- Disk conflicts: two pods on one node may not mount the same inline disk (GCE PD, AWS EBS, RBD,
  iSCSI) unless both read-only, as upstream's isVolumeConflict (Filter).
ReadWriteOnce across nodes is not a scheduling restriction upstream either: the attach lock
(controllers/attachdetach.py) enforces it, and the agent waits for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kubelite.api import volumes as vu
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import SKIP, SUCCESS, Code, FilterResult, Rejection, Status
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.plugins.volume_cache import VolumeCache
from kubelite.scheduler.podinfo import PodInfo

NAME = "VolumeRestrictions"
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod "
                            "access mode")

Obj = dict[str, Any]


@dataclass(frozen=True)
class Disk:
    """An inline disk volume, as isVolumeConflict compares them."""

    kind: str
    name: str
    read_only: bool
    monitors: frozenset[str] = frozenset()


def _disk(vol: Obj) -> Disk | None:
    if vol.get("gcePersistentDisk"):
        d = vol["gcePersistentDisk"]
        return Disk("gce", str(d.get("pdName")), bool(d.get("readOnly")))
    if vol.get("awsElasticBlockStore"):
        return Disk("aws", str(vol["awsElasticBlockStore"].get("volumeID")), False)
    if vol.get("iscsi"):
        d = vol["iscsi"]
        return Disk("iscsi", str(d.get("iqn")), bool(d.get("readOnly")))
    if vol.get("rbd"):
        d = vol["rbd"]
        return Disk("rbd", f"{d.get('pool', 'rbd')}/{d.get('image')}", bool(d.get("readOnly")),
                    frozenset(d.get("monitors") or []))
    return None


def _conflicts(a: Disk, b: Disk) -> bool:
    """isVolumeConflict: the same disk (RBD: same pool and image with an overlapping monitor), not both
    read-only; an EBS volume conflicts even read-only."""
    if a.kind != b.kind or a.name != b.name:
        return False
    if a.kind == "rbd" and not a.monitors & b.monitors:
        return False
    return a.kind == "aws" or not (a.read_only and b.read_only)


class VolumeRestrictions:
    name = NAME

    def __init__(self, cache: VolumeCache) -> None:
        self.cache = cache

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> Status:
        volumes = pod.spec.get("volumes") or []
        if not volumes:
            return SKIP
        rwop = set()
        for name in vu.claim_names(pod.obj):
            claim = self.cache.claim(pod.namespace, name)
            if claim is None:
                return Status(Code.UnschedulableAndUnresolvable, (f'persistentvolumeclaim "{name}" not found',),
                              NAME)
            if "ReadWriteOncePod" in ((claim.get("spec") or {}).get("accessModes") or []):
                rwop.add(name)
        if rwop:
            for pods in table.pods:
                for other in pods.values():
                    if other.uid != pod.uid and other.namespace == pod.namespace and \
                            rwop.intersection(vu.claim_names(other.obj)):
                        return Status(Code.UnschedulableAndUnresolvable, (ERR_REASON_RWOP_CONFLICT,), NAME)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        disks = [d for d in map(_disk, pod.spec.get("volumes") or []) if d is not None]
        if not disks:
            return None
        ok = np.ones(table.n, np.bool_)
        for row in range(table.n):
            ok[row] = not any(_conflicts(d, e) for other in table.pods[row].values()
                              for e in map(_disk, other.spec.get("volumes") or []) if e is not None
                              for d in disks)
        return FilterResult(ok, [Rejection(ERR_REASON_DISK_CONFLICT, ~ok)])

    # PreFilterExtensions: preemption's dry runs see disks leave and join a node through the table copy
    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, table: NodeTable, row: int) -> None:
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: PodInfo, table: NodeTable, row: int) -> None:
        return None

    def filter_node(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> bool:
        res = self.filter(state, pod, table)
        return res is None or bool(res.passed[row])
