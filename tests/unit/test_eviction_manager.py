"""The eviction manager's control loop on a FakeClock (L21): eviction_manager_test.go by name, plus
soft grace held continuously, the transition period, one pod per interval and ExceededGracePeriod."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from kubelite.agent.eviction.manager import EXCEEDED_GRACE_MESSAGE, EvictionManager, kill_timeout
from kubelite.agent.eviction.quantity import Quantity
from kubelite.agent.eviction.stats import FsStats, NodeStats, PodStats, Summary
from kubelite.agent.eviction.thresholds import (
    DISK_PRESSURE,
    MEMORY_AVAILABLE,
    MEMORY_PRESSURE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    PID_PRESSURE,
    EvictionConfig,
    Threshold,
    ThresholdValue,
)
from kubelite.clock import FakeClock
from tests.unit.eviction_pods import (
    DEFAULT_PRIORITY,
    HIGH_PRIORITY,
    LOW_PRIORITY,
    Obj,
    container,
    disk_stats,
    memory_stats,
    pod,
    resources,
)


def b(text: str) -> int:
    return Quantity.parse(text).value()


def threshold(signal: str, value: str, grace: float = 0.0, min_reclaim: str | None = None) -> Threshold:
    return Threshold(signal, ThresholdValue(quantity=Quantity.parse(value)), grace,
                     ThresholdValue(quantity=Quantity.parse(min_reclaim)) if min_reclaim else None)


@dataclass
class FakeStats:
    """makeMemoryStats / makeDiskStats: the node's available memory or nodefs bytes, and fixed pod stats."""
    pods: Sequence[PodStats]
    memory: str = "16Gi"
    nodefs: str = "16Gi"
    inodes_free: str = "3Mi"
    processes: int = 300  # of 2000

    async def summary(self, pods: Sequence[Obj]) -> Summary:
        mem, fs = b(self.memory), b(self.nodefs)
        return Summary(NodeStats(memory_available=mem, memory_working_set=mem,
                                 fs=FsStats(available=fs, capacity=2 * fs, inodes_free=b(self.inodes_free),
                                            inodes=b("4Mi")), max_pid=2000, running_processes=self.processes),
                       self.pods)


@dataclass
class FakeKiller:
    """mockPodKiller: records each eviction; `stop_seconds` of fake time before the pod is stopped."""
    clock: FakeClock
    pods: list[Obj]
    evicted: list[tuple[str, int, str, str]] = field(default_factory=list)
    stop_seconds: float = 0.0
    remove_evicted: bool = False
    stopped: int = 0

    def active_pods(self) -> list[Obj]:
        return list(self.pods)

    async def evict(self, pod: Obj, grace_seconds: int, reason: str, message: str) -> None:
        self.evicted.append((pod["metadata"]["name"], grace_seconds, reason, message))
        if self.remove_evicted:
            self.pods.remove(pod)
        if self.stop_seconds:
            await self.clock.sleep(self.stop_seconds)
        self.stopped += 1

    def cleaned_up(self, pod: Obj) -> bool:
        return True

    def last(self) -> tuple[str, int] | None:
        return (self.evicted[-1][0], self.evicted[-1][1]) if self.evicted else None


@dataclass
class FakeNode:
    reported: list[frozenset[str]] = field(default_factory=list)
    pod_events: list[tuple[str, str, str]] = field(default_factory=list)
    node_events: list[tuple[str, str, str]] = field(default_factory=list)

    async def set_pressure(self, conditions: frozenset[str]) -> None:
        self.reported.append(conditions)

    def pod_event(self, pod: Obj, reason: str, message: str) -> None:
        self.pod_events.append((pod["metadata"]["name"], reason, message))

    def node_event(self, reason: str, message: str, kind: str) -> None:
        self.node_events.append((reason, message, kind))


@dataclass
class Rig:
    clock: FakeClock
    stats: FakeStats
    killer: FakeKiller
    node: FakeNode
    manager: EvictionManager

    async def step(self, seconds: float) -> Obj | None:
        """fakeClock.Step, then synchronize."""
        await self.clock.advance(seconds)
        return await self.manager.synchronize()


