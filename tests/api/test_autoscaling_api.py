"""HorizontalPodAutoscalers: autoscaling/v2 defaults and validation (pkg/apis/autoscaling/validation's table cases),
autoscaling/v1 served by conversion (pkg/apis/autoscaling/v1/conversion.go), discovery and `kubectl get` columns,
over HTTP against a real API server."""

from __future__ import annotations

import copy
import struct
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from kubelite.apiserver import protobuf
from kubelite.apiserver.proto import codec
from kubelite.apiserver.registry.autoscaling import (
    BEHAVIOR_ANNOTATION,
    CONDITIONS_ANNOTATION,
    from_v1,
    to_v1,
    validate_hpa_spec,
)
from kubelite.apiserver.tables import _hpa_cells
from tests.conftest import SHARED_LOOP

Client = TestClient  # type: ignore[type-arg]
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


async def call(api: Client, method: str, path: str, body: Any = None, expect: int = 200,
               ctype: str = "application/json", accept: str = "application/json") -> Any:
    resp = await api.request(method, path, data=None if body is None else orjson.dumps(body),
                             headers={"Content-Type": ctype, "Accept": accept})
    payload = await resp.read()
    assert resp.status == expect, (resp.status, payload)
    return orjson.loads(payload)


def spec(**changes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                           "minReplicas": 1, "maxReplicas": 5,
                           "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                               "type": "Utilization", "averageUtilization": 70}}}]}
    out.update(changes)
    return out


def metric(kind: str, **source: Any) -> dict[str, Any]:
    field = kind[0].lower() + kind[1:]
    return {"type": kind, field: source}


CPU_RAW = {"type": "AverageValue", "averageValue": "300m"}
ERROR_CASES = [  # TestValidateHorizontalPodAutoscaler's error cases: (name, spec, field, message)
    ("scaleTargetRef.kind required", spec(scaleTargetRef={"name": "web"}), "spec.scaleTargetRef.kind",
     "Required value"),
    ("scaleTargetRef.kind invalid", spec(scaleTargetRef={"kind": "..", "name": "web"}), "spec.scaleTargetRef.kind",
     "Invalid value: \"..\": may not be '..'"),
    ("scaleTargetRef.name required", spec(scaleTargetRef={"kind": "ReplicationController"}),
     "spec.scaleTargetRef.name", "Required value"),
    ("scaleTargetRef.name invalid", spec(scaleTargetRef={"kind": "ReplicationController", "name": ".."}),
     "spec.scaleTargetRef.name", "Invalid value: \"..\": may not be '..'"),
    ("minReplicas 0 without HPAScaleToZero", spec(minReplicas=0), "spec.minReplicas",
     "Invalid value: 0: must be greater than or equal to 1"),
    ("maxReplicas below minReplicas", spec(minReplicas=7), "spec.maxReplicas",
     "Invalid value: 5: must be greater than or equal to `minReplicas`"),
    ("maxReplicas zero", spec(minReplicas=None, maxReplicas=0), "spec.maxReplicas",
     "Invalid value: 0: must be greater than 0"),
    ("must specify a resource name",
     spec(metrics=[metric("Resource", target={"type": "Utilization", "averageUtilization": 70})]),
     "spec.metrics[0].resource.name", "Required value: must specify a resource name"),
    ("must set either a target raw value or a target utilization",
     spec(metrics=[metric("Resource", name="cpu", target={"type": "Utilization"})]),
     "spec.metrics[0].resource.target.averageUtilization",
     "Required value: must set either a target raw value or a target utilization"),
    ("may not set both a target raw value and a target utilization",
     spec(metrics=[metric("Resource", name="cpu", target={"type": "Utilization", "averageUtilization": 70,
                                                          "averageValue": "300m"})]),
     "spec.metrics[0].resource.target.averageValue",
     "Forbidden: may not set both a target raw value and a target utilization"),
    ("averageUtilization must be greater than 0",
     spec(metrics=[metric("Resource", name="cpu", target={"type": "Utilization", "averageUtilization": -10})]),
     "spec.metrics[0].resource.target.averageUtilization", "Invalid value: -10: must be greater than 0"),
    ("must specify a container",
     spec(metrics=[metric("ContainerResource", name="cpu", target=CPU_RAW)]),
     "spec.metrics[0].containerResource.container", "Required value: must specify a container"),
    ("must specify a metric source type", spec(metrics=[{"resource": {"name": "cpu", "target": CPU_RAW}}]),
     "spec.metrics[0].type", "Required value: must specify a metric source type"),
    ("unsupported metric source type", spec(metrics=[{"type": "InvalidType"}]), "spec.metrics[0].type",
     'Unsupported value: "InvalidType": supported values: "ContainerResource", "External", "Object", "Pods", '
     '"Resource"'),
    ("must populate information for the given metric source", spec(metrics=[{"type": "Resource"}]),
     "spec.metrics[0].resource", "Required value: must populate information for the given metric source"),
    ("must populate the given metric source only",
     spec(metrics=[{"type": "Resource", "resource": {"name": "cpu", "target": CPU_RAW},
                    "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1"}}}]),
     "spec.metrics[0].pods", "Forbidden: must populate the given metric source only"),
    ("must specify a metric name",
     spec(metrics=[metric("Pods", metric={}, target={"type": "AverageValue", "averageValue": "100"})]),
     "spec.metrics[0].pods.metric.name", "Required value: must specify a metric name"),
    ("must specify a positive target averageValue",
     spec(metrics=[metric("Pods", metric={"name": "qps"}, target={"type": "AverageValue"})]),
     "spec.metrics[0].pods.target.averageValue", "Required value: must specify a positive target averageValue"),
    ("must be positive", spec(metrics=[metric("Pods", metric={"name": "qps"},
                                              target={"type": "AverageValue", "averageValue": "-1"})]),
     "spec.metrics[0].pods.target.averageValue", "Invalid value: -1: must be positive"),
    ("must set either a target value or averageValue",
     spec(metrics=[metric("Object", describedObject={"kind": "ReplicationController", "name": "myrc"},
                          metric={"name": "somemetric"}, target={"type": "Value"})]),
     "spec.metrics[0].object.target.averageValue",
     "Required value: must set either a target value or averageValue"),
    ("object describedObject kind required",
     spec(metrics=[metric("Object", describedObject={"name": "myrc"}, metric={"name": "somemetric"},
                          target={"type": "Value", "value": "100"})]),
     "spec.metrics[0].object.describedObject.kind", "Required value"),
    ("must set either a target value for metric or a per-pod target",
     spec(metrics=[metric("External", metric={"name": "somemetric"}, target={"type": "Value"})]),
     "spec.metrics[0].external.target.averageValue",
     "Required value: must set either a target value for metric or a per-pod target"),
    ("may not set both a target value for metric and a per-pod target",
     spec(metrics=[metric("External", metric={"name": "somemetric"},
                          target={"type": "Value", "value": "300", "averageValue": "100"})]),
     "spec.metrics[0].external.target.value",
     "Forbidden: may not set both a target value for metric and a per-pod target"),
    ("must be either Utilization, Value, or AverageValue",
     spec(metrics=[metric("Resource", name="cpu", target={"type": "Percent", "averageUtilization": 70})]),
     "spec.metrics[0].resource.target.type",
     'Invalid value: "Percent": must be either Utilization, Value, or AverageValue'),
]

