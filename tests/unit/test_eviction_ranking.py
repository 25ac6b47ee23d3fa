"""Who is evicted first (L21): the ordering tables of pkg/kubelet/eviction/helpers_test.go, by name."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubelite.agent.eviction.ranking import (
    NODEFS_MEASURED,
    Cmp,
    StatsFunc,
    disk,
    exceed_disk_requests,
    exceed_memory_requests,
    memory,
    ordered_by,
    priority,
    process,
    rank_memory_pressure,
)
from kubelite.agent.eviction.stats import PodStats
from kubelite.agent.eviction.thresholds import EPHEMERAL_STORAGE, INODES
from tests.unit.eviction_pods import (
    DEFAULT_PRIORITY,
    HIGH_PRIORITY,
    LOW_PRIORITY,
    Obj,
    container,
    disk_stats,
    empty_dir,
    inode_stats,
    memory_stats,
    pod,
    resources,
)

Table = tuple[list[tuple[Obj, PodStats | None]], Callable[[StatsFunc], list[Cmp]], list[str]]


def stats_of(table: list[tuple[Obj, PodStats | None]]) -> StatsFunc:
    by_uid = {p["metadata"]["uid"]: s for p, s in table}
    return lambda p: by_uid.get(p["metadata"]["uid"])


def with_disk(name: str, prio: int, requests: dict[str, str], rootfs: str, logs: str, vol: str,
              limits: dict[str, str] | None = None) -> tuple[Obj, PodStats]:
    p = pod(name, prio, [container(name, requests, limits)], [empty_dir()])
    return p, disk_stats(p, rootfs, logs, vol)


def with_inodes(name: str, prio: int, rootfs: str, logs: str, vol: str) -> tuple[Obj, PodStats]:
    p = pod(name, prio, [container(name)], [empty_dir()])
    return p, inode_stats(p, rootfs, logs, vol)


def with_memory(name: str, prio: int, requests: dict[str, str], usage: str,
                limits: dict[str, str] | None = None) -> tuple[Obj, PodStats]:
    p = pod(name, prio, [container(name, requests, limits)])
    return p, memory_stats(p, usage)


def exceeds_request_memory() -> Table:
    return ([with_memory("below-requests", -1, resources(memory="200Mi"), "199Mi"),
             with_memory("exceeds-requests", 1, resources(memory="100Mi"), "101Mi")],
            lambda s: [exceed_memory_requests(s)], ["exceeds-requests", "below-requests"])


def exceeds_request_disk() -> Table:
    below = pod("below-requests", -1, [container("below-requests", resources(disk="200Mi"))])
    exceeds = pod("exceeds-requests", 1, [container("exceeds-requests", resources(disk="100Mi"))])
    return ([(below, disk_stats(below, "100Mi", "99Mi", "0Mi")), (exceeds, disk_stats(exceeds, "90Mi", "11Mi", "0Mi"))],
            lambda s: [exceed_disk_requests(s, NODEFS_MEASURED, EPHEMERAL_STORAGE)],
            ["exceeds-requests", "below-requests"])


def by_priority() -> Table:
    return ([(pod("high-priority", 12534), None), (pod("medium-priority", 1), None), (pod("low-priority", -134), None)],
            lambda s: [priority], ["low-priority", "medium-priority", "high-priority"])


def by_disk() -> Table:
    d = DEFAULT_PRIORITY
    return ([with_disk("best-effort-high", d, {}, "50Mi", "100Mi", "150Mi"),  # 300Mi - 0 = 300Mi
             with_disk("best-effort-low", d, {}, "25Mi", "25Mi", "50Mi"),  # 100Mi - 0 = 100Mi
             with_disk("burstable-high", d, resources(disk="100Mi"), "150Mi", "150Mi", "50Mi"),  # 250Mi
             with_disk("burstable-low", d, resources(disk="100Mi"), "25Mi", "35Mi", "50Mi"),  # 10Mi
             with_disk("guaranteed-high", d, resources(disk="400Mi"), "225Mi", "100Mi", "50Mi"),  # -25Mi
             with_disk("guaranteed-low", d, resources(disk="400Mi"), "25Mi", "45Mi", "50Mi")],  # -280Mi
            lambda s: [disk(s, NODEFS_MEASURED, EPHEMERAL_STORAGE)],
            ["best-effort-high", "burstable-high", "best-effort-low", "burstable-low", "guaranteed-high",
             "guaranteed-low"])


def by_inodes() -> Table:
    d = DEFAULT_PRIORITY
    return ([with_inodes("low", d, "50000", "100000", "50000"), with_inodes("medium", d, "100000", "150000", "50000"),
             with_inodes("high", d, "200000", "150000", "50000")],
            lambda s: [disk(s, NODEFS_MEASURED, INODES)], ["high", "medium", "low"])


def by_priority_disk() -> Table:
    lo, hi = LOW_PRIORITY, HIGH_PRIORITY
    return ([with_disk("below-requests-high-priority-low-usage", hi, resources(disk="1Gi"), "100Mi", "60Mi", "40Mi"),
             with_disk("below-requests-high-priority-high-usage", hi, resources(disk="1Gi"), "250Mi", "500Mi", "50Mi"),
             with_disk("below-requests-low-priority-low-usage", lo, resources(disk="1Gi"), "50Mi", "100Mi", "50Mi"),
             with_disk("below-requests-low-priority-high-usage", lo, resources(disk="1Gi"), "500Mi", "200Mi", "100Mi"),
             with_disk("above-requests-high-priority-low-usage", hi, resources(disk="100Mi"), "90Mi", "50Mi", "10Mi"),
             with_disk("above-requests-high-priority-high-usage", hi, resources(disk="100Mi"), "200Mi", "150Mi",
                       "250Mi"),
             with_disk("above-requests-low-priority-low-usage", lo, {}, "10Mi", "10Mi", "30Mi"),
             with_disk("above-requests-low-priority-high-usage", lo, {}, "200Mi", "100Mi", "200Mi")],
            lambda s: [exceed_disk_requests(s, NODEFS_MEASURED, EPHEMERAL_STORAGE), priority,
                       disk(s, NODEFS_MEASURED, EPHEMERAL_STORAGE)],
            ["above-requests-low-priority-high-usage", "above-requests-low-priority-low-usage",
             "above-requests-high-priority-high-usage", "above-requests-high-priority-low-usage",
             "below-requests-low-priority-high-usage", "below-requests-low-priority-low-usage",
             "below-requests-high-priority-high-usage", "below-requests-high-priority-low-usage"])


def by_priority_inodes() -> Table:
    lo, hi = LOW_PRIORITY, HIGH_PRIORITY
    return ([with_inodes("high-priority-low-usage", hi, "10000", "40000", "100000"),
             with_inodes("high-priority-high-usage", hi, "150000", "150000", "50000"),
             with_inodes("low-priority-low-usage", lo, "60000", "30000", "10000"),
             with_inodes("low-priority-high-usage", lo, "50000", "100000", "250000")],
            lambda s: [priority, disk(s, NODEFS_MEASURED, INODES)],
            ["low-priority-high-usage", "low-priority-low-usage", "high-priority-high-usage",
             "high-priority-low-usage"])


def by_memory() -> Table:
    d = DEFAULT_PRIORITY
    return ([with_memory("best-effort-high", d, {}, "500Mi"), with_memory("best-effort-low", d, {}, "300Mi"),
             with_memory("burstable-high", d, resources(memory="100Mi"), "800Mi", resources(memory="1Gi")),
             with_memory("burstable-low", d, resources(memory="100Mi"), "300Mi", resources(memory="1Gi")),
             with_memory("guaranteed-high", d, resources(memory="1Gi"), "800Mi", resources(memory="1Gi")),
             with_memory("guaranteed-low", d, resources(memory="1Gi"), "200Mi", resources(memory="1Gi"))],
            lambda s: [memory(s)],
            ["burstable-high", "best-effort-high", "best-effort-low", "burstable-low", "guaranteed-high",
             "guaranteed-low"])


def by_priority_memory() -> Table:
    lo, hi = LOW_PRIORITY, HIGH_PRIORITY
    return ([with_memory("below-requests-high-priority-low-usage", hi, resources(memory="1Gi"), "200Mi"),
             with_memory("below-requests-high-priority-high-usage", hi, resources(memory="1Gi"), "800Mi"),
             with_memory("below-requests-low-priority-low-usage", lo, resources(memory="1Gi"), "200Mi"),
             with_memory("below-requests-low-priority-high-usage", lo, resources(memory="1Gi"), "800Mi"),
             with_memory("above-requests-high-priority-low-usage", hi, resources(memory="100Mi"), "150Mi"),
             with_memory("above-requests-high-priority-high-usage", hi, resources(memory="100Mi"), "600Mi"),
             with_memory("above-requests-low-priority-low-usage", lo, {}, "50Mi"),
             with_memory("above-requests-low-priority-high-usage", lo, {}, "500Mi")],
            lambda s: [exceed_memory_requests(s), priority, memory(s)],
            ["above-requests-low-priority-high-usage", "above-requests-low-priority-low-usage",
             "above-requests-high-priority-high-usage", "above-requests-high-priority-low-usage",
             "below-requests-low-priority-high-usage", "below-requests-low-priority-low-usage",
             "below-requests-high-priority-high-usage", "below-requests-high-priority-low-usage"])


def by_priority_process() -> Table:
    lo, hi = LOW_PRIORITY, HIGH_PRIORITY
    rows = [("high-priority-low-usage", hi, 5), ("high-priority-high-usage", hi, 20),
            ("low-priority-low-usage", lo, 6), ("low-priority-high-usage", lo, 20)]
    return ([(p := pod(n, prio), PodStats(p["metadata"]["uid"], process_count=count)) for n, prio, count in rows],
            lambda s: [priority, process(s)],
            ["low-priority-high-usage", "low-priority-low-usage", "high-priority-high-usage",
             "high-priority-low-usage"])


@pytest.mark.parametrize("table", [
    pytest.param(exceeds_request_memory, id="TestOrderedByExceedsRequestMemory"),
    pytest.param(exceeds_request_disk, id="TestOrderedByExceedsRequestDisk"),
    pytest.param(by_priority, id="TestOrderedByPriority"),
    pytest.param(by_disk, id="TestOrderedbyDisk"),
    pytest.param(by_inodes, id="TestOrderedbyInodes"),
    pytest.param(by_priority_disk, id="TestOrderedByPriorityDisk"),
    pytest.param(by_priority_inodes, id="TestOrderedByPriorityInodes"),
    pytest.param(by_memory, id="TestOrderedByMemory"),
    pytest.param(by_priority_memory, id="TestOrderedByPriorityMemory"),
    pytest.param(by_priority_process, id="TestOrderedByPriorityProcess"),
])
def test_ordered_by(table: Callable[[], Table]) -> None:
    rows, comparators, want = table()
    stats = stats_of(rows)
    pods = [p for p, _ in rows]
    ordered_by(*comparators(stats))(pods)
    assert [p["metadata"]["name"] for p in pods] == want


def test_rank_memory_pressure_evicts_pods_without_stats_first() -> None:
    """exceedMemoryRequests: 'prioritize evicting the pod for which no stats were found'."""
    known, stats = with_memory("known", LOW_PRIORITY, {}, "900Mi")
    unknown = pod("unknown", HIGH_PRIORITY)
    pods = [known, unknown]
    rank_memory_pressure(pods, lambda p: stats if p is known else None)
    assert [p["metadata"]["name"] for p in pods] == ["unknown", "known"]


def test_memory_request_counts_init_containers_as_pod_requests() -> None:
    """GetResourceRequestQuantity is the pod's effective request: max(sum of apps, largest init container)."""
    p = pod("init-heavy", DEFAULT_PRIORITY, [container("app", resources(memory="100Mi"))])
    p["spec"]["initContainers"] = [container("init", resources(memory="1Gi"))]
    other, other_stats = with_memory("plain", DEFAULT_PRIORITY, resources(memory="100Mi"), "200Mi")
    table = {"uid-init-heavy": memory_stats(p, "200Mi"), "uid-plain": other_stats}
    pods = [p, other]
    ordered_by(exceed_memory_requests(lambda x: table.get(x["metadata"]["uid"])))(pods)
    assert [x["metadata"]["name"] for x in pods] == ["plain", "init-heavy"]
