"""kube-apiserver's metrics (k8s.io/apiserver/pkg/endpoints/metrics), served at `/metrics`.

Every request passes `ApiServerMetrics.measure` (the server's middleware calls it, for HTTP and
in-process requests alike): `apiserver_request_total` and `apiserver_request_duration_seconds`
with upstream's labels and buckets, and `apiserver_current_inflight_requests{request_kind}` for
requests that are not long-running (watches are not counted in flight, as upstream's
max-in-flight filter). `apiserver_storage_objects{resource}` is read from the watch cache when
scraped, so it costs nothing per request. Labels come from the path as upstream's
RequestInfoFactory reads it; a path naming no served resource or subresource is labelled
`other`, so no client can add series by inventing paths.

The registry is the server's own (never prometheus_client's global one); under `kubelite
server`/`up` the composition root may add the in-process components' registries (`include`), so
one `/metrics` shows the scheduler's and controllers' metrics too.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import NamedTuple

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client import disable_created_metrics as _disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kubelite.api.errors import ApiError
from kubelite.apiserver import metrics_api
from kubelite.apiserver.cache import Caches
from kubelite.apiserver.registry import SERVED
from kubelite.apiserver.request import APPLY_PATCH, CACHED_PATH, PATH_CACHE, media_type, parse_bool
from kubelite.apiserver.watch import WatchResponse
from kubelite.clock import Clock

_disable_created_metrics()  # type: ignore[no-untyped-call]  # upstream exposes no `_created` series

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Inner = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]

DURATION_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30,
                    45, 60)
DURATION_BOUNDS = (*(float(b) for b in DURATION_BUCKETS), math.inf)  # as prometheus_client's Histogram holds them
_LE = tuple(floatToGoString(b) for b in DURATION_BOUNDS)  # type: ignore[no-untyped-call]  # their `le` labels
COMPONENT = "apiserver"
REQUEST_LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
NON_RESOURCE_PATHS = frozenset({"/", "/api", "/apis", "/healthz", "/livez", "/readyz", "/metrics", "/version",
                                "/openapi/v2", "/openapi/v3"})
# apiserver_current_inflight_requests' request_kind by the metric's verb: watches are not counted (None), other verbs
# (GET, LIST, and whatever method a client invents) are readOnly
_REQUEST_KIND: dict[str, str | None] = {"WATCH": None, "POST": "mutating", "PUT": "mutating", "PATCH": "mutating",
                                        "DELETE": "mutating", "APPLY": "mutating"}
_SERVED = {(r.group, r.version, r.plural): r.subresources for r in (*SERVED, *metrics_api.RESOURCES)}
_SERVED["", "v1", "bindings"] = ()


class RequestInfo(NamedTuple):
    """What upstream's RequestInfoFactory makes of a request, reduced to what the metrics label.

    A NamedTuple, not a frozen dataclass: `ApiServerMetrics.record` finds a request's cells by (info, code), and a
    tuple is hashed in C from its strings' cached hashes, where a dataclass's `__hash__` builds a tuple of the
    fields in Python first (≈ 0.4 µs of every request)."""

    verb: str  # the metric's verb: GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""  # for a non-resource request: its (bounded) path
    scope: str = ""  # resource | namespace | cluster, "" for non-resource requests
    resource_request: bool = False
    dry_run: str = ""


def request_info(method: str, path: str, watch: bool = False, apply: bool = False, dry_run: str = "") -> RequestInfo:
    """Labels for a request as upstream derives them (requestinfo.go, CleanScope, CanonicalVerb, cleanVerb)."""
    if len(path) <= CACHED_PATH:
        return _remembered_info(method, path, watch, apply, dry_run)
    return _request_info(method, path, watch, apply, dry_run)


def _request_info(method: str, path: str, watch: bool, apply: bool, dry_run: str) -> RequestInfo:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return RequestInfo(method, subresource=_non_resource_path(path), dry_run=dry_run)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    subresources = _SERVED.get((group, version, resource))
    if subresources is None:  # not a served resource: one label for all, so no path can add series
        return RequestInfo(method, subresource="other", dry_run=dry_run)
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if subresource and subresource not in subresources:
        subresource = "other"
    scope = "resource" if name or method == "POST" else "namespace" if namespace else "cluster"
    verb = method
    if method in ("GET", "HEAD"):
        verb = "WATCH" if watch else "GET" if scope == "resource" else "LIST"
    elif method == "PATCH" and apply:
        verb = "APPLY"
    return RequestInfo(verb, group, version, resource, subresource, scope, True, dry_run)


# A pure function of its arguments, asked on every request: the same paths recur (a node's Lease, its status).
_remembered_info = functools.lru_cache(maxsize=PATH_CACHE)(_request_info)


def _non_resource_path(path: str) -> str:
    """Non-resource paths keep their name when the set is bounded (discovery, health, OpenAPI); else `other`."""
    path = path.rstrip("/") or "/"
    if path in NON_RESOURCE_PATHS:
        return path
    if path.startswith("/openapi/v3/"):
        return "/openapi/v3/*"
    parts = path.split("/")
    if (parts[1:2] == ["api"] and len(parts) == 3) or (parts[1:2] == ["apis"] and len(parts) <= 4):
        return path  # /api/v1, /apis/GROUP, /apis/GROUP/VERSION: one per served group-version
    return "other"


def info_of(request: web.Request) -> RequestInfo:
    """A request's labels. Most requests have no query, and only a PATCH can be an apply: the query's flags and the
    Content-Type are read only when they can change the labels."""
    q, method = request.query, request.method
    watch, dry_run = False, ""
    if q:
        try:  # not contextlib.suppress: a context manager costs this hot path ≈ 0.3 µs more
            watch = parse_bool(q.get("watch"), "watch")
        except ApiError:  # a malformed flag is the handler's 400; the metric need not know
            watch = False
        if q.get("dryRun") == "All":
            dry_run = "All"
    return request_info(method, request.path, watch, method == "PATCH" and media_type(request) == APPLY_PATCH,
                        dry_run)


class ApiServerMetrics:
    def __init__(self, clock: Clock, caches: Caches) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = _Requests()
        self.registry.register(self.requests)
        self.inflight = _Inflight()
        self.registry.register(self.inflight)
        self.registry.register(_StorageObjects(caches))
        self.included: list[CollectorRegistry] = []
        # (labels, code) → the request's count and its duration histogram (`_Requests`): a server sees few label sets
        self._cells: dict[tuple[RequestInfo, int], tuple[list[float], list[float]]] = {}

    def include(self, registry: CollectorRegistry) -> None:
        """Serve another in-process component's registry at this server's `/metrics` too."""
        self.included.append(registry)

    async def measure(self, request: web.Request, inner: Inner, handler: Handler) -> web.StreamResponse:
        info = info_of(request)
        kind = _REQUEST_KIND.get(info.verb, "readOnly")
        counts = self.inflight.counts
        if kind is not None:
            counts[kind] += 1
        started = self.clock.monotonic()
        code = 0
        try:
            response = await inner(request, handler)
            code = response.status
            if type(response) is WatchResponse:  # in process: the watch is read after this returns (isinstance of an
                # aiohttp response is an ABC's check: ≈ 0.2 µs)
                stream_code, code = code, 0
                response.stream.on_close(lambda: self.record(info, stream_code, self.clock.monotonic() - started))
            return response
        except web.HTTPException as exc:
            code = exc.status
            raise
        except (asyncio.CancelledError, ConnectionResetError):
            code = 200 if info.verb == "WATCH" else 0  # a watch ends when its client goes; others did not finish
            raise
        finally:
            if kind is not None:
                counts[kind] -= 1
            if code:
                self.record(info, code, self.clock.monotonic() - started)

    def record(self, info: RequestInfo, code: int, seconds: float) -> None:
        cells = self._cells.get((info, code))
        if cells is None:
            labels = (info.verb, info.dry_run, info.group, info.version, info.resource, info.subresource, info.scope,
                      COMPONENT)
            cells = self._cells[(info, code)] = self.requests.cells(labels, str(code))
        count, histogram = cells
        count[0] += 1.0
        histogram[bisect.bisect_left(DURATION_BOUNDS, seconds)] += 1.0  # the first bucket whose bound holds it
        histogram[-1] += seconds

    def response(self) -> web.Response:
        body = b"".join(generate_latest(r) for r in (self.registry, *self.included))
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


class _Requests(Collector):
    """`apiserver_request_total` and `apiserver_request_duration_seconds` as plain numbers, exposed exactly as
    prometheus_client's Counter and Histogram of these names, labels and buckets expose them (children in order of
    first use, cumulative buckets, `_count` and `_sum`; no `_created`, disabled above). Their `inc` and `observe`
    take a lock per update and observe walks the buckets in Python: ≈ 3 µs of every request, where these are two
    list updates (the server's requests are all served on one event loop)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, ...], list[float]] = {}  # labels and code → [count]
        # labels → the count of each bucket (not cumulative; +Inf last), then the sum of the durations
        self.histograms: dict[tuple[str, ...], list[float]] = {}

    def cells(self, labels: tuple[str, ...], code: str) -> tuple[list[float], list[float]]:
        """The count of (`labels`, `code`) and the histogram of `labels`, made on first use."""
        count = self.counts.setdefault((*labels, code), [0.0])
        histogram = self.histograms.setdefault(labels, [0.0] * (len(DURATION_BOUNDS) + 1))
        return count, histogram

    def collect(self) -> Iterator[Metric]:
        total = CounterMetricFamily("apiserver_request_total", "Counter of apiserver requests broken out for each "
                                    "verb, dry run value, group, version, resource, scope, component, and HTTP "
                                    "response code.", labels=[*REQUEST_LABELS, "code"])
        for labels, count in self.counts.items():
            total.add_metric(labels, count[0])
        yield total
        durations = HistogramMetricFamily("apiserver_request_duration_seconds", "Response latency distribution in "
                                          "seconds for each verb, dry run value, group, version, resource, "
                                          "subresource, scope and component.", labels=list(REQUEST_LABELS))
        for labels, histogram in self.histograms.items():
            acc, buckets = 0.0, []
            for le, in_bucket in zip(_LE, histogram, strict=False):
                acc += in_bucket
                buckets.append((le, acc))
            durations.add_metric(labels, buckets, histogram[-1])
        yield durations


class _Inflight(Collector):
    """`apiserver_current_inflight_requests{request_kind}`: plain counts, read when scraped. A labelled Gauge takes
    a lock for each inc and dec, twice per request, for a value only a scrape reads (the server's requests are
    served on one event loop)."""

    def __init__(self) -> None:
        self.counts = {"readOnly": 0, "mutating": 0}

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("apiserver_current_inflight_requests", "Number of requests currently being "
                                   "served by this apiserver, per request kind.", labels=["request_kind"])
        for kind, count in self.counts.items():
            family.add_metric([kind], count)
        yield family


class _StorageObjects(Collector):
    def __init__(self, caches: Caches) -> None:
        self.caches = caches

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("apiserver_storage_objects", "Number of stored objects at the time of last check "
                                   "split by kind.", labels=["resource"])
        for resource, cache in self.caches.by_resource.items():
            name = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
            family.add_metric([name], cache.count())
        yield family
