"""Threshold bookkeeping, observations and messages (L21): helpers_test.go tables by name."""

from __future__ import annotations

import pytest

from kubelite.agent.eviction.local_storage import local_storage_violation
from kubelite.agent.eviction.quantity import DECIMAL_SI, Quantity
from kubelite.agent.eviction.signals import (
    Observation,
    Observations,
    by_eviction_priority,
    eviction_message,
    make_signal_observations,
    node_conditions,
    node_conditions_last_observed_at,
    node_conditions_observed_since,
    thresholds_first_observed_at,
    thresholds_met,
    thresholds_met_grace_period,
    thresholds_updated_stats,
)
from kubelite.agent.eviction.stats import ContainerStats, FsStats, NodeStats, PodStats, Summary
from kubelite.agent.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    MEMORY_AVAILABLE,
    MEMORY_PRESSURE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    Threshold,
    ThresholdValue,
    float32,
)
from tests.unit.eviction_pods import container, disk_stats, empty_dir, pod, resources


def qty(text: str) -> Quantity:
    return Quantity.parse(text)


def tq(text: str) -> ThresholdValue:
    return ThresholdValue(quantity=qty(text))


def tp(value: float) -> ThresholdValue:
    return ThresholdValue(percentage=float32(value))


HARD = Threshold(MEMORY_AVAILABLE, tq("1Gi"), 0, tq("500Mi"))
SPECIFIC = [Threshold(MEMORY_AVAILABLE, tp(0.2), 0, tp(0.05)), Threshold(NODEFS_AVAILABLE, tp(0.3))]


def mem(available: str, capacity: str | None = None) -> Observations:
    return {MEMORY_AVAILABLE: Observation(qty(available), qty(capacity) if capacity else None)}


def both(memory: str, nodefs: str) -> Observations:
    return {MEMORY_AVAILABLE: Observation(qty(memory), qty("1000Mi")),
            NODEFS_AVAILABLE: Observation(qty(nodefs), qty("1000Gi"))}


@pytest.mark.parametrize(("enforce", "thresholds", "observations", "want"), [
    pytest.param(False, [], {}, [], id="TestThresholdsMet/empty"),
    pytest.param(False, [HARD], mem("500Mi"), [HARD], id="TestThresholdsMet/threshold-met-memory"),
    pytest.param(False, [HARD], mem("2Gi"), [], id="TestThresholdsMet/threshold-not-met"),
    pytest.param(True, [HARD], mem("1.05Gi"), [HARD], id="TestThresholdsMet/threshold-met-with-min-reclaim"),
    pytest.param(True, [HARD], mem("2Gi"), [], id="TestThresholdsMet/threshold-not-met-with-min-reclaim"),
    pytest.param(False, SPECIFIC, both("100Mi", "100Gi"), SPECIFIC, id="TestPercentageThresholdsMet/BothMet"),
    pytest.param(False, SPECIFIC, both("300Mi", "400Gi"), [], id="TestPercentageThresholdsMet/NoneMet"),
    pytest.param(False, SPECIFIC, both("300Mi", "100Gi"), SPECIFIC[1:], id="TestPercentageThresholdsMet/DiskMet"),
    pytest.param(False, SPECIFIC, both("100Mi", "400Gi"), SPECIFIC[:1], id="TestPercentageThresholdsMet/MemoryMet"),
    pytest.param(True, SPECIFIC, mem("225Mi", "1000Mi"), SPECIFIC[:1],
                 id="TestPercentageThresholdsMet/MemoryMetWithMinReclaim"),
    pytest.param(True, SPECIFIC, mem("300Mi", "1000Mi"), [],
                 id="TestPercentageThresholdsMet/MemoryNotMetWithMinReclaim"),
])
def test_thresholds_met(enforce: bool, thresholds: list[Threshold], observations: Observations,
                        want: list[Threshold]) -> None:
    assert thresholds_met(thresholds, observations, enforce) == want


UPDATED = Threshold(MEMORY_AVAILABLE, tq("1Gi"))


@pytest.mark.parametrize(("observed", "last", "want"), [
    pytest.param(None, None, [], id="empty"),
    pytest.param(0.0, None, [UPDATED], id="no-time"),
    pytest.param(100.0, None, [UPDATED], id="no-last-observation"),
    pytest.param(100.0, 160.0, [], id="time-machine"),
    pytest.param(100.0, 100.0, [], id="same-observation"),
    pytest.param(160.0, 100.0, [UPDATED], id="new-observation"),
])
def test_thresholds_updated_stats(observed: float | None, last: float | None, want: list[Threshold]) -> None:
    """TestThresholdsUpdatedStats."""
    thresholds = [] if observed is None else [UPDATED]
    obs = {} if observed is None else {MEMORY_AVAILABLE: Observation(qty("0"), None, observed)}
    prev = {} if last is None else {MEMORY_AVAILABLE: Observation(qty("0"), None, last)}
    assert thresholds_updated_stats(thresholds, obs, prev) == want


