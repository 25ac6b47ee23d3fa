"""The resource metrics API (`metrics.k8s.io/v1beta1`: NodeMetrics, PodMetrics), as metrics-server serves it.

`kubectl top node|pod` reads it. The server scrapes each node agent's `/stats/summary` (the
agent measures usage: agent/stats.py) the way metrics-server scrapes kubelets, over the same
connection as `pods/log` (node_connection: TLS with the API server's client certificate), and
keeps each node's scrape for `resolution` seconds (metrics-server's default resolution, 15 s) on
the injected clock, so a burst of requests costs one scrape per node. A node whose agent cannot
be reached, or that has not measured a pod yet, is left out of lists, and a GET of it is a 404,
as metrics-server answers.

Quantities are written as metrics-server writes them: CPU in nanocores (`123456n`), memory in
bytes with the largest exact binary suffix (`4096Ki`). `window` is the scrape resolution.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from kubelite.api import errors
from kubelite.api.selectors import COMMON_FIELDS, parse_field_selector, parse_label_selector
from kubelite.apiserver import node_connection
from kubelite.apiserver.handlers import respond
from kubelite.apiserver.node_connection import node_endpoint
from kubelite.apiserver.registry.base import Obj, Resource
from kubelite.apiserver.registry.core import NODES
from kubelite.apiserver.registry.pods import PODS
from kubelite.apiserver.rest import Registry
from kubelite.clock import Clock, rfc3339

log = logging.getLogger("kubelite.apiserver")

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
PREFIX = f"/apis/{GROUP_VERSION}/"
RESOLUTION = 15.0
SCRAPE_TIMEOUT = 10.0
_READ = ("get", "list")
NODE_METRICS = Resource(GROUP, VERSION, "nodes", "", "NodeMetrics", False, "", verbs=_READ)
POD_METRICS = Resource(GROUP, VERSION, "pods", "", "PodMetrics", True, "", verbs=_READ)
RESOURCES = (NODE_METRICS, POD_METRICS)
_BINARY = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))


def cpu_quantity(nanocores: int) -> str:
    return f"{nanocores}n"


def memory_quantity(size: int) -> str:
    """Bytes in BinarySI canonical form, as resource.NewQuantity(n, BinarySI) prints them."""
    for suffix, unit in _BINARY:
        if size and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


@dataclass
class Scrape:
    at: float  # clock.monotonic() when fetched
    summary: Obj | None  # None: the agent could not be reached


def node_usage(summary: Obj) -> Obj | None:
    node = summary.get("node") or {}
    cpu, memory = (node.get("cpu") or {}).get("usageNanoCores"), (node.get("memory") or {}).get("workingSetBytes")
    if cpu is None or memory is None:
        return None
    return {"timestamp": (node.get("cpu") or {}).get("time"), "usage": {"cpu": cpu_quantity(int(cpu)),
                                                                       "memory": memory_quantity(int(memory))}}


def pod_usage(summary: Obj) -> dict[str, Obj]:
    """uid → (timestamp, containers' usage) for the pods whose every container has been measured."""
    out: dict[str, Obj] = {}
    for pod in summary.get("pods") or []:
        containers, timestamp = [], None
        for c in pod.get("containers") or []:
            cpu, memory = (c.get("cpu") or {}).get("usageNanoCores"), (c.get("memory") or {}).get("workingSetBytes")
            if cpu is None or memory is None:
                break
            timestamp = (c.get("cpu") or {}).get("time")
            containers.append({"name": c.get("name", ""), "usage": {"cpu": cpu_quantity(int(cpu)),
                                                                     "memory": memory_quantity(int(memory))}})
        else:
            if containers:
                out[(pod.get("podRef") or {}).get("uid", "")] = {"timestamp": timestamp, "containers": containers}
    return out


class MetricsApi:
    def __init__(self, registry: Registry, clock: Clock, tls: ssl.SSLContext | None = None,
                 resolution: float = RESOLUTION, timeout: float = SCRAPE_TIMEOUT) -> None:
        self.registry = registry
        self.tls = tls if tls is not None else node_connection.client_context()
        self.clock = clock
        self.resolution = resolution
        self.timeout = timeout
        self._scrapes: dict[str, Scrape] = {}
        self._inflight: dict[str, asyncio.Future[Scrape]] = {}

    # --- routing -----------------------------------------------------------------------------------

    async def handle(self, request: web.Request, path: str) -> web.StreamResponse | None:
        """Answer a metrics.k8s.io resource request; None when `path` is not one (discovery is elsewhere)."""
        if not path.startswith(PREFIX):
            return None
        parts = path.removeprefix(PREFIX).split("/")
        namespace = ""
        if len(parts) >= 3 and parts[0] == "namespaces" and parts[2] == "pods":
            namespace, parts = parts[1], parts[2:]
        if not parts or len(parts) > 2 or parts[0] not in ("nodes", "pods") or (namespace and parts[0] != "pods"):
            return None
        resource = NODE_METRICS if parts[0] == "nodes" else POD_METRICS
        if request.method != "GET":
            raise errors.method_not_allowed(request.method, f"{resource.plural}.{GROUP}")
        name = parts[1] if len(parts) == 2 else ""
        if resource is NODE_METRICS:
            return respond(await self.nodes(request, name))
        return respond(await self.pods(request, namespace, name))

    def _selected(self, request: web.Request, objects: Iterable[Obj], name: str) -> list[Obj]:
        labels = parse_label_selector(request.query.get("labelSelector", ""))
        fields = parse_field_selector(request.query.get("fieldSelector", ""), COMMON_FIELDS, "")
        return [o for o in objects if (not name or o["metadata"]["name"] == name)
                and labels.matches(o["metadata"].get("labels")) and fields.matches(o)]

    # --- NodeMetrics -------------------------------------------------------------------------------

    async def nodes(self, request: web.Request, name: str) -> Obj:
        nodes = self._selected(request, self.registry.caches[NODES].list(), name)
        scrapes = await self.scrape({n["metadata"]["name"]: n for n in nodes})
        items = []
        for node in nodes:
            meta = node["metadata"]
            summary = scrapes[meta["name"]].summary
            usage = node_usage(summary) if summary is not None else None
            if usage is not None:
                items.append({"kind": "NodeMetrics", "apiVersion": GROUP_VERSION,
                              "metadata": self._meta(meta), "window": self._window(), **usage})
        if name:
            if not items:
                raise errors.not_found("nodemetrics", name, GROUP)
            return items[0]
        return {"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}

    # --- PodMetrics --------------------------------------------------------------------------------

    async def pods(self, request: web.Request, namespace: str, name: str) -> Obj:
        pods = [p for p in self._selected(request, self.registry.caches[PODS].list(namespace), name)
                if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") == "Running"]
        node_names = {p["spec"]["nodeName"] for p in pods}
        nodes = {n: self.registry.caches[NODES].get("", n) for n in node_names}
        scrapes = await self.scrape({n: node for n, node in nodes.items() if node is not None})
        usage: dict[str, Obj] = {}
        for scrape in scrapes.values():
            if scrape.summary is not None:
                usage.update(pod_usage(scrape.summary))
        items = []
        for pod in pods:
            found = usage.get(pod["metadata"].get("uid", ""))
            if found is not None:
                items.append({"kind": "PodMetrics", "apiVersion": GROUP_VERSION,
                              "metadata": self._meta(pod["metadata"]), "timestamp": found["timestamp"],
                              "window": self._window(), "containers": found["containers"]})
        if name:
            if not items:
                raise errors.not_found("podmetrics", f"{namespace}/{name}", GROUP)
            return items[0]
        return {"kind": "PodMetricsList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}

    def _meta(self, meta: Obj) -> Obj:
        out: Obj = {"name": meta["name"], "creationTimestamp": rfc3339(self.clock.now())}
        if meta.get("namespace"):
            out["namespace"] = meta["namespace"]
        if meta.get("labels"):
            out["labels"] = meta["labels"]
        return out

    def _window(self) -> str:
        return f"{self.resolution:g}s"

    # --- scraping ----------------------------------------------------------------------------------

    async def scrape(self, nodes: dict[str, Obj]) -> dict[str, Scrape]:
        """Each node's latest scrape, fetching those older than the resolution (concurrently, once per node)."""
        for gone in [n for n in self._scrapes if self.registry.caches[NODES].get("", n) is None]:
            del self._scrapes[gone]
        names = list(nodes)
        results = await asyncio.gather(*(self._scrape_one(n, nodes[n]) for n in names))
        return dict(zip(names, results, strict=True))

    async def _scrape_one(self, name: str, node: Obj) -> Scrape:
        cached = self._scrapes.get(name)
        if cached is not None and self.clock.monotonic() - cached.at < self.resolution:
            return cached
        pending = self._inflight.get(name)
        if pending is None:
            pending = asyncio.ensure_future(self._fetch(name, node))
            self._inflight[name] = pending
            pending.add_done_callback(lambda _: self._inflight.pop(name, None))
        return await asyncio.shield(pending)

    async def _fetch(self, name: str, node: Obj) -> Scrape:
        agent = node_endpoint(node)
        summary: Obj | None = None
        if agent is not None:
            url = URL.build(scheme="https", host=agent.host, port=agent.port, path="/stats/summary")
            try:
                timeout = aiohttp.ClientTimeout(total=self.timeout)
                async with aiohttp.ClientSession(timeout=timeout) as session, \
                        session.get(url, params={"only_cpu_and_memory": "true"}, ssl=self.tls) as resp:
                    resp.raise_for_status()
                    body: Any = await resp.json()
                    summary = body if isinstance(body, dict) else None
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                log.warning("metrics: scraping node %s failed: %s", name, exc)
        scrape = Scrape(self.clock.monotonic(), summary)
        self._scrapes[name] = scrape
        return scrape
