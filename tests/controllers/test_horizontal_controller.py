"""The HPA controller against a real API server on SQLite, through the in-process client, on a fake clock: a
Deployment's `scale` subresource, pods, and PodMetrics served by the real metrics.k8s.io path, which scrapes a node
agent's /stats/summary (a real HTTPS server playing the agent, as tests/api/test_metrics_api.py does).

Upstream's horizontal_test.go scenarios in this setting: a scale-up on CPU utilization (TestScaleUp), a scale-down
held by the downscale stabilization window then taken (TestScaleDown…), behavior's policies limiting a scale-up,
no metrics (FailedGetResourceMetric), a Pods metric without a custom metrics API (FailedGetPodsMetric), the target
outside [minReplicas, maxReplicas], a target at zero replicas (ScalingDisabled), and two HPAs on the same pods
(AmbiguousSelector)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kubelite.agent.server import ensure_serving_cert, tls_context
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock, rfc3339
from kubelite.controllers.horizontal import HorizontalController
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod
from tests.api.test_metrics_api import FakeAgent

Obj = dict[str, Any]
HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments/web"
MERGE = "application/merge-patch+json"
SYNC = 15.0


@dataclass
class Cluster:
    client: InProcessClient
    clock: FakeClock
    agent: FakeAgent
    uids: dict[str, str]

    async def pods(self, cpu_milli: list[int], request: str = "500m") -> None:
        """Running, Ready pods of the Deployment on node n1 (started 15 minutes ago), using `cpu_milli` each."""
        started = rfc3339(self.clock.now() - 900)
        for i, _ in enumerate(cpu_milli):
            name = f"web-{i}"
            if name not in self.uids:
                pod = make_pod(name).label("app", "web").node("n1").req(cpu=request).obj()
                self.uids[name] = (await self.client.create("/api/v1/namespaces/default/pods", pod))["metadata"]["uid"]
                await self.client.patch(f"/api/v1/namespaces/default/pods/{name}/status", {"status": {
                    "phase": "Running", "startTime": started,
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}]}}, MERGE)
        stamp = rfc3339(self.clock.now())
        self.agent.summary = {"node": {"nodeName": "n1", "cpu": {"time": stamp, "usageNanoCores": 10**9},
                                       "memory": {"time": stamp, "workingSetBytes": 2**30}},
                              "pods": [{"podRef": {"name": f"web-{i}", "namespace": "default",
                                                   "uid": self.uids[f"web-{i}"]},
                                        "containers": [{"name": "main",
                                                        "cpu": {"time": stamp, "usageNanoCores": milli * 10**6},
                                                        "memory": {"time": stamp, "workingSetBytes": 2**20}}]}
                                       for i, milli in enumerate(cpu_milli)]}

    async def hpa(self, name: str = "web", **spec: Any) -> None:
        body = {"metadata": {"name": name}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                "type": "Utilization", "averageUtilization": 50}}}], **spec}}
        await self.client.create(HPAS, body)

    async def until(self, check: Callable[[Obj], bool], what: str, seconds: float = 4 * SYNC, name: str = "web"
                    ) -> Obj:
        """Advance fake time a second at a time (the HPA's sync period is 15 s) until `check(hpa)`."""
        for _ in range(int(seconds)):
            await self.clock.advance(1.0)
            await asyncio.sleep(0.01)
            hpa = await self.client.get(f"{HPAS}/{name}")
            if check(hpa):
                return hpa
        raise AssertionError(f"timed out waiting for {what}: {hpa.get('status')}")

    async def replicas(self) -> int:
        return int((await self.client.get(DEPLOY))["spec"]["replicas"])

    async def events(self) -> list[tuple[str, str, str]]:
        items = (await self.client.get("/api/v1/namespaces/default/events"))["items"]
        return [(e["type"], e["reason"], e["message"]) for e in items
                if e["involvedObject"]["kind"] == "HorizontalPodAutoscaler"]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    clock = FakeClock()
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, clock)
    await server.start()
    client = InProcessClient(server)
    agent = FakeAgent()
    app = web.Application()
    app.router.add_get("/stats/summary", agent.handle)
    agent_server = TestServer(app)
    await agent_server.start_server(ssl=tls_context(*ensure_serving_cert(tmp_path / "agent", "127.0.0.1"), None))
    await client.create("/api/v1/nodes", {"metadata": {"name": "n1"}})
    await client.patch("/api/v1/nodes/n1/status", {"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": agent_server.port}}}}, MERGE)
    await client.create("/apis/apps/v1/namespaces/default/deployments", {
        "metadata": {"name": "web"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                                              "template": {"metadata": {"labels": {"app": "web"}},
                                                           "spec": {"containers": [{"name": "main",
                                                                                    "image": "busybox"}]}}}})
    task = asyncio.create_task(HorizontalController(client, clock).run())
    try:
        yield Cluster(client, clock, agent, {})
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await agent_server.close()
        await server.stop()
        await store.close()


