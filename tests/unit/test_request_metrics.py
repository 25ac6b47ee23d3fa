"""`apiserver_request_total` and `apiserver_request_duration_seconds` are kept as plain numbers (metrics.py `_Requests`)
and must be exposed byte for byte as prometheus_client's Counter and Histogram of the same names, labels and buckets
were: the same requests recorded both ways, the same `/metrics` text."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from kubelite.apiserver.cache import Caches
from kubelite.apiserver.metrics import DURATION_BUCKETS, REQUEST_LABELS, ApiServerMetrics, RequestInfo, info_of
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


# What `info_of` reads of a request (the query's watch and dryRun, a PATCH's Content-Type) for its labels; it
# reads the query only when there is one and the Content-Type only of a PATCH, so each flag is pinned here.
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@pytest.mark.parametrize("method,path,content_type,want", [
    pytest.param("GET", f"{LEASE}/n1", "", RequestInfo("GET", "coordination.k8s.io", "v1", "leases", "", "resource",
                                                       True), id="a get without a query"),
    pytest.param("GET", f"{LEASE}?watch=true", "", RequestInfo("WATCH", "coordination.k8s.io", "v1", "leases", "",
                                                               "namespace", True), id="watch=true is a WATCH"),
    pytest.param("GET", f"{LEASE}?watch=1", "", RequestInfo("WATCH", "coordination.k8s.io", "v1", "leases", "",
                                                            "namespace", True), id="watch as Go's ParseBool reads it"),
    pytest.param("GET", f"{LEASE}?watch=maybe", "", RequestInfo("LIST", "coordination.k8s.io", "v1", "leases", "",
                                                                "namespace", True),
                 id="a malformed watch flag labels a LIST (the handler answers 400)"),
    pytest.param("GET", f"{LEASE}?limit=5", "", RequestInfo("LIST", "coordination.k8s.io", "v1", "leases", "",
                                                            "namespace", True), id="a query without the flags"),
    pytest.param("POST", f"{LEASE}?dryRun=All", "application/json",
                 RequestInfo("POST", "coordination.k8s.io", "v1", "leases", "", "resource", True, "All"),
                 id="dryRun=All is labelled"),
    pytest.param("POST", f"{LEASE}?dryRun=Some", "application/json",
                 RequestInfo("POST", "coordination.k8s.io", "v1", "leases", "", "resource", True),
                 id="another dryRun value is not"),
    pytest.param("PATCH", f"{LEASE}/n1", "application/apply-patch+yaml; charset=utf-8",
                 RequestInfo("APPLY", "coordination.k8s.io", "v1", "leases", "", "resource", True),
                 id="a PATCH of apply's media type is an APPLY"),
    pytest.param("PATCH", f"{LEASE}/n1", "application/merge-patch+json",
                 RequestInfo("PATCH", "coordination.k8s.io", "v1", "leases", "", "resource", True),
                 id="a merge patch stays PATCH"),
    pytest.param("PUT", f"{LEASE}/n1", "application/apply-patch+yaml",
                 RequestInfo("PUT", "coordination.k8s.io", "v1", "leases", "", "resource", True),
                 id="apply's media type on another verb changes nothing"),
    pytest.param("GET", "/apis/autoscaling/v1/namespaces/d/horizontalpodautoscalers/web/status", "",
                 RequestInfo("GET", "autoscaling", "v1", "horizontalpodautoscalers", "status", "resource", True),
                 id="a version served by conversion is labelled with its resource"),
])
def test_labels_read_from_the_request(method: str, path: str, content_type: str, want: RequestInfo) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    assert info_of(make_mocked_request(method, path, headers=headers)) == want
