"""client-go's workqueue metrics (k8s.io/component-base/metrics/prometheus/workqueue), per controller queue.

`workqueue_depth`, `workqueue_adds_total`, `workqueue_retries_total`, `workqueue_queue_duration_seconds`
(added → picked up) and `workqueue_work_duration_seconds` (picked up → done), labelled by the
queue's name, with upstream's buckets; `workqueue_unfinished_work_seconds` and
`workqueue_longest_running_processor_seconds` are computed when scraped.

As client-go's workqueue asks a global provider when a queue is made, a `WorkQueue` asks
`PROVIDER`, a context variable: the controller manager sets it to its own `WorkqueueMetrics`
while it constructs its controllers (`registry.starters`), so each component keeps its own
registry and controllers built elsewhere (tests) are not measured.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextvars import ContextVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kubelite.clock import Clock

disable_created_metrics()  # type: ignore[no-untyped-call]  # upstream exposes no `_created` series

DURATION_BUCKETS = tuple(10e-9 * 10**i for i in range(10))  # ExponentialBuckets(10e-9, 10, 10)


class QueueMetrics:
    """One queue's instruments (client-go's queueMetrics): what Add, Get and Done report."""

    def __init__(self, owner: WorkqueueMetrics, name: str) -> None:
        self.clock = owner.clock
        self.depth = owner.depth.labels(name)
        self.adds = owner.adds.labels(name)
        self.retries = owner.retries.labels(name)
        self.latency = owner.latency.labels(name)
        self.work = owner.work.labels(name)
        self.added: dict[Hashable, float] = {}
        self.processing: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        self.adds.inc()
        self.depth.inc()
        self.added.setdefault(item, self.clock.monotonic())

    def get(self, item: Hashable) -> None:
        now = self.clock.monotonic()
        self.depth.dec()
        self.processing[item] = now
        if item in self.added:
            self.latency.observe(now - self.added.pop(item))

    def done(self, item: Hashable) -> None:
        if item in self.processing:
            self.work.observe(self.clock.monotonic() - self.processing.pop(item))

    def retry(self) -> None:
        self.retries.inc()


class WorkqueueMetrics:
    """The workqueue metrics of one component (one registry, every queue of its controllers)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ["name"]
        self.depth = Gauge("workqueue_depth", "Current depth of workqueue", labels, registry=self.registry)
        self.adds = Counter("workqueue_adds_total", "Total number of adds handled by workqueue", labels,
                            registry=self.registry)
        self.retries = Counter("workqueue_retries_total", "Total number of retries handled by workqueue", labels,
                               registry=self.registry)
        self.latency = Histogram("workqueue_queue_duration_seconds", "How long in seconds an item stays in "
                                 "workqueue before being requested.", labels, buckets=DURATION_BUCKETS,
                                 registry=self.registry)
        self.work = Histogram("workqueue_work_duration_seconds", "How long in seconds processing an item from "
                              "workqueue takes.", labels, buckets=DURATION_BUCKETS, registry=self.registry)
        self.queues: dict[str, QueueMetrics] = {}
        self.registry.register(_Processing(self))

    def queue(self, name: str) -> QueueMetrics:
        """The instruments of queue `name` (a restarted controller's new queue continues its series)."""
        metrics = self.queues.get(name)
        if metrics is None:
            metrics = self.queues[name] = QueueMetrics(self, name)
        else:  # the old queue is gone with its items
            metrics.added.clear()
            metrics.processing.clear()
            metrics.depth.set(0)
        return metrics


class _Processing(Collector):
    """unfinished_work_seconds and longest_running_processor_seconds, from the items being processed now."""

    def __init__(self, owner: WorkqueueMetrics) -> None:
        self.owner = owner

    def collect(self) -> Iterator[Metric]:
        now = self.owner.clock.monotonic()
        unfinished = GaugeMetricFamily("workqueue_unfinished_work_seconds", "How many seconds of work has done that "
                                       "is in progress and hasn't been observed by work_duration.", labels=["name"])
        longest = GaugeMetricFamily("workqueue_longest_running_processor_seconds", "How many seconds has the "
                                    "longest running processor for workqueue been running.", labels=["name"])
        for name, q in self.owner.queues.items():
            ages = [now - t for t in q.processing.values()]
            unfinished.add_metric([name], sum(ages))
            longest.add_metric([name], max(ages, default=0.0))
        yield unfinished
        yield longest


PROVIDER: ContextVar[WorkqueueMetrics | None] = ContextVar("workqueue_metrics", default=None)
