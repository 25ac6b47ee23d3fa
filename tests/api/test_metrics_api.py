"""metrics.k8s.io (NodeMetrics, PodMetrics) and /metrics over real HTTP: a real ApiServer on SQLite scraping a
node agent's /stats/summary (a real HTTP server playing the agent) on a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from kubelite.agent.server import ensure_serving_cert, tls_context
from kubelite.apiserver import protobuf
from kubelite.apiserver.metrics_api import cpu_quantity, memory_quantity
from kubelite.clock import FakeClock
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod
from tests.conftest import serving

Client = TestClient  # type: ignore[type-arg]
GV = "/apis/metrics.k8s.io/v1beta1"


@dataclass
class FakeAgent:
    """A node agent's /stats/summary, answering what the test sets and counting scrapes."""

    summary: dict[str, Any] = field(default_factory=dict)
    scrapes: int = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.scrapes += 1
        assert request.query.get("only_cpu_and_memory") == "true"
        return web.json_response(self.summary)


@dataclass
class Cluster:
    api: Client
    clock: FakeClock
    agent: FakeAgent
    agent_port: int


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    clock = FakeClock()
    agent = FakeAgent()
    app = web.Application()
    app.router.add_get("/stats/summary", agent.handle)
    agent_server = TestServer(app)  # the agent serves TLS (its self-signed certificate, as kubelet's)
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), clock=clock) as api:
        await agent_server.start_server(ssl=tls_context(*ensure_serving_cert(tmp_path / "agent", "127.0.0.1"), None))
        assert agent_server.port is not None
        try:
            yield Cluster(api, clock, agent, agent_server.port)
        finally:
            await agent_server.close()


async def call(api: Client, method: str, path: str, body: Any = None, expect: int = 200,
               ctype: str = "application/json") -> Any:
    resp = await api.request(method, path, data=None if body is None else orjson.dumps(body),
                             headers={"Content-Type": ctype})
    payload = await resp.read()
    assert resp.status == expect, (resp.status, payload)
    return orjson.loads(payload) if resp.content_type == "application/json" else payload.decode()


