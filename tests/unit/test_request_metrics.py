"""`apiserver_request_total` and `apiserver_request_duration_seconds` are kept as plain numbers (metrics.py `_Requests`)
and must be exposed byte for byte as prometheus_client's Counter and Histogram of the same names, labels and buckets
were: the same requests recorded both ways, the same `/metrics` text."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from kubelite.apiserver.cache import Caches
from kubelite.apiserver.metrics import DURATION_BUCKETS, REQUEST_LABELS, ApiServerMetrics, RequestInfo
from kubelite.clock import RealClock

GET = RequestInfo("GET", "", "v1", "pods", "", "resource", True)
PATCH = RequestInfo("PATCH", "coordination.k8s.io", "v1", "leases", "", "resource", True)
LIST = RequestInfo("LIST", "", "v1", "pods", "", "namespace", True, "All")
HEALTH = RequestInfo("GET", subresource="/healthz")

# (request, code, seconds) in the order recorded
CASES = [
    pytest.param([], id="nothing recorded: the families alone"),
    pytest.param([(GET, 200, 0.001)], id="one request"),
    pytest.param([(GET, 200, 0.005), (GET, 200, 0.025), (GET, 404, 0.0051), (GET, 200, 60.0), (GET, 200, 61.0)],
                 id="durations on a bucket's bound, just over, beyond the last: le is inclusive"),
    pytest.param([(PATCH, 200, 0.3), (LIST, 200, 0.0), (GET, 200, 1.25), (HEALTH, 200, 0.0001), (PATCH, 409, 2.0),
                  (GET, 200, 1e-9)], id="label sets in order of first use, codes apart, sums of floats"),
]


def _by_prometheus_client(recorded: list[tuple[RequestInfo, int, float]]) -> bytes:
    registry = CollectorRegistry(auto_describe=True)
    total = Counter("apiserver_request_total", "Counter of apiserver requests broken out for each verb, dry run value, "
                    "group, version, resource, scope, component, and HTTP response code.", [*REQUEST_LABELS, "code"],
                    registry=registry)
    durations = Histogram("apiserver_request_duration_seconds", "Response latency distribution in seconds for each "
                          "verb, dry run value, group, version, resource, subresource, scope and component.",
                          REQUEST_LABELS, buckets=DURATION_BUCKETS, registry=registry)
    for info, code, seconds in recorded:
        labels: Any = (info.verb, info.dry_run, info.group, info.version, info.resource, info.subresource, info.scope,
                       "apiserver")
        total.labels(*labels, str(code)).inc()
        durations.labels(*labels).observe(seconds)
    return generate_latest(registry)


@pytest.mark.parametrize("recorded", CASES)
def test_plain_counts_are_exposed_as_the_counter_and_histogram_were(
        recorded: list[tuple[RequestInfo, int, float]]) -> None:
    metrics = ApiServerMetrics(RealClock(), Caches(None, ()))  # type: ignore[arg-type]  # no store: none read
    for info, code, seconds in recorded:
        metrics.record(info, code, seconds)
    alone = CollectorRegistry()
    alone.register(metrics.requests)
    assert generate_latest(alone) == _by_prometheus_client(recorded)