def rig(pods: list[tuple[Obj, PodStats]], thresholds: list[Threshold], max_grace: int = 5,
        transition: float = 300.0) -> Rig:
    clock = FakeClock()
    stats = FakeStats([s for _, s in pods])
    killer = FakeKiller(clock, [p for p, _ in pods])
    node = FakeNode()
    manager = EvictionManager(EvictionConfig(thresholds, transition, max_grace), clock, stats, killer, node)
    return Rig(clock, stats, killer, node, manager)


def memory_pods() -> list[tuple[Obj, PodStats]]:
    """TestMemoryPressure's podsToMake."""
    rows = [("guaranteed-low-priority-high-usage", LOW_PRIORITY, resources("100m", "1Gi"), resources("100m", "1Gi"),
             "900Mi"),
            ("burstable-below-requests", DEFAULT_PRIORITY, resources("100m", "100Mi"), resources("200m", "1Gi"),
             "50Mi"),
            ("burstable-above-requests", DEFAULT_PRIORITY, resources("100m", "100Mi"), resources("200m", "1Gi"),
             "400Mi"),
            ("best-effort-high-priority-high-usage", HIGH_PRIORITY, {}, {}, "400Mi"),
            ("best-effort-low-priority-low-usage", LOW_PRIORITY, {}, {}, "100Mi")]
    out = []
    for name, prio, req, lim, usage in rows:
        p = pod(name, prio, [container(name, req, lim)])
        out.append((p, memory_stats(p, usage)))
    return out


BEST_EFFORT_TO_ADMIT = pod("best-admit")
BURSTABLE_TO_ADMIT = pod("burst-admit", containers=[container("burst-admit", resources("100m", "100Mi"),
                                                              resources("200m", "200Mi"))])


def admitted(m: EvictionManager) -> list[bool]:
    return [m.admit(p) is None for p in (BEST_EFFORT_TO_ADMIT, BURSTABLE_TO_ADMIT)]


async def test_memory_pressure() -> None:
    """TestMemoryPressure: soft threshold after its grace (grace = evictionMaxPodGracePeriod), hard at once
    (grace 0), admission of BestEffort pods refused under pressure, pressure kept for the transition period."""
    r = rig(memory_pods(), [threshold(MEMORY_AVAILABLE, "1Gi"), threshold(MEMORY_AVAILABLE, "2Gi", 120.0)])
    r.stats.memory = "2Gi"
    assert await r.manager.synchronize() is None
    assert not r.manager.is_under_memory_pressure() and admitted(r.manager) == [True, True]

    r.stats.memory = "1500Mi"  # induce soft threshold
    await r.step(60)
    assert r.manager.is_under_memory_pressure(), "soft threshold met: pressure before its grace period"
    assert r.killer.last() is None, "no pod killed before the soft grace period"

    await r.step(180)  # past the grace period
    assert r.manager.is_under_memory_pressure()
    assert r.killer.last() == ("best-effort-low-priority-low-usage", 5)
    r.killer.evicted.clear()

    r.stats.memory = "3Gi"  # remove memory pressure
    await r.step(1200)
    assert not r.manager.is_under_memory_pressure()

    r.stats.memory = "500Mi"  # induce memory pressure!
    await r.step(60)
    assert r.manager.is_under_memory_pressure()
    assert r.killer.last() == ("best-effort-low-priority-low-usage", 0)
    assert admitted(r.manager) == [False, True]

    r.stats.memory = "2Gi"  # reduce memory pressure
    r.killer.evicted.clear()
    await r.step(60)
    assert r.manager.is_under_memory_pressure(), "transition period not yet met"
    assert r.killer.last() is None
    assert admitted(r.manager) == [False, True]

    await r.step(300)  # past the transition period
    assert not r.manager.is_under_memory_pressure()
    assert r.killer.last() is None
    assert admitted(r.manager) == [True, True]
    assert r.node.reported == [frozenset(), {MEMORY_PRESSURE}, frozenset(), {MEMORY_PRESSURE}, frozenset()]


