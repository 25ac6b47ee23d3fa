"""apps/v1 DaemonSets: defaults (SetDefaults_DaemonSet), validation (TestValidateDaemonSet,
TestValidateDaemonSetUpdate in pkg/apis/apps/validation/validation_test.go), the registry strategy (template
generation and generation, pkg/registry/apps/daemonset/strategy.go) and the Table columns of `kubectl get ds`."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]
DS = "/apis/apps/v1/namespaces/default/daemonsets"
MERGE = "application/merge-patch+json"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
GENERATION = "deprecated.daemonset.template.generation"


def daemon_set(name: str = "abc", **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}},
                     "spec": {"containers": [{"name": "abc", "image": "image"}]}}, **spec}}


async def test_defaults_and_initial_status(api: Client) -> None:
    """SetDefaults_DaemonSet: RollingUpdate, maxUnavailable 1, maxSurge 0, revisionHistoryLimit 10; generation 1
    and template generation 1 (its apps/v1 annotation); an empty status."""
    out = await call(api, "POST", DS, daemon_set(), expect=201)
    assert out["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert out["spec"]["revisionHistoryLimit"] == 10
    assert out["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    assert out["metadata"]["generation"] == 1
    assert out["metadata"]["annotations"] == {GENERATION: "1"}
    assert out["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                             "numberReady": 0}


def _with(mutate: Callable[[Obj], Any]) -> Obj:
    body = daemon_set()
    mutate(body)
    return body


def _spec(**fields: Any) -> Callable[[Obj], Any]:
    return lambda d: d["spec"].update(fields)


def _template_spec(**fields: Any) -> Callable[[Obj], Any]:
    return lambda d: d["spec"]["template"]["spec"].update(fields)


def _rolling(**bounds: Any) -> Callable[[Obj], Any]:
    return _spec(updateStrategy={"type": "RollingUpdate", "rollingUpdate": bounds})


# Mirrors TestValidateDaemonSet's errorCases (names verbatim) and ValidateRollingUpdateDaemonSet's rules.
@pytest.mark.parametrize(("body", "field", "detail"), [
    pytest.param(_with(lambda d: d["metadata"].update(name="")), "metadata.name", "name or generateName is required",
                 id="zero-length ID"),
    pytest.param(_with(lambda d: d["spec"].pop("selector")), "spec.template.metadata.labels",
                 "`selector` does not match template `labels`", id="nil selector"),
    pytest.param(_with(_spec(selector={})), "spec.selector", "empty selector is invalid for daemonset",
                 id="empty selector"),
    pytest.param(_with(_spec(selector={"matchLabels": {"foo": "bar"}})), "spec.template.metadata.labels",
                 "`selector` does not match template `labels`", id="selector_doesnt_match"),
    pytest.param(_with(lambda d: d["spec"].pop("template")), "spec.template.spec.containers", "Required value",
                 id="invalid template"),
    pytest.param(_with(lambda d: d["metadata"].update(labels={"NoUppercaseOrSpecialCharsLike=Equals": "bar"})),
                 "metadata.labels", "name part must consist of", id="invalid_label"),
    pytest.param(_with(lambda d: d["metadata"].update(annotations={"NoUppercaseOrSpecialCharsLike=Equals": "bar"})),
                 "metadata.annotations", "name part must consist of", id="invalid_annotation"),
    pytest.param(_with(_template_spec(restartPolicy="OnFailure")), "spec.template.spec.restartPolicy",
                 'supported values: "Always"', id="invalid restart policy 1"),
    pytest.param(_with(_template_spec(restartPolicy="Never")), "spec.template.spec.restartPolicy",
                 'supported values: "Always"', id="invalid restart policy 2"),
    pytest.param(_with(_template_spec(activeDeadlineSeconds=5)), "spec.template.spec.activeDeadlineSeconds",
                 "activeDeadlineSeconds in DaemonSet is not Supported", id="activeDeadlineSeconds"),
    pytest.param(_with(_spec(updateStrategy={"type": "Random"})), "spec.updateStrategy", "Unsupported value",
                 id="invalid update strategy"),
    pytest.param(_with(_rolling(maxUnavailable=0, maxSurge=0)), "spec.updateStrategy.rollingUpdate.maxUnavailable",
                 "cannot be 0 when maxSurge is 0", id="maxUnavailable and maxSurge both 0"),
    pytest.param(_with(_rolling(maxUnavailable=1, maxSurge=1)), "spec.updateStrategy.rollingUpdate.maxSurge",
                 "may not be set when maxUnavailable is non-zero", id="maxUnavailable and maxSurge both set"),
    pytest.param(_with(_rolling(maxUnavailable="110%")), "spec.updateStrategy.rollingUpdate.maxUnavailable",
                 "must not be greater than 100%", id="maxUnavailable over 100%"),
    pytest.param(_with(_rolling(maxUnavailable=-1)), "spec.updateStrategy.rollingUpdate.maxUnavailable",
                 "must be greater than or equal to 0", id="negative maxUnavailable"),
    pytest.param(_with(_rolling(maxSurge="20Percent")), "spec.updateStrategy.rollingUpdate.maxSurge",
                 "a valid percent string must be", id="maxSurge not a percentage"),
    pytest.param(_with(_spec(minReadySeconds=-1)), "spec.minReadySeconds", "must be greater than or equal to 0",
                 id="negative minReadySeconds"),
    pytest.param(_with(_spec(revisionHistoryLimit=-1)), "spec.revisionHistoryLimit",
                 "must be greater than or equal to 0", id="negative revisionHistoryLimit"),
])
async def test_invalid_daemonset_is_422(api: Client, body: Obj, field: str, detail: str) -> None:
    out = await call(api, "POST", DS, copy.deepcopy(body), expect=422)
    assert any(c["field"] == field and detail in c["message"] for c in out["details"]["causes"]), out


@pytest.mark.parametrize("body", [
    pytest.param(daemon_set(updateStrategy={"type": "OnDelete"}), id="OnDelete"),
    pytest.param(daemon_set(hostNetwork=None, template={"metadata": {"labels": {"a": "b"}}, "spec": {
        "hostNetwork": True, "containers": [{"name": "abc", "image": "image",
                                             "ports": [{"containerPort": 12345, "protocol": "TCP"}]}]}}),
        id="hostnet"),
    pytest.param(daemon_set(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0,
                                                                                       "maxSurge": "10%"}}),
                 id="surge"),
])
async def test_valid_daemonset(api: Client, body: Obj) -> None:
    """TestValidateDaemonSet's successCases."""
    await call(api, "POST", DS, body, expect=201)


