"""The EndpointSlice and Endpoints controllers against a real API server (SQLite, in-process client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelite.controllers.endpoints import EndpointsController
from kubelite.controllers.endpointslice import EndpointSliceController
from tests.controllers.harness import Harness, running

Obj = dict[str, Any]
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"


async def make_pod(h: Harness, name: str, port: int, ready: bool) -> Obj:
    pod = await h.client.create("/api/v1/namespaces/default/pods", {
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": "node-1",
                 "containers": [{"name": "c", "image": "x", "ports": [{"name": "http", "containerPort": port}]}]}})
    return await set_ready(h, pod, ready)


async def set_ready(h: Harness, pod: Obj, ready: bool) -> Obj:
    path = f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}/status"
    current = await h.client.get(path)
    current["status"] = {"phase": "Running", "podIP": "10.1.0.1",
                         "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    result: Obj = await h.client.request("PUT", path, current)
    return result


async def slices_of(h: Harness, service: str) -> list[Obj]:
    items: list[Obj] = (await h.client.get(SLICES, {"labelSelector": f"kubernetes.io/service-name={service}"}))["items"]
    return items


async def served(h: Harness, service: str) -> dict[str, Obj]:
    """Pod name → endpoint conditions, over the Service's slices."""
    return {ep["targetRef"]["name"]: ep["conditions"] for s in await slices_of(h, service)
            for ep in s.get("endpoints") or []}


async def test_slices_follow_pod_readiness_and_endpoints_mirror(tmp_path: Path) -> None:
    async with running(tmp_path, EndpointSliceController, EndpointsController) as h:
        await h.client.create("/api/v1/namespaces/default/services", {
            "metadata": {"name": "web", "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}})

        async def placeholder() -> bool:
            got = await slices_of(h, "web")
            return len(got) == 1 and not got[0].get("endpoints")
        await h.until(placeholder, "a placeholder slice for a Service without pods")

        a = await make_pod(h, "a", 8081, ready=True)
        await make_pod(h, "b", 8082, ready=False)

        async def both() -> bool:
            return await served(h, "web") == {"a": {"ready": True, "serving": True, "terminating": False},
                                              "b": {"ready": False, "serving": False, "terminating": False}}
        await h.until(both, "both pods as endpoints with their readiness")
        got = await slices_of(h, "web")
        assert sorted(s["ports"][0]["port"] for s in got) == [8081, 8082]  # named targetPort resolved per pod
        for s in got:
            assert s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == \
                "endpointslice-controller.k8s.io"
            assert s["metadata"]["labels"]["tier"] == "front"
            assert s["metadata"]["ownerReferences"][0]["kind"] == "Service"

        async def mirrored() -> bool:
            ep = await h.client.get("/api/v1/namespaces/default/endpoints/web")
            ready = [a["targetRef"]["name"] for s in ep.get("subsets") or [] for a in s.get("addresses") or []]
            not_ready = [a["targetRef"]["name"] for s in ep.get("subsets") or []
                         for a in s.get("notReadyAddresses") or []]
            return (ready, not_ready) == (["a"], ["b"])
        await h.until(mirrored, "Endpoints with a ready and b not ready")

        await set_ready(h, a, False)

        async def a_unready() -> bool:
            return (await served(h, "web")).get("a", {}).get("ready") is False
        await h.until(a_unready, "a's endpoint no longer ready")

        await h.client.delete("/api/v1/namespaces/default/pods/b", {"gracePeriodSeconds": 30})

        async def b_terminating() -> bool:
            return (await served(h, "web")).get("b", {}).get("terminating") is True
        await h.until(b_terminating, "b's endpoint terminating (kept while its pod is terminating)")


async def test_selectorless_service_is_left_alone(tmp_path: Path) -> None:
    async with running(tmp_path, EndpointSliceController, EndpointsController) as h:
        await h.client.create("/api/v1/namespaces/default/services", {
            "metadata": {"name": "external"}, "spec": {"ports": [{"port": 80}]}})
        await h.client.create("/api/v1/namespaces/default/services", {
            "metadata": {"name": "marker"}, "spec": {"selector": {"x": "y"}, "ports": [{"port": 80}]}})

        async def marker_done() -> bool:
            return len(await slices_of(h, "marker")) == 1
        await h.until(marker_done, "the marker Service's placeholder")
        assert await slices_of(h, "external") == []