def disk_pods(inodes: bool = False) -> list[tuple[Obj, PodStats]]:
    """TestDiskPressureNodeFs / TestInodePressureFsInodes 'eviction due to disk pressure; no image fs' podToMakes
    (no volumes: the per-local-volume usage of upstream's table counts for nothing, as there)."""
    rows = [("low-priority-high-usage", LOW_PRIORITY, resources("100m", "1Gi"), ("900Mi", "", "")),
            ("below-requests", DEFAULT_PRIORITY, resources("100m", "100Mi"), ("", "50Mi", "")),
            ("above-requests", DEFAULT_PRIORITY, resources("100m", "100Mi"), ("400Mi", "", "")),
            ("high-priority-high-usage", HIGH_PRIORITY, {}, ("", "", "400Mi")),
            ("low-priority-low-usage", LOW_PRIORITY, {}, ("100Mi", "", ""))]
    if inodes:  # TestInodePressureFsInodes: the same amounts, all as rootfs inodes
        rows = [(n, pr, rq, (u[0] or u[1] or u[2], "", "")) for n, pr, rq, u in rows]
    out = []
    for name, prio, req, (rootfs, logs, vol) in rows:
        p = pod(name, prio, [container(name, req, req)])
        out.append((p, disk_stats(p, rootfs, logs, vol, inodes=inodes)))
    return out


@pytest.mark.parametrize(("signal", "field", "normal", "soft", "hard", "inodes"), [
    pytest.param(NODEFS_AVAILABLE, "nodefs", "16Gi", "1.5Gi", "750Mi", False,
                 id="TestDiskPressureNodeFs/eviction due to disk pressure; no image fs"),
    pytest.param(NODEFS_INODES_FREE, "inodes_free", "3Mi", "1.5Mi", "0.5Mi", True,
                 id="TestInodePressureFsInodes/eviction due to disk pressure; no image fs"),
])
async def test_disk_pressure(signal: str, field: str, normal: str, soft: str, hard: str, inodes: bool) -> None:
    """Soft threshold after its grace (evictionMaxPodGracePeriod), hard at once, every pod refused under
    DiskPressure, pressure kept for the transition period."""
    unit = "Mi" if inodes else "Gi"
    r = rig(disk_pods(inodes), [threshold(signal, f"1{unit}"), threshold(signal, f"2{unit}", 120.0)])
    setattr(r.stats, field, normal)
    to_admit = pod("pod-to-admit")
    assert await r.manager.synchronize() is None
    assert not r.manager.is_under_disk_pressure() and r.manager.admit(to_admit) is None

    setattr(r.stats, field, soft)
    await r.step(60)
    assert r.manager.is_under_disk_pressure() and r.killer.last() is None

    await r.step(180)
    assert r.killer.last() == ("low-priority-high-usage", 5)
    r.killer.evicted.clear()

    setattr(r.stats, field, normal)
    await r.step(1200)
    assert not r.manager.is_under_disk_pressure()

    setattr(r.stats, field, hard)
    await r.step(60)
    assert r.manager.is_under_disk_pressure()
    assert r.killer.last() == ("low-priority-high-usage", 0)
    assert r.manager.admit(to_admit) == ("Evicted", "The node had condition: [DiskPressure]. ")

    setattr(r.stats, field, normal)
    r.killer.evicted.clear()
    await r.step(60)
    assert r.manager.is_under_disk_pressure() and r.killer.last() is None
    assert r.manager.admit(to_admit) is not None

    await r.step(300)
    assert not r.manager.is_under_disk_pressure() and r.manager.admit(to_admit) is None
    assert r.node.reported[-1] == frozenset() and {DISK_PRESSURE} in r.node.reported


async def test_pid_pressure() -> None:
    """TestPIDPressure/eviction due to pid pressure: lowest priority, then most processes."""
    rows = [("high-priority-high-usage", HIGH_PRIORITY, 900), ("default-priority-low-usage", DEFAULT_PRIORITY, 100),
            ("default-priority-medium-usage", DEFAULT_PRIORITY, 400), ("low-priority-high-usage", LOW_PRIORITY, 600),
            ("low-priority-low-usage", LOW_PRIORITY, 50)]
    pods = [(p := pod(n, prio), PodStats(p["metadata"]["uid"], process_count=count)) for n, prio, count in rows]
    r = rig(pods, [threshold(PID_AVAILABLE, "1200"), threshold(PID_AVAILABLE, "1500", 120.0)])
    assert await r.manager.synchronize() is None and r.manager.conditions == []

    r.stats.processes = 700  # induce soft threshold: 1300 available
    await r.step(60)
    assert r.manager.conditions == [PID_PRESSURE] and r.killer.last() is None
    await r.step(180)
    assert r.killer.last() == ("low-priority-high-usage", 5)
    assert r.killer.evicted[-1][3] == "The node was low on resource: pids. Threshold quantity: 1500, available: 1300. "
    r.killer.evicted.clear()

    r.stats.processes = 300
    await r.step(1200)
    assert r.manager.conditions == []

    r.stats.processes = 1200  # hard threshold: 800 available
    await r.step(60)
    assert r.killer.last() == ("low-priority-high-usage", 0)
    assert r.manager.admit(pod("pod-to-admit")) == ("Evicted", "The node had condition: [PIDPressure]. ")