def condition(hpa: Obj, kind: str) -> tuple[str, str, str]:
    found = next(c for c in hpa["status"].get("conditions", []) if c["type"] == kind)
    return found["status"], found["reason"], found["message"]


async def test_scale_up_on_cpu_utilization(cluster: Cluster) -> None:
    """Two pods at 90% of their request against a 50% target: ceil(2 * 1.8) = 4 replicas."""
    await cluster.pods([450, 450])
    await cluster.hpa()
    hpa = await cluster.until(lambda h: h["status"].get("desiredReplicas") == 4, "a scale-up")
    assert await cluster.replicas() == 4
    status = hpa["status"]
    assert (status["currentReplicas"], status["desiredReplicas"]) == (2, 4)
    assert status["currentMetrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "current": {"averageUtilization": 90, "averageValue": "450m"}}}]
    assert "lastScaleTime" in status
    assert condition(hpa, "AbleToScale") == ("True", "SucceededRescale",
                                             "the HPA controller was able to update the target scale to 4")
    assert condition(hpa, "ScalingActive") == (
        "True", "ValidMetricFound",
        "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of "
        "request)")
    assert condition(hpa, "ScalingLimited") == ("False", "DesiredWithinRange",
                                                "the desired count is within the acceptable range")
    await cluster.until(lambda h: True, "the event to be sent", 2)
    assert ("Normal", "SuccessfulRescale", "New size: 4; reason: cpu resource utilization (percentage of request) "
                                           "above target") in await cluster.events()


async def test_scale_down_waits_for_the_stabilization_window(cluster: Cluster) -> None:
    """Low usage recommends 1 replica; the initial recommendation (2) holds it for 300 s, then it scales down."""
    await cluster.pods([50, 50])
    await cluster.hpa()
    hpa = await cluster.until(lambda h: "conditions" in h["status"], "a first sync")
    assert condition(hpa, "AbleToScale")[1] == "ScaleDownStabilized"
    assert await cluster.replicas() == 2
    hpa = await cluster.until(lambda h: h["status"].get("desiredReplicas") == 1, "the scale-down", 360)
    assert await cluster.replicas() == 1
    assert condition(hpa, "ScalingLimited")[1] == "DesiredWithinRange"


async def test_behavior_limits_the_scale_up_rate(cluster: Cluster) -> None:
    """A Pods policy of 1 pod per 60 s: 2 → 3 now, the next pod only after the period."""
    await cluster.pods([500, 500])
    await cluster.hpa(behavior={"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}})
    hpa = await cluster.until(lambda h: h["status"].get("desiredReplicas") == 3, "a limited scale-up")
    assert condition(hpa, "ScalingLimited") == (
        "True", "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
    await cluster.until(lambda h: h["status"].get("desiredReplicas") == 4, "the next step", 80)


async def test_missing_metrics_set_scaling_active_false(cluster: Cluster) -> None:
    await cluster.pods([])
    await cluster.hpa()
    hpa = await cluster.until(lambda h: "conditions" in h["status"], "a sync")
    assert condition(hpa, "ScalingActive") == (
        "False", "FailedGetResourceMetric",
        "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for "
        "resource cpu: no metrics returned from resource metrics API")
    assert await cluster.replicas() == 2
    await cluster.until(lambda h: True, "the events to be sent", 2)
    reasons = {(kind, reason) for kind, reason, _ in await cluster.events()}
    assert {("Warning", "FailedGetResourceMetric"), ("Warning", "FailedComputeMetricsReplicas")} <= reasons


async def test_pods_metric_without_a_custom_metrics_api(cluster: Cluster) -> None:
    await cluster.pods([100, 100])
    await cluster.hpa(metrics=[{"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {
        "type": "AverageValue", "averageValue": "10"}}}])
    hpa = await cluster.until(lambda h: "conditions" in h["status"], "a sync")
    status, reason, message = condition(hpa, "ScalingActive")
    assert (status, reason) == ("False", "FailedGetPodsMetric")
    assert message.startswith("the HPA was unable to compute the replica count: unable to get metric qps: unable to "
                              "fetch metrics from custom metrics API: ")


@pytest.mark.parametrize("replicas,low,expected,reason", [
    pytest.param(8, 1, 5, "Current number of replicas above Spec.MaxReplicas", id="above maxReplicas"),
    pytest.param(1, 3, 3, "Current number of replicas below Spec.MinReplicas", id="below minReplicas"),
])
async def test_target_outside_the_range_is_brought_inside(cluster: Cluster, replicas: int, low: int, expected: int,
                                                          reason: str) -> None:
    await cluster.client.patch(DEPLOY, {"spec": {"replicas": replicas}}, MERGE)
    await cluster.hpa(minReplicas=low)
    await cluster.until(lambda h: h["status"].get("desiredReplicas") == expected, "the clamp")
    assert await cluster.replicas() == expected
    await cluster.until(lambda h: True, "the event to be sent", 2)
    assert ("Normal", "SuccessfulRescale", f"New size: {expected}; reason: {reason}") in await cluster.events()


async def test_target_at_zero_replicas_is_not_autoscaled(cluster: Cluster) -> None:
    await cluster.client.patch(DEPLOY, {"spec": {"replicas": 0}}, MERGE)
    await cluster.hpa()
    hpa = await cluster.until(lambda h: "conditions" in h["status"], "a sync")
    assert condition(hpa, "ScalingActive") == ("False", "ScalingDisabled",
                                               "scaling is disabled since the replica count of the target is zero")
    assert await cluster.replicas() == 0


async def test_two_hpas_on_the_same_pods_are_ambiguous(cluster: Cluster) -> None:
    await cluster.pods([450, 450])
    await cluster.hpa()
    await cluster.until(lambda h: "conditions" in h["status"], "the first HPA's sync")
    await cluster.hpa("web2")
    message = "pods by selector app=web are controlled by multiple HPAs: [{web default} {web2 default}]"
    for name in ("web2", "web"):
        hpa = await cluster.until(lambda h: any(c["reason"] == "AmbiguousSelector"
                                                for c in h["status"].get("conditions", [])), name, name=name)
        assert condition(hpa, "ScalingActive") == ("False", "AmbiguousSelector", message)


class _Discovery:
    """A client whose group-version discovery gains a kind (a CRD established) after a while."""

    def __init__(self) -> None:
        self.kinds: list[Obj] = []
        self.reads = 0

    async def get(self, path: str, params: Any = None) -> Obj:
        self.reads += 1
        return {"resources": self.kinds}


async def test_a_kind_discovered_later_is_found_after_the_discovery_reset() -> None:
    """Upstream's controller manager resets its RESTMapper every 30 s: a target kind that discovery did not list
    (its CRD established afterwards) is found then, without a restart — not cached as missing for good."""
    from kubelite.controllers.horizontal import DISCOVERY_RESET, MetricsError

    clock, discovery = FakeClock(), _Discovery()
    ctrl = HorizontalController(discovery, clock)  # type: ignore[arg-type]
    ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w"}
    with pytest.raises(MetricsError, match=r'no matches for kind "Widget" in group "example\.com"'):
        await ctrl._scale_path(ref, "default")
    discovery.kinds = [{"name": "widgets", "kind": "Widget"}, {"name": "widgets/scale", "kind": "Scale"}]
    with pytest.raises(MetricsError):  # within the reset period: the same answer, no second read
        await ctrl._scale_path(ref, "default")
    assert discovery.reads == 1
    await clock.advance(DISCOVERY_RESET)
    assert await ctrl._scale_path(ref, "default") == "/apis/example.com/v1/namespaces/default/widgets/w/scale"
