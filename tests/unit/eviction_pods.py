"""Pods and pod stats for the eviction tests, built as upstream's helpers_test.go builds them
(newPod, newContainer, newResourceList, newPodMemoryStats, newPodDiskStats, newPodInodeStats)."""

from __future__ import annotations

from typing import Any

from kubelite.agent.eviction.quantity import Quantity
from kubelite.agent.eviction.stats import ContainerStats, FsStats, PodStats

Obj = dict[str, Any]
LOW_PRIORITY, DEFAULT_PRIORITY, HIGH_PRIORITY = -1, 0, 1


def resources(cpu: str = "", memory: str = "", disk: str = "") -> dict[str, str]:
    """newResourceList: only the non-empty values."""
    return {k: v for k, v in (("cpu", cpu), ("memory", memory), ("ephemeral-storage", disk)) if v}


def container(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> Obj:
    return {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}}


def pod(name: str, priority: int = DEFAULT_PRIORITY, containers: list[Obj] | None = None,
        volumes: list[Obj] | None = None, grace: int | None = None) -> Obj:
    spec: Obj = {"priority": priority, "containers": containers if containers is not None else [container(name)],
                 "volumes": volumes or []}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


def empty_dir(name: str = "local-volume") -> Obj:
    return {"name": name, "emptyDir": {}}


def _value(text: str) -> int:
    return Quantity.parse(text).value() if text else 0


def memory_stats(p: Obj, working_set: str) -> PodStats:
    """newPodMemoryStats: every container and the pod use `working_set`."""
    ws = _value(working_set)
    return PodStats(p["metadata"]["uid"], ws,
                    tuple(ContainerStats(c["name"], ws) for c in p["spec"]["containers"]))


def disk_stats(p: Obj, rootfs: str, logs: str, per_volume: str, inodes: bool = False) -> PodStats:
    """newPodDiskStats / newPodInodeStats: rootfs and logs per container, `per_volume` per local volume."""
    def fs(text: str) -> FsStats:
        return FsStats(inodes_used=_value(text)) if inodes else FsStats(used=_value(text))
    containers = tuple(ContainerStats(c["name"], None, fs(rootfs), fs(logs)) for c in p["spec"]["containers"])
    volumes = tuple((v["name"], fs(per_volume)) for v in p["spec"]["volumes"])
    total = _value(rootfs) + _value(logs) + _value(per_volume) * len(volumes)
    return PodStats(p["metadata"]["uid"], None, containers, volumes,
                    FsStats(inodes_used=total) if inodes else FsStats(used=total))


def inode_stats(p: Obj, rootfs: str, logs: str, per_volume: str) -> PodStats:
    return disk_stats(p, rootfs, logs, per_volume, inodes=True)