async def test_min_reclaim() -> None:
    """TestMinReclaim: once met, a threshold holds until available exceeds it by the minimum reclaim."""
    r = rig(memory_pods(), [threshold(MEMORY_AVAILABLE, "1Gi", min_reclaim="500Mi")])
    r.stats.memory = "2Gi"
    assert await r.manager.synchronize() is None

    r.stats.memory = "500Mi"
    await r.step(60)
    assert r.killer.last() == ("best-effort-low-priority-low-usage", 0)
    r.killer.evicted.clear()

    r.stats.memory = "1.2Gi"  # above the threshold, below threshold + min reclaim
    await r.step(60)
    assert r.manager.is_under_memory_pressure()
    assert r.killer.last() == ("best-effort-low-priority-low-usage", 0)
    r.killer.evicted.clear()

    r.stats.memory = "2Gi"  # reclaimed enough
    await r.step(60)
    assert r.manager.is_under_memory_pressure(), "transition period not yet met"
    assert r.killer.last() is None

    await r.step(300)
    assert not r.manager.is_under_memory_pressure() and r.killer.last() is None


async def test_soft_threshold_needs_its_grace_period_observed_continuously() -> None:
    """A soft threshold that stops being met starts its grace period over when met again."""
    r = rig(memory_pods(), [threshold(MEMORY_AVAILABLE, "2Gi", 120.0)], max_grace=30)
    r.stats.memory = "1500Mi"
    await r.manager.synchronize()  # first observed at 0
    r.stats.memory = "3Gi"
    await r.step(60)  # no longer met at 60
    r.stats.memory = "1500Mi"
    await r.step(10)  # met again at 70: the grace period restarts
    await r.step(110)  # 180 s after the first observation, but 110 s since it was met again
    assert r.killer.last() is None
    await r.step(10)  # 120 s of continuous pressure
    assert r.killer.last() == ("best-effort-low-priority-low-usage", 30)


@pytest.mark.parametrize(("pod_grace", "max_grace", "want"), [
    pytest.param(None, 5, 5, id="default pod grace (30 s) above the maximum"),
    pytest.param(3, 5, 3, id="pod grace below the maximum"),
    pytest.param(60, 0, 0, id="evictionMaxPodGracePeriod 0 stops at once"),
])
async def test_soft_eviction_grace_is_the_smaller_of_pod_grace_and_max(pod_grace: int | None, max_grace: int,
                                                                        want: int) -> None:
    p = pod("only", grace=pod_grace)
    r = rig([(p, memory_stats(p, "1Gi"))], [threshold(MEMORY_AVAILABLE, "2Gi", 60.0)], max_grace=max_grace)
    r.stats.memory = "1Gi"
    await r.manager.synchronize()
    await r.step(60)
    assert r.killer.last() == ("only", want)


async def test_evicted_pod_is_failed_with_reason_evicted_and_upstream_message() -> None:
    p = pod("hog", containers=[container("x", resources(memory="100Mi"))])
    r = rig([(p, memory_stats(p, "500Mi"))], [threshold(MEMORY_AVAILABLE, "100Mi")])
    r.stats.memory = "50Mi"
    assert await r.manager.synchronize() is p
    message = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
               "Container x was using 500Mi, request is 100Mi, has larger consumption of memory. ")
    assert r.killer.evicted == [("hog", 0, "Evicted", message)]
    assert r.node.node_events == [("EvictionThresholdMet", "Attempting to reclaim memory", "Warning")]


