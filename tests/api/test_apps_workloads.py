"""apps/v1 validation (upstream's messages, 422 with causes) and the scale subresource, over real HTTP."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]
RSS = "/apis/apps/v1/namespaces/default/replicasets"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
MERGE = "application/merge-patch+json"

BASE: Obj = {"metadata": {"name": "web"},
             "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                      "template": {"metadata": {"labels": {"app": "web"}},
                                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def with_spec(**changes: Any) -> Obj:
    body = copy.deepcopy(BASE)
    for path, value in changes.items():
        target = body["spec"]
        *parents, leaf = path.split("__")
        for p in parents:
            target = target.setdefault(p, {})
        target[leaf] = value
    return body


@pytest.mark.parametrize(("collection", "body", "field", "message"), [
    pytest.param(RSS, with_spec(selector=None), "spec.selector", "Required value", id="selector required"),
    pytest.param(RSS, with_spec(selector={}), "spec.selector",
                 "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
                 "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment",
                 id="empty selector"),
    pytest.param(RSS, with_spec(template__metadata__labels={"app": "other"}), "spec.template.metadata.labels",
                 'Invalid value: map[string]string{"app":"other"}: `selector` does not match template `labels`',
                 id="selector does not match template labels"),
    pytest.param(RSS, with_spec(replicas=-1), "spec.replicas", "Invalid value: -1: must be greater than or equal to 0",
                 id="negative replicas"),
    pytest.param(RSS, with_spec(minReadySeconds=-1), "spec.minReadySeconds",
                 "Invalid value: -1: must be greater than or equal to 0", id="negative minReadySeconds"),
    pytest.param(RSS, with_spec(template__spec__restartPolicy="OnFailure"), "spec.template.spec.restartPolicy",
                 'Unsupported value: "OnFailure": supported values: "Always"', id="restartPolicy must be Always"),
    pytest.param(DEPLOYS, with_spec(strategy={"type": "RollingUpdate", "rollingUpdate": {
        "maxUnavailable": 0, "maxSurge": 0}}), "spec.strategy.rollingUpdate.maxUnavailable",
        "Invalid value: 0: may not be 0 when `maxSurge` is 0", id="maxUnavailable and maxSurge both 0"),
    pytest.param(DEPLOYS, with_spec(strategy={"type": "RollingUpdate", "rollingUpdate": {
        "maxUnavailable": "120%", "maxSurge": 1}}), "spec.strategy.rollingUpdate.maxUnavailable",
        'Invalid value: "120%": must not be greater than 100%', id="maxUnavailable over 100%"),
    pytest.param(DEPLOYS, with_spec(strategy={"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
                 "spec.strategy.rollingUpdate",
                 "Forbidden: may not be specified when strategy `type` is 'Recreate'",
                 id="Recreate with rollingUpdate"),
    pytest.param(DEPLOYS, with_spec(minReadySeconds=30, progressDeadlineSeconds=30), "spec.progressDeadlineSeconds",
                 "Invalid value: 30: must be greater than minReadySeconds", id="progressDeadline not above minReady"),
])
async def test_invalid_workload_is_422_with_upstream_message(api: Client, collection: str, body: Obj, field: str,
                                                           message: str) -> None:
    status = await call(api, "POST", collection, body, expect=422)
    assert {"field": field, "message": message} in [
        {"field": c["field"], "message": c["message"]} for c in status["details"]["causes"]]
    listed = await call(api, "GET", collection, expect=200)
    assert listed["items"] == []  # nothing half-written


async def test_selector_is_immutable(api: Client) -> None:
    await call(api, "POST", RSS, BASE, expect=201)
    status = await call(api, "PATCH", f"{RSS}/web", {"spec": {"selector": {"matchLabels": {"app": "web", "x": "y"}},
                                                              "template": {"metadata": {"labels": {"x": "y"}}}}},
                        MERGE, expect=422)
    assert status["details"]["causes"][0]["field"] == "spec.selector"
    assert status["details"]["causes"][0]["message"].endswith("field is immutable")


@pytest.mark.parametrize("collection", [pytest.param(RSS, id="replicasets"), pytest.param(DEPLOYS, id="deployments")])
async def test_scale_subresource(api: Client, collection: str) -> None:
    """GET shows a Scale; PATCH and PUT change spec.replicas (generation bumped); stale or negative refused."""
    await call(api, "POST", collection, BASE, expect=201)
    scale = await call(api, "GET", f"{collection}/web/scale", expect=200)
    assert (scale["kind"], scale["apiVersion"], scale["spec"], scale["status"]) == (
        "Scale", "autoscaling/v1", {"replicas": 2}, {"replicas": 0, "selector": "app=web"})
    patched = await call(api, "PATCH", f"{collection}/web/scale", {"spec": {"replicas": 5}}, MERGE, expect=200)
    assert patched["spec"]["replicas"] == 5
    obj = await call(api, "GET", f"{collection}/web", expect=200)
    assert (obj["spec"]["replicas"], obj["metadata"]["generation"]) == (5, 2)
    stale = {**scale, "spec": {"replicas": 1}}
    await call(api, "PUT", f"{collection}/web/scale", stale, expect=409)
    fresh = await call(api, "GET", f"{collection}/web/scale", expect=200)
    put = await call(api, "PUT", f"{collection}/web/scale", {**fresh, "spec": {"replicas": 1}}, expect=200)
    assert put["spec"]["replicas"] == 1
    bad = await call(api, "PATCH", f"{collection}/web/scale", {"spec": {"replicas": -3}}, MERGE, expect=422)
    assert bad["details"]["causes"][0]["field"] == "spec.replicas"
    await call(api, "GET", f"{collection}/missing/scale", expect=404)
