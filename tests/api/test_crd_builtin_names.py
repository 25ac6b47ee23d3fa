"""A CRD never serves a built-in resource's objects, whatever its status says.

A reviewer took over the built-in IngressClasses: a CRD `ingressclasses.networking.k8s.io` (refused by the naming
controller with PluralConflict) had its status written by hand with those accepted names and Established, after
which the built-in objects were listed and written as custom resources, and deleting the CRD deleted them. A CRD
in metrics.k8s.io likewise hid the metrics API. Built-in names (metrics.k8s.io's included) are never served, and
the watch cache refuses to serve a built-in's key prefix to a custom resource."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp.test_utils import TestClient

from tests.api.test_customresources_api import CRDS, established, widget_crd
from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]
CLASSES = "/apis/networking.k8s.io/v1/ingressclasses"


def named(group: str, plural: str, kind: str) -> Obj:
    crd = widget_crd()
    crd["metadata"] = {"name": f"{plural}.{group}", "annotations": {"api-approved.kubernetes.io": "unapproved, test"}}
    crd["spec"].update(group=group, names={"plural": plural, "kind": kind})
    crd["spec"]["versions"][0]["name"] = "v9"
    return crd


async def test_a_status_written_with_a_builtin_plural_serves_nothing(api: Client) -> None:
    await call(api, "POST", CLASSES, {"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/nginx"}},
               expect=201)
    await call(api, "POST", CRDS, named("networking.k8s.io", "ingressclasses", "MyIC"), expect=201)
    crd = await established(api, "ingressclasses.networking.k8s.io", "False")
    crd["status"]["acceptedNames"] = {"plural": "ingressclasses", "kind": "MyIC", "listKind": "MyICList",
                                      "singular": "myic"}
    crd["status"]["conditions"] = [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                                    "message": "", "lastTransitionTime": "2026-11-28T00:00:00Z"}]
    await call(api, "PUT", f"{CRDS}/ingressclasses.networking.k8s.io/status", crd, expect=200)
    for _ in range(20):  # the serving controller has seen the write
        await asyncio.sleep(0.02)
    await call(api, "GET", "/apis/networking.k8s.io/v9/ingressclasses", expect=404)
    await call(api, "DELETE", f"{CRDS}/ingressclasses.networking.k8s.io", expect=200)
    for _ in range(100):
        resp = await api.get(f"{CRDS}/ingressclasses.networking.k8s.io")
        if resp.status == 404:
            break
        await asyncio.sleep(0.02)
    kept = await call(api, "GET", f"{CLASSES}/nginx", expect=200)
    assert kept["spec"]["controller"] == "k8s.io/nginx", "the CRD's cleanup left the built-in objects alone"


async def test_a_crd_in_the_metrics_group_is_a_name_conflict(api: Client) -> None:
    await call(api, "POST", CRDS, named("metrics.k8s.io", "pods", "PodMetrics"), expect=201)
    crd = await established(api, "pods.metrics.k8s.io", "False")
    names = {c["type"]: (c["status"], c["reason"]) for c in crd["status"]["conditions"]}
    assert names["NamesAccepted"] == ("False", "PluralConflict"), crd["status"]
    listed = await call(api, "GET", "/apis/metrics.k8s.io/v1beta1/pods", expect=200)
    assert listed["kind"] == "PodMetricsList", "still the metrics API's answer"


def test_a_schema_too_deep_to_encode_leaves_only_its_group_version_out_of_the_openapi_index() -> None:
    """One CRD's document that cannot be encoded (orjson's depth limit) must not fail the index kubectl apply reads
    for every kind (a 500 there broke `kubectl apply` for all of them)."""
    from kubelite.apiserver import discovery
    from kubelite.apiserver.customresources.strategy import CustomResource

    schema: Obj = {"type": "object"}
    for _ in range(300):
        schema = {"type": "object", "properties": {"a": schema}}
    deep = CustomResource("deep.example.com", "v1", "deeps", "deep", "Deep", True, "", crd="deeps.deep.example.com",
                          list_kind="DeepList", schema=schema, storage="v1")
    index = discovery.openapi_index((deep,))["paths"]
    assert "apis/deep.example.com/v1" not in index and "api/v1" in index