async def test_one_pod_per_monitoring_interval() -> None:
    """The loop evicts at most one pod per 10 s interval while the pressure lasts."""
    pods = memory_pods()
    r = rig(pods, [threshold(MEMORY_AVAILABLE, "1Gi")])
    r.killer.remove_evicted = True  # an evicted pod is no longer active
    r.stats.memory = "500Mi"
    task = asyncio.create_task(r.manager.run())
    try:
        await r.clock.advance(0)
        assert len(r.killer.evicted) == 1
        await r.clock.advance(9.5)
        assert len(r.killer.evicted) == 1
        await r.clock.advance(0.5)
        assert len(r.killer.evicted) == 2
        await r.clock.advance(20)
        # ranked: over requests (low, default, high priority), then within requests
        assert [e[0] for e in r.killer.evicted] == ["best-effort-low-priority-low-usage", "burstable-above-requests",
                                                    "best-effort-high-priority-high-usage",
                                                    "guaranteed-low-priority-high-usage"]
    finally:
        task.cancel()


@pytest.mark.parametrize(("grace", "stop_seconds", "overrun"), [
    pytest.param(0, 12.0, True, id="hard eviction still stopping after 10 s"),
    pytest.param(0, 9.0, False, id="hard eviction stopped within 10 s"),
    pytest.param(30, 44.0, False, id="soft eviction within 1.5 x grace"),
    pytest.param(30, 46.0, True, id="soft eviction past 1.5 x grace"),
])
async def test_exceeded_grace_period(grace: int, stop_seconds: float, overrun: bool) -> None:
    """killPodNow: wait max(1.5 x grace, 10 s) for the pod to stop, else an ExceededGracePeriod event; the
    stop itself goes on."""
    p = pod("slow", grace=grace)
    soft = grace > 0
    r = rig([(p, memory_stats(p, "1Gi"))], [threshold(MEMORY_AVAILABLE, "2Gi", 60.0 if soft else 0.0)], max_grace=30)
    r.killer.stop_seconds = stop_seconds
    r.stats.memory = "1Gi"
    if soft:  # first observed now, met its grace period a minute later
        assert await r.manager.synchronize() is None
        await r.clock.advance(60)
    sync = asyncio.create_task(r.manager.synchronize())
    await r.clock.advance(0)  # the eviction starts now
    await r.clock.advance(kill_timeout(grace) + 1)
    assert await sync is p
    events = [e for e in r.node.pod_events if e[1] == "ExceededGracePeriod"]
    assert events == ([("slow", "ExceededGracePeriod", EXCEEDED_GRACE_MESSAGE)] if overrun else [])
    await r.clock.advance(60)
    assert r.killer.stopped == 1


async def test_critical_pods_are_not_evicted() -> None:
    critical = pod("critical", priority=2_000_000_000)
    other = pod("other", HIGH_PRIORITY)
    r = rig([(critical, memory_stats(critical, "1Gi")), (other, memory_stats(other, "10Mi"))],
            [threshold(MEMORY_AVAILABLE, "1Gi")])
    r.stats.memory = "100Mi"
    assert await r.manager.synchronize() is other
    assert [e[0] for e in r.killer.evicted] == ["other"]


async def test_emptydir_over_its_size_limit_is_evicted_without_node_pressure() -> None:
    p = pod("cache", volumes=[{"name": "scratch", "emptyDir": {"sizeLimit": "10Mi"}}])
    r = rig([(p, disk_stats(p, "0", "0", "20Mi"))], [threshold(NODEFS_AVAILABLE, "1Gi")])
    assert await r.manager.synchronize() is p
    assert r.killer.evicted == [("cache", 0, "Evicted", 'Usage of EmptyDir volume "scratch" exceeds the limit '
                                                        '"10Mi". ')]
    assert not r.manager.is_under_disk_pressure()


async def test_a_failed_report_is_retried_next_round() -> None:
    class Flaky(FakeNode):
        fail = True

        async def set_pressure(self, conditions: frozenset[str]) -> None:
            if self.fail:
                self.fail = False
                raise ConnectionError("API server away")
            await super().set_pressure(conditions)

    r = rig(memory_pods(), [threshold(MEMORY_AVAILABLE, "1Gi")])
    r.manager.node = r.node = Flaky()
    await r.manager.synchronize()
    assert r.node.reported == []
    await r.step(10)
    assert r.node.reported == [frozenset()]