RULES = {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}
BEHAVIOR_CASES = [  # TestValidateBehavior's error cases
    ("scaleUp with no policies", {"scaleUp": {"selectPolicy": "Max"}}, "spec.behavior.scaleUp.policies",
     "Required value: must specify at least one Policy"),
    ("scaleDown with an invalid select policy", {"scaleDown": {**RULES, "selectPolicy": "Unknown"}},
     "spec.behavior.scaleDown.selectPolicy",
     'Unsupported value: "Unknown": supported values: "Disabled", "Max", "Min"'),
    ("negative stabilization window", {"scaleUp": {**RULES, "stabilizationWindowSeconds": -1}},
     "spec.behavior.scaleUp.stabilizationWindowSeconds", "Invalid value: -1: must be greater than or equal to zero"),
    ("stabilization window above the maximum", {"scaleDown": {**RULES, "stabilizationWindowSeconds": 3601}},
     "spec.behavior.scaleDown.stabilizationWindowSeconds", "Invalid value: 3601: must be less than or equal to 3600"),
    ("policy period above the maximum", {"scaleUp": {"policies": [{"type": "Pods", "value": 1,
                                                                   "periodSeconds": 1801}]}},
     "spec.behavior.scaleUp.policies[0].periodSeconds", "Invalid value: 1801: must be less than or equal to 1800"),
    ("policy period zero", {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 0}]}},
     "spec.behavior.scaleUp.policies[0].periodSeconds", "Invalid value: 0: must be greater than zero"),
    ("policy value zero", {"scaleDown": {"policies": [{"type": "Percent", "value": 0, "periodSeconds": 15}]}},
     "spec.behavior.scaleDown.policies[0].value", "Invalid value: 0: must be greater than zero"),
    ("unknown policy type", {"scaleDown": {"policies": [{"type": "Replicas", "value": 1, "periodSeconds": 15}]}},
     "spec.behavior.scaleDown.policies[0].type", 'Unsupported value: "Replicas": supported values: "Percent", "Pods"'),
]


