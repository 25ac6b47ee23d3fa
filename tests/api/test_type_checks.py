"""Every kind's fields are type-checked as upstream's decoder does (issue 10, defect 2).

Create and update answer 400 with the codec's message (`Pod in version "v1" cannot be handled as a Pod: json:
cannot unmarshal number into Go struct field PodSpec.spec.affinity of type v1.Affinity`), details.causes naming
the field; a patch whose result does not decode answers 422 Invalid on `patch`, as
apiserver/pkg/endpoints/handlers/patch.go does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.registry.pods import PODS as POD_RESOURCE
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_node, make_pod
from tests.api.test_rest import PODS, call
from tests.conftest import SHARED_LOOP, serving_server

Client = TestClient  # type: ignore[type-arg]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
NODES = "/api/v1/nodes"
MERGE = "application/merge-patch+json"


def _pod(**spec: Any) -> dict[str, Any]:
    body = make_pod("p").obj()
    body["spec"].update(spec)
    return body


def _annotated(value: Any) -> dict[str, Any]:
    body = make_pod("p").obj()
    body["metadata"]["annotations"] = {"a": value}
    return body


def _container(**fields: Any) -> dict[str, Any]:
    body = make_pod("p").obj()
    body["spec"]["containers"][0].update(fields)
    return body


# (path, body, field in details.causes, Go's error)
CREATE_CASES = [
    pytest.param(PODS, _pod(affinity=7), "spec.affinity",
                 "json: cannot unmarshal number into Go struct field PodSpec.spec.affinity of type v1.Affinity",
                 id="spec.affinity: 7"),
    pytest.param(PODS, _pod(readinessGates=7), "spec.readinessGates",
                 "json: cannot unmarshal number into Go struct field PodSpec.spec.readinessGates of type "
                 "[]v1.PodReadinessGate", id="spec.readinessGates: 7"),
    pytest.param(PODS, _annotated(5), "metadata.annotations[a]",
                 "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations of type string",
                 id="annotation value 5"),
    pytest.param(LEASES, {"metadata": {"name": "l"}, "spec": "x"}, "spec",
                 "json: cannot unmarshal string into Go struct field Lease.spec of type v1.LeaseSpec",
                 id="Lease spec x"),
    pytest.param(PODS, _container(name=5), "spec.containers[0].name",
                 "json: cannot unmarshal number into Go struct field Container.spec.containers.name of type string",
                 id="container name is a number"),
    pytest.param(PODS, _pod(containers=[7]), "spec.containers[0]",
                 "json: cannot unmarshal number into Go struct field PodSpec.spec.containers of type v1.Container",
                 id="container is a number"),
    pytest.param(PODS, _pod(terminationGracePeriodSeconds=1.5), "spec.terminationGracePeriodSeconds",
                 "json: cannot unmarshal number 1.5 into Go struct field PodSpec.spec.terminationGracePeriodSeconds "
                 "of type int64", id="fractional integer"),
    pytest.param(PODS, _pod(hostNetwork="yes"), "spec.hostNetwork",
                 "json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool",
                 id="string for a bool"),
    pytest.param(PODS, _container(resources={"limits": {"cpu": True}}), "spec.containers[0].resources.limits[cpu]",
                 "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                 id="bool quantity"),
    pytest.param(PODS, _container(readinessProbe={"httpGet": {"port": True}}),
                 "spec.containers[0].readinessProbe.httpGet.port",
                 "json: cannot unmarshal bool into Go value of type int32", id="bool int-or-string"),
    pytest.param(PODS, {"metadata": {"name": "p", "labels": []}, "spec": make_pod("p").obj()["spec"]},
                 "metadata.labels",
                 "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type "
                 "map[string]string", id="labels is a list"),
]


@SHARED_LOOP
@pytest.mark.parametrize(("path", "body", "field", "error"), CREATE_CASES)
async def test_create_with_a_wrong_type_is_refused(shared_api: Client, path: str, body: Any, field: str,
                                                  error: str) -> None:
    kind = "Lease" if path == LEASES else "Pod"
    out = await call(shared_api, "POST", path, body, expect=400)
    assert out["reason"] == "BadRequest"
    assert out["message"] == f'{kind} in version "v1" cannot be handled as a {kind}: {error}'
    assert out["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": error, "field": field}]
    listed = await call(shared_api, "GET", path, expect=200)
    assert listed["items"] == []


ACCEPTED_CASES = [
    pytest.param(_container(resources={"requests": {"cpu": 1, "memory": "1Gi"}}), id="number quantity"),
    pytest.param(_container(readinessProbe={"httpGet": {"port": 8080}}), id="integer int-or-string"),
    pytest.param(_container(readinessProbe={"httpGet": {"port": "http"}}), id="string int-or-string"),
    pytest.param(_pod(affinity=None, nodeSelector=None), id="nulls decode to nothing"),
    pytest.param(_container(resources={"requests": {"cpu": None}}), id="quantity null decodes to zero"),
]


@pytest.mark.parametrize("body", ACCEPTED_CASES)
async def test_values_upstream_decodes_are_accepted(api: Client, body: dict[str, Any]) -> None:
    out = await call(api, "POST", PODS, body, expect=201)
    assert "affinity" not in out["spec"] and "nodeSelector" not in out["spec"]
    assert out["spec"]["containers"][0]["resources"].get("requests", {}).get("cpu") in (None, 1, "0")


PATCH_CASES = [
    pytest.param(MERGE, {"spec": {"affinity": 7}}, "PodSpec.spec.affinity of type v1.Affinity", id="merge patch"),
    pytest.param("application/strategic-merge-patch+json", {"metadata": {"annotations": {"a": 5}}},
                 "ObjectMeta.metadata.annotations of type string", id="strategic merge patch"),
    pytest.param("application/json-patch+json", [{"op": "add", "path": "/spec/readinessGates", "value": 7}],
                 "PodSpec.spec.readinessGates of type []v1.PodReadinessGate", id="json patch"),
]


@pytest.mark.parametrize(("ctype", "patch", "error"), PATCH_CASES)
async def test_patch_result_with_a_wrong_type_is_invalid(api: Client, ctype: str, patch: Any, error: str) -> None:
    before = await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    out = await call(api, "PATCH", f"{PODS}/p", patch, ctype, expect=422)
    assert out["reason"] == "Invalid" and out["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert out["message"].endswith(f"json: cannot unmarshal number into Go struct field {error}")
    assert [c["field"] for c in out["details"]["causes"]] == ["patch"]
    after = await call(api, "GET", f"{PODS}/p", expect=200)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_update_and_status_update_with_a_wrong_type_are_refused(api: Client) -> None:
    pod = await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    for suffix, change in (("", {"spec": {**pod["spec"], "affinity": 7}}), ("/status", {"status": {"phase": 1}})):
        out = await call(api, "PUT", f"{PODS}/p{suffix}", {**pod, **change}, expect=400)
        assert out["details"]["causes"][0]["field"] in ("spec.affinity", "status.phase")


@pytest.fixture
async def server_and_client(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Client]]:
    async with serving_server(await SQLiteStore.open(tmp_path / "state.db")) as served:
        yield served


async def test_get_table_renders_a_row_for_an_object_its_printer_cannot_read(
        server_and_client: tuple[ApiServer, Client]) -> None:
    """An object stored before type checking existed (here written to the store directly) fails no list."""
    server, api = server_and_client
    await call(api, "POST", PODS, make_pod("good").obj(), expect=201)
    bad = make_pod("bad").obj()
    bad["metadata"].update(namespace="default", uid="u", creationTimestamp="2026-01-01T00:00:00Z")
    bad["spec"]["readinessGates"] = 7
    bad["status"] = {"phase": "Running", "conditions": 7, "containerStatuses": "x"}
    kv = await server.store.create(POD_RESOURCE.key("default", "bad"), orjson.dumps(bad))
    await server.caches.wait_for(kv.mod_revision)
    resp = await api.get(PODS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    table = await resp.json()
    assert resp.status == 200, table
    rows = {r["cells"][0]: r["cells"] for r in table["rows"]}
    assert set(rows) == {"good", "bad"} and rows["bad"][1:3] == ["<unknown>", "<unknown>"]
    assert rows["good"][2] == "Pending"


def _deployment(replicas: Any = 1, **container: Any) -> dict[str, Any]:
    return {"metadata": {"name": "d"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}},
                                  "spec": {"containers": [{"name": "c", "image": "i", **container}]}}}}


def _port(**port: Any) -> dict[str, Any]:
    return _container(ports=[{"containerPort": 80, **port}])


# Integer ranges: upstream's OpenAPI types each integer int32 or int64 (scripts/gen_int32_fields.py), and Go's
# decoder refuses a number outside the field's type like any other mismatch.
# (kind, path, body, field in details.causes, Go's error)
INT32_CASES = [
    pytest.param("Pod", PODS, _port(containerPort=2**31), "spec.containers[0].ports[0].containerPort",
                 "json: cannot unmarshal number 2147483648 into Go struct field ContainerPort.spec.containers.ports."
                 "containerPort of type int32", id="containerPort 2^31"),
    pytest.param("Pod", PODS, _pod(priority=-(2**31) - 1), "spec.priority",
                 "json: cannot unmarshal number -2147483649 into Go struct field PodSpec.spec.priority of type int32",
                 id="priority below int32"),
    pytest.param("Pod", PODS, _container(readinessProbe={"httpGet": {"port": 2**31}}),
                 "spec.containers[0].readinessProbe.httpGet.port",
                 "json: cannot unmarshal number 2147483648 into Go value of type int32", id="int-or-string 2^31"),
    pytest.param("Deployment", DEPLOYS, _deployment(replicas=2**31), "spec.replicas",
                 "json: cannot unmarshal number 2147483648 into Go struct field DeploymentSpec.spec.replicas of type "
                 "int32", id="Deployment replicas 2^31"),
    pytest.param("Pod", PODS, _pod(terminationGracePeriodSeconds=2**63), "spec.terminationGracePeriodSeconds",
                 "json: cannot unmarshal number 9223372036854775808 into Go struct field PodSpec.spec."
                 "terminationGracePeriodSeconds of type int64", id="int64 field 2^63"),
]


@SHARED_LOOP
@pytest.mark.parametrize(("kind", "path", "body", "field", "error"), INT32_CASES)
async def test_integer_out_of_its_go_type_is_refused(shared_api: Client, kind: str, path: str, body: Any,
                                                     field: str, error: str) -> None:
    out = await call(shared_api, "POST", path, json.dumps(body).encode(), expect=400)  # orjson stops at 64 bits
    assert out["message"] == f'{kind} in version "v1" cannot be handled as a {kind}: {error}'
    assert out["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": error, "field": field}]


IN_RANGE_CASES = [
    pytest.param(PODS, _port(containerPort=65535, hostPort=65535), id="port at its largest"),
    pytest.param(PODS, _pod(terminationGracePeriodSeconds=2**31), id="int64 field beyond int32"),
    pytest.param(DEPLOYS, _deployment(replicas=2**31 - 1), id="Deployment replicas 2^31-1"),
    pytest.param(PODS, _container(readinessProbe={"httpGet": {"port": 2**31 - 1}}), id="int-or-string 2^31-1"),
]


@pytest.mark.parametrize(("path", "body"), IN_RANGE_CASES)
async def test_integer_within_its_go_type_decodes(api: Client, path: str, body: Any) -> None:
    out = await call(api, "POST", path, body)
    assert out.get("reason") != "BadRequest", out


async def test_int32_out_of_range_after_a_patch_is_invalid(api: Client) -> None:
    await call(api, "POST", DEPLOYS, _deployment(), expect=201)
    out = await call(api, "PATCH", f"{DEPLOYS}/d", {"spec": {"replicas": 2**31}}, MERGE, expect=422)
    assert out["message"].endswith("json: cannot unmarshal number 2147483648 into Go struct field "
                                   "DeploymentSpec.spec.replicas of type int32")
    assert [c["field"] for c in out["details"]["causes"]] == ["patch"]


async def test_int32_out_of_range_on_update_is_refused(api: Client) -> None:
    created = await call(api, "POST", DEPLOYS, _deployment(), expect=201)
    created["spec"]["replicas"] = 2**31
    out = await call(api, "PUT", f"{DEPLOYS}/d", created, expect=400)
    assert out["details"]["causes"][0]["field"] == "spec.replicas"


def _supported(*values: str) -> str:
    return "supported values: " + ", ".join(f'"{v}"' for v in values)


def _tainted(effect: str) -> dict[str, Any]:
    node = make_node("n")
    node["spec"] = {"taints": [{"key": "k", "effect": effect}]}
    return node


# Enumerated fields upstream's validation refuses outside their values (kubelite/apiserver/enums.py).
# (path, body, field, message)
ENUM_CASES = [
    pytest.param(PODS, _pod(restartPolicy="Sometimes"), "spec.restartPolicy",
                 'Unsupported value: "Sometimes": ' + _supported("Always", "OnFailure", "Never"),
                 id="pod restartPolicy"),
    pytest.param(PODS, _pod(dnsPolicy="Maybe"), "spec.dnsPolicy",
                 'Unsupported value: "Maybe": ' + _supported("ClusterFirstWithHostNet", "ClusterFirst", "Default",
                                                             "None"), id="dnsPolicy"),
    pytest.param(PODS, _container(imagePullPolicy="Sometimes"), "spec.containers[0].imagePullPolicy",
                 'Unsupported value: "Sometimes": ' + _supported("Always", "IfNotPresent", "Never"),
                 id="imagePullPolicy"),
    pytest.param(PODS, _container(terminationMessagePolicy="Stdout"), "spec.containers[0].terminationMessagePolicy",
                 'Unsupported value: "Stdout": ' + _supported("File", "FallbackToLogsOnError"),
                 id="terminationMessagePolicy"),
    pytest.param(PODS, _port(protocol="ICMP"), "spec.containers[0].ports[0].protocol",
                 'Unsupported value: "ICMP": ' + _supported("SCTP", "TCP", "UDP"), id="port protocol"),
    pytest.param(PODS, _container(readinessProbe={"httpGet": {"port": 80, "scheme": "FTP"}}),
                 "spec.containers[0].readinessProbe.httpGet.scheme",
                 'Unsupported value: "FTP": ' + _supported("HTTP", "HTTPS"), id="httpGet scheme"),
    pytest.param(PODS, _pod(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoEntry"}]),
                 "spec.tolerations[0].effect",
                 'Unsupported value: "NoEntry": ' + _supported("NoSchedule", "PreferNoSchedule", "NoExecute"),
                 id="toleration effect"),
    pytest.param(PODS, _pod(tolerations=[{"key": "k", "operator": "In"}]), "spec.tolerations[0].operator",
                 'Unsupported value: "In": ' + _supported("Equal", "Exists"), id="toleration operator"),
    pytest.param(DEPLOYS, _deployment(imagePullPolicy="Sometimes"),
                 "spec.template.spec.containers[0].imagePullPolicy",
                 'Unsupported value: "Sometimes": ' + _supported("Always", "IfNotPresent", "Never"),
                 id="imagePullPolicy in a Deployment's template"),
    pytest.param(NODES, _tainted("NoEntry"), "spec.taints[0].effect",
                 'Unsupported value: "NoEntry": ' + _supported("NoSchedule", "PreferNoSchedule", "NoExecute"),
                 id="node taint effect"),
]


@SHARED_LOOP
@pytest.mark.parametrize(("path", "body", "field", "message"), ENUM_CASES)
async def test_enum_value_outside_upstreams_values_is_invalid(shared_api: Client, path: str, body: Any,
                                                              field: str, message: str) -> None:
    out = await call(shared_api, "POST", path, body, expect=422)
    assert out["reason"] == "Invalid"
    assert {"reason": "FieldValueNotSupported", "message": message, "field": field} in out["details"]["causes"]
    assert [c["field"] for c in out["details"]["causes"]].count(field) == 1, out  # one table, no second check


async def test_enum_value_after_a_patch_is_invalid(api: Client) -> None:
    await call(api, "POST", DEPLOYS, _deployment(), expect=201)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "imagePullPolicy": "Sometimes"}]}}}}
    out = await call(api, "PATCH", f"{DEPLOYS}/d", patch, "application/strategic-merge-patch+json", expect=422)
    assert [c["field"] for c in out["details"]["causes"]] == ["spec.template.spec.containers[0].imagePullPolicy"]


async def test_enum_value_on_update_is_invalid(api: Client) -> None:
    node = await call(api, "POST", NODES, make_node("n"), expect=201)
    node["spec"] = {"taints": [{"key": "k", "effect": "NoEntry"}]}
    out = await call(api, "PUT", f"{NODES}/n", node, expect=422)
    assert [c["field"] for c in out["details"]["causes"]] == ["spec.taints[0].effect"]


def _wrong_everywhere(**meta: Any) -> dict[str, Any]:
    """A pod with an unknown field before and after a wrong type (spec.affinity: 7)."""
    body = _pod(affinity=7)
    body["aaa"], body["spec"]["zzz"] = 1, 2
    body["metadata"].update(meta)
    return body


# (method, query, body, status, what the refusal says): which of several faults a write is refused for is upstream's
# order — fieldValidation's Strict before the namespace, the namespace and the dryRun option before the type check
# (the type check prunes unknown fields in the same walk under Warn and Ignore, and must not come earlier for it).
ORDER_CASES = [
    pytest.param("POST", "?fieldValidation=Strict", _wrong_everywhere(namespace="other"), 400,
                 'strict decoding error: unknown field "spec.zzz", unknown field "aaa"', id="Strict first"),
    pytest.param("POST", "", _wrong_everywhere(namespace="other"), 400,
                 "the namespace of the provided object does not match", id="then the namespace"),
    pytest.param("POST", "?dryRun=Some", _wrong_everywhere(), 400, 'unsupported dry run option "Some"',
                 id="then the dryRun option"),
    pytest.param("POST", "?fieldValidation=Ignore", _wrong_everywhere(), 400,
                 "Go struct field PodSpec.spec.affinity of type v1.Affinity", id="then the types (Ignore)"),
    pytest.param("POST", "?fieldValidation=Bogus", _wrong_everywhere(), 400,
                 "fieldValidation parameter unsupported: Bogus", id="an unknown fieldValidation before all"),
]


@SHARED_LOOP
@pytest.mark.parametrize(("method", "query", "body", "status", "message"), ORDER_CASES)
async def test_a_write_is_refused_for_its_first_fault(shared_api: Client, method: str, query: str, body: Any,
                                                      status: int, message: str) -> None:
    out = await call(shared_api, method, f"{PODS}{query}", body, expect=status)
    assert message in out["message"]


async def test_a_patch_refused_for_a_type_shows_the_object_pruned(api: Client) -> None:
    """The 422's message shows the patched object without its unknown fields, those after the mismatch too."""
    await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    out = await call(api, "PATCH", f"{PODS}/p", {"aaa": 1, "spec": {"affinity": 7, "zzz": 2}}, MERGE, expect=422)
    shown = json.loads(out["message"].split("Invalid value: ", 1)[1].rsplit(": json: cannot unmarshal", 1)[0])
    assert "aaa" not in json.loads(shown) and "zzz" not in json.loads(shown)["spec"]


async def test_unknown_fields_warn_in_walk_order(api: Client) -> None:
    for method, path, body in (("POST", PODS, _pod(zzz=1, bogus=2)), ("PATCH", f"{PODS}/p", {"yyy": 3, "spec": {
            "xxx": 4}})):
        resp = await api.request(method, path, data=orjson.dumps(body), headers={
            "Content-Type": "application/json" if method == "POST" else MERGE})
        assert resp.status in (200, 201)
        expected = ["spec.zzz", "spec.bogus"] if method == "POST" else ["spec.xxx", "yyy"]  # the object's order
        assert resp.headers.getall("Warning") == [f'299 - "unknown field \\"{p}\\""' for p in expected]
