"""kube-scheduler's metrics (pkg/scheduler/metrics), with upstream's names, labels and buckets.

- `scheduler_schedule_attempts_total{result,profile}` and
  `scheduler_scheduling_attempt_duration_seconds{result,profile}`: one per attempt, `scheduled`
  once the binding succeeded (the duration then covers the algorithm and the binding),
  `unschedulable` when no node fits, `error` for a failed bind or a failing cycle;
- `scheduler_pod_scheduling_sli_duration_seconds{attempts}` and `scheduler_pod_scheduling_attempts`:
  per scheduled pod, from when it entered the queue;
- `scheduler_pending_pods{queue}` (active, backoff, unschedulable, gated), read when scraped;
- `scheduler_preemption_attempts_total` (each DefaultPreemption run) and
  `scheduler_preemption_victims` (victims of the chosen candidate).

Each scheduler has its own registry, so schedulers in one process (tests, the all-in-one) do
not collide.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kubelite.scheduler.candidate import PreemptionResult

disable_created_metrics()  # type: ignore[no-untyped-call]  # upstream exposes no `_created` series


def exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """prometheus.ExponentialBuckets."""
    return tuple(start * factor**i for i in range(count))


ATTEMPT_BUCKETS = exponential(0.001, 2, 15)
SLI_BUCKETS = exponential(0.01, 2, 20)
VICTIM_BUCKETS = exponential(1, 2, 7)
ATTEMPTS_BUCKETS = exponential(1, 2, 5)
QUEUES = ("active", "backoff", "unschedulable", "gated")

Pending = Callable[[], dict[str, int]]  # queue name → pods in it now


def attempts_label(attempts: int) -> str:
    """getAttemptsLabel: the count, with everything from 15 on as "15+"."""
    return "15+" if attempts >= 15 else str(attempts)


class SchedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.attempts = Counter("scheduler_schedule_attempts_total", "Number of attempts to schedule pods, by the "
                                "result. 'unschedulable' means a pod could not be scheduled, while 'error' means an "
                                "internal scheduler problem.", ["result", "profile"], registry=self.registry)
        self.attempt_duration = Histogram("scheduler_scheduling_attempt_duration_seconds", "Scheduling attempt "
                                          "latency in seconds (scheduling algorithm + binding)", ["result", "profile"],
                                          buckets=ATTEMPT_BUCKETS, registry=self.registry)
        self.sli = Histogram("scheduler_pod_scheduling_sli_duration_seconds", "E2e latency for a pod being "
                             "scheduled, from the time the pod enters the scheduling queue and might involve "
                             "multiple scheduling attempts.", ["attempts"], buckets=SLI_BUCKETS,
                             registry=self.registry)
        self.pod_attempts = Histogram("scheduler_pod_scheduling_attempts", "Number of attempts to successfully "
                                      "schedule a pod.", buckets=ATTEMPTS_BUCKETS, registry=self.registry)
        self.preemption_attempts = Counter("scheduler_preemption_attempts_total", "Total preemption attempts in the "
                                           "cluster till now", registry=self.registry)
        self.preemption_victims = Histogram("scheduler_preemption_victims", "Number of selected preemption victims",
                                            buckets=VICTIM_BUCKETS, registry=self.registry)
        self._pending: list[Pending] = []
        self.registry.register(_PendingPods(self._pending))

    def watch_pending(self, pending: Pending) -> None:
        """Read `scheduler_pending_pods` from `pending` (the running scheduler's queue) when scraped."""
        self._pending[:] = [pending]

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        self.attempts.labels(result, profile).inc()
        self.attempt_duration.labels(result, profile).observe(seconds)

    def scheduled(self, profile: str, seconds: float, attempts: int, since_queued: float) -> None:
        self.attempt("scheduled", profile, seconds)
        self.sli.labels(attempts_label(attempts)).observe(since_queued)
        self.pod_attempts.observe(attempts)

    def preemption(self, result: PreemptionResult) -> None:
        self.preemption_attempts.inc()
        if result.candidate is not None:
            self.preemption_victims.observe(len(result.candidate.victims))


class _PendingPods(Collector):
    def __init__(self, pending: list[Pending]) -> None:
        self.pending = pending

    def collect(self) -> Iterator[Metric]:
        counts = self.pending[0]() if self.pending else {}
        family = GaugeMetricFamily("scheduler_pending_pods", "Number of pending pods, by the queue type. 'active' "
                                   "means number of pods in activeQ; 'backoff' means number of pods in backoffQ; "
                                   "'unschedulable' means number of pods in unschedulablePods that the scheduler "
                                   "attempted to schedule and failed; 'gated' is the number of unschedulable pods "
                                   "that the scheduler never attempted to schedule because they are gated.",
                                   labels=["queue"])
        for queue in QUEUES:
            family.add_metric([queue], counts.get(queue, 0))
        yield family