def test_thresholds_first_observed_at() -> None:
    """TestThresholdsFirstObservedAt: empty, no-previous-observation, previous-observation."""
    t = Threshold(MEMORY_AVAILABLE, tq("1Gi"))
    assert thresholds_first_observed_at([], {}, 1000.0) == {}
    assert thresholds_first_observed_at([t], {}, 1000.0) == {t: 1000.0}
    assert thresholds_first_observed_at([t], {t: 940.0}, 1000.0) == {t: 940.0}


SOFT = Threshold(MEMORY_AVAILABLE, tq("2Gi"), 60.0)
HARD_ONLY = Threshold(MEMORY_AVAILABLE, tq("1Gi"))


@pytest.mark.parametrize(("observed_at", "want"), [
    pytest.param({}, [], id="empty"),
    pytest.param({HARD_ONLY: 1000.0}, [HARD_ONLY], id="hard-threshold-met"),
    pytest.param({SOFT: 1000.0}, [], id="soft-threshold-not-met"),
    pytest.param({SOFT: 880.0}, [SOFT], id="soft-threshold-met"),
])
def test_thresholds_met_grace_period(observed_at: dict[Threshold, float], want: list[Threshold]) -> None:
    """TestThresholdsMetGracePeriod (now = 1000 s)."""
    assert thresholds_met_grace_period(observed_at, 1000.0) == want


def test_node_conditions() -> None:
    """TestNodeConditions; each condition once, whatever the number of thresholds."""
    assert node_conditions([]) == []
    assert node_conditions([Threshold(MEMORY_AVAILABLE, tq("1Gi"))]) == [MEMORY_PRESSURE]
    assert node_conditions([Threshold(NODEFS_AVAILABLE, tq("1Gi")), Threshold(NODEFS_INODES_FREE, tq("1")),
                            Threshold(MEMORY_AVAILABLE, tq("1Gi"))]) == ["DiskPressure", MEMORY_PRESSURE]


def test_node_conditions_last_observed_at() -> None:
    """TestNodeConditionsLastObservedAt: no-previous-observation, previous-observation, old-observation."""
    assert node_conditions_last_observed_at([MEMORY_PRESSURE], {}, 1000.0) == {MEMORY_PRESSURE: 1000.0}
    assert node_conditions_last_observed_at([MEMORY_PRESSURE], {MEMORY_PRESSURE: 940.0}, 1000.0) == \
        {MEMORY_PRESSURE: 1000.0}
    assert node_conditions_last_observed_at([], {MEMORY_PRESSURE: 940.0}, 1000.0) == {MEMORY_PRESSURE: 940.0}


@pytest.mark.parametrize(("period", "want"), [
    pytest.param(120.0, [MEMORY_PRESSURE], id="in-period"),
    pytest.param(30.0, [], id="out-of-period"),
])
def test_node_conditions_observed_since(period: float, want: list[str]) -> None:
    """TestNodeConditionsObservedSince (observed 1 minute ago)."""
    assert node_conditions_observed_since({MEMORY_PRESSURE: 940.0}, period, 1000.0) == want


@pytest.mark.parametrize(("signals", "want"), [
    pytest.param([], [], id="empty threshold list"),
    pytest.param([NODEFS_AVAILABLE, PID_AVAILABLE, MEMORY_AVAILABLE], [MEMORY_AVAILABLE, NODEFS_AVAILABLE,
                                                                        PID_AVAILABLE], id="memory first"),
    pytest.param([NODEFS_AVAILABLE, PID_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE],
                 [ALLOCATABLE_MEMORY_AVAILABLE, NODEFS_AVAILABLE, PID_AVAILABLE], id="allocatable memory first"),
])
def test_sort_by_eviction_priority(signals: list[str], want: list[str]) -> None:
    """TestSortByEvictionPriority."""
    got = by_eviction_priority([Threshold(s, tq("1")) for s in signals])
    assert [t.signal for t in got] == want


