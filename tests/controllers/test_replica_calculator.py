"""The replica calculator against upstream's replica_calculator_test.go table cases (by name): Resource metrics (pods'
and one container's), per-pod custom metrics, tolerance, unready, hot-CPU, failed, deleted, pending and missing pods.

As upstream's harness: pods `test-pod-<i>` with two containers that each request the case's request and report the
case's level; the Ready condition has no transition time and start times are zero unless given (hot: now, cool: three
minutes ago); tolerance 0.1, CPU initialization period 2 min, initial readiness delay 10 s (its testing defaults).
The metrics are fed by a fake source: the calculator's own inputs, nothing else faked."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from kubelite.clock import rfc3339
from kubelite.controllers.replica_calculator import (
    Grouped,
    MetricsError,
    PodMetric,
    PodMetrics,
    PodSelector,
    ReplicaCalculator,
    group_pods,
)

NOW = 1_700_000_000.0
ZERO = 0.0  # upstream's zero time
HOT, COOL = NOW, NOW - 180
T, F = "True", "False"
CONTAINERS = 2


@dataclass
class Case:
    current: int
    expected: int = 0
    requests: list[str] = field(default_factory=list)
    levels: list[list[int]] = field(default_factory=list)  # per pod, per container (milli)
    target: int = 0  # utilization % (resource) or milli usage (custom metric)
    utilization: int = 0
    value: int = 0
    readiness: list[str] | None = None
    start: list[float] | None = None
    phase: list[str] | None = None
    deleting: list[bool] | None = None
    pod_names: list[str] | None = None
    container: str = ""
    error: str = ""
    custom: list[int] | None = None  # a Pods metric's per-pod levels instead of a resource's


def levels(*each: int) -> list[list[int]]:
    """makePodMetricLevels: every container of pod i at each[i]."""
    return [[v] * CONTAINERS for v in each]


def one(*requests: str) -> list[str]:
    return list(requests)


class FakeSource:
    def __init__(self, case: Case) -> None:
        self.case = case

    def _samples(self, values: list[int]) -> PodMetrics:
        names = self.case.pod_names or []
        return {(names[i] if i < len(names) else f"test-pod-{i}"): PodMetric(v, ZERO, 60.0)
                for i, v in enumerate(values)}

    async def resource_metric(self, resource: str, namespace: str, selector: PodSelector,
                              container: str) -> tuple[PodMetrics, float]:
        if not self.case.levels:
            raise MetricsError("no metrics returned from resource metrics API")
        if container:
            index = int(container.removeprefix("container")) - 1
            return self._samples([pod[index] for pod in self.case.levels if index < len(pod)]), ZERO
        return self._samples([sum(pod) for pod in self.case.levels]), ZERO

    async def raw_metric(self, metric: str, namespace: str, selector: PodSelector,
                         metric_selector: object) -> tuple[PodMetrics, float]:
        return self._samples(self.case.custom or []), ZERO


def pods_of(case: Case) -> list[dict[str, object]]:
    count = max(case.current, len(case.phase or []))
    out: list[dict[str, object]] = []
    for i in range(count):
        container = {"name": "c"}
        if i < len(case.requests):
            container["resources"] = {"requests": {"cpu": case.requests[i]}}  # type: ignore[assignment]
        meta: dict[str, object] = {"name": f"test-pod-{i}", "namespace": "test-namespace",
                                   "labels": {"name": "test-pod"}}
        if case.deleting and case.deleting[i]:
            meta["deletionTimestamp"] = rfc3339(NOW)
        out.append({"metadata": meta,
                    "spec": {"containers": [{**container, "name": f"container{n + 1}"} for n in range(CONTAINERS)]},
                    "status": {"phase": (case.phase or ["Running"] * count)[i],
                               "startTime": rfc3339(case.start[i] if case.start else ZERO),
                               "conditions": [{"type": "Ready",
                                               "status": case.readiness[i] if case.readiness and
                                               i < len(case.readiness) else T}]}})
    return out


R1 = "1.0"
CASES = {
    "TestReplicaCalcDisjointResourcesMetrics": Case(1, requests=[R1], levels=levels(100), target=100,
                                                    pod_names=["an-older-pod-name"],
                                                    error="no metrics returned matched known pods"),
    "TestReplicaCalcScaleUp": Case(3, 5, [R1] * 3, levels(300, 500, 700), 30, 50, CONTAINERS * 500),
    "TestReplicaCalcContainerScaleUp": Case(3, 5, [R1] * 3, [[1000, 300], [1000, 500], [1000, 700]], 30, 50, 500,
                                            container="container2"),
    "TestReplicaCalcScaleUpUnreadyLessScale": Case(3, 4, [R1] * 3, levels(300, 500, 700), 30, 60, CONTAINERS * 600,
                                                   readiness=[F, T, T]),
    "TestReplicaCalcScaleUpContainerHotCpuLessScale": Case(3, 4, [R1] * 3, [[0, 300], [0, 500], [0, 700]], 30, 60, 600,
                                                           start=[HOT, COOL, COOL], container="container2"),
    "TestReplicaCalcScaleUpHotCpuLessScale": Case(3, 4, [R1] * 3, levels(300, 500, 700), 30, 60, CONTAINERS * 600,
                                                  start=[HOT, COOL, COOL]),
    "TestReplicaCalcScaleUpUnreadyNoScale": Case(3, 3, [R1] * 3, levels(400, 500, 700), 30, 40, CONTAINERS * 400,
                                                 readiness=[T, F, F]),
    "TestReplicaCalcScaleHotCpuNoScale": Case(3, 3, [R1] * 3, levels(400, 500, 700), 30, 40, CONTAINERS * 400,
                                              readiness=[T, F, F], start=[COOL, HOT, HOT]),
    "TestReplicaCalcScaleUpIgnoresFailedPods": Case(2, 4, [R1] * 4, levels(500, 700), 30, 60, CONTAINERS * 600,
                                                    readiness=[T, T, F, F],
                                                    phase=["Running", "Running", "Failed", "Failed"]),
    "TestReplicaCalcMissingContainerMetricScaleUpIgnoresFailedPods": Case(
        2, 4, [R1] * 4, [[1000, 500], [9000, 700], [1000], [9000]], 30, 60, 600, readiness=[T, T, F, F],
        phase=["Running", "Running", "Failed", "Failed"], container="container2"),
    "TestReplicaCalcScaleUpIgnoresDeletionPods": Case(2, 4, [R1] * 4, levels(500, 700), 30, 60, CONTAINERS * 600,
                                                      readiness=[T, T, F, F], phase=["Running"] * 4,
                                                      deleting=[False, False, True, True]),
    "TestReplicaCalcScaleDown": Case(5, 3, [R1] * 5, levels(100, 300, 500, 250, 250), 50, 28, CONTAINERS * 280),
    "TestReplicaCalcContainerScaleDown": Case(5, 3, [R1] * 5,
                                              [[1000, 100], [1000, 300], [1000, 500], [1000, 250], [1000, 250]],
                                              50, 28, 280, container="container2"),
    "TestReplicaCalcScaleDownExcludeUnreadyPods": Case(5, 2, [R1] * 5, levels(100, 300, 500, 250, 250), 50, 30,
                                                       CONTAINERS * 300, readiness=[T, T, T, F, F]),
    "TestReplicaCalcScaleDownExcludeUnscheduledPods": Case(5, 1, [R1] * 5, levels(100), 50, 10, CONTAINERS * 100,
                                                           readiness=[T, F, F, F, F],
                                                           phase=["Running"] + ["Pending"] * 4),
    "TestReplicaCalcScaleDownIgnoreHotCpuPods": Case(5, 2, [R1] * 5, levels(100, 300, 500, 250, 250), 50, 30,
                                                     CONTAINERS * 300, start=[COOL, COOL, COOL, HOT, HOT]),
    "TestReplicaCalcScaleDownIgnoresFailedPods": Case(5, 3, [R1] * 7, levels(100, 300, 500, 250, 250), 50, 28,
                                                      CONTAINERS * 280, readiness=[T] * 5 + [F, F],
                                                      phase=["Running"] * 5 + ["Failed"] * 2),
    "TestReplicaCalcScaleDownIgnoresDeletionPods": Case(5, 3, [R1] * 7, levels(100, 300, 500, 250, 250), 50, 28,
                                                        CONTAINERS * 280, readiness=[T] * 5 + [F, F],
                                                        phase=["Running"] * 7, deleting=[False] * 5 + [True, True]),
    "TestReplicaCalcTolerance": Case(3, 3, ["0.9", "1.0", "1.1"], levels(1010, 1030, 1020), 100, 102,
                                     CONTAINERS * 1020),
    "TestReplicaCalcSuperfluousMetrics": Case(4, 24, [R1] * 4, levels(4000, 9500, 3000, 7000, 3200, 2000), 100, 587,
                                              CONTAINERS * 5875),
    "TestReplicaCalcMissingMetrics": Case(4, 3, [R1] * 4, levels(400, 95), 100, 24, 495),
    "TestReplicaCalcEmptyMetrics": Case(4, requests=[R1] * 3, levels=[], target=100,
                                        error="unable to get metrics for resource cpu: no metrics returned from "
                                              "resource metrics API"),
    "TestReplicaCalcEmptyCPURequest": Case(1, requests=[], levels=levels(200), target=100,
                                           error="missing request for"),
    "TestReplicaCalcMissingMetricsNoChangeEq": Case(2, 2, [R1] * 2, levels(1000), 100, 100, CONTAINERS * 1000),
    "TestReplicaCalcMissingMetricsNoChangeGt": Case(2, 2, [R1] * 2, levels(1900), 100, 190, CONTAINERS * 1900),
    "TestReplicaCalcMissingMetricsNoChangeLt": Case(2, 2, [R1] * 2, levels(600), 100, 60, CONTAINERS * 600),
    "TestReplicaCalcMissingMetricsUnreadyChange": Case(3, 3, [R1] * 3, levels(100, 450), 50, 45, CONTAINERS * 450,
                                                       readiness=[F, T, T]),
    "TestReplicaCalcMissingMetricsHotCpuNoChange": Case(3, 3, [R1] * 3, levels(100, 450), 50, 45, CONTAINERS * 450,
                                                        start=[HOT, COOL, COOL]),
    "TestReplicaCalcMissingMetricsUnreadyScaleUp": Case(3, 4, [R1] * 3, levels(100, 2000), 50, 200,
                                                        CONTAINERS * 2000, readiness=[F, T, T]),
    "TestReplicaCalcMissingMetricsHotCpuScaleUp": Case(3, 4, [R1] * 3, levels(100, 2000), 50, 200, CONTAINERS * 2000,
                                                       readiness=[F, T, T], start=[HOT, COOL, COOL]),
    "TestReplicaCalcMissingMetricsUnreadyScaleDown": Case(4, 3, [R1] * 4, levels(100, 100, 100), 50, 10,
                                                          CONTAINERS * 100, readiness=[F, T, T, T]),
    "TestReplicaCalcMissingMetricsScaleDownTargetOver100": Case(4, 2, [R1, R1, "2.0", "2.0"], levels(200, 100, 100),
                                                                300, 6, CONTAINERS * 100, readiness=[F, T, T, T]),
    "TestReplicaCalcDuringRollingUpdateWithMaxSurge": Case(2, 2, [R1] * 3, levels(100, 100), 50, 10,
                                                           CONTAINERS * 100, phase=["Running"] * 3),
    # per-pod custom metrics (calcPlainMetricReplicas): target and expected usage in milli-units
    "TestReplicaCalcScaleUpCM": Case(3, 4, target=15000, value=20000, custom=[20000, 10000, 30000]),
    "TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale": Case(3, 6, target=15000, value=30000,
                                                             custom=[50000, 10000, 30000], readiness=[T, T, F],
                                                             start=[COOL, COOL, HOT]),
    "TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown": Case(3, 7, target=15000, value=31666,
                                                                     custom=[50000, 15000, 30000],
                                                                     readiness=[F, T, F], start=[HOT, COOL, HOT]),
    "TestReplicaCalcScaleDownCM": Case(5, 3, target=20000, value=12000, custom=[12000] * 5),
    "TestReplicaCalcToleranceCM": Case(3, 3, target=20000, value=20666, custom=[20000, 21000, 21000]),
    "TestPlainMetricReplicaCalcMissingMetricsNoChangeEq": Case(5, 5, target=20000, value=20000,
                                                               custom=[20000, 19000, 21000]),
    "TestReplicaCalcDuringRollingUpdateWithMaxSurgeCM": Case(2, 2, target=17000, value=10000, custom=[10000, 10000],
                                                             phase=["Running"] * 3),
}


def calculator(case: Case) -> ReplicaCalculator:
    pods = pods_of(case)
    return ReplicaCalculator(FakeSource(case),
                             lambda ns, sel: [p for p in pods if sel.matches(p["metadata"]["labels"])],  # type: ignore
                             lambda: NOW, 0.1, 120.0, 10.0)


@pytest.mark.parametrize("case", [pytest.param(c, id=n) for n, c in CASES.items()])
async def test_replica_calc(case: Case) -> None:
    calc, selector = calculator(case), PodSelector.parse("name=test-pod")
    if case.custom is not None:
        replicas, usage, _ = await calc.metric_replicas(case.current, case.target, "qps", "test-namespace", selector,
                                                        None)
        assert (replicas, usage) == (case.expected, case.value)
        return
    if case.error:
        with pytest.raises(MetricsError, match=case.error):
            await calc.resource_replicas(case.current, case.target, "cpu", "test-namespace", selector, case.container)
        return
    replicas, utilization, value, _ = await calc.resource_replicas(case.current, case.target, "cpu", "test-namespace",
                                                                   selector, case.container)
    assert (replicas, utilization, value) == (case.expected, case.utilization, case.value)


async def test_replica_calc_computed_tolerance_alg_implementation() -> None:
    """TestReplicaCalcComputedToleranceAlgImplementation: a target just past the tolerance scales down; one just
    inside it does not."""
    start_pods, used = 10, 10 * 150
    requested = 2 * used
    per_pod = requested // start_pods
    requests = [f"{per_pod + d}m" for d in (100, -100, 10, -10, 2, -2, 1, -1, 0, 0)]
    requested_to_used = float(requested // used)
    for margin, expect_scale in ((0.01, True), (0.004, False)):
        target = abs(1 / (requested_to_used * (1 - 0.1))) + margin
        final_pods = math.ceil(used / (requested * target) * start_pods)
        case = Case(start_pods, final_pods if expect_scale else start_pods, requests, levels(*[used // 10] * 10),
                    int(target * 100), used * 100 // requested, CONTAINERS * used // 10)
        replicas, utilization, value, _ = await calculator(case).resource_replicas(
            case.current, case.target, "cpu", "test-namespace", PodSelector.parse("name=test-pod"))
        assert (replicas, utilization, value) == (case.expected, case.utilization, case.value)


def pod(name: str, phase: str = "Succeeded", start: float | None = None, ready: tuple[str, float] | None = None
        ) -> dict[str, object]:
    status: dict[str, object] = {"phase": phase}
    if start is not None:
        status["startTime"] = rfc3339(start)
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready[0], "lastTransitionTime": rfc3339(ready[1])}]
    return {"metadata": {"name": name}, "status": status}


GROUP_CASES = [  # TestGroupPods: (name, pods, metrics, resource, ready, unready, missing, ignored)
    ("void", [], {}, "cpu", Grouped(0, set(), set(), set())),
    ("count in a ready pod - memory", [pod("bentham")], {"bentham": PodMetric(1, NOW, 60)}, "memory",
     Grouped(1, set(), set(), set())),
    ("unready a pod without ready condition - CPU", [pod("lucretius", start=NOW)], {"lucretius": PodMetric(1)}, "cpu",
     Grouped(0, {"lucretius"}, set(), set())),
    ("count in a ready pod with fresh metrics during initialization period - CPU",
     [pod("bentham", start=NOW - 60, ready=(T, NOW - 30))], {"bentham": PodMetric(1, NOW, 30)}, "cpu",
     Grouped(1, set(), set(), set())),
    ("unready a ready pod without fresh metrics during initialization period - CPU",
     [pod("bentham", start=NOW - 60, ready=(T, NOW - 30))], {"bentham": PodMetric(1, NOW, 60)}, "cpu",
     Grouped(0, {"bentham"}, set(), set())),
    ("unready an unready pod during initialization period - CPU",
     [pod("lucretius", start=NOW - 600, ready=(F, NOW - 594))], {"lucretius": PodMetric(1)}, "cpu",
     Grouped(0, {"lucretius"}, set(), set())),
    ("count in a ready pod without fresh metrics after initialization period - CPU",
     [pod("bentham", start=NOW - 180, ready=(T, NOW - 180))], {"bentham": PodMetric(1, NOW - 120, 60)}, "cpu",
     Grouped(1, set(), set(), set())),
    ("count in an unready pod that was ready after initialization period - CPU",
     [pod("lucretius", start=NOW - 600, ready=(F, NOW - 540))], {"lucretius": PodMetric(1)}, "cpu",
     Grouped(1, set(), set(), set())),
    ("unready pod that has never been ready after initialization period - CPU",
     [pod("lucretius", start=NOW - 600, ready=(F, NOW - 590))], {"lucretius": PodMetric(1)}, "cpu",
     Grouped(1, set(), set(), set())),
    ("a missing pod", [pod("epicurus", start=NOW - 180)], {}, "cpu", Grouped(0, set(), {"epicurus"}, set())),
    ("pending pods are unreadied", [pod("unscheduled", phase="Pending", start=NOW - 180)], {}, "cpu",
     Grouped(0, {"unscheduled"}, set(), set())),
    ("ignore pods with deletion timestamps or failed",
     [pod("failed", phase="Failed", start=NOW - 180),
      {**pod("deleted", start=NOW - 180), "metadata": {"name": "deleted", "deletionTimestamp": rfc3339(NOW)}}],
     {"failed": PodMetric(1), "deleted": PodMetric(1)}, "cpu", Grouped(0, set(), set(), {"failed", "deleted"})),
]


@pytest.mark.parametrize("pods,metrics,resource,expected", [pytest.param(*c[1:], id=c[0]) for c in GROUP_CASES])
def test_group_pods(pods: list[dict[str, object]], metrics: PodMetrics, resource: str, expected: Grouped) -> None:
    """TestGroupPods (upstream: 2 min CPU initialization, 10 s initial readiness delay, at time.Now())."""
    assert group_pods(pods, metrics, resource, 120.0, 10.0, NOW) == expected