@pytest.mark.parametrize("given,field,message", [pytest.param(*c[1:], id=c[0]) for c in ERROR_CASES])
def test_validate_horizontal_pod_autoscaler(given: dict[str, Any], field: str, message: str) -> None:
    causes = validate_hpa_spec({k: v for k, v in given.items() if v is not None})
    assert (field, message) in [(c.field, c.message) for c in causes], causes


@pytest.mark.parametrize("behavior,field,message", [pytest.param(*c[1:], id=c[0]) for c in BEHAVIOR_CASES])
def test_validate_behavior(behavior: dict[str, Any], field: str, message: str) -> None:
    causes = validate_hpa_spec(spec(behavior=behavior))
    assert [(c.field, c.message) for c in causes] == [(field, message)]


@pytest.mark.parametrize("given", [
    pytest.param(spec(), id="cpu utilization"),
    pytest.param(spec(metrics=[metric("Resource", name="memory", target=CPU_RAW)]), id="memory average value"),
    pytest.param(spec(metrics=[metric("ContainerResource", name="cpu", container="app", target=CPU_RAW)]),
                 id="container resource"),
    pytest.param(spec(metrics=[metric("Object", describedObject={"kind": "Service", "name": "front"},
                                      metric={"name": "qps"}, target={"type": "Value", "value": "10k"})]),
                 id="object value"),
    pytest.param(spec(metrics=[metric("External", metric={"name": "queue"},
                                      target={"type": "AverageValue", "averageValue": "30"})]), id="external"),
    pytest.param(spec(behavior={"scaleDown": {"stabilizationWindowSeconds": 60, **RULES}}), id="behavior"),
])
def test_valid_horizontal_pod_autoscalers(given: dict[str, Any]) -> None:
    assert validate_hpa_spec(given) == []


