"""Metrics overhead: what instrumentation adds per API request, what a scrape costs, what sampling costs.

    python -m benchmarks.metrics [--requests 200000] [--series 2000] [--processes 300]

- per request: the labels from the path and the counter, histogram and in-flight gauge
  updates the API server's middleware adds to every request (ApiServerMetrics.measure's work,
  without the handler), over a realistic mix of paths;
- scrape: rendering `/metrics` with `--series` label sets of apiserver_request_total and its
  histogram;
- sampling: one agent sample (one pass over /proc plus process-tree sums) with `--processes`
  container process groups looked up.

Prints figures only (see BENCHMARKS.md; `benchmarks.apiserver` run before and after gives the
end-to-end view).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from prometheus_client import generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kubelite.agent.stats import ContainerRef, ResourceStats
from kubelite.apiserver.cache import Caches
from kubelite.apiserver.metrics import ApiServerMetrics, RequestInfo, request_info
from kubelite.apiserver.registry import RESOURCES
from kubelite.clock import RealClock

PATHS = [("POST", "/api/v1/namespaces/default/pods", False), ("GET", "/api/v1/namespaces/default/pods/web-1", False),
         ("GET", "/api/v1/pods", False), ("PATCH", "/api/v1/namespaces/default/pods/web-1/status", False),
         ("GET", "/apis/apps/v1/namespaces/default/deployments", True), ("PUT", "/api/v1/nodes/n1/status", False),
         ("DELETE", "/api/v1/namespaces/default/pods/web-1", False), ("GET", "/readyz", False)]


VERBS = [("GET", "resource"), ("LIST", "namespace"), ("LIST", "cluster"), ("WATCH", "cluster"),
         ("POST", "resource"), ("PUT", "resource"), ("PATCH", "resource"), ("DELETE", "resource")]


class _NoStore:
    """Caches need a store only to be fed; the benchmark reads their (empty) counts."""


def per_request(n: int) -> float:
    """Seconds of instrumentation per request (labels + count + observe + in-flight inc/dec)."""
    metrics = ApiServerMetrics(RealClock(), Caches(_NoStore(), RESOURCES))  # type: ignore[arg-type]
    clock = RealClock()
    gauge = metrics._kinds["readOnly"]
    start = time.perf_counter()
    for i in range(n):
        method, path, watch = PATHS[i % len(PATHS)]
        gauge.inc()
        began = clock.monotonic()
        info = request_info(method, path, watch)
        gauge.dec()
        metrics.record(info, 200, clock.monotonic() - began)
    return (time.perf_counter() - start) / n


def scrape(series: int) -> tuple[float, int]:
    """Render /metrics after `series` distinct label sets (served resources, verbs and scopes, codes) were seen."""
    metrics = ApiServerMetrics(RealClock(), Caches(_NoStore(), RESOURCES))  # type: ignore[arg-type]
    label_sets = [(RequestInfo(verb, r.group, r.version, r.plural, "", scope, True), code)
                  for r in RESOURCES for verb, scope in VERBS for code in (200, 201, 404, 409, 422)]
    for info, code in label_sets[:series]:
        metrics.record(info, code, 0.01)
    start = time.perf_counter()
    body = metrics.response().body
    assert isinstance(body, bytes)
    generate_latest(metrics.registry)
    return (time.perf_counter() - start) / 2, len(body)


def sampling(processes: int) -> tuple[float, int]:
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    refs = [ContainerRef("ns", f"p{i}", f"u{i}", "c", 0.0, pids[i % len(pids)]) for i in range(processes)]
    stats = ResourceStats(RealClock(), lambda: refs, None, "bench")
    start = time.perf_counter()
    rounds = 5
    for _ in range(rounds):
        stats.record(refs, *stats.read(refs))
    return (time.perf_counter() - start) / rounds, len(pids)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=200_000)
    p.add_argument("--series", type=int, default=600)
    p.add_argument("--processes", type=int, default=300)
    args = p.parse_args()
    cost = per_request(args.requests)
    print(f"per request: {cost * 1e6:.1f} µs of instrumentation ({args.requests:,} requests, {len(PATHS)} paths)")
    seconds, size = scrape(args.series)
    print(f"scrape: {seconds * 1e3:.1f} ms to render /metrics with {args.series:,} request label sets at most "
          f"({size / 1024:.0f} KiB)")
    seconds, host = sampling(args.processes)
    print(f"agent sample: {seconds * 1e3:.1f} ms for {args.processes} containers' process trees "
          f"({host} processes on this host)")


if __name__ == "__main__":
    main()
