"""Defaults applied on every write, as upstream's SetDefaults_* on every decode (pkg/apis/apps/v1/defaults.go,
pkg/apis/batch/v1/defaults.go), and SetDefaults_Pod's requests-from-limits copy kept to Pods (never templates)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
APPS = "/apis/apps/v1/namespaces/default"
JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"
JSON_PATCH = "application/json-patch+json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def _template(restart: str = "Always", **container: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}},
            "spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "busybox", **container}]}}


def workload(plural: str, **spec: Any) -> tuple[str, dict[str, Any]]:
    """(collection path, body) of a minimal valid object of `plural`, with `spec` merged in."""
    if plural == "jobs":
        return JOBS, {"metadata": {"name": "x"}, "spec": {"template": _template("Never"), **spec}}
    body: dict[str, Any] = {"metadata": {"name": "x"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
                                                                "template": _template(), **spec}}
    if plural == "statefulsets":
        body["spec"].setdefault("serviceName", "x")
    return f"{APPS}/{plural}", body


def _dig(obj: Any, path: str) -> Any:
    for key in path.split("."):
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


@dataclass
class Case:
    plural: str
    spec: dict[str, Any]  # on create
    method: str  # how the field is then dropped: PUT (kubectl replace) or a PATCH content type
    change: Any  # PUT: the spec keys left out; PATCH: the patch body
    path: str  # the field, under .spec
    want: Any


UPDATES = [
    pytest.param(Case("deployments", {"replicas": 3}, "PUT", ["replicas"], "replicas", 1),
                 id="deployment replace without replicas stores 1"),
    pytest.param(Case("deployments", {"replicas": 3}, JSON_PATCH, [{"op": "remove", "path": "/spec/replicas"}],
                      "replicas", 1), id="deployment json patch removing replicas stores 1"),
    pytest.param(Case("deployments", {"replicas": 3}, STRATEGIC, {"spec": {"replicas": None}}, "replicas", 1),
                 id="deployment apply dropping replicas stores 1"),
    pytest.param(Case("deployments", {"revisionHistoryLimit": 2}, JSON_PATCH,
                      [{"op": "remove", "path": "/spec/revisionHistoryLimit"}], "revisionHistoryLimit", 10),
                 id="deployment json patch removing revisionHistoryLimit stores 10"),
    pytest.param(Case("deployments", {"progressDeadlineSeconds": 60}, MERGE,
                      {"spec": {"progressDeadlineSeconds": None}}, "progressDeadlineSeconds", 600),
                 id="deployment merge patch nulling progressDeadlineSeconds stores 600"),
    pytest.param(Case("deployments", {}, JSON_PATCH,
                      [{"op": "remove", "path": "/spec/strategy/rollingUpdate/maxSurge"}],
                      "strategy.rollingUpdate", {"maxUnavailable": "25%", "maxSurge": "25%"}),
                 id="deployment maxSurge removed is defaulted alone"),
    pytest.param(Case("replicasets", {"replicas": 3}, JSON_PATCH, [{"op": "remove", "path": "/spec/replicas"}],
                      "replicas", 1), id="replicaset json patch removing replicas stores 1"),
    pytest.param(Case("statefulsets", {"replicas": 3}, "PUT", ["replicas"], "replicas", 1),
                 id="statefulset replace without replicas stores 1"),
    pytest.param(Case("statefulsets", {"revisionHistoryLimit": 2}, JSON_PATCH,
                      [{"op": "remove", "path": "/spec/revisionHistoryLimit"}], "revisionHistoryLimit", 10),
                 id="statefulset json patch removing revisionHistoryLimit stores 10"),
    pytest.param(Case("statefulsets", {}, JSON_PATCH, [{"op": "remove", "path": "/spec/updateStrategy"}],
                      "updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
                 id="statefulset json patch removing updateStrategy stores the default"),
    pytest.param(Case("jobs", {}, JSON_PATCH, [{"op": "remove", "path": "/spec/completionMode"}],
                      "completionMode", "NonIndexed"), id="job json patch removing completionMode stores NonIndexed"),
    pytest.param(Case("jobs", {"backoffLimit": 2}, JSON_PATCH, [{"op": "remove", "path": "/spec/backoffLimit"}],
                      "backoffLimit", 6), id="job json patch removing backoffLimit stores 6"),
    pytest.param(Case("jobs", {"suspend": True}, MERGE, {"spec": {"suspend": None}}, "suspend", False),
                 id="job merge patch nulling suspend stores false"),
]


@pytest.mark.parametrize("case", UPDATES)
async def test_update_and_patch_apply_the_create_defaults(api: Client, case: Case) -> None:
    collection, body = workload(case.plural, **case.spec)
    created = await call(api, "POST", collection, body, expect=201)
    if case.method == "PUT":
        for key in case.change:
            created["spec"].pop(key)
        out = await call(api, "PUT", f"{collection}/x", created, expect=200)
    else:
        out = await call(api, "PATCH", f"{collection}/x", case.change, ctype=case.method, expect=200)
    assert _dig(out["spec"], case.path) == case.want
    assert _dig((await call(api, "GET", f"{collection}/x", expect=200))["spec"], case.path) == case.want


@pytest.mark.parametrize(("plural", "spec", "path", "want"), [
    pytest.param("deployments", {"strategy": {"rollingUpdate": {"maxSurge": 1}}}, "strategy",
                 {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}},
                 id="deployment maxUnavailable defaulted beside a given maxSurge"),
    pytest.param("replicasets", {}, "revisionHistoryLimit", None, id="replicaset has no revisionHistoryLimit"),
    pytest.param("statefulsets", {"updateStrategy": {"type": "RollingUpdate"}}, "updateStrategy",
                 {"type": "RollingUpdate"}, id="statefulset explicit RollingUpdate gets no rollingUpdate"),
    pytest.param("jobs", {"podFailurePolicy": {"rules": [{"action": "Ignore",
                                                          "onPodConditions": [{"type": "DisruptionTarget"}]}]}},
                 "podFailurePolicy.rules", [{"action": "Ignore",
                                             "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}],
                 id="job pod condition rule matches status True by default"),
    pytest.param("jobs", {"backoffLimitPerIndex": 1, "completionMode": "Indexed", "completions": 2},
                 "backoffLimit", 2**31 - 1, id="job backoffLimit is MaxInt32 beside backoffLimitPerIndex"),
])
async def test_create_defaults_as_upstream(api: Client, plural: str, spec: dict[str, Any], path: str,
                                           want: Any) -> None:
    collection, body = workload(plural, **spec)
    if plural == "jobs" and "podFailurePolicy" in spec:
        body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    out = await call(api, "POST", collection, body, expect=201)
    assert _dig(out["spec"], path) == want


@pytest.mark.parametrize("plural", ["deployments", "replicasets", "statefulsets"])
async def test_scale_reads_the_defaulted_replicas(api: Client, plural: str) -> None:
    collection, body = workload(plural, replicas=3)
    await call(api, "POST", collection, body, expect=201)
    await call(api, "PATCH", f"{collection}/x", [{"op": "remove", "path": "/spec/replicas"}], ctype=JSON_PATCH,
               expect=200)
    scale = await call(api, "GET", f"{collection}/x/scale", expect=200)
    assert scale["spec"]["replicas"] == 1


LIMITS = {"limits": {"cpu": "1", "memory": "64Mi"}}


@pytest.mark.parametrize("plural", ["deployments", "replicasets", "statefulsets", "jobs"])
@pytest.mark.parametrize("kind", ["containers", "initContainers"])
async def test_template_requests_are_not_copied_from_limits(api: Client, plural: str, kind: str) -> None:
    collection, body = workload(plural)
    tspec = body["spec"]["template"]["spec"]
    tspec[kind] = [{"name": kind.lower(), "image": "busybox", "resources": copy.deepcopy(LIMITS)}]
    if kind == "initContainers":
        tspec["containers"][0]["resources"] = copy.deepcopy(LIMITS)
    out = await call(api, "POST", collection, body, expect=201)
    assert out["spec"]["template"]["spec"][kind][-1]["resources"] == LIMITS
    # `kubectl set resources --limits` on the template: no request stays behind from the old limits
    patch = [{"op": "replace", "path": f"/spec/template/spec/{kind}/0/resources/limits/cpu", "value": "2"}]
    out = await call(api, "PATCH", f"{collection}/x", patch, ctype=JSON_PATCH, expect=422 if plural == "jobs" else 200)
    if plural != "jobs":  # a Job's template is immutable
        assert out["spec"]["template"]["spec"][kind][0]["resources"] == {"limits": {"cpu": "2", "memory": "64Mi"}}


@pytest.mark.parametrize(("kind", "resources", "want"), [
    pytest.param("containers", LIMITS, {**LIMITS, "requests": LIMITS["limits"]}, id="pod container requests = limits"),
    pytest.param("initContainers", LIMITS, {**LIMITS, "requests": LIMITS["limits"]}, id="pod init container too"),
    pytest.param("containers", {"limits": {"cpu": "1"}, "requests": {"cpu": "500m"}},
                 {"limits": {"cpu": "1"}, "requests": {"cpu": "500m"}}, id="pod requests given are kept"),
])
async def test_pod_requests_still_default_to_limits(api: Client, kind: str, resources: dict[str, Any],
                                                    want: dict[str, Any]) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    spec.setdefault(kind, []).insert(0, {"name": "r", "image": "busybox", "resources": copy.deepcopy(resources)})
    out = await call(api, "POST", PODS, {"metadata": {"name": "p"}, "spec": spec}, expect=201)
    assert out["spec"][kind][0]["resources"] == want
