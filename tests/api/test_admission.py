"""Admission and validation through the API: PriorityClasses (P1, P2), PDBs, discovery and health."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from kubelite.apiserver import metrics_api
from kubelite.apiserver.registry import SERVED
from kubelite.testing.builders import make_pod
from tests.api.test_rest import PODS, call

Client = TestClient  # type: ignore[type-arg]
PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"


@dataclass(frozen=True)
class Case:
    name: str
    body: dict[str, Any]
    code: int
    message: str = ""


# Mirrors TestValidatePriorityClass, pkg/apis/scheduling/validation/validation_test.go.
PRIORITY_CLASS_CASES = [
    Case("user class at the limit", {"metadata": {"name": "top"}, "value": 1_000_000_000}, 201),
    Case("user class above the limit", {"metadata": {"name": "too-high"}, "value": 1_000_000_001}, 422,
         "maximum allowed value of a user defined priority is 1000000000"),
    Case("reserved system prefix", {"metadata": {"name": "system-mine"}, "value": 10}, 422,
         "priority class names with 'system-' prefix are reserved"),
    Case("missing value", {"metadata": {"name": "novalue"}}, 422, "value: Required value"),
    Case("bad preemption policy", {"metadata": {"name": "pp"}, "value": 1, "preemptionPolicy": "Sometimes"}, 422,
         "Unsupported value"),
    Case("bad name", {"metadata": {"name": "Bad"}, "value": 1}, 422, "metadata.name"),
]


@pytest.mark.parametrize("case", PRIORITY_CLASS_CASES, ids=lambda c: c.name)
async def test_priority_class_validation(api: Client, case: Case) -> None:
    out = await call(api, "POST", PCS, case.body, expect=case.code)
    if case.message:
        assert case.message in out["message"]
    else:
        assert out["preemptionPolicy"] == "PreemptLowerPriority"


async def test_one_global_default_and_value_immutable(api: Client) -> None:
    await call(api, "POST", PCS, {"metadata": {"name": "d1"}, "value": 5, "globalDefault": True}, expect=201)
    second = await call(api, "POST", PCS, {"metadata": {"name": "d2"}, "value": 6, "globalDefault": True},
                        expect=403)
    assert second["message"] == ('priorityclasses.scheduling.k8s.io "d2" is forbidden: PriorityClass d1 is already '
                                 "marked as default. Only one default can exist")
    changed = await call(api, "PATCH", f"{PCS}/d1", {"value": 7}, "application/merge-patch+json", expect=422)
    assert "may not be changed in an update" in changed["message"]
    pod = await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    assert (pod["spec"]["priority"], pod["spec"]["priorityClassName"]) == (5, "d1")
    await call(api, "DELETE", f"{PCS}/d1", expect=200)
    again = await call(api, "GET", f"{PODS}/p")
    assert again["spec"]["priority"] == 5  # removing a class never changes existing pods


PDB_CASES = [
    Case("minAvailable integer", {"minAvailable": 1}, 201),
    Case("maxUnavailable percent", {"maxUnavailable": "25%"}, 201),
    Case("both set", {"minAvailable": 1, "maxUnavailable": 1}, 422, "cannot be both set"),
    Case("negative", {"minAvailable": -1}, 422, "must be greater than or equal to 0"),
    Case("over 100 percent", {"maxUnavailable": "120%"}, 422, "must not be greater than 100%"),
    Case("bad policy", {"minAvailable": 1, "unhealthyPodEvictionPolicy": "Never"}, 422, "Unsupported value"),
]


@pytest.mark.parametrize("case", PDB_CASES, ids=lambda c: c.name)
async def test_pdb_validation(api: Client, case: Case) -> None:
    body = {"metadata": {"name": "b"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, **case.body}}
    out = await call(api, "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", body, expect=case.code)
    if case.message:
        assert case.message in out["message"]


async def test_discovery_documents(api: Client) -> None:
    core = await call(api, "GET", "/api/v1", expect=200)
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["shortNames"] == ["po"] and by_name["pods"]["categories"] == ["all"]
    assert (by_name["pods/eviction"]["group"], by_name["pods/eviction"]["version"]) == ("policy", "v1")
    assert by_name["pods/binding"]["verbs"] == ["create"] and by_name["nodes"]["namespaced"] is False
    groups = await call(api, "GET", "/apis", expect=200)
    assert {g["name"] for g in groups["groups"]} == {"apps", "batch", "coordination.k8s.io", "policy",
                                                     "scheduling.k8s.io", "kubelite.io", "authentication.k8s.io",
                                                     "discovery.k8s.io", "metrics.k8s.io", "storage.k8s.io",
                                                     "rbac.authorization.k8s.io", "authorization.k8s.io",
                                                     "certificates.k8s.io", "networking.k8s.io",
                                                     "autoscaling",
                                                     "apiextensions.k8s.io"}
    resp = await api.get("/api", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;"
                                                    "as=APIGroupDiscoveryList,application/json"})
    assert resp.headers["Content-Type"].startswith("application/json;g=apidiscovery.k8s.io;v=v2")
    index = await call(api, "GET", "/openapi/v3", expect=200)
    assert set(index["paths"]) == {"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/policy/v1",
                                   "apis/scheduling.k8s.io/v1",
                                   "apis/coordination.k8s.io/v1", "apis/kubelite.io/v1alpha1",
                                   "apis/authentication.k8s.io/v1", "apis/discovery.k8s.io/v1",
                                   "apis/metrics.k8s.io/v1beta1", "apis/storage.k8s.io/v1",
                                   "apis/rbac.authorization.k8s.io/v1", "apis/authorization.k8s.io/v1",
                                   "apis/certificates.k8s.io/v1", "apis/networking.k8s.io/v1",
                                   "apis/autoscaling/v2", "apis/autoscaling/v1",
                                   "apis/apiextensions.k8s.io/v1"}
    doc = await call(api, "GET", index["paths"]["api/v1"]["serverRelativeURL"], expect=200)
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
    version = await call(api, "GET", "/version", expect=200)
    assert version["gitVersion"].startswith("v1.32.") and version["minor"] == "32"
    await call(api, "GET", "/openapi/v2", expect=404)


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
async def test_health_endpoints(api: Client, path: str) -> None:
    resp = await api.get(path)
    assert (resp.status, await resp.text()) == (200, "ok")


# Mirrors TestPriorityClassAdmission, plugin/pkg/admission/priority/admission_test.go: the plugin validates
# updates as it validates creates, so a second global default is Forbidden either way.
PC_UPDATE_CASES = [
    pytest.param("nondefault1", {"globalDefault": True}, 403, id="update operator with one existing default class"),
    pytest.param("default1", {"description": "still the default"}, 200, id="update the existing default class"),
    pytest.param("default1", {"globalDefault": False}, 200, id="update default class and remove its global default"),
]


@pytest.mark.parametrize(("name", "change", "code"), PC_UPDATE_CASES)
async def test_priority_class_update_admission(api: Client, name: str, change: dict[str, Any], code: int) -> None:
    await call(api, "POST", PCS, {"metadata": {"name": "default1"}, "value": 1000, "globalDefault": True}, expect=201)
    await call(api, "POST", PCS, {"metadata": {"name": "nondefault1"}, "value": 2000}, expect=201)
    current = await call(api, "GET", f"{PCS}/{name}", expect=200)
    out = await call(api, "PUT", f"{PCS}/{name}", {**current, **change}, expect=code)
    patched = await call(api, "PATCH", f"{PCS}/{name}", change, "application/merge-patch+json", expect=code)
    if code == 403:
        forbidden = (f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: PriorityClass default1 is already '
                     "marked as default. Only one default can exist")
        assert (out["reason"], out["message"]) == ("Forbidden", forbidden)
        assert patched["message"] == forbidden
        assert (await call(api, "GET", f"{PCS}/{name}")).get("globalDefault") is None
    else:
        assert patched.get("globalDefault", False) == change.get("globalDefault", True)  # false: omitted, as Go


NEGATIVE_GRACE = ("must be >= 0; negative values are invalid and will be treated as 1")

# Mirrors TestWarnings, pkg/api/pod/warnings_test.go: the value is stored as sent, with a Warning naming the field.
GRACE_WARNING_CASES = [
    pytest.param(PODS, lambda g: make_pod("p").grace(g).obj(), "spec.terminationGracePeriodSeconds",
                 id="terminationGracePeriodSeconds is negative"),
    pytest.param("/apis/apps/v1/namespaces/default/deployments",
                 lambda g: {"metadata": {"name": "d"}, "spec": {
                     "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {**make_pod("t").grace(g).obj()["spec"]}}}},
                 "spec.template.spec.terminationGracePeriodSeconds",
                 id="pod template terminationGracePeriodSeconds is negative"),
]


@pytest.mark.parametrize(("path", "build", "field"), GRACE_WARNING_CASES)
async def test_negative_termination_grace_period_is_stored_with_a_warning(
        api: Client, path: str, build: Any, field: str) -> None:
    resp = await api.post(path, data=orjson.dumps(build(-1)), headers={"Content-Type": "application/json"})
    assert resp.status == 201, await resp.text()
    assert resp.headers.getall("Warning") == [f'299 - "{field}: {NEGATIVE_GRACE}"']
    stored = await resp.json()
    spec = stored["spec"] if "template" not in stored["spec"] else stored["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == -1
    fine = await api.post(path, data=orjson.dumps({**build(0), "metadata": {"name": "zero"}}),
                          headers={"Content-Type": "application/json"})
    assert fine.status == 201 and "Warning" not in fine.headers


async def test_negative_grace_may_be_raised_to_one_and_deletes_with_one(api: Client) -> None:
    """ValidatePodUpdate: `spec.terminationGracePeriodSeconds` may change from negative to 1, nothing else."""
    await call(api, "POST", PODS, make_pod("p").grace(-5).node("n1").obj(), expect=201)
    other = await call(api, "PATCH", f"{PODS}/p", {"spec": {"terminationGracePeriodSeconds": 7}},
                       "application/merge-patch+json", expect=422)
    assert "pod updates may not change fields" in other["message"]
    one = await call(api, "PATCH", f"{PODS}/p", {"spec": {"terminationGracePeriodSeconds": 1}},
                     "application/merge-patch+json", expect=200)
    assert one["spec"]["terminationGracePeriodSeconds"] == 1
    await call(api, "POST", PODS, make_pod("q").grace(-5).node("n1").obj(), expect=201)
    deleting = await call(api, "DELETE", f"{PODS}/q", expect=200)
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 1  # CheckGracefulDelete: negative → 1


async def test_openapi_v3_has_a_schema_for_every_served_kind(api: Client) -> None:
    """kubectl explain finds a kind's schema by `x-kubernetes-group-version-kind` in components.schemas."""
    index = await call(api, "GET", "/openapi/v3", expect=200)
    served: set[tuple[str, str, str]] = set()
    for entry in index["paths"].values():
        doc = await call(api, "GET", entry["serverRelativeURL"], expect=200)
        for component in doc["components"]["schemas"].values():
            gvks = component.get("x-kubernetes-group-version-kind", [])
            served |= {(g["group"], g["version"], g["kind"]) for g in gvks}
    assert served == {(r.group, r.version, r.kind) for r in (*SERVED, *metrics_api.RESOURCES)}