async def test_v2_defaults_min_replicas_cpu_target_and_behavior(api: Client) -> None:
    """SetDefaults_HorizontalPodAutoscaler: minReplicas 1, 80% CPU, a partial behavior completed; status empty."""
    body = {"metadata": {"name": "web"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 4,
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}, "status": {"currentReplicas": 9}}
    hpa = await call(api, "POST", V2, body, 201)
    assert hpa["spec"]["minReplicas"] == 1
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 80}}}]
    assert hpa["spec"]["behavior"] == {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                 {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                      "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
    assert hpa["status"] == {"desiredReplicas": 0}


async def test_invalid_hpa_is_a_422_with_upstreams_message(api: Client) -> None:
    body = {"metadata": {"name": "web"}, "spec": spec(minReplicas=0)}
    status = await call(api, "POST", V2, body, 422)
    assert status["message"] == (
        'HorizontalPodAutoscaler.autoscaling "web" is invalid: [spec.minReplicas: Invalid value: 0: must be greater '
        "than or equal to 1, spec.metrics: Forbidden: must specify at least one Object or External metric to support "
        "scaling to zero replicas]")


async def test_v1_create_as_kubectl_autoscale_posts_it_is_read_at_both_versions(api: Client) -> None:
    """kubectl autoscale's v1 body: targetCPUUtilizationPercentage becomes the v2 CPU metric and back."""
    body = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}}
    created = await call(api, "POST", V1, body, 201)
    assert created["apiVersion"] == "autoscaling/v1"
    assert created["spec"] == body["spec"]
    v2 = await call(api, "GET", f"{V2}/web")
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 50}}}]
    listed = await call(api, "GET", V1)
    assert listed["kind"] == "HorizontalPodAutoscalerList" and listed["apiVersion"] == "autoscaling/v1"
    assert [i["spec"]["targetCPUUtilizationPercentage"] for i in listed["items"]] == [50]
    patched = await call(api, "PATCH", f"{V1}/web", {"spec": {"targetCPUUtilizationPercentage": 60}},
                         ctype="application/merge-patch+json")
    assert patched["spec"]["targetCPUUtilizationPercentage"] == 60
    v2 = await call(api, "GET", f"{V2}/web")
    assert v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    await call(api, "DELETE", f"{V1}/web")
    await call(api, "GET", f"{V2}/web", expect=404)


async def test_v1_keeps_the_other_v2_fields_in_annotations_across_an_update(api: Client) -> None:
    body = {"metadata": {"name": "web"}, "spec": spec(
        metrics=[metric("Resource", name="memory", target=CPU_RAW),
                 metric("Resource", name="cpu", target={"type": "Utilization", "averageUtilization": 70})],
        behavior={"scaleDown": {"stabilizationWindowSeconds": 60, **RULES}})}
    stored = await call(api, "POST", V2, body, 201)
    old = await call(api, "GET", f"{V1}/web")
    assert old["spec"]["targetCPUUtilizationPercentage"] == 70
    assert BEHAVIOR_ANNOTATION in old["metadata"]["annotations"]
    old["spec"]["maxReplicas"] = 8
    await call(api, "PUT", f"{V1}/web", old)
    now = await call(api, "GET", f"{V2}/web")
    assert now["spec"]["maxReplicas"] == 8
    assert now["spec"]["metrics"] == stored["spec"]["metrics"]
    assert now["spec"]["behavior"] == stored["spec"]["behavior"]
    assert "annotations" not in now["metadata"]


def test_status_conversion_round_trips_conditions_and_current_cpu() -> None:
    v2 = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
          "spec": spec(), "status": {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": [
              {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 90,
                                                                           "averageValue": "180m"}}}],
              "conditions": [{"type": "AbleToScale", "status": "True", "reason": "SucceededRescale",
                              "message": "m", "lastTransitionTime": "2026-11-28T00:00:00Z"}]}}
    v1 = to_v1(v2)
    assert v1["status"] == {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 90}
    assert orjson.loads(v1["metadata"]["annotations"][CONDITIONS_ANNOTATION]) == v2["status"]["conditions"]
    assert from_v1(copy.deepcopy(v1)) == v2


@SHARED_LOOP
async def test_discovery_serves_v2_preferred_and_v1(shared_api: Client) -> None:
    group = await call(shared_api, "GET", "/apis/autoscaling")
    assert [v["groupVersion"] for v in group["versions"]] == ["autoscaling/v2", "autoscaling/v1"]
    assert group["preferredVersion"]["groupVersion"] == "autoscaling/v2"
    for gv in ("autoscaling/v2", "autoscaling/v1"):
        resources = (await call(shared_api, "GET", f"/apis/{gv}"))["resources"]
        [hpa] = [r for r in resources if r["name"] == "horizontalpodautoscalers"]
        assert (hpa["shortNames"], hpa["categories"], hpa["namespaced"]) == (["hpa"], ["all"], True)
        assert "horizontalpodautoscalers/status" in {r["name"] for r in resources}