def test_make_signal_observations() -> None:
    """TestMakeSignalObservations: memory capacity is available + working set; nodefs bytes and inodes; pids."""
    gib = 2**30
    node = NodeStats(memory_available=gib, memory_working_set=gib,
                     fs=FsStats(available=1024, capacity=2048, inodes_free=1024, inodes=1024 * 1024),
                     max_pid=255816, running_processes=1000, time=5.0)
    pods = [pod("pod1"), pod("pod3")]
    summary = Summary(node, [PodStats(p["metadata"]["uid"], gib) for p in pods])
    observations, stats = make_signal_observations(summary)
    assert observations[MEMORY_AVAILABLE] == Observation(Quantity.of(gib), Quantity.of(2 * gib), 5.0)
    assert observations[NODEFS_AVAILABLE] == Observation(Quantity.of(1024), Quantity.of(2048), 5.0)
    assert observations[NODEFS_INODES_FREE] == Observation(Quantity.of(1024, DECIMAL_SI),
                                                           Quantity.of(1024 * 1024, DECIMAL_SI), 5.0)
    assert observations[PID_AVAILABLE] == Observation(Quantity.of(255816 - 1000, DECIMAL_SI),
                                                      Quantity.of(255816, DECIMAL_SI), 5.0)
    assert all(stats(p) is not None and stats(p).memory_working_set == gib for p in pods)  # type: ignore[union-attr]
    assert stats(pod("absent")) is None


def test_eviction_message_names_the_threshold_and_the_container_over_its_request() -> None:
    """evictionMessage: 'The node was low on resource: memory. Threshold quantity: …, available: …. Container x
    was using …, request is …, has larger consumption of memory. ' (trailing space as upstream)."""
    p = pod("web", containers=[container("x", resources(memory="100Mi")), container("y", resources(memory="1Gi"))])
    stats = PodStats("uid-web", 600 * 2**20, (ContainerStats("x", 500 * 2**20), ContainerStats("y", 100 * 2**20)))
    threshold = Threshold(MEMORY_AVAILABLE, tq("100Mi"))
    observations = {MEMORY_AVAILABLE: Observation(Quantity.of(50 * 2**20), Quantity.of(2**30))}
    message = eviction_message("memory", p, lambda _: stats, [threshold], observations)
    assert message == ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
                       "Container x was using 500Mi, request is 100Mi, has larger consumption of memory. ")


def test_eviction_message_for_disk_counts_rootfs_and_logs_and_percentage_thresholds() -> None:
    p = pod("filler", volumes=[empty_dir()])
    stats = disk_stats(p, "0", "3Mi", "900Mi")
    threshold = Threshold(NODEFS_AVAILABLE, tp(0.1))
    observations = {NODEFS_AVAILABLE: Observation(Quantity.of(2**30), Quantity.of(20 * 2**30))}
    message = eviction_message("ephemeral-storage", p, lambda _: stats, [threshold], observations)
    limit = int(float(20 * 2**30) * float32(0.1))
    assert message == (f"The node was low on resource: ephemeral-storage. Threshold quantity: {limit}, "
                       "available: 1Gi. Container filler was using 3Mi, request is 0, has larger consumption of "
                       "ephemeral-storage. ")


@pytest.mark.parametrize(("volumes", "limits", "usage", "want"), [
    pytest.param([{"name": "cache", "emptyDir": {"sizeLimit": "100Mi"}}], {}, ("0", "1Mi", "101Mi"),
                 'Usage of EmptyDir volume "cache" exceeds the limit "100Mi". ', id="emptyDir over its sizeLimit"),
    pytest.param([{"name": "cache", "emptyDir": {"sizeLimit": "100Mi"}}], {}, ("0", "1Mi", "99Mi"), None,
                 id="emptyDir under its sizeLimit"),
    pytest.param([empty_dir("cache")], {"ephemeral-storage": "50Mi"}, ("0", "1Mi", "60Mi"),
                 "Pod ephemeral local storage usage exceeds the total limit of containers 50Mi. ",
                 id="pod over the sum of ephemeral-storage limits"),
])
def test_local_storage_violation(volumes: list[dict[str, object]], limits: dict[str, str],
                                 usage: tuple[str, str, str], want: str | None) -> None:
    """localStorageEviction: emptyDir sizeLimit, pod and container ephemeral-storage limits."""
    p = pod("p", containers=[container("c", {}, limits)], volumes=volumes)  # type: ignore[arg-type]
    assert local_storage_violation(p, disk_stats(p, *usage)) == want


def test_container_over_its_ephemeral_storage_limit() -> None:
    """containerEphemeralStorageLimitEviction: the pod's total is within the sum of limits, one container is not."""
    p = pod("p", containers=[container("small", {}, {"ephemeral-storage": "1Mi"}),
                             container("big", {}, {"ephemeral-storage": "10Mi"})])
    logs = {"small": 2 * 2**20, "big": 0}
    stats = PodStats("uid-p", None, tuple(ContainerStats(n, None, FsStats(used=0), FsStats(used=u))
                                          for n, u in logs.items()), (), FsStats(used=2 * 2**20))
    assert local_storage_violation(p, stats) == 'Container small exceeded its local ephemeral storage limit "1Mi". '
