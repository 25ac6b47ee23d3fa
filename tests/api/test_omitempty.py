"""Go's `omitempty` on what is stored and answered (kubelite/apiserver/omitempty.py): a field tagged omitempty that
holds an empty value of a bool, number, string, list or map type is left out, as kube-apiserver's encoding leaves
it out; a pointer set to 0 or false and a struct value are kept. Real API server on SQLite, over HTTP: each case
writes an object (and, for a status, its status subresource), then reads it back by GET and LIST."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
NS = "/api/v1/namespaces/default"
APPS = "/apis/apps/v1/namespaces/default"
TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
SELECTOR = {"matchLabels": {"app": "a"}}


def _at(obj: Any, path: str) -> Any:
    """The value at a dotted path (`spec.containers.0.ports`), or KeyError when a step is missing."""
    for step in path.split("."):
        obj = obj[int(step)] if isinstance(obj, list) else obj[step]
    return obj


def _has(obj: Any, path: str) -> bool:
    try:
        _at(obj, path)
    except (KeyError, IndexError):
        return False
    return True


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "o"}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


# (collection, object, status to PUT on status or None, paths left out, paths kept with their value)
CASES = [
    pytest.param(f"{APPS}/replicasets", {"metadata": {"name": "o"}, "spec": {
        "replicas": 0, "minReadySeconds": 0, "selector": SELECTOR, "template": TEMPLATE}},
        {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0, "fullyLabeledReplicas": 0,
         "observedGeneration": 0, "conditions": []},
        ["status.readyReplicas", "status.availableReplicas", "status.fullyLabeledReplicas",
         "status.observedGeneration", "status.conditions", "spec.minReadySeconds"],
        {"spec.replicas": 0, "status.replicas": 0},
        id="ReplicaSet: status counts of 0 left out, pointer replicas kept"),
    pytest.param(f"{APPS}/statefulsets", {"metadata": {"name": "o"}, "spec": {
        "replicas": 0, "serviceName": "", "selector": SELECTOR, "template": TEMPLATE}},
        {"replicas": 0, "readyReplicas": 0, "currentReplicas": 0, "updatedReplicas": 0, "currentRevision": "",
         "availableReplicas": 0},
        ["status.readyReplicas", "status.currentReplicas", "status.updatedReplicas", "status.currentRevision"],
        {"status.replicas": 0, "status.availableReplicas": 0, "spec.replicas": 0, "spec.serviceName": ""},
        id="StatefulSet: status counts of 0 left out; replicas, availableReplicas, serviceName (no omitempty) kept"),
    pytest.param(f"{APPS}/deployments", {"metadata": {"name": "o"}, "spec": {
        "replicas": 0, "paused": False, "minReadySeconds": 0, "selector": SELECTOR, "template": TEMPLATE}},
        {"replicas": 0, "unavailableReplicas": 0},
        ["spec.paused", "spec.minReadySeconds", "status.replicas", "status.unavailableReplicas"], {"spec.replicas": 0},
        id="Deployment: false paused, 0 minReadySeconds and status counts left out"),
    pytest.param("/api/v1/nodes", {"metadata": {"name": "o", "labels": {}}, "spec": {
        "taints": [], "unschedulable": False, "podCIDRs": []}}, None,
        ["spec.taints", "spec.unschedulable", "spec.podCIDRs", "metadata.labels"], {},
        id="Node: empty taints, false unschedulable, empty labels left out"),
    pytest.param(f"{NS}/pods", _pod({"hostNetwork": False, "nodeName": "", "automountServiceAccountToken": False,
                                     "securityContext": {}, "imagePullSecrets": []}), None,
        ["spec.hostNetwork", "spec.nodeName", "spec.imagePullSecrets"],
        {"spec.automountServiceAccountToken": False, "spec.securityContext": {}},
        id="Pod: false and empty value fields left out, false pointer and empty struct pointer kept"),
    pytest.param(f"{NS}/pods", _pod({"containers": [{"name": "c", "image": "i", "stdin": False, "args": [],
                                                     "ports": [{"containerPort": 80, "hostPort": 0, "name": ""}]}]}),
        None, ["spec.containers.0.stdin", "spec.containers.0.args", "spec.containers.0.ports.0.hostPort",
               "spec.containers.0.ports.0.name"], {"spec.containers.0.ports.0.containerPort": 80},
        id="Pod: fields of structs in lists left out"),
    pytest.param(f"{NS}/services", {"metadata": {"name": "o"}, "spec": {
        "ports": [{"port": 80, "name": "", "nodePort": 0}], "externalIPs": [], "selector": {}}}, None,
        ["spec.externalIPs", "spec.selector", "spec.ports.0.name", "spec.ports.0.nodePort"], {"spec.ports.0.port": 80},
        id="Service: empty externalIPs and selector, 0 nodePort left out"),
    pytest.param(f"{NS}/configmaps", {"metadata": {"name": "o", "annotations": {}, "finalizers": []}, "data": {},
                                      "binaryData": {}}, None,
        ["data", "binaryData", "metadata.annotations", "metadata.finalizers"], {},
        id="ConfigMap: empty data and ObjectMeta collections left out"),
    pytest.param("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "o"}, "value": 0,
                                                                "globalDefault": False, "description": ""}, None,
        ["globalDefault", "description"], {"value": 0}, id="PriorityClass: value 0 (no omitempty) kept"),
]


@pytest.mark.parametrize(("collection", "obj", "status", "omitted", "kept"), CASES)
async def test_omitempty(api: Client, collection: str, obj: dict[str, Any], status: dict[str, Any] | None,
                         omitted: list[str], kept: dict[str, Any]) -> None:
    written = await call(api, "POST", collection, obj, expect=201)
    if status is not None:
        written = await call(api, "PUT", f"{collection}/o/status", {**written, "status": status}, expect=200)
    got = await call(api, "GET", f"{collection}/o", expect=200)
    listed = [i for i in (await call(api, "GET", collection, expect=200))["items"] if i["metadata"]["name"] == "o"]
    for seen in (written, got, *listed):
        assert [path for path in omitted if _has(seen, path)] == [], seen
        assert {path: _at(seen, path) for path in kept} == kept


async def test_update_adding_only_empty_values_writes_nothing(api: Client) -> None:
    """Dropped as the body is decoded, before the strategy compares specs (a Deployment's generation) and before
    the no-op check: a PUT that adds `paused: false` and empty labels is the object already stored."""
    deploy = {"metadata": {"name": "o"}, "spec": {"replicas": 0, "selector": SELECTOR, "template": TEMPLATE}}
    created = await call(api, "POST", f"{APPS}/deployments", deploy, expect=201)
    created["spec"]["paused"] = False
    created["metadata"]["labels"] = {}
    updated = await call(api, "PUT", f"{APPS}/deployments/o", created, expect=200)
    assert updated["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert updated["metadata"]["generation"] == 1
    assert "paused" not in updated["spec"] and "labels" not in updated["metadata"]


async def test_empty_value_is_defaulted_as_absent(api: Client) -> None:
    """Go's decoder leaves `protocol: ""` the zero value, which defaulting then sets: TCP, as if it were absent."""
    pod = _pod({"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": ""}]}]})
    created = await call(api, "POST", f"{NS}/pods", pod, expect=201)
    assert created["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
