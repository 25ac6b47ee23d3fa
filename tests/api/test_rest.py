"""REST semantics over real HTTP against a real SQLite store: CRUD, concurrency, status, errors."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp.test_utils import TestClient

from kubelite.testing.builders import make_pod

PODS = "/api/v1/namespaces/default/pods"
JSON = {"Content-Type": "application/json"}
Client = TestClient  # type: ignore[type-arg]


async def call(api: Client, method: str, path: str, body: Any = None, ctype: str = "application/json",
               expect: int | None = None) -> Any:
    data = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
    resp = await api.request(method, path, data=data, headers={"Content-Type": ctype})
    payload = await resp.read()
    out = orjson.loads(payload) if payload and resp.content_type == "application/json" else payload
    if expect is not None:
        assert resp.status == expect, (resp.status, out)
    return out


async def test_create_sets_uid_timestamp_and_defaults(api: Client) -> None:
    pod = await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    meta = pod["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and int(meta["resourceVersion"]) > 0
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    got = await call(api, "GET", f"{PODS}/p", expect=200)
    assert got == pod


async def test_create_defaults_kind_from_url(api: Client) -> None:
    body = make_pod("nokind").obj()
    del body["apiVersion"], body["kind"]
    pod = await call(api, "POST", PODS, body, expect=201)
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")


async def test_generate_name(api: Client) -> None:
    body = make_pod("").obj()
    body["metadata"] = {"generateName": "web-"}
    pod = await call(api, "POST", PODS, body, expect=201)
    assert pod["metadata"]["name"].startswith("web-") and len(pod["metadata"]["name"]) == 9


async def test_duplicate_create_is_already_exists(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    status = await call(api, "POST", PODS, make_pod("p").obj(), expect=409)
    assert (status["reason"], status["message"]) == ("AlreadyExists", 'pods "p" already exists')


async def test_stale_update_is_conflict(api: Client) -> None:
    pod = await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    pod["metadata"]["labels"] = {"a": "1"}
    await call(api, "PUT", f"{PODS}/p", pod, expect=200)
    pod["metadata"]["labels"] = {"a": "2"}
    status = await call(api, "PUT", f"{PODS}/p", pod, expect=409)
    assert status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]


async def test_concurrent_label_patches_all_land(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    await asyncio.gather(*(call(api, "PATCH", f"{PODS}/p", {"metadata": {"labels": {f"k{i}": "v"}}},
                                "application/merge-patch+json", expect=200) for i in range(20)))
    pod = await call(api, "GET", f"{PODS}/p")
    assert len(pod["metadata"]["labels"]) == 20


async def test_noop_patch_keeps_resource_version(api: Client) -> None:
    pod = await call(api, "POST", PODS, make_pod("p").label("a", "1").obj(), expect=201)
    same = await call(api, "PATCH", f"{PODS}/p", {"metadata": {"labels": {"a": "1"}}},
                      "application/merge-patch+json", expect=200)
    assert same["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]


async def test_status_subresource_separation(api: Client) -> None:
    pod = await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    pod["status"] = {"phase": "Running"}
    pod["metadata"]["labels"] = {"x": "y"}
    main = await call(api, "PUT", f"{PODS}/p", pod, expect=200)
    assert main["status"]["phase"] == "Pending" and main["metadata"]["labels"] == {"x": "y"}
    patched = await call(api, "PATCH", f"{PODS}/p/status",
                         {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
                          "spec": {"activeDeadlineSeconds": 5}},
                         "application/strategic-merge-patch+json", expect=200)
    assert patched["status"]["phase"] == "Running"
    assert "activeDeadlineSeconds" not in patched["spec"]
    merged = await call(api, "PATCH", f"{PODS}/p/status",
                        {"status": {"conditions": [{"type": "Initialized", "status": "True"}]}},
                        "application/strategic-merge-patch+json", expect=200)
    assert [c["type"] for c in merged["status"]["conditions"]] == ["Ready", "Initialized"]


async def test_generation_bumps_on_spec_change_only(api: Client) -> None:
    pdb = {"metadata": {"name": "b"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}}
    path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    created = await call(api, "POST", path, pdb, expect=201)
    assert created["metadata"]["generation"] == 1
    labelled = await call(api, "PATCH", f"{path}/b", {"metadata": {"labels": {"x": "y"}}},
                          "application/merge-patch+json", expect=200)
    assert labelled["metadata"]["generation"] == 1
    changed = await call(api, "PATCH", f"{path}/b", {"spec": {"minAvailable": 2}}, "application/merge-patch+json",
                         expect=200)
    assert changed["metadata"]["generation"] == 2


async def test_finalizers_hold_deletion(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("p").finalizer("example.com/hold").obj(), expect=201)
    pod = await call(api, "DELETE", f"{PODS}/p", expect=200)
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 0
    await call(api, "GET", f"{PODS}/p", expect=200)
    await call(api, "PATCH", f"{PODS}/p", {"metadata": {"finalizers": None}}, "application/merge-patch+json",
               expect=200)
    await call(api, "GET", f"{PODS}/p", expect=404)


async def test_dry_run_persists_nothing(api: Client) -> None:
    await call(api, "POST", f"{PODS}?dryRun=All", make_pod("p").obj(), expect=201)
    await call(api, "GET", f"{PODS}/p", expect=404)
    await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    await call(api, "DELETE", f"{PODS}/p?dryRun=All", expect=200)
    await call(api, "GET", f"{PODS}/p", expect=200)
    await call(api, "PATCH", f"{PODS}/p?dryRun=All", {"metadata": {"labels": {"a": "b"}}},
               "application/merge-patch+json", expect=200)
    assert "labels" not in (await call(api, "GET", f"{PODS}/p"))["metadata"]


async def test_field_validation_modes(api: Client) -> None:
    body = make_pod("strict").obj()
    body["spec"]["bogusField"] = 1
    status = await call(api, "POST", f"{PODS}?fieldValidation=Strict", body, expect=400)
    assert status["message"] == ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                                 'unknown field "spec.bogusField"')
    resp = await api.post(f"{PODS}?fieldValidation=Warn", data=orjson.dumps(body), headers=JSON)
    assert resp.status == 201
    assert resp.headers.getall("Warning") == ['299 - "unknown field \\"spec.bogusField\\""']
    assert "bogusField" not in (await resp.json())["spec"]
    body["metadata"]["name"] = "ignored"
    resp = await api.post(f"{PODS}?fieldValidation=Ignore", data=orjson.dumps(body), headers=JSON)
    assert resp.status == 201 and "Warning" not in resp.headers
    dup = b'{"metadata":{"name":"d","name":"e"},"spec":{"containers":[{"name":"c","image":"i"}]}}'
    status = await call(api, "POST", f"{PODS}?fieldValidation=Strict", dup, expect=400)
    assert 'duplicate field "name"' in status["message"]


async def test_list_selectors_limit_continue(api: Client) -> None:
    for i in range(5):
        await call(api, "POST", PODS, make_pod(f"p{i}").label("i", str(i % 2)).node(f"n{i % 2}").obj(), expect=201)
    got = await call(api, "GET", f"{PODS}?labelSelector=i%3D1")
    assert [p["metadata"]["name"] for p in got["items"]] == ["p1", "p3"]
    got = await call(api, "GET", f"{PODS}?fieldSelector=spec.nodeName%3Dn0,metadata.name!%3Dp0")
    assert [p["metadata"]["name"] for p in got["items"]] == ["p2", "p4"]
    bad = await call(api, "GET", f"{PODS}?fieldSelector=spec.bogus%3D1", expect=400)
    assert bad["reason"] == "BadRequest"
    page = await call(api, "GET", f"{PODS}?limit=2")
    names = [p["metadata"]["name"] for p in page["items"]]
    while page["metadata"].get("continue"):
        page = await call(api, "GET", f"{PODS}?limit=2&continue={page['metadata']['continue']}")
        names += [p["metadata"]["name"] for p in page["items"]]
    assert names == [f"p{i}" for i in range(5)]


async def test_list_exact_resource_version_reads_the_past(api: Client) -> None:
    first = await call(api, "POST", PODS, make_pod("a").obj(), expect=201)
    await call(api, "POST", PODS, make_pod("b").obj(), expect=201)
    rv = first["metadata"]["resourceVersion"]
    got = await call(api, "GET", f"{PODS}?resourceVersion={rv}&resourceVersionMatch=Exact", expect=200)
    assert [p["metadata"]["name"] for p in got["items"]] == ["a"]


# Mirrors the upstream error catalogue: each bad request maps to one reason and code.
ERROR_CASES: list[tuple[str, str, str, Any, str, int, str]] = [
    ("missing object is NotFound", "GET", f"{PODS}/nope", None, "application/json", 404, "NotFound"),
    ("unknown namespace is NotFound", "POST", "/api/v1/namespaces/nope/pods", make_pod("x", "nope").obj(),
     "application/json", 404, "NotFound"),
    ("invalid pod is Invalid", "POST", PODS, {"metadata": {"name": "Bad_Name"}, "spec": {"containers": []}},
     "application/json", 422, "Invalid"),
    ("malformed json is BadRequest", "POST", PODS, b"{not json", "application/json", 400, "BadRequest"),
    ("wrong kind is BadRequest", "POST", PODS, {"kind": "Node", "metadata": {"name": "x"}}, "application/json", 400,
     "BadRequest"),
    ("unsupported media type", "POST", PODS, b"x", "text/plain", 415, "UnsupportedMediaType"),
    ("method not allowed", "PUT", PODS, make_pod("x").obj(), "application/json", 405, "MethodNotAllowed"),
    ("body too large", "POST", PODS, b"{" + b" " * (4 * 1024 * 1024) + b"}", "application/json", 413,
     "RequestEntityTooLarge"),
    ("unknown path is NotFound", "GET", "/api/v1/widgets", None, "application/json", 404, "NotFound"),
    ("bad label selector", "GET", f"{PODS}?labelSelector=a%20in%20(", None, "application/json", 400,
     "BadRequest"),
    ("unknown priority class", "POST", PODS, make_pod("x").priority_class("nope").obj(), "application/json", 403,
     "Forbidden"),
]


async def test_errors_are_status_objects(api: Client) -> None:
    for name, method, path, body, ctype, code, reason in ERROR_CASES:
        status = await call(api, method, path, body, ctype)
        assert (status.get("kind"), status.get("code"), status.get("reason")) == ("Status", code, reason), name
    listed = await call(api, "GET", PODS)
    assert listed["items"] == []  # nothing stored by any failed request


async def test_invalid_has_causes(api: Client) -> None:
    status = await call(api, "POST", PODS, {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}},
                        expect=422)
    assert status["message"] == 'Pod "x" is invalid: spec.containers[0].image: Required value'
    assert status["details"]["causes"] == [{"reason": "FieldValueRequired", "message": "Required value",
                                            "field": "spec.containers[0].image"}]


async def test_table_output(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("p").label("a", "b").obj(), expect=201)
    resp = await api.get(PODS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    table = await resp.json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]
    row = table["rows"][0]
    assert row["cells"][:4] == ["p", "0/1", "Pending", "0"]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["labels"] == {"a": "b"}
    resp = await api.get(f"{PODS}?includeObject=Object",
                         headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert (await resp.json())["rows"][0]["object"]["kind"] == "Pod"


async def test_bootstrap_objects_exist(api: Client) -> None:
    namespaces = await call(api, "GET", "/api/v1/namespaces")
    assert {n["metadata"]["name"] for n in namespaces["items"]} == {
        "default", "kube-system", "kube-public", "kube-node-lease"}
    pcs = await call(api, "GET", "/apis/scheduling.k8s.io/v1/priorityclasses")
    assert {p["metadata"]["name"]: p["value"] for p in pcs["items"]} == {
        "system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


async def test_namespace_deletion_refuses_new_content(api: Client) -> None:
    """Terminating and closed to new content; emptying and removing it is the namespace controller's
    (tests/controllers/test_garbage_collector.py::test_namespace_deletion_removes_content)."""
    await call(api, "POST", "/api/v1/namespaces", {"metadata": {"name": "gone"}}, expect=201)
    await call(api, "POST", "/api/v1/namespaces/gone/pods", make_pod("p", "gone").obj(), expect=201)
    ns = await call(api, "DELETE", "/api/v1/namespaces/gone", expect=200)
    assert ns["status"]["phase"] == "Terminating"
    status = await call(api, "POST", "/api/v1/namespaces/gone/pods", make_pod("q", "gone").obj(), expect=403)
    assert "being terminated" in status["message"]
