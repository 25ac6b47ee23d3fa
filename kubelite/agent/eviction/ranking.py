"""Which pod goes first: kubelet's eviction ranking (helpers.go orderedBy / rank*Pressure).

Memory pressure: pods whose working set exceeds their memory request first, then lower
priority first, then the largest usage above the request. Disk pressure: the same with the
pod's disk usage (rootfs, logs and local volumes) or inodes. PID pressure: lower priority,
then more processes. A pod without stats goes first.
The comparators keep upstream's names so the ported test tables read the same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from kubelite.agent.eviction.stats import FsStats, PodStats
from kubelite.agent.eviction.thresholds import EPHEMERAL_STORAGE, INODES, MEMORY
from kubelite.api.podresources import pod_requests

Obj = dict[str, Any]
StatsFunc = Callable[[Obj], PodStats | None]
Cmp = Callable[[Obj, Obj], int]
RankFunc = Callable[[list[Obj], StatsFunc], None]

FS_ROOT, FS_LOGS, FS_LOCAL_VOLUME = "root", "logs", "localVolumeSource"
NODEFS_MEASURED = (FS_ROOT, FS_LOGS, FS_LOCAL_VOLUME)  # no dedicated imagefs: every fs stat counts


def pod_priority(pod: Obj) -> int:
    """corev1helpers.PodPriority."""
    value = (pod.get("spec") or {}).get("priority")
    return int(value) if value is not None else 0


def request(pod: Obj, resource: str) -> int:
    """GetResourceRequestQuantity: the pod's effective request (init containers, sidecars, overhead)."""
    return pod_requests(pod.get("spec") or {}).get(resource, 0)


def cmp_bool(a: bool, b: bool) -> int:
    """cmpBool: true before false."""
    if a == b:
        return 0
    return -1 if not b else 1


def ordered_by(*cmps: Cmp) -> Callable[[list[Obj]], None]:
    """orderedBy(...).Sort: sort in place, each comparator breaking the previous one's ties."""
    def compare(p1: Obj, p2: Obj) -> int:
        for c in cmps:
            result = c(p1, p2)
            if result:
                return result
        return 0

    def sort(pods: list[Obj]) -> None:
        pods.sort(key=functools.cmp_to_key(compare))
    return sort


def priority(p1: Obj, p2: Obj) -> int:
    a, b = pod_priority(p1), pod_priority(p2)
    return 0 if a == b else (1 if a > b else -1)


def memory_usage(stats: PodStats) -> int:
    return stats.memory_working_set or 0


def _with_stats(stats: StatsFunc, measure: Callable[[Obj, PodStats], int], p1: Obj, p2: Obj) -> tuple[int, int] | int:
    """Both pods' measure, or the comparison result when one has no stats (that one first)."""
    s1, s2 = stats(p1), stats(p2)
    if s1 is None or s2 is None:
        return cmp_bool(s1 is None, s2 is None)
    return measure(p1, s1), measure(p2, s2)


def exceed_memory_requests(stats: StatsFunc) -> Cmp:
    def cmp(p1: Obj, p2: Obj) -> int:
        got = _with_stats(stats, lambda p, s: memory_usage(s), p1, p2)
        if isinstance(got, int):
            return got
        return cmp_bool(got[0] > request(p1, MEMORY), got[1] > request(p2, MEMORY))
    return cmp


def memory(stats: StatsFunc) -> Cmp:
    def cmp(p1: Obj, p2: Obj) -> int:
        got = _with_stats(stats, lambda p, s: memory_usage(s) - request(p, MEMORY), p1, p2)
        if isinstance(got, int):
            return got
        return (got[1] > got[0]) - (got[1] < got[0])
    return cmp


def _fs(fs: FsStats | None, resource: str) -> int:
    if fs is None:
        return 0
    return (fs.inodes_used if resource == INODES else fs.used) or 0


def pod_disk_usage(stats: PodStats, pod: Obj, measured: Sequence[str], resource: str) -> int:
    """podDiskUsage: containers' rootfs and logs, plus the pod's local volumes (emptyDir, hostPath)."""
    total = 0
    for c in stats.containers:
        if FS_ROOT in measured:
            total += _fs(c.rootfs, resource)
        if FS_LOGS in measured:
            total += _fs(c.logs, resource)
    if FS_LOCAL_VOLUME in measured:
        local = {v.get("name") for v in (pod.get("spec") or {}).get("volumes") or []
                 if "emptyDir" in v or "hostPath" in v}
        total += sum(_fs(fs, resource) for name, fs in stats.volumes if name in local)
    return total


def exceed_disk_requests(stats: StatsFunc, measured: Sequence[str], resource: str) -> Cmp:
    def cmp(p1: Obj, p2: Obj) -> int:
        got = _with_stats(stats, lambda p, s: pod_disk_usage(s, p, measured, resource), p1, p2)
        if isinstance(got, int):
            return got
        return cmp_bool(got[0] > request(p1, resource), got[1] > request(p2, resource))
    return cmp


def disk(stats: StatsFunc, measured: Sequence[str], resource: str) -> Cmp:
    def cmp(p1: Obj, p2: Obj) -> int:
        # upstream subtracts the ephemeral-storage request whatever the resource (inodes included)
        got = _with_stats(stats, lambda p, s: pod_disk_usage(s, p, measured, resource)
                          - request(p, EPHEMERAL_STORAGE), p1, p2)
        if isinstance(got, int):
            return got
        return (got[1] > got[0]) - (got[1] < got[0])
    return cmp


def process(stats: StatsFunc) -> Cmp:
    """The larger number of processes first."""
    def cmp(p1: Obj, p2: Obj) -> int:
        got = _with_stats(stats, lambda p, s: s.process_count or 0, p1, p2)
        if isinstance(got, int):
            return got
        return got[1] - got[0]
    return cmp


def rank_memory_pressure(pods: list[Obj], stats: StatsFunc) -> None:
    ordered_by(exceed_memory_requests(stats), priority, memory(stats))(pods)


def rank_pid_pressure(pods: list[Obj], stats: StatsFunc) -> None:
    ordered_by(priority, process(stats))(pods)


def rank_disk_pressure_func(measured: Sequence[str], resource: str) -> RankFunc:
    def rank(pods: list[Obj], stats: StatsFunc) -> None:
        ordered_by(exceed_disk_requests(stats, measured, resource), priority, disk(stats, measured, resource))(pods)
    return rank


RANK_NODEFS = rank_disk_pressure_func(NODEFS_MEASURED, EPHEMERAL_STORAGE)
RANK_NODEFS_INODES = rank_disk_pressure_func(NODEFS_MEASURED, INODES)