# Mirrors TestValidateDaemonSetUpdate: what may change, and how the strategy answers (template generation bumped
# with the template, generation with any spec change, the selector immutable).
@pytest.mark.parametrize(("patch", "code", "generation", "template_generation"), [
    pytest.param({"metadata": {"labels": {"x": "y"}}}, 200, 1, "1", id="no change"),
    pytest.param({"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}}, 200, 2, "2", id="change template"),
    pytest.param({"spec": {"template": {"spec": {"containers": [{"name": "abc", "image": "other"}]}}}}, 200, 2, "2",
                 id="change container image name"),
    pytest.param({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": None}}}, 200, 2, "1",
                 id="change update strategy"),
    pytest.param({"metadata": {"annotations": {GENERATION: "7"}}}, 200, 1, "1",
                 id="templateGeneration is the server's"),
    pytest.param({"spec": {"selector": {"matchLabels": {"a": "b", "c": "d"}},
                           "template": {"metadata": {"labels": {"c": "d"}}}}}, 422, 0, "",
                 id="invalid selector"),
    pytest.param({"spec": {"template": {"spec": {"containers": None}}}}, 422, 0, "", id="invalid pod"),
    pytest.param({"spec": {"updateStrategy": {"type": "Random"}}}, 422, 0, "", id="invalid update strategy"),
])
async def test_daemonset_update_rules(api: Client, patch: Obj, code: int, generation: int,
                                      template_generation: str) -> None:
    await call(api, "POST", DS, daemon_set(), expect=201)
    out = await call(api, "PATCH", f"{DS}/abc", patch, MERGE, expect=code)
    if code == 200:
        assert out["metadata"]["generation"] == generation
        assert out["metadata"]["annotations"][GENERATION] == template_generation


# The annotation is decoded as Convert_v1_DaemonSet_To_apps_DaemonSet does, with strconv.ParseInt(v, 10, 64): what
# it refuses is a 400 quoting Go's error (never a 500); a parsed value below 1 becomes 1 on create.
@pytest.mark.parametrize(("value", "code", "detail"), [
    pytest.param("5", 201, "5", id="kept on create"),
    pytest.param("-3", 201, "1", id="negative is raised to 1"),
    pytest.param("+7", 201, "7", id="sign accepted as by ParseInt"),
    pytest.param("\u00b2", 400, 'strconv.ParseInt: parsing "\u00b2": invalid syntax', id="non-ASCII digit"),
    pytest.param("1_0", 400, 'strconv.ParseInt: parsing "1_0": invalid syntax', id="underscore"),
    pytest.param(" 1", 400, 'strconv.ParseInt: parsing " 1": invalid syntax', id="space"),
    pytest.param("", 400, 'strconv.ParseInt: parsing "": invalid syntax', id="empty"),
    pytest.param("9223372036854775808", 400,
                 'strconv.ParseInt: parsing "9223372036854775808": value out of range', id="beyond int64"),
])
async def test_template_generation_annotation_is_parsed_as_upstream(api: Client, value: str, code: int,
                                                                     detail: str) -> None:
    body = daemon_set()
    body["metadata"]["annotations"] = {GENERATION: value}
    out = await call(api, "POST", DS, body, expect=code)
    if code == 201:
        assert out["metadata"]["annotations"][GENERATION] == detail
    else:
        assert out["message"] == f'DaemonSet in version "v1" cannot be handled as a DaemonSet: {detail}', out


async def test_template_generation_annotation_is_parsed_on_update_and_status(api: Client) -> None:
    """The update and status bodies are decoded too: an unparseable annotation is a 400 on both."""
    ds = await call(api, "POST", DS, daemon_set(), expect=201)
    bad = {**ds, "metadata": {**ds["metadata"], "annotations": {GENERATION: "\u00b2"}}}
    for path in (f"{DS}/abc", f"{DS}/abc/status"):
        out = await call(api, "PUT", path, bad, expect=400)
        assert "strconv.ParseInt" in out["message"]


async def test_status_is_written_only_through_the_subresource(api: Client) -> None:
    ds = await call(api, "POST", DS, daemon_set(), expect=201)
    await call(api, "PUT", f"{DS}/abc", {**ds, "status": {"numberReady": 5}}, expect=200)
    ds = await call(api, "GET", f"{DS}/abc", expect=200)
    assert ds["status"]["numberReady"] == 0
    out = await call(api, "PUT", f"{DS}/abc/status", {**ds, "status": {**ds["status"], "numberReady": 5}},
                     expect=200)
    assert out["status"]["numberReady"] == 5 and out["metadata"]["generation"] == 1


async def test_table_columns(api: Client) -> None:
    """printDaemonSet: NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE (+ wide columns)."""
    ds = daemon_set()
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"z": "1", "disk": "ssd"}
    await call(api, "POST", DS, ds, expect=201)
    resp = await api.get(DS, headers={"Accept": TABLE})
    table = await resp.json()
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers",
        "Images", "Selector"]
    cells = table["rows"][0]["cells"]
    assert cells[:7] == ["abc", 0, 0, 0, 0, 0, "disk=ssd,z=1"]
    assert cells[8:] == ["abc", "image", "a=b"]


async def test_discovery_names_daemonsets(api: Client) -> None:
    out = await call(api, "GET", "/apis/apps/v1", expect=200)
    found = {r["name"]: r for r in out["resources"]}
    assert found["daemonsets"]["shortNames"] == ["ds"] and found["daemonsets"]["categories"] == ["all"]
    assert found["daemonsets"]["kind"] == "DaemonSet" and "daemonsets/status" in found


# ValidateDaemonSetStatusUpdate's rules (case names are ours, not upstream's).
@pytest.mark.parametrize(("old", "new", "code"), [
    pytest.param({}, {"numberReady": 1}, 200, id="valid status update"),
    pytest.param({}, {"numberReady": -1}, 422, id="negative numberReady"),
    pytest.param({}, {"collisionCount": 1}, 200, id="collisionCount set"),
    pytest.param({"collisionCount": 2}, {"collisionCount": 3}, 200, id="collisionCount incremented"),
    pytest.param({"collisionCount": 2}, {"collisionCount": 1}, 422, id="decreasing collisionCount"),
    pytest.param({"collisionCount": 2}, {}, 422, id="nil collisionCount"),
])
async def test_daemonset_status_update_rules(api: Client, old: Obj, new: Obj, code: int) -> None:
    ds = await call(api, "POST", DS, daemon_set(), expect=201)
    base = {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}
    ds = await call(api, "PUT", f"{DS}/abc/status", {**ds, "status": {**base, **old}}, expect=200)
    await call(api, "PUT", f"{DS}/abc/status", {**ds, "status": {**base, **new}}, expect=code)
