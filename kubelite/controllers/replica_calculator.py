"""How many replicas a metric asks for: a port of pkg/controller/podautoscaler/replica_calculator.go and
metrics/utilization.go (v1.32).

The ratio of the pods' usage to the target gives the replica count (`ceil(ratio * ready pods)`), unless it is within
the tolerance (10%) of 1. Pods are sorted first (`group_pods`): deleted and failed pods are ignored; pending pods, and
for CPU pods still starting (within the CPU initialization period of their start, or not ready and never ready since
the delay of initial readiness) count as unready; pods without a sample are missing. Then the ratio is made
conservative: on a scale-up unready pods count as using nothing, missing pods nothing on a scale-up and their request
(or the target when above 100%) on a scale-down, and a result that would change the direction of scaling keeps the
current count.

Metrics come from a `MetricsSource`: the controller's reads metrics.k8s.io through the API (horizontal.py); the
calculator's tests give fixed samples. Only resource metrics (Resource and ContainerResource, Utilization and
AverageValue targets) and per-pod plain metrics are computed here; Object and External metrics need the custom and
external metrics APIs, which kubelite does not serve.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kubelite.api.quantity import QuantityError, milli_value
from kubelite.api.selectors import LabelSelector, parse_label_selector
from kubelite.clock import parse_rfc3339
from kubelite.controllers.podutil import ready_condition

Obj = dict[str, Any]

DEFAULT_TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance
DEFAULT_CPU_INITIALIZATION_PERIOD = 300.0  # --horizontal-pod-autoscaler-cpu-initialization-period (5 min)
DEFAULT_INITIAL_READINESS_DELAY = 30.0  # --horizontal-pod-autoscaler-initial-readiness-delay


class MetricsError(Exception):
    """A metric could not be read or used; the message is upstream's, shown in the HPA's conditions and events."""


@dataclass(frozen=True)
class PodSelector:
    """The target's pods as its scale subresource names them: the text (what the metrics API is asked with) and
    the compiled selector (what the pod cache is filtered with)."""

    text: str
    compiled: LabelSelector

    @classmethod
    def parse(cls, text: str) -> PodSelector:
        """labels.Parse; bad syntax raises the API's 400 ApiError."""
        return cls(text, parse_label_selector(text))

    def matches(self, labels: dict[str, str] | None) -> bool:
        return self.compiled.matches(labels)


@dataclass(frozen=True)
class PodMetric:
    value: int  # milli-units: millicores, or milli-bytes as Quantity.MilliValue()
    timestamp: float = 0.0
    window: float = 0.0


PodMetrics = dict[str, PodMetric]  # pod name → its sample


class MetricsSource(Protocol):
    async def resource_metric(self, resource: str, namespace: str, selector: PodSelector,
                              container: str) -> tuple[PodMetrics, float]:
        """Each selected pod's usage of `resource` (of one container when `container`), and the samples' time."""
        ...

    async def raw_metric(self, metric: str, namespace: str, selector: PodSelector,
                         metric_selector: Obj | None) -> tuple[PodMetrics, float]:
        """A per-pod custom metric (Pods metrics) of the selected pods."""
        ...


@dataclass(frozen=True)
class Grouped:
    ready: int
    unready: set[str]
    missing: set[str]
    ignored: set[str]


def _time(value: str | None) -> float | None:
    return parse_rfc3339(value) if value else None


def group_pods(pods: list[Obj], metrics: PodMetrics, resource: str, cpu_initialization_period: float,
               delay_of_initial_readiness_status: float, now: float) -> Grouped:
    """groupPods: ready pods counted; unready, missing and ignored (deleted or failed) pods named."""
    ready, unready, missing, ignored = 0, set(), set(), set()
    for pod in pods:
        name, status = pod["metadata"]["name"], pod.get("status") or {}
        if pod["metadata"].get("deletionTimestamp") or status.get("phase") == "Failed":
            ignored.add(name)
            continue
        if status.get("phase") == "Pending":
            unready.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            missing.add(name)
            continue
        if resource == "cpu":
            condition, start = ready_condition(pod), _time(status.get("startTime"))
            if condition is None or start is None:
                is_unready = True
            else:
                transition = _time(condition.get("lastTransitionTime")) or 0.0
                if start + cpu_initialization_period > now:
                    # still initializing: unready, or no whole sample window since it last changed readiness
                    is_unready = condition.get("status") == "False" or metric.timestamp < transition + metric.window
                else:
                    # unready and never ready since it started
                    is_unready = condition.get("status") == "False" and \
                        start + delay_of_initial_readiness_status > transition
            if is_unready:
                unready.add(name)
                continue
        ready += 1
    return Grouped(ready, unready, missing, ignored)


