"""Behaviours a kubectl v1.32 QA pass found to differ from kube-apiserver 1.32, one table each: strategic merge
patch metadata for every kind (upstream's struct tags), collection DELETE, Service (DNS-1035) names, ListOptions
validation and resourceVersion handling, field errors' printed values, field selector messages, and templates'
service account defaulting. Real API server on real SQLite; the resourceVersion wait on a FakeClock."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kubelite.api import validation as v
from kubelite.apiserver.patch import strategic_merge_patch
from kubelite.apiserver.patch_fields import PATCH_FIELDS
from kubelite.clock import TIMER_GRANULARITY, FakeClock
from kubelite.store.sqlite import SQLiteStore
from tests.api.test_rest import call
from tests.conftest import SHARED_LOOP, serving_server

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]
NS = "/api/v1/namespaces/default"
CMS = f"{NS}/configmaps"
PODS = f"{NS}/pods"
SVCS = f"{NS}/services"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
JOBS = "/apis/batch/v1/namespaces/default/jobs"
SMP = "application/strategic-merge-patch+json"


def _directives(value: Any) -> list[str]:
    """Every `$`-key left anywhere in a value (a stored object must hold none)."""
    if isinstance(value, dict):
        return [k for k in value if k.startswith("$")] + [d for x in value.values() for d in _directives(x)]
    if isinstance(value, list):
        return [d for x in value for d in _directives(x)]
    return []


def _template(containers: list[Obj], **spec: Any) -> Obj:
    return {"spec": {"template": {"spec": {"containers": containers, **spec}}}}


# --- strategic merge patch: the metadata of every kind, from k8s.io/api's struct tags ----------------------------

_ENV = [{"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]
_ENV_PATCH = [{"$setElementOrder/env": [{"name": "A"}, {"name": "B"}], "name": "c",
               "env": [{"name": "A", "value": "3"}]}]
_ENV_WANT = [{"name": "c", "image": "i", "env": [{"name": "A", "value": "3"}, {"name": "B", "value": "2"}]}]

SMP_CASES = [
    pytest.param("V1Service", {"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}},
                 {"spec": {"$setElementOrder/ports": [{"port": 80}, {"port": 443}],
                           "ports": [{"port": 80, "targetPort": 9090}, {"name": "https", "port": 443}]}},
                 {"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 9090},
                                     {"name": "https", "port": 443}]}},
                 id="service ports merge by port"),
    *[pytest.param(model, _template(_ENV), _template([*_ENV_PATCH]), _template(_ENV_WANT),
                   id=f"{model[2:]} template env merges by name as a pod's")
      for model in ("V1Job", "V1Deployment", "V1ReplicaSet", "V1StatefulSet", "V1DaemonSet")],
    pytest.param("V1Deployment", _template([], volumes=[{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]),
                 _template([], volumes=[{"name": "b", "$retainKeys": ["name", "hostPath"],
                                         "hostPath": {"path": "/x"}}]),
                 _template([], volumes=[{"name": "a", "emptyDir": {}}, {"name": "b", "hostPath": {"path": "/x"}}]),
                 id="template volumes merge by name and retain keys"),
    pytest.param("V1ServiceAccount", {"secrets": [{"name": "s1"}]}, {"secrets": [{"name": "s2"}]},
                 {"secrets": [{"name": "s1"}, {"name": "s2"}]}, id="service account secrets merge by name"),
    pytest.param("V1Endpoints", {"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]},
                 {"subsets": [{"addresses": [{"ip": "10.0.0.2"}]}]},
                 {"subsets": [{"addresses": [{"ip": "10.0.0.2"}]}]}, id="endpoints subsets are replaced"),
    pytest.param("V1EndpointSlice", {"endpoints": [{"addresses": ["10.0.0.1"]}]},
                 {"endpoints": [{"addresses": ["10.0.0.2"]}]},
                 {"endpoints": [{"addresses": ["10.0.0.2"]}]}, id="endpointslice endpoints are replaced"),
    pytest.param("V1ConfigMap", {"data": {"a": "1"}}, {"data": {"b": "2"}}, {"data": {"a": "1", "b": "2"}},
                 id="configmap data merges as a map"),
    pytest.param("V1Secret", {"data": {"a": "MQ=="}}, {"data": {"a": None}}, {"data": {}},
                 id="secret data keys are deleted by null"),
    pytest.param("V1Role", {"rules": [{"verbs": ["get"], "resources": ["pods"], "apiGroups": [""]}]},
                 {"rules": [{"verbs": ["list"], "resources": ["pods"], "apiGroups": [""]}]},
                 {"rules": [{"verbs": ["list"], "resources": ["pods"], "apiGroups": [""]}]},
                 id="role rules are replaced"),
    pytest.param("V1Node", {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}},
                 {"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}},
                 {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                           {"type": "Hostname", "address": "n1"}]}},
                 id="node addresses merge by type"),
    pytest.param("V1PodDisruptionBudget", {"spec": {"selector": {"matchLabels": {"a": "1"}}}},
                 {"spec": {"selector": {"matchLabels": {"b": "2"}}}},
                 {"spec": {"selector": {"matchLabels": {"b": "2"}}}}, id="pdb selector is replaced whole"),
    pytest.param("V1Deployment", {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}},
                 {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
                 {"spec": {"strategy": {"type": "Recreate"}}}, id="deployment strategy retains keys"),
    pytest.param("V1Lease", {"metadata": {"ownerReferences": [{"uid": "u1", "name": "a"}]}},
                 {"metadata": {"ownerReferences": [{"uid": "u2", "name": "b"}]}},
                 {"metadata": {"ownerReferences": [{"uid": "u1", "name": "a"}, {"uid": "u2", "name": "b"}]}},
                 id="owner references merge by uid on any kind"),
    pytest.param("", {"spec": {"items": [{"name": "a"}]}}, {"spec": {"items": [{"name": "b"}]}},
                 {"spec": {"items": [{"name": "b"}]}}, id="a kind with no model replaces its lists"),
]


@pytest.mark.parametrize(("model", "original", "doc", "want"), SMP_CASES)
def test_strategic_merge_follows_upstream_struct_tags(model: str, original: Obj, doc: Obj, want: Obj) -> None:
    out = strategic_merge_patch(original, doc, model)
    assert out == want
    assert _directives(out) == []


TAG_CASES = [
    pytest.param(("V1ServiceSpec", "ports"), ("merge", "port"), id="ServiceSpec.Ports"),
    pytest.param(("V1PodSpec", "volumes"), ("merge,retainKeys", "name"), id="PodSpec.Volumes"),
    pytest.param(("V1Container", "env"), ("merge", "name"), id="Container.Env"),
    pytest.param(("V1EphemeralContainer", "env"), ("merge", "name"), id="EphemeralContainerCommon inlined"),
    pytest.param(("V1DeploymentSpec", "strategy"), ("retainKeys", ""), id="DeploymentSpec.Strategy"),
    pytest.param(("V1ObjectMeta", "finalizers"), ("merge", ""), id="ObjectMeta.Finalizers"),
    pytest.param(("V1EndpointSubset", "addresses"), None, id="EndpointSubset has none"),
]


@pytest.mark.parametrize(("field", "want"), TAG_CASES)
def test_patch_fields_hold_upstream_tags(field: tuple[str, str], want: tuple[str, str] | None) -> None:
    assert PATCH_FIELDS.get(field) == want


def _job(env: str) -> Obj:
    return {"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "env": [{"name": "A", "value": env}]}]}}}}


async def test_strategic_merge_over_http(api: Client) -> None:
    """The QA repros, as kubectl apply sends them: a Service re-applied with a changed targetPort and a second port
    merges; a Job re-applied with a changed env is refused as immutable (not as an unknown `$` field); a kind with
    no Go type refuses strategic merge as custom resources do."""
    await call(api, "POST", SVCS, {"metadata": {"name": "web"}, "spec": {"ports": [
        {"name": "http", "port": 80, "targetPort": 8080}]}}, expect=201)
    out = await call(api, "PATCH", f"{SVCS}/web?fieldValidation=Strict", {"spec": {
        "$setElementOrder/ports": [{"port": 80}, {"port": 443}],
        "ports": [{"port": 80, "targetPort": 9090}, {"name": "https", "port": 443, "targetPort": 8443}]}}, SMP,
        expect=200)
    assert [(p["name"], p["port"], p["targetPort"]) for p in out["spec"]["ports"]] == [
        ("http", 80, 9090), ("https", 443, 8443)]
    await call(api, "POST", JOBS, _job("1"), expect=201)
    refused = await call(api, "PATCH", f"{JOBS}/j?fieldValidation=Strict", {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "c"}],
        "containers": [{"$setElementOrder/env": [{"name": "A"}], "name": "c",
                        "env": [{"name": "A", "value": "2"}]}]}}}},
        SMP, expect=422)
    assert "spec.template: Invalid value" in refused["message"] and "field is immutable" in refused["message"]
    fence = await call(api, "PATCH", "/apis/kubelite.io/v1alpha1/nodefences/n1", {"spec": {}}, SMP, expect=415)
    assert fence["reason"] == "UnsupportedMediaType"


# --- collection DELETE: Store.DeleteCollection ------------------------------------------------------------------

def _cm(name: str, finalizers: list[str] | None = None, **labels: str) -> Obj:
    meta: Obj = {"name": name, "labels": labels}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"metadata": meta, "data": {"k": "v"}}


def _pod(name: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}}


def _deploy(name: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "labels": labels}, "spec": {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


DELETE_COLLECTION_CASES = [
    # (collection, objects, query, answered names, gone, terminating)
    pytest.param(CMS, [_cm("a1", app="a"), _cm("a2", app="a"), _cm("b1", app="b")], "labelSelector=app%3Da",
                 ["a1", "a2"], ["a1", "a2"], [], id="a label selector deletes only the matching objects"),
    pytest.param(CMS, [_cm("a1", app="a"), _cm("a2", app="a")], "fieldSelector=metadata.name%3Da2",
                 ["a2"], ["a2"], [], id="a field selector deletes only the matching objects"),
    pytest.param(CMS, [_cm("a1", app="a"), _cm("a2", app="a")], "labelSelector=app%3Da&dryRun=All",
                 ["a1", "a2"], [], [], id="a dry run deletes nothing and answers what it would"),
    pytest.param(CMS, [_cm("f1", ["example.com/hold"], app="f"), _cm("f2", app="f")], "labelSelector=app%3Df",
                 ["f1", "f2"], ["f2"], ["f1"], id="a finalizer holds its object as a single delete's would"),
    pytest.param(PODS, [_pod("p1", app="p"), _pod("p2", app="p")], "labelSelector=app%3Dp",
                 ["p1", "p2"], [], ["p1", "p2"], id="bound pods are deleted gracefully"),
    pytest.param(PODS, [_pod("p1", app="p")], "labelSelector=app%3Dp&gracePeriodSeconds=0",
                 ["p1"], ["p1"], [], id="the query's grace period applies to each item"),
    pytest.param(DEPLOYS, [_deploy("d1", app="d"), _deploy("d2", app="e")], "labelSelector=app%3Dd",
                 ["d1"], ["d1"], [], id="a group's collection is deleted alike"),
]


@pytest.mark.parametrize(("path", "objects", "query", "answered", "gone", "terminating"), DELETE_COLLECTION_CASES)
async def test_delete_collection(api: Client, path: str, objects: list[Obj], query: str, answered: list[str],
                                 gone: list[str], terminating: list[str]) -> None:
    for obj in objects:
        await call(api, "POST", path, obj, expect=201)
    out = await call(api, "DELETE", f"{path}?{query}", expect=200)
    assert out["kind"].endswith("List") and out["metadata"]["resourceVersion"]
    assert sorted(o["metadata"]["name"] for o in out["items"]) == answered
    left = {o["metadata"]["name"]: o for o in (await call(api, "GET", path, expect=200))["items"]}
    created = [o["metadata"]["name"] for o in objects]
    assert sorted(n for n in created if n not in left) == gone
    assert sorted(n for n in created if n in left and left[n]["metadata"].get("deletionTimestamp")) == terminating


# --- ListOptions validation and resourceVersion parsing -------------------------------------------------------

_LIST_OPTIONS = 'ListOptions.meta.k8s.io "" is invalid: '
LIST_OPTION_CASES = [
    # upstream's TestValidateListOptions cases by name, then the rest of the QA's
    pytest.param("GET", CMS, 200, "", id="valid-default"),
    pytest.param("GET", f"{CMS}?resourceVersion={{rv}}&resourceVersionMatch=Exact", 200, "",
                 id="valid-resourceversionmatch-exact"),
    pytest.param("GET", f"{CMS}?resourceVersion=0&resourceVersionMatch=Exact", 422,
                 _LIST_OPTIONS + 'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
                                 'resourceVersion "0"', id="invalid-resourceversionmatch-exact"),
    pytest.param("GET", f"{CMS}?resourceVersion=0&resourceVersionMatch=NotOlderThan", 200, "",
                 id="valid-resourceversionmatch-notolderthan"),
    pytest.param("GET", f"{CMS}?resourceVersion=0&resourceVersionMatch=foo", 422,
                 _LIST_OPTIONS + 'resourceVersionMatch: Unsupported value: "foo": supported values: "Exact", '
                                 '"NotOlderThan", ""', id="invalid-resourceversionmatch"),
    pytest.param("GET", f"{CMS}?resourceVersionMatch=Exact", 422,
                 _LIST_OPTIONS + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
                                 "resourceVersion is provided", id="a match without a resourceVersion"),
    pytest.param("GET", f"{CMS}?sendInitialEvents=true", 422,
                 _LIST_OPTIONS + "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
                 id="list-sendInitialEvents-forbidden"),
    pytest.param("GET", f"{CMS}?watch=true", 200, "", id="valid-watch-default"),
    pytest.param("GET", f"{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                        "&allowWatchBookmarks=true", 200, "", id="valid-watch-sendInitialEvents-on"),
    pytest.param("GET", f"{CMS}?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
                        "&allowWatchBookmarks=true", 200, "", id="valid-watch-sendInitialEvents-off"),
    pytest.param("GET", f"{CMS}?watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=0", 422,
                 _LIST_OPTIONS + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
                                 "sendInitialEvents is provided",
                 id="watch-resourceversionmatch-without-sendInitialEvents-forbidden"),
    pytest.param("GET", f"{CMS}?watch=true&sendInitialEvents=true", 422,
                 _LIST_OPTIONS + "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                                 "resourceVersionMatch to NotOlderThan",
                 id="watch-sendInitialEvents-without-resourceversionmatch-forbidden"),
    pytest.param("GET", f"{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true",
                 422, _LIST_OPTIONS + "[resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                                      "resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "
                                      '"Exact": supported values: "NotOlderThan"]',
                 id="watch-sendInitialEvents-with-exact-resourceversionmatch-forbidden"),
    pytest.param("GET", f"{CMS}?watch=true&sendInitialEvents=false&resourceVersionMatch=", 422,
                 _LIST_OPTIONS + "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                                 "resourceVersionMatch to NotOlderThan",
                 id="watch-sendInitialEvents-off-with-empty-resourceversionmatch-forbidden"),
    pytest.param("GET", f"{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=incorrect", 422,
                 _LIST_OPTIONS + "[resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                                 "resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "
                                 '"incorrect": supported values: "NotOlderThan"]',
                 id="watch-sendInitialEvents-with-incorrect-resourceversionmatch-forbidden"),
    pytest.param("GET", f"{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", 200, "",
                 id="watch-sendInitialEvents-no-allowWatchBookmark"),
    pytest.param("GET", f"{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=123",
                 422, _LIST_OPTIONS + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when "
                                      "continue is provided", id="watch-sendInitialEvents-with-continue-forbidden"),
    pytest.param("GET", f"{CMS}?resourceVersion=abc", 400,
                 'invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing '
                 '"abc": invalid syntax', id="a list's resourceVersion that is not a number"),
    pytest.param("GET", f"{CMS}/kube-root-ca.crt?resourceVersion=-1", 400,
                 'invalid resource version: resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing '
                 '"-1": invalid syntax', id="a get's resourceVersion that is not a number"),
    pytest.param("DELETE", f"{CMS}?resourceVersionMatch=Bogus&resourceVersion=1", 422,
                 _LIST_OPTIONS + 'resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", '
                                 '"NotOlderThan", ""', id="a collection delete validates its list options"),
    pytest.param("DELETE", "/api/v1/configmaps", 405,
                 "the server does not allow this method on the requested resource (DELETE configmaps)",
                 id="a collection delete across namespaces is not served"),
    pytest.param("DELETE", "/api/v1/namespaces", 405,
                 "the server does not allow this method on the requested resource (DELETE namespaces)",
                 id="namespaces have no collection delete"),
]


@SHARED_LOOP
@pytest.mark.parametrize(("method", "path", "status", "message"), LIST_OPTION_CASES)
async def test_list_options(shared_api: Client, method: str, path: str, status: int, message: str) -> None:
    rv = (await call(shared_api, "GET", CMS, expect=200))["metadata"]["resourceVersion"]
    async with shared_api.request(method, path.replace("{rv}", rv)) as resp:  # a watch: its headers only
        assert resp.status == status, await resp.text()
        if message:
            assert (await resp.json())["message"] == message


FUTURE_CASES = [
    pytest.param(CMS, False, id="a list ahead of the cache answers 504 after 3 s"),
    pytest.param(f"{NS}/configmaps/kube-root-ca.crt", False, id="a get ahead of the cache answers 504 after 3 s"),
    pytest.param(CMS, True, id="a list is served once the cache reaches its resourceVersion"),
]


@pytest.mark.parametrize(("path", "written"), FUTURE_CASES)
async def test_a_resource_version_ahead_of_the_cache(tmp_path: Path, path: str, written: bool) -> None:
    clock = FakeClock()
    async with serving_server(await SQLiteStore.open(tmp_path / "state.db"), clock=clock) as (server, api):
        ahead = server.caches.revision + 1
        reply = asyncio.ensure_future(api.get(f"{path}?resourceVersion={ahead}"))
        for _ in range(500):  # until the request waits for the revision (real I/O: the fake clock cannot settle it)
            if server.caches._waiters:
                break
            await asyncio.sleep(0.01)
        await clock.advance(2.5)
        assert not reply.done()
        if written:
            await call(api, "POST", CMS, _cm("late"), expect=201)
        else:
            await clock.advance(0.5 + 2 * TIMER_GRANULARITY)
        resp = await asyncio.wait_for(reply, 10)
        body = await resp.json()
        if written:
            assert resp.status == 200, body
            return
        assert (resp.status, body["reason"], resp.headers["Retry-After"]) == (504, "Timeout", "1")
        assert body["message"].startswith(f"Too large resource version: {ahead}, current: ")
        assert body["details"]["causes"] == [{"reason": "ResourceVersionTooLarge",
                                              "message": "Too large resource version"}]


# --- names ----------------------------------------------------------------------------------------------------

_DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
            "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
NAME_CASES = [
    pytest.param(SVCS, {"spec": {"ports": [{"port": 80}]}}, "1abc", 422,
                 f'Service "1abc" is invalid: metadata.name: Invalid value: "1abc": {_DNS1035}',
                 id="a service name must start with a letter"),
    pytest.param(SVCS, {"spec": {"ports": [{"port": 80}]}}, "a" * 64, 422,
                 f'Service "{"a" * 64}" is invalid: metadata.name: Invalid value: "{"a" * 64}": must be no more '
                 "than 63 characters", id="a service name has at most 63 characters"),
    pytest.param(SVCS, {"spec": {"ports": [{"port": 80}]}}, "a.b", 422,
                 f'Service "a.b" is invalid: metadata.name: Invalid value: "a.b": {_DNS1035}',
                 id="a service name has no dots"),
    pytest.param(SVCS, {"spec": {"ports": [{"port": 80}]}}, "svc-1", 201, "", id="a DNS-1035 service name"),
    pytest.param("/api/v1/namespaces", {}, "a.b", 422, 'Namespace "a.b" is invalid: metadata.name: Invalid value: '
                 f'"a.b": {v.DNS1123_LABEL_MSG}', id="a namespace name is a DNS-1123 label"),
    pytest.param(CMS, {}, "1.a.b", 201, "", id="a configmap name is a DNS-1123 subdomain"),
    pytest.param("/apis/rbac.authorization.k8s.io/v1/clusterroles", {}, "system:x", 201, "",
                 id="an RBAC name is a path segment"),
]


# apimachinery/pkg/util/validation TestIsDNS1035Label's values
DNS1035_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "a" * 63]
DNS1035_BAD = ["0", "01", "012", "1a", "1-1", "1--a--b--2", "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a",
               "1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ",
               "a ", " a", "a b", "1 ", " 1", "1 2", "a" * 64]


@pytest.mark.parametrize(("value", "good"), [pytest.param(x, True, id=f"good {x[:8]!r}") for x in DNS1035_GOOD]
                         + [pytest.param(x, False, id=f"bad {x[:8]!r}") for x in DNS1035_BAD])
def test_is_dns1035_label(value: str, good: bool) -> None:
    assert (v.is_dns1035_label(value) == []) is good


@SHARED_LOOP
@pytest.mark.parametrize(("path", "body", "name", "status", "message"), NAME_CASES)
async def test_names(shared_api: Client, path: str, body: Obj, name: str, status: int, message: str) -> None:
    out = await call(shared_api, "POST", path, {"metadata": {"name": name}, **body}, expect=status)
    if message:
        assert out["message"].split(", metadata.name")[0] == message


# --- how field errors print bad values (field.Error.ErrorBody) -------------------------------------------------

GO_VALUE_CASES = [
    pytest.param("abc", None, '"abc"', id="a string is quoted"),
    pytest.param('a"b', None, '"a\\"b"', id="a quote in a string is escaped"),
    pytest.param(-1, None, "-1", id="an integer as is"),
    pytest.param(True, None, "true", id="a boolean as Go prints it"),
    pytest.param(None, None, "null", id="nothing as null"),
    pytest.param(0.5, None, "0.5", id="a float as %v"),
    pytest.param(1e6, None, "1e+06", id="a large float in exponent form as %v"),
    pytest.param({"b": "2", "a": "1"}, None, 'map[string]string{"a":"1", "b":"2"}',
                 id="a map of strings as %#v, keys sorted"),
    pytest.param(["10.96.0.1"], None, '[]string{"10.96.0.1"}', id="a list of strings as %#v"),
    pytest.param({"matchLabels": {"app": "ap2"}}, v.LABEL_SELECTOR,
                 'v1.LabelSelector{MatchLabels:map[string]string{"app":"ap2"}, '
                 "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}", id="a label selector as %#v"),
    pytest.param({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, v.LABEL_SELECTOR,
                 "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement"
                 '{v1.LabelSelectorRequirement{Key:"a", Operator:"Exists", Values:[]string(nil)}}}',
                 id="a selector's expressions as %#v"),
    pytest.param({"a": 1}, None, '{"a":1}', id="a struct of unknown type as its JSON"),
]


@pytest.mark.parametrize(("value", "go_type", "want"), GO_VALUE_CASES)
def test_field_errors_print_values_as_upstream(value: Any, go_type: v.GoType | None, want: str) -> None:
    assert v.go_value(value, go_type) == want
    assert v.invalid("f", value, "why", go_type).message == f"Invalid value: {want}: why"


async def test_messages_seen_by_kubectl(api: Client) -> None:
    """The QA's messages: a Deployment's changed selector, unknown field selectors of a core kind and another."""
    await call(api, "POST", DEPLOYS, _deploy("ap"), expect=201)
    changed = _deploy("ap")
    changed["spec"]["selector"] = {"matchLabels": {"app": "ap2"}}
    changed["spec"]["template"]["metadata"]["labels"] = {"app": "ap2"}
    out = await call(api, "PUT", f"{DEPLOYS}/ap", changed, expect=422)
    assert 'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"ap2"}, ' \
           "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable" in out["message"]
    out = await call(api, "GET", f"{PODS}?fieldSelector=spec.foo%3Dx", expect=400)
    assert out["message"] == "field label not supported: spec.foo"
    out = await call(api, "GET", f"{DEPLOYS}?fieldSelector=spec.foo%3Dx", expect=400)
    assert out["message"] == '"spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace"'


SERVICE_ACCOUNT_CASES = [
    pytest.param(DEPLOYS, {}, None, id="a template names no account"),
    pytest.param(DEPLOYS, {"serviceAccount": "robot"}, "robot", id="a template's deprecated field is mirrored"),
    pytest.param(PODS, {}, "default", id="a pod runs as default"),
]


@pytest.mark.parametrize(("path", "spec", "want"), SERVICE_ACCOUNT_CASES)
async def test_service_account_defaults(api: Client, path: str, spec: Obj, want: str | None) -> None:
    if path == PODS:
        await call(api, "POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "default"}})
        body = _pod("p")
        body["spec"].update(spec)
        out = (await call(api, "POST", path, body, expect=201))["spec"]
    else:
        body = _deploy("d")
        body["spec"]["template"]["spec"].update(spec)
        out = (await call(api, "POST", path, body, expect=201))["spec"]["template"]["spec"]
    assert (out.get("serviceAccountName"), out.get("serviceAccount")) == (want, want)