async def add_node(c: Cluster, name: str, port: int, labels: dict[str, str] | None = None) -> None:
    await call(c.api, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                "metadata": {"name": name, "labels": labels or {}}}, 201)
    await call(c.api, "PATCH", f"/api/v1/nodes/{name}/status", {"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}, ctype="application/merge-patch+json")


async def add_running_pod(c: Cluster, name: str, node: str, labels: dict[str, str]) -> str:
    body = make_pod(name).obj()
    body["spec"]["nodeName"] = node
    body["metadata"]["labels"] = labels
    pod = await call(c.api, "POST", "/api/v1/namespaces/default/pods", body, 201)
    await call(c.api, "PATCH", f"/api/v1/namespaces/default/pods/{name}/status", {"status": {"phase": "Running"}},
               ctype="application/merge-patch+json")
    return str(pod["metadata"]["uid"])


def summary(node_cpu: int, pods: list[tuple[str, str, int, int]]) -> dict[str, Any]:
    """A /stats/summary: the node's usage and (pod name, uid, nanocores, bytes) with one container `main` each."""
    t = "2023-11-14T22:13:20Z"
    return {"node": {"nodeName": "n1", "cpu": {"time": t, "usageNanoCores": node_cpu},
                     "memory": {"time": t, "workingSetBytes": 2 * 2**30}},
            "pods": [{"podRef": {"name": n, "namespace": "default", "uid": uid},
                      "containers": [{"name": "main", "cpu": {"time": t, "usageNanoCores": cpu},
                                      "memory": {"time": t, "workingSetBytes": mem}}]} for n, uid, cpu, mem in pods]}


@pytest.mark.parametrize("nanocores,size,cpu,memory", [
    (250_000_000, 4096, "250000000n", "4Ki"),
    (0, 0, "0n", "0"),
    (1, 1536 * 2**20, "1n", "1536Mi"),
    (7, 2**30 + 1, "7n", "1073741825"),
])
def test_quantities_as_metrics_server_writes_them(nanocores: int, size: int, cpu: str, memory: str) -> None:
    assert (cpu_quantity(nanocores), memory_quantity(size)) == (cpu, memory)


async def test_discovery_lists_the_metrics_api(cluster: Cluster) -> None:
    groups = await call(cluster.api, "GET", "/apis")
    [group] = [g for g in groups["groups"] if g["name"] == "metrics.k8s.io"]
    assert group["preferredVersion"]["groupVersion"] == "metrics.k8s.io/v1beta1"
    resources = await call(cluster.api, "GET", GV)
    assert {(r["name"], r["kind"], r["namespaced"], tuple(r["verbs"])) for r in resources["resources"]} == {
        ("nodes", "NodeMetrics", False, ("get", "list")), ("pods", "PodMetrics", True, ("get", "list"))}
    resp = await cluster.api.get("/apis", headers={
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})
    aggregated = orjson.loads(await resp.read())
    assert "metrics.k8s.io" in {item["metadata"].get("name") for item in aggregated["items"]}


async def test_node_and_pod_metrics_from_the_agents_summary(cluster: Cluster) -> None:
    c = cluster
    await add_node(c, "n1", c.agent_port, {"zone": "a"})
    busy = await add_running_pod(c, "busy", "n1", {"app": "spin"})
    idle = await add_running_pod(c, "idle", "n1", {"app": "sleep"})
    c.agent.summary = summary(1_500_000_000, [("busy", busy, 990_000_000, 8192), ("idle", idle, 1_000_000, 4096)])

    nodes = await call(c.api, "GET", f"{GV}/nodes")
    assert nodes["kind"] == "NodeMetricsList"
    [node] = nodes["items"]
    assert node["metadata"]["name"] == "n1" and node["metadata"]["labels"] == {"zone": "a"}
    assert node["usage"] == {"cpu": "1500000000n", "memory": "2Gi"}
    assert node["timestamp"] == "2023-11-14T22:13:20Z" and node["window"] == "15s"
    assert (await call(c.api, "GET", f"{GV}/nodes/n1"))["usage"]["cpu"] == "1500000000n"
    assert (await call(c.api, "GET", f"{GV}/nodes?labelSelector=zone%3Db"))["items"] == []

    pods = await call(c.api, "GET", f"{GV}/namespaces/default/pods")
    assert pods["kind"] == "PodMetricsList"
    by_name = {p["metadata"]["name"]: p for p in pods["items"]}
    assert by_name["busy"]["containers"] == [{"name": "main", "usage": {"cpu": "990000000n", "memory": "8Ki"}}]
    selected = await call(c.api, "GET", f"{GV}/namespaces/default/pods?labelSelector=app%3Dspin")
    assert [p["metadata"]["name"] for p in selected["items"]] == ["busy"]
    one = await call(c.api, "GET", f"{GV}/namespaces/default/pods/idle")
    assert (one["kind"], one["metadata"]["namespace"]) == ("PodMetrics", "default")
    assert [p["metadata"]["name"] for p in (await call(c.api, "GET", f"{GV}/pods"))["items"]] == ["busy", "idle"]
    assert (await call(c.api, "GET", f"{GV}/namespaces/other/pods"))["items"] == []
    assert c.agent.scrapes == 1  # every request above was served from one scrape (resolution 15 s)


@pytest.mark.parametrize("path", [f"{GV}/nodes", f"{GV}/nodes/n1", f"{GV}/namespaces/default/pods",
                                  f"{GV}/namespaces/default/pods/busy", f"{GV}/pods"])
async def test_protobuf_answers_when_accept_prefers_it(cluster: Cluster, path: str) -> None:
    """`kubectl top` asks `application/vnd.kubernetes.protobuf, */*` (metrics-server answers protobuf): the same
    object as the JSON answer, in its upstream message (list items carry no kind, as Go's)."""
    c = cluster
    await add_node(c, "n1", c.agent_port)
    busy = await add_running_pod(c, "busy", "n1", {"app": "spin"})
    c.agent.summary = summary(1_500_000_000, [("busy", busy, 990_000_000, 8192)])
    as_json = await call(c.api, "GET", path)
    for item in as_json.get("items", []):
        del item["kind"], item["apiVersion"]
    resp = await c.api.get(path, headers={"Accept": f"{protobuf.MEDIA_TYPE}, */*"})
    assert (resp.status, resp.content_type) == (200, protobuf.MEDIA_TYPE)
    assert protobuf.decode(await resp.read()) == as_json


async def test_scrapes_are_cached_for_the_resolution(cluster: Cluster) -> None:
    c = cluster
    await add_node(c, "n1", c.agent_port)
    c.agent.summary = summary(100, [])
    await call(c.api, "GET", f"{GV}/nodes")
    await c.clock.advance(14.0)
    c.agent.summary = summary(200, [])
    assert (await call(c.api, "GET", f"{GV}/nodes/n1"))["usage"]["cpu"] == "100n"
    await c.clock.advance(1.0)
    assert (await call(c.api, "GET", f"{GV}/nodes/n1"))["usage"]["cpu"] == "200n"
    assert c.agent.scrapes == 2


@pytest.mark.parametrize("name,path,code,reason,message", [
    ("an unknown node", f"{GV}/nodes/nope", 404, "NotFound", 'nodemetrics.metrics.k8s.io "nope" not found'),
    ("a pod without metrics", f"{GV}/namespaces/default/pods/ghost", 404, "NotFound",
     'podmetrics.metrics.k8s.io "default/ghost" not found'),
    ("a node whose agent cannot be reached", f"{GV}/nodes/gone", 404, "NotFound",
     'nodemetrics.metrics.k8s.io "gone" not found'),
    ("a bad label selector", f"{GV}/nodes?labelSelector=a%3D(", 400, "BadRequest", None),
    ("an unsupported field selector", f"{GV}/pods?fieldSelector=spec.nodeName%3Dn1", 400, "BadRequest", None),
])
async def test_errors_are_status_objects(cluster: Cluster, name: str, path: str, code: int, reason: str,
                                         message: str | None) -> None:
    await add_node(cluster, "gone", 1)  # nothing listens on port 1
    status = await call(cluster.api, "GET", path, expect=code)
    assert (status["kind"], status["reason"]) == ("Status", reason)
    if message is not None:
        assert status["message"] == message


async def test_writes_are_not_allowed(cluster: Cluster) -> None:
    status = await call(cluster.api, "POST", f"{GV}/nodes", {}, expect=405)
    assert status["reason"] == "MethodNotAllowed"


async def test_unreachable_agents_are_left_out_of_lists(cluster: Cluster) -> None:
    await add_node(cluster, "up", cluster.agent_port)
    await add_node(cluster, "down", 1)
    cluster.agent.summary = summary(5, [])
    items = (await call(cluster.api, "GET", f"{GV}/nodes"))["items"]
    assert [n["metadata"]["name"] for n in items] == ["up"]


async def test_apiserver_metrics_count_the_request_just_made(cluster: Cluster) -> None:
    await call(cluster.api, "GET", "/api/v1/namespaces/default/pods?limit=1")
    await call(cluster.api, "GET", "/api/v1/namespaces/default/pods/missing", expect=404)
    text = await call(cluster.api, "GET", "/metrics")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    counts = {tuple(sorted(s.labels.items())): s.value for s in families["apiserver_request"].samples
              if s.name == "apiserver_request_total"}
    base = {"component": "apiserver", "dry_run": "", "group": "", "version": "v1", "resource": "pods",
            "subresource": ""}
    assert counts[tuple(sorted({**base, "verb": "LIST", "scope": "namespace", "code": "200"}.items()))] == 1
    assert counts[tuple(sorted({**base, "verb": "GET", "scope": "resource", "code": "404"}.items()))] == 1
    durations = [s for s in families["apiserver_request_duration_seconds"].samples
                 if s.name.endswith("_count") and s.labels.get("verb") == "LIST" and s.labels["resource"] == "pods"]
    assert [s.value for s in durations] == [1]
    storage = {s.labels["resource"]: s.value for s in families["apiserver_storage_objects"].samples}
    assert storage["namespaces"] == 4 and storage["priorityclasses.scheduling.k8s.io"] == 2
    inflight = {s.labels["request_kind"]: s.value for s in families["apiserver_current_inflight_requests"].samples}
    assert inflight == {"readOnly": 1, "mutating": 0}  # the /metrics request itself