def calculate_pod_requests(pods: list[Obj], container: str, resource: str) -> dict[str, int]:
    """calculatePodRequests: each pod's request of `resource` (milli) over its containers and restartable init
    containers (or the one named `container`); a container without one makes utilization meaningless."""
    requests: dict[str, int] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        containers = list(spec.get("containers") or []) + [
            c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
        total = 0
        for c in containers:
            if container and c.get("name") != container:
                continue
            request = ((c.get("resources") or {}).get("requests") or {}).get(resource)
            if request is None:
                raise MetricsError(f"missing request for {resource} in container {c.get('name', '')} of Pod "
                                   f"{pod['metadata']['name']}")
            try:
                total += milli_value(request)
            except QuantityError as exc:
                raise MetricsError(f"invalid request for {resource} in container {c.get('name', '')} of Pod "
                                   f"{pod['metadata']['name']}: {exc}") from None
        requests[pod["metadata"]["name"]] = total
    return requests


def resource_utilization_ratio(metrics: PodMetrics, requests: dict[str, int],
                               target_utilization: int) -> tuple[float, int, int]:
    """GetResourceUtilizationRatio: (usage/target ratio, utilization percent, average raw usage) over the pods that
    have both a sample and a request."""
    total = requested = entries = 0
    for name, metric in metrics.items():
        request = requests.get(name)
        if request is None:  # extraneous metrics: missing requests are checked elsewhere
            continue
        total += metric.value
        requested += request
        entries += 1
    if requested == 0:
        raise MetricsError("no metrics returned matched known pods")
    utilization = total * 100 // requested
    return utilization / target_utilization, utilization, total // entries


def metric_usage_ratio(metrics: PodMetrics, target_usage: int) -> tuple[float, int]:
    """GetMetricUsageRatio: (average/target ratio, average usage)."""
    usage = sum(m.value for m in metrics.values()) // len(metrics)
    return usage / target_usage, usage


class ReplicaCalculator:
    def __init__(self, metrics: MetricsSource, pods: Callable[[str, PodSelector], list[Obj]],
                 now: Callable[[], float], tolerance: float = DEFAULT_TOLERANCE,
                 cpu_initialization_period: float = DEFAULT_CPU_INITIALIZATION_PERIOD,
                 delay_of_initial_readiness_status: float = DEFAULT_INITIAL_READINESS_DELAY) -> None:
        self.metrics = metrics
        self.pods = pods
        self.now = now
        self.tolerance = tolerance
        self.cpu_initialization_period = cpu_initialization_period
        self.delay_of_initial_readiness_status = delay_of_initial_readiness_status

    def _selected(self, namespace: str, selector: PodSelector) -> list[Obj]:
        pods = self.pods(namespace, selector)
        if not pods:
            raise MetricsError("no pods returned by selector while calculating replica count")
        return pods

    def _group(self, pods: list[Obj], metrics: PodMetrics, resource: str) -> Grouped:
        grouped = group_pods(pods, metrics, resource, self.cpu_initialization_period,
                             self.delay_of_initial_readiness_status, self.now())
        for name in grouped.ignored | grouped.unready:
            metrics.pop(name, None)
        if not metrics:
            raise MetricsError("did not receive metrics for targeted pods (pods might be unready)")
        return grouped

    def _within_tolerance(self, ratio: float) -> bool:
        return abs(1.0 - ratio) <= self.tolerance

    async def resource_replicas(self, current: int, target_utilization: int, resource: str, namespace: str,
                                selector: PodSelector, container: str = "") -> tuple[int, int, int, float]:
        """GetResourceReplicas: (replicas, utilization %, average raw usage, samples' time) for a Utilization
        target."""
        try:
            metrics, timestamp = await self.metrics.resource_metric(resource, namespace, selector, container)
        except MetricsError as exc:
            raise MetricsError(f"unable to get metrics for resource {resource}: {exc}") from None
        pods = self._selected(namespace, selector)
        grouped = self._group(pods, metrics, resource)
        requests = calculate_pod_requests(pods, container, resource)
        ratio, utilization, raw = resource_utilization_ratio(metrics, requests, target_utilization)
        scale_up_with_unready = bool(grouped.unready) and ratio > 1.0
        if not scale_up_with_unready and not grouped.missing:
            if self._within_tolerance(ratio):
                return current, utilization, raw, timestamp
            return math.ceil(ratio * grouped.ready), utilization, raw, timestamp
        if grouped.missing:
            if ratio < 1.0:  # scale-down: missing pods use all their request, or the target when above 100%
                fallback = max(100, target_utilization)
                for name in grouped.missing:
                    metrics[name] = PodMetric(requests[name] * fallback // 100)
            elif ratio > 1.0:  # scale-up: missing pods use nothing
                for name in grouped.missing:
                    metrics[name] = PodMetric(0)
        if scale_up_with_unready:
            for name in grouped.unready:
                metrics[name] = PodMetric(0)
        new_ratio, _, _ = resource_utilization_ratio(metrics, requests, target_utilization)
        return self._rebalanced(current, ratio, new_ratio, len(metrics)), utilization, raw, timestamp

    def _rebalanced(self, current: int, ratio: float, new_ratio: float, pods: int) -> int:
        """The count from the ratio with missing and unready pods filled in, unless it is within tolerance or turns
        the direction of scaling (by the ratio, or by the pods counted)."""
        if self._within_tolerance(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
            return current
        replicas = math.ceil(new_ratio * pods)
        if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
            return current
        return replicas

    async def raw_resource_replicas(self, current: int, target_usage: int, resource: str, namespace: str,
                                    selector: PodSelector, container: str = "") -> tuple[int, int, float]:
        """GetRawResourceReplicas: (replicas, average usage, samples' time) for an AverageValue target."""
        try:
            metrics, timestamp = await self.metrics.resource_metric(resource, namespace, selector, container)
        except MetricsError as exc:
            raise MetricsError(f"unable to get metrics for resource {resource}: {exc}") from None
        replicas, usage = self.plain_metric_replicas(metrics, current, target_usage, namespace, selector, resource)
        return replicas, usage, timestamp

    async def metric_replicas(self, current: int, target_usage: int, metric: str, namespace: str,
                              selector: PodSelector, metric_selector: Obj | None) -> tuple[int, int, float]:
        """GetMetricReplicas: a Pods metric's (replicas, average usage, samples' time)."""
        try:
            metrics, timestamp = await self.metrics.raw_metric(metric, namespace, selector, metric_selector)
        except MetricsError as exc:
            raise MetricsError(f"unable to get metric {metric}: {exc}") from None
        replicas, usage = self.plain_metric_replicas(metrics, current, target_usage, namespace, selector, "")
        return replicas, usage, timestamp

    def plain_metric_replicas(self, metrics: PodMetrics, current: int, target_usage: int, namespace: str,
                              selector: PodSelector, resource: str) -> tuple[int, int]:
        """calcPlainMetricReplicas: as for utilization, missing pods using the target itself on a scale-down."""
        pods = self._selected(namespace, selector)
        grouped = self._group(pods, metrics, resource)
        ratio, usage = metric_usage_ratio(metrics, target_usage)
        scale_up_with_unready = bool(grouped.unready) and ratio > 1.0
        if not scale_up_with_unready and not grouped.missing:
            if self._within_tolerance(ratio):
                return current, usage
            return math.ceil(ratio * grouped.ready), usage
        if grouped.missing:
            if ratio < 1.0:
                for name in grouped.missing:
                    metrics[name] = PodMetric(target_usage)
            elif ratio > 1.0:
                for name in grouped.missing:
                    metrics[name] = PodMetric(0)
        if scale_up_with_unready:
            for name in grouped.unready:
                metrics[name] = PodMetric(0)
        new_ratio, _ = metric_usage_ratio(metrics, target_usage)
        return self._rebalanced(current, ratio, new_ratio, len(metrics)), usage
