"""kubelet's own metrics (pkg/kubelet/metrics) and the agent's metric routes.

One `CollectorRegistry` per agent (never prometheus_client's global one), so agents and tests
in one process do not collide. Served as kubelet serves them:

- `/metrics`: `kubelet_running_pods`, `kubelet_running_containers{container_state}` (read from
  the pod workers when scraped), `kubelet_pod_start_duration_seconds` (first seen by this
  agent → the API shows the pod Running, upstream's buckets), and
  `kubelet_pod_worker_duration_seconds{operation}` (one pod sync: create, update or sync);
- `/metrics/resource` and `/stats/summary`: resource usage (stats.py).

Not measured yet: kubelet_evictions (the eviction manager would have to report the signal).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kubelite.agent.pod_sync import PodSync
from kubelite.agent.runtime.interface import Runtime
from kubelite.agent.stats import ContainerRef, ResourceStats, refs_of
from kubelite.clock import Clock

disable_created_metrics()  # type: ignore[no-untyped-call]  # upstream exposes no `_created` series

Obj = dict[str, Any]
POD_START_BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200,
                     1800, 2700, 3600)
CONTAINER_STATES = ("created", "running", "exited", "unknown")

# (running pods, containers by state) as the pod workers see them now
Census = Callable[[], tuple[int, dict[str, int]]]


class KubeletMetrics:
    def __init__(self, clock: Clock, census: Census) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Census(census))
        self.pod_start = Histogram("kubelet_pod_start_duration_seconds",
                                   "Duration in seconds from kubelet seeing a pod for the first time to the pod "
                                   "starting to run", buckets=POD_START_BUCKETS, registry=self.registry)
        self.pod_worker = Histogram("kubelet_pod_worker_duration_seconds",
                                    "Duration in seconds to sync a single pod. Broken down by operation type: "
                                    "create, update, or sync", ["operation"], registry=self.registry)
        self._first_seen: dict[str, float] = {}  # uid → monotonic time, until the pod is seen Running

    def pod_seen(self, pod: Obj) -> None:
        """Every version of a pod bound here: the first starts the clock, the first Running one stops it."""
        uid = pod["metadata"].get("uid", "")
        phase = (pod.get("status") or {}).get("phase")
        if uid not in self._first_seen:
            if phase in (None, "", "Pending"):
                self._first_seen[uid] = self.clock.monotonic()
            return
        if phase == "Running":
            self.pod_start.observe(self.clock.monotonic() - self._first_seen.pop(uid))
        elif phase in ("Succeeded", "Failed"):
            self._first_seen.pop(uid)

    def pod_gone(self, uid: str) -> None:
        self._first_seen.pop(uid, None)

    def pod_synced(self, operation: str, seconds: float) -> None:
        self.pod_worker.labels(operation).observe(seconds)


class _Census(Collector):
    def __init__(self, census: Census) -> None:
        self.census = census

    def collect(self) -> Iterator[Metric]:
        pods, containers = self.census()
        yield GaugeMetricFamily("kubelet_running_pods", "Number of pods that have a running pod sandbox", value=pods)
        family = GaugeMetricFamily("kubelet_running_containers", "Number of containers currently running",
                                   labels=["container_state"])
        for state in CONTAINER_STATES:
            family.add_metric([state], containers.get(state, 0))
        yield family


def census(syncers: Mapping[str, PodSync], could_run: Callable[[str], bool]) -> tuple[int, dict[str, int]]:
    """(pods with a running container, containers by kubelet's container_state) among the pods that may run."""
    pods, states = 0, {"running": 0, "exited": 0, "created": 0}
    for uid, s in syncers.items():
        if not could_run(uid):
            continue
        running = sum(r.running for r in s.records)
        pods += running > 0
        states["running"] += running
        states["exited"] += sum(not r.running and r.exit is not None for r in s.records)
        states["created"] += sum(not r.running and r.exit is None and r.ever_started for r in s.records)
    return pods, states


def running_containers(runtime: Runtime, syncers: Mapping[str, PodSync]) -> list[ContainerRef]:
    """The container instances running here as processes, for resource stats (hollow containers use nothing)."""
    if not runtime.sandboxed:
        return []
    return refs_of((s.pod, r.name, r.process) for s in syncers.values() for r in s.records if r.running)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def exposition(*registries: CollectorRegistry) -> web.Response:
    """The Prometheus text format of `registries`, one after the other."""
    body = b"".join(generate_latest(r) for r in registries)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def metrics_routes(metrics: KubeletMetrics, stats: ResourceStats) -> dict[str, Handler]:
    """`/metrics`, `/metrics/resource` and `/stats/summary` for the agent's server (GET, path → handler)."""
    resource = stats.registry()

    async def kubelet(request: web.Request) -> web.StreamResponse:
        return exposition(metrics.registry)

    async def resource_metrics(request: web.Request) -> web.StreamResponse:
        await stats.refresh()
        return exposition(resource)

    async def summary(request: web.Request) -> web.StreamResponse:
        await stats.refresh()
        return web.json_response(stats.summary())

    return {"/metrics": kubelet, "/metrics/resource": resource_metrics, "/stats/summary": summary}