@pytest.mark.parametrize("metrics,current,targets", [
    ([metric("Resource", name="cpu", target={"type": "Utilization", "averageUtilization": 50})], [],
     "cpu: <unknown>/50%"),
    ([metric("Resource", name="cpu", target={"type": "Utilization", "averageUtilization": 50})],
     [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 20}}}], "cpu: 20%/50%"),
    ([metric("Resource", name="memory", target={"type": "AverageValue", "averageValue": "100Mi"})],
     [{"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "50Mi"}}}],
     "memory: 50Mi/100Mi"),
    ([metric("Pods", metric={"name": "qps"}, target={"type": "AverageValue", "averageValue": "10"})], [],
     "<unknown>/10"),
    ([metric("External", metric={"name": "q"}, target={"type": "AverageValue", "averageValue": "30"})], [],
     "<unknown>/30 (avg)"),
    ([metric("Object", metric={"name": "q"}, target={"type": "Value", "value": "5"})] * 3, [],
     "<unknown>/5, <unknown>/5 + 1 more..."),
    ([], [], "<none>"),
])
def test_targets_column_as_format_hpa_metrics(metrics: list[Any], current: list[Any], targets: str) -> None:
    hpa = {"metadata": {"name": "web", "creationTimestamp": "2026-11-28T00:00:00Z"},
           "spec": spec(metrics=metrics), "status": {"currentReplicas": 2, "currentMetrics": current}}
    assert _hpa_cells(hpa, 0)[:6] == ["web", "Deployment/web", targets, "1", 5, 2]


async def test_get_hpa_table(api: Client) -> None:
    await call(api, "POST", V2, {"metadata": {"name": "web"}, "spec": spec()}, 201)
    table = await call(api, "GET", V2, accept=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Reference", "Targets", "MinPods", "MaxPods",
                                                              "Replicas", "Age"]
    assert table["rows"][0]["cells"][:6] == ["web", "Deployment/web", "cpu: <unknown>/70%", "1", 5, 0]


async def test_v1_watch_converts_events(api: Client) -> None:
    await call(api, "POST", V2, {"metadata": {"name": "web"}, "spec": spec()}, 201)
    resp = await api.get(V1, params={"watch": "true", "timeoutSeconds": "1"})
    events = [orjson.loads(line) for line in (await resp.read()).splitlines() if line]
    assert [(e["type"], e["object"]["apiVersion"], e["object"]["spec"]["targetCPUUtilizationPercentage"])
            for e in events] == [("ADDED", "autoscaling/v1", 70)]


async def test_v1_watch_bookmarks_carry_v1(api: Client) -> None:
    await call(api, "POST", V2, {"metadata": {"name": "web"}, "spec": spec()}, 201)
    resp = await api.get(V1, params={"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "1"})
    events = [orjson.loads(line) for line in (await resp.read()).splitlines() if line]
    assert [(e["type"], e["object"]["apiVersion"]) for e in events][:2] == [
        ("ADDED", "autoscaling/v1"), ("BOOKMARK", "autoscaling/v1")]


async def test_v1_watch_answers_protobuf_when_accepted(api: Client) -> None:
    await call(api, "POST", V2, {"metadata": {"name": "web"}, "spec": spec()}, 201)
    resp = await api.get(V1, params={"watch": "true", "allowWatchBookmarks": "true"},
                         headers={"Accept": protobuf.WATCH_MEDIA_TYPE})
    assert resp.headers["Content-Type"] == protobuf.WATCH_MEDIA_TYPE
    events = []
    for _ in range(2):
        (length,) = struct.unpack(">I", await resp.content.readexactly(4))
        events.append(codec.decode_message("meta.v1.WatchEvent", await resp.content.readexactly(length)))
    resp.close()
    assert [(e["type"], e["object"]["apiVersion"]) for e in events] == [
        ("ADDED", "autoscaling/v1"), ("BOOKMARK", "autoscaling/v1")]
    assert events[0]["object"]["spec"]["targetCPUUtilizationPercentage"] == 70


async def test_v1_status_update_keeps_v2_conditions(api: Client) -> None:
    """A v1 status write converts currentCPUUtilizationPercentage back into the v2 current metric."""
    await call(api, "POST", V2, {"metadata": {"name": "web"}, "spec": spec()}, 201)
    v1 = await call(api, "GET", f"{V1}/web")
    v1["status"] = {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 40}
    await call(api, "PUT", f"{V1}/web/status", v1)
    status = (await call(api, "GET", f"{V2}/web"))["status"]
    assert status == {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40}}}]}


