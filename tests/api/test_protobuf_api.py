"""Protobuf over HTTP: request bodies of any kind, answers when Accept prefers protobuf (get, list, watch).

Tables, errors and objects a message cannot carry stay JSON, as client-go reads whatever Content-Type it gets.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson
from aiohttp.test_utils import TestClient

from kubelite.apiserver import protobuf
from kubelite.apiserver.proto import codec
from kubelite.testing.builders import make_pod
from tests.api.test_rest import PODS, call

Client = TestClient  # type: ignore[type-arg]
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
PREFER = {"Accept": "application/vnd.kubernetes.protobuf, application/json"}
DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 0, "minReadySeconds": 5, "revisionHistoryLimit": 3, "paused": True,
             "progressDeadlineSeconds": 120,
             "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "10%"}},
             "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                 {"name": "c", "image": "busybox", "env": [{"name": "A", "valueFrom": {"fieldRef": {
                     "apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                  "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 2}}],
                 "nodeSelector": {"disk": "ssd"}}}}}


async def _pb(api: Client, method: str, path: str, obj: dict[str, Any] | None = None,
              headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    body = codec.encode_object(obj) if obj is not None else None
    resp = await api.request(method, path, data=body,
                             headers={"Content-Type": protobuf.MEDIA_TYPE, **(headers or PREFER)})
    return resp.status, resp.content_type, await resp.read()


def _as_go(obj: dict[str, Any]) -> dict[str, Any]:
    """The JSON answer as Go would hold it: zero omitempty fields (status.replicas: 0) and list items' TypeMeta
    have no protobuf form, upstream's as ours."""
    items = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in obj.get("items", [])]
    return protobuf.decode(codec.encode_object({**obj, "items": items} if "items" in obj else obj))


async def test_a_protobuf_deployment_keeps_every_field(api: Client) -> None:
    """The hand-written decoder dropped minReadySeconds, revisionHistoryLimit, paused, progressDeadlineSeconds and
    strategy.rollingUpdate; the generated one carries them all, and a zero replicas (a pointer) stays 0."""
    status, ctype, body = await _pb(api, "POST", DEPLOYS, DEPLOYMENT)
    assert (status, ctype) == (201, protobuf.MEDIA_TYPE), body[:300]
    created = protobuf.decode(body)
    stored = await call(api, "GET", f"{DEPLOYS}/web", expect=200)
    assert created == _as_go(stored)
    for key, value in DEPLOYMENT["spec"].items():  # type: ignore[union-attr]
        if key != "template":
            assert stored["spec"][key] == value, key
    assert stored["spec"]["template"]["spec"]["containers"][0]["env"] == \
        DEPLOYMENT["spec"]["template"]["spec"]["containers"][0]["env"]  # type: ignore[index]


async def test_get_and_list_answer_protobuf_when_accept_prefers_it(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("a").obj(), expect=201)
    await call(api, "POST", PODS, make_pod("b").obj(), expect=201)
    for path in (f"{PODS}/a", PODS):
        status, ctype, body = await _pb(api, "GET", path)
        assert (status, ctype) == (200, protobuf.MEDIA_TYPE)
        assert protobuf.decode(body) == _as_go(await call(api, "GET", path, expect=200))
    listed = protobuf.decode((await _pb(api, "GET", PODS))[2])
    assert listed["kind"] == "PodList" and [p["metadata"]["name"] for p in listed["items"]] == ["a", "b"]


# (Accept header, path suffix): answers that stay JSON
STAYS_JSON = [
    ("application/json;as=Table;v=v1;g=meta.k8s.io,application/vnd.kubernetes.protobuf", "/a"),
    ("application/json", "/a"),
    ("application/vnd.kubernetes.protobuf, application/json", "/missing"),  # errors: a JSON Status
]


async def test_tables_errors_and_json_clients_get_json(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("a").obj(), expect=201)
    for accept, suffix in STAYS_JSON:
        resp = await api.get(f"{PODS}{suffix}", headers={"Accept": accept})
        assert resp.content_type == "application/json", (accept, suffix)
        assert isinstance(orjson.loads(await resp.read()), dict)


async def test_an_object_protobuf_cannot_carry_is_answered_as_json(api: Client) -> None:
    """A stored field the message lacks (the official client knows fields k8s.io/api here does not yet) must not
    be dropped silently: the answer falls back to JSON."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"nodeInfo": {"runningInUserNamespace": True}}}
    await call(api, "POST", "/api/v1/nodes", node, expect=201)
    resp = await api.get("/api/v1/nodes/n1", headers=PREFER)
    assert resp.content_type == "application/json"
    assert (await resp.json())["status"]["nodeInfo"]["runningInUserNamespace"] is True


async def test_watch_streams_length_prefixed_watch_events(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("a").obj(), expect=201)
    resp = await api.get(f"{PODS}?watch=1", headers={"Accept": protobuf.WATCH_MEDIA_TYPE})
    assert resp.status == 200 and resp.headers["Content-Type"] == protobuf.WATCH_MEDIA_TYPE
    events = []
    for _ in range(2):
        (length,) = struct.unpack(">I", await resp.content.readexactly(4))
        events.append(codec.decode_message("meta.v1.WatchEvent", await resp.content.readexactly(length)))
        if len(events) == 1:
            await call(api, "DELETE", f"{PODS}/a?gracePeriodSeconds=0", expect=200)
    resp.close()
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "a"
    assert events[1]["type"] in ("MODIFIED", "DELETED") and events[1]["object"]["kind"] == "Pod"


async def test_delete_options_from_kubectl_drain(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("a").obj(), expect=201)
    drain = codec.encode_object({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    resp = await api.delete(f"{PODS}/a", data=drain, headers={"Content-Type": protobuf.MEDIA_TYPE})
    assert resp.status == 200
    await call(api, "GET", f"{PODS}/a", expect=404)


async def test_bad_protobuf_body_is_a_400_status(api: Client) -> None:
    body = b"k8s\x00" + b"\x0a\x0b\x0a\x02v1\x12\x03Pod" + b"\x12\x02\xfa\x06"  # field 111 of Pod, truncated
    resp = await api.post(PODS, data=body, headers={"Content-Type": protobuf.MEDIA_TYPE})
    status = await resp.json()
    assert resp.status == 400 and status["reason"] == "BadRequest" and "protobuf" in status["message"]


async def test_watch_bookmark_is_a_protobuf_frame(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("a").obj(), expect=201)
    resp = await api.get(f"{PODS}?watch=1&allowWatchBookmarks=true", headers={"Accept": protobuf.WATCH_MEDIA_TYPE})
    events = []
    for _ in range(2):
        (length,) = struct.unpack(">I", await resp.content.readexactly(4))
        events.append(codec.decode_message("meta.v1.WatchEvent", await resp.content.readexactly(length)))
    resp.close()
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["kind"] == "Pod" and int(events[1]["object"]["metadata"]["resourceVersion"]) >= 1


async def test_a_kind_without_a_message_is_watched_as_json(api: Client) -> None:
    resp = await api.get("/apis/kubelite.io/v1alpha1/schedulingexplanations?watch=1&timeoutSeconds=0",
                         headers={"Accept": protobuf.WATCH_MEDIA_TYPE})
    assert resp.status == 200 and resp.headers["Content-Type"] == "application/json"
    resp.close()
