"""apps/v1 StatefulSet validation (TestValidateStatefulSet, TestValidateStatefulSetUpdate) and ControllerRevisions."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
STS = "/apis/apps/v1/namespaces/default/statefulsets"
REVS = "/apis/apps/v1/namespaces/default/controllerrevisions"
MERGE = "application/merge-patch+json"


def sts(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}}, "serviceName": "web",
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, **spec}}


async def test_defaults(api: Client) -> None:
    out = await call(api, "POST", STS, sts(), expect=201)
    spec = out["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert (spec["replicas"], spec["revisionHistoryLimit"]) == (1, 10)


def _bad(mutate: Any) -> dict[str, Any]:
    body = sts()
    mutate(body["spec"])
    return body


@pytest.mark.parametrize(("body", "field", "detail"), [
    pytest.param(_bad(lambda s: s.update(selector={})), "spec.selector", "empty selector is invalid for statefulset",
                 id="empty selector"),
    pytest.param(_bad(lambda s: s.update(selector={"matchLabels": {"app": "other"}})),
                 "spec.template.metadata.labels", "`selector` does not match template `labels`",
                 id="selector_doesnt_match"),
    pytest.param(_bad(lambda s: s["template"]["spec"].update(restartPolicy="OnFailure")),
                 "spec.template.spec.restartPolicy", 'supported values: "Always"', id="invalid restart policy"),
    pytest.param(_bad(lambda s: s.update(replicas=-1)), "spec.replicas", "must be greater than or equal to 0",
                 id="negative_replicas"),
    pytest.param(_bad(lambda s: s.update(podManagementPolicy="Foo")), "spec.podManagementPolicy",
                 "Unsupported value", id="invalid podManagementPolicy"),
    pytest.param(_bad(lambda s: s.update(updateStrategy={"type": "Foo"})), "spec.updateStrategy.type",
                 "Unsupported value", id="invalid updateStrategy"),
    pytest.param(_bad(lambda s: s.update(updateStrategy={"type": "OnDelete", "rollingUpdate": {"partition": 1}})),
                 "spec.updateStrategy.rollingUpdate", "only allowed for updateStrategy 'RollingUpdate'",
                 id="rollingUpdate with OnDelete"),
    pytest.param(_bad(lambda s: s.update(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": -1}})),
                 "spec.updateStrategy.rollingUpdate.partition", "must be greater than or equal to 0",
                 id="negative partition"),
    pytest.param(_bad(lambda s: s["template"]["spec"].update(activeDeadlineSeconds=5)),
                 "spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in StatefulSet is not Supported",
                 id="invalid activeDeadlineSeconds"),
    pytest.param(_bad(lambda s: s.update(persistentVolumeClaimRetentionPolicy={"whenDeleted": "Keep",
                                                                              "whenScaled": "Retain"})),
                 "spec.persistentVolumeClaimRetentionPolicy.whenDeleted", "Unsupported value",
                 id="invalid PersistentVolumeClaimRetentionPolicy"),
    pytest.param(_bad(lambda s: s.update(ordinals={"start": -2})), "spec.ordinals.start",
                 "must be greater than or equal to 0", id="invalid ordinals.start"),
])
async def test_invalid_statefulset_is_422(api: Client, body: dict[str, Any], field: str, detail: str) -> None:
    out = await call(api, "POST", STS, copy.deepcopy(body), expect=422)
    assert any(c["field"] == field and detail in c["message"] for c in out["details"]["causes"]), out
    await call(api, "GET", f"{STS}/web", expect=404)


@pytest.mark.parametrize(("patch", "code"), [
    pytest.param({"spec": {"replicas": 5}}, 200, id="replicas may change"),
    pytest.param({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": None}}}, 200,
                 id="updateStrategy may change"),
    pytest.param({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}, 200,
                 id="template may change"),
    pytest.param({"spec": {"serviceName": "other"}}, 422, id="serviceName is immutable"),
    pytest.param({"spec": {"podManagementPolicy": "Parallel"}}, 422, id="podManagementPolicy is immutable"),
    pytest.param({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]}}, 422,
                 id="volumeClaimTemplates are immutable"),
])
async def test_statefulset_update_rules(api: Client, patch: dict[str, Any], code: int) -> None:
    await call(api, "POST", STS, sts(), expect=201)
    out = await call(api, "PATCH", f"{STS}/web", patch, MERGE, expect=code)
    if code == 422:
        assert "updates to statefulset spec for fields other than" in out["message"]


async def test_controller_revision_data_is_immutable(api: Client) -> None:
    rev = {"metadata": {"name": "web-abc"}, "revision": 1, "data": {"spec": {"template": {"$patch": "replace"}}}}
    await call(api, "POST", REVS, rev, expect=201)
    await call(api, "PATCH", f"{REVS}/web-abc", {"revision": 2}, MERGE, expect=200)
    out = await call(api, "PATCH", f"{REVS}/web-abc", {"data": {"other": 1}}, MERGE, expect=422)
    assert any(c["field"] == "data" for c in out["details"]["causes"])
    await call(api, "POST", REVS, {**rev, "metadata": {"name": "neg"}, "revision": -1}, expect=422)