@pytest.mark.parametrize("annotation", ['[{"type": "Resource", "resource": "cpu"}]', '{"not": "a list"}', "not json",
                                        '[{"type": "Pods", "pods": {"metricName": 7}}]'])
async def test_v1_round_trip_annotations_that_make_no_sense_are_never_a_500(api: Client, annotation: str) -> None:
    body = {"metadata": {"name": "web", "annotations": {"autoscaling.alpha.kubernetes.io/metrics": annotation}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}}
    resp = await api.post(V1, data=orjson.dumps(body), headers={"Content-Type": "application/json"})
    assert resp.status in (201, 400, 422), await resp.read()


async def test_v1_new_hpa_reads_with_the_official_client(api: Client) -> None:
    """A new HPA's v1 status carries currentReplicas 0 (no omitempty at v1, unlike v2): V1HorizontalPodAutoscalerStatus
    requires it, so AutoscalingV1Api's read and list would fail without it."""
    from kubernetes.client import ApiClient

    await call(api, "POST", V2, {"metadata": {"name": "web"}, "spec": spec()}, 201)
    client = ApiClient()
    got = client.deserialize((await (await api.get(f"{V1}/web")).text()), "V1HorizontalPodAutoscaler",
                             "application/json")
    listed = client.deserialize((await (await api.get(V1)).text()), "V1HorizontalPodAutoscalerList",
                                "application/json")
    for hpa in (got, *listed.items):
        assert (hpa.status.current_replicas, hpa.status.desired_replicas) == (0, 0)
        assert (hpa.spec.scale_target_ref.name, hpa.spec.max_replicas) == ("web", 5)


V1_BODY = {"metadata": {"name": "web"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                                                 "maxReplicas": 3}}


@pytest.mark.parametrize("mode,status,warnings", [
    ("Strict", 400, []),
    ("Warn", 200, ['299 - "unknown field \\"spec.bogus\\""']),
    ("Ignore", 200, []),
])
async def test_v1_patch_validates_fields_as_the_storage_version(api: Client, mode: str, status: int,
                                                                warnings: list[str]) -> None:
    await call(api, "POST", V1, V1_BODY, 201)
    resp = await api.patch(f"{V1}/web", params={"fieldValidation": mode}, data=b'{"spec": {"bogus": 1}}',
                           headers={"Content-Type": "application/merge-patch+json"})
    answer = await resp.json()
    assert (resp.status, resp.headers.getall("Warning", [])) == (status, warnings)
    if status == 400:
        assert answer["message"] == ('HorizontalPodAutoscaler in version "v1" cannot be handled as a '
                                     'HorizontalPodAutoscaler: strict decoding error: unknown field "spec.bogus"')
    else:
        assert "bogus" not in answer["spec"]


async def test_v1_collection_put_is_405(api: Client) -> None:
    status = await call(api, "PUT", V1, V1_BODY, 405)
    assert status["message"] == ("the server does not allow this method on the requested resource "
                                 "(PUT horizontalpodautoscalers)")


@pytest.mark.parametrize("path,api_version", [(V1, "autoscaling/v2"), (V2, "autoscaling/v1")])
async def test_a_body_of_the_other_version_is_refused_as_create_go_does(api: Client, path: str,
                                                                        api_version: str) -> None:
    body = {**V1_BODY, "apiVersion": api_version, "kind": "HorizontalPodAutoscaler"}
    status = await call(api, "POST", path, body, 400)
    expected = path.split("/")[3]
    assert status["message"] == (f"the API version in the data ({api_version}) does not match the expected API "
                                 f"version (autoscaling/{expected})")
