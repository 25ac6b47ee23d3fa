"""The in-process fast path (LoopbackRequest, watches read in the caller's task) answers as HTTP does.

The same table of requests is played, in order, against two servers on identical stores and one
fake clock each: one through `ApiClient` over a real socket, one through `InProcessClient`. Every
answer — an object, or an `ApiError`'s code, reason, message and details — must be the same (uids
and resourceVersions aside, which differ run to run). Then watches, the same way, and the
authorization shortcut against the full check.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from kubelite.api.errors import ApiError
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.auth.authorizer import Decision
from kubelite.apiserver.auth.config import ADMIN_USER, AuthConfig
from kubelite.apiserver.auth.node import restrict_request
from kubelite.apiserver.auth.requestinfo import RequestAttributes, new_request_info
from kubelite.apiserver.auth.user import ANONYMOUS_USER, UNSECURED_USER, UserInfo
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.apiserver.metrics import REQUEST_LABELS
from kubelite.client.http import ApiClient
from kubelite.clock import FakeClock
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod

TOKEN = "admin-token"
PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
VOLATILE = ("uid", "resourceVersion", "creationTimestamp")
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_RV = re.compile(r'resourceVersion\\+":\\+"[0-9]+')


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: Any = None
    content_type: str = "application/json"
    params: dict[str, str] | None = None


def _lease(name: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}}


# Played in order: later cases see what earlier ones wrote.
CASES = [
    pytest.param(Call("POST", PODS, make_pod("p").obj()), id="create a pod"),
    pytest.param(Call("POST", PODS, make_pod("p").obj()), id="create it again: AlreadyExists"),
    pytest.param(Call("GET", f"{PODS}/p"), id="get the pod"),
    pytest.param(Call("GET", f"{PODS}/missing"), id="get a missing pod: NotFound"),
    pytest.param(Call("POST", PODS, {"metadata": {"name": "bad"}, "spec": {}}), id="invalid pod: Invalid with causes"),
    pytest.param(Call("POST", PODS, {**make_pod("q").obj(), "metadata": {"name": "q", "namespace": "other"}}),
                 id="namespace of body and URL disagree: BadRequest"),
    pytest.param(Call("POST", PODS, [1, 2]), id="a body that is no object: BadRequest"),
    pytest.param(Call("POST", PODS, {**make_pod("s").obj(), "bogus": 1}, params={"fieldValidation": "Strict"}),
                 id="unknown field under Strict field validation: BadRequest"),
    pytest.param(Call("POST", PODS, {**make_pod("w").obj(), "bogus": 1}), id="unknown field under Warn: created"),
    pytest.param(Call("POST", PODS, make_pod("dry").obj(), params={"dryRun": "All"}), id="dry-run create"),
    pytest.param(Call("GET", f"{PODS}/dry"), id="a dry-run create stored nothing: NotFound"),
    pytest.param(Call("POST", PODS, make_pod("dry").obj(), params={"dryRun": "Some"}), id="bad dryRun: BadRequest"),
    pytest.param(Call("POST", LEASES, _lease("l")), id="create a lease"),
    pytest.param(Call("PATCH", f"{LEASES}/l", {"spec": {"leaseDurationSeconds": 60}}, MERGE),
                 id="merge patch of a lease"),
    pytest.param(Call("PATCH", f"{LEASES}/l", {"spec": {"leaseDurationSeconds": "sixty"}}, MERGE),
                 id="patch to a wrong type: Invalid on patch"),
    pytest.param(Call("PATCH", f"{LEASES}/l", {"metadata": {"resourceVersion": "1"}, "spec": {}}, MERGE),
                 id="patch pinned to a stale resourceVersion: Conflict"),
    pytest.param(Call("PATCH", f"{LEASES}/l", [{"op": "replace", "path": "/spec/holderIdentity", "value": "x"}],
                      JSON_PATCH), id="JSON patch"),
    pytest.param(Call("PATCH", f"{LEASES}/l", [{"op": "test", "path": "/spec/holderIdentity", "value": "y"}],
                      JSON_PATCH), id="JSON patch whose test fails: UnprocessableEntity"),
    pytest.param(Call("PATCH", f"{LEASES}/l", {"spec": {}}, "text/plain"), id="patch of an unknown type: 415"),
    pytest.param(Call("PATCH", f"{PODS}/p/status", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}}, STRATEGIC), id="strategic patch of a pod's status"),
    pytest.param(Call("PATCH", f"{PODS}/p/status", {"metadata": {"uid": "not-its-uid"}, "status": {}}, STRATEGIC),
                 id="status patch with another uid: Conflict"),
    pytest.param(Call("PUT", f"{PODS}/p", {**make_pod("p").obj(), "metadata": {"name": "other"}}),
                 id="update naming another object: BadRequest"),
    pytest.param(Call("PUT", PODS, {}), id="PUT to a collection: MethodNotAllowed"),
    pytest.param(Call("GET", "/api/v1/widgets"), id="unknown resource: NotFound"),
    pytest.param(Call("GET", PODS, params={"labelSelector": "app in (a"}), id="malformed label selector"),
    pytest.param(Call("GET", PODS, params={"limit": "many"}), id="malformed limit: BadRequest"),
    pytest.param(Call("GET", PODS, params={"limit": "1"}), id="a page of one pod, with a continue token"),
    pytest.param(Call("GET", f"{PODS}?limit=1&labelSelector=a%3Db"), id="a query written into the path"),
    pytest.param(Call("GET", "/api/v1/namespaces/default/pods/%70"), id="an escaped path"),
    pytest.param(Call("GET", PODS, params={"fieldSelector": "spec.nodeName=", "resourceVersionMatch": "NotOlderThan",
                                           "resourceVersion": "0"}), id="list by field selector"),
    pytest.param(Call("GET", f"{PODS}/p/log"), id="logs of a pod on no node (the streamed path)"),
    pytest.param(Call("POST", "/api/v1/namespaces/default/events", {
        "metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Started", "message": "m", "type": "Normal"}), id="post an event"),
    pytest.param(Call("POST", f"{PODS}/p/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                                     "metadata": {"name": "other"}}),
                 id="eviction naming another pod: BadRequest"),
    pytest.param(Call("DELETE", f"{PODS}/w", {"gracePeriodSeconds": "soon"}), id="malformed delete options"),
    pytest.param(Call("DELETE", f"{PODS}/w", {"gracePeriodSeconds": 0}), id="delete a pod"),
    pytest.param(Call("DELETE", f"{PODS}/w"), id="delete it again: NotFound"),
    pytest.param(Call("POST", "/api/v1/namespaces/absent/configmaps", {"metadata": {"name": "c"}}),
                 id="create in a missing namespace: NotFound"),
    pytest.param(Call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "big"},
                                                                       "data": {"k": "x" * (3 * 1024 * 1024)}}),
                 id="a body over 3 MiB: RequestEntityTooLarge"),
]


def _normal(value: Any) -> Any:
    """An answer without what differs run to run (uids, resourceVersions, continue tokens naming them)."""
    if isinstance(value, dict):
        return {k: "*" if k in VOLATILE or k == "continue" else _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str):  # an object quoted in a message
        return _UID.sub("*", _RV.sub("*", value))
    return value


async def _outcome(client: Any, call: Call) -> Any:
    try:
        return "ok", _normal(await client.request(call.method, call.path, call.body, call.content_type, call.params))
    except ApiError as exc:
        return "error", exc.code, exc.reason, _normal(exc.message), _normal(exc.details)


@contextlib.asynccontextmanager
async def _servers(tmp_path: Path) -> AsyncIterator[tuple[ApiClient, InProcessClient, list[ApiServer]]]:
    """Two servers as alike as can be (RBAC on, the client authenticated by the admin token): HTTP, in process."""
    stores = [await SQLiteStore.open(tmp_path / f"{name}.db") for name in ("http", "inprocess")]
    servers = [ApiServer(store, FakeClock(), tokens=frozenset({TOKEN}), auth=AuthConfig(authorization_modes=("RBAC",)))
               for store in stores]
    for server in servers:
        await server.start()
    http = TestServer(servers[0].app())
    await http.start_server()
    client = ApiClient(str(http.make_url("")), token=TOKEN)
    try:
        yield client, InProcessClient(servers[1]), servers
    finally:
        await client.close()
        await http.close()
        for server, store in zip(servers, stores, strict=True):
            await server.stop()
            await store.close()


async def test_every_answer_agrees(tmp_path: Path) -> None:
    async with _servers(tmp_path) as (http, inprocess, _):
        for case in CASES:
            call = case.values[0]
            assert isinstance(call, Call)
            over_http = await _outcome(http, call)
            in_process = await _outcome(inprocess, call)
            assert in_process == over_http, case.id


async def _events(client: Any, path: str, params: dict[str, str], count: int) -> list[Any]:
    """The first `count` events of a watch (or how it failed), types and normalized objects."""
    out: list[Any] = []
    try:
        async for event in client.watch(path, params):
            out.append((event["type"], _normal(event["object"])))
            if len(out) == count:
                break
    except ApiError as exc:
        out.append(("raised", exc.code, exc.reason, exc.message))
    return out


WATCHES: list[tuple[str, dict[str, str], int]] = [
    ("initial events of every pod", {}, 2),
    ("initial events by field selector", {"fieldSelector": "metadata.name=a"}, 1),
    ("a bookmark after the initial events (none match)", {"allowWatchBookmarks": "true", "labelSelector": "x=y"}, 1),
    ("the events since a resourceVersion", {"resourceVersion": "{created}"}, 1),
    ("a malformed resourceVersion: BadRequest", {"resourceVersion": "abc"}, 1),
    ("a resourceVersion the cache no longer reaches: 410 as an ERROR event", {"resourceVersion": "1"}, 1),
    ("a malformed field selector: BadRequest", {"fieldSelector": "spec.bogus=1"}, 1),
    ("a malformed timeoutSeconds: BadRequest", {"timeoutSeconds": "soon"}, 1),
]


@pytest.mark.parametrize(("params", "count"), [pytest.param(p, n, id=name) for name, p, n in WATCHES])
async def test_watches_agree(tmp_path: Path, params: dict[str, str], count: int) -> None:
    async with _servers(tmp_path) as (http, inprocess, servers):
        for client in (http, inprocess):
            created = await client.create(PODS, make_pod("a").obj())
            await client.create(PODS, make_pod("b").obj())
        params = {k: v.format(created=created["metadata"]["resourceVersion"]) for k, v in params.items()}
        for server in servers:  # as after a restart: the watch cache reaches back only to where it started
            server.caches.start_revision = 2
        answers = [await asyncio.wait_for(_events(client, PODS, params, count), 10) for client in (http, inprocess)]
        assert answers[1] == answers[0]


async def test_live_watch_events_agree_and_the_watch_leaves_the_cache(tmp_path: Path) -> None:
    """Events written after the watch started reach both transports alike; closing the in-process watch takes
    its watcher out of the watch cache and counts the request in the metrics, as the end of an HTTP watch does."""
    async with _servers(tmp_path) as (http, inprocess, servers):
        server = servers[1]
        answers = []
        for client in (http, inprocess):
            listed = await client.get(PODS)
            reading = asyncio.create_task(_events(client, PODS, {"resourceVersion": listed["metadata"][
                "resourceVersion"]}, 3))
            await asyncio.sleep(0.05)
            await client.create(PODS, make_pod("live").obj())
            await client.patch(f"{PODS}/live", {"metadata": {"labels": {"k": "v"}}}, MERGE)
            await client.delete(f"{PODS}/live", {"gracePeriodSeconds": 0})
            answers.append(await asyncio.wait_for(reading, 10))
        assert [t for t, _ in answers[1]] == ["ADDED", "MODIFIED", "DELETED"]
        assert answers[1] == answers[0]
        cache = server.caches.by_resource[next(r for r in server.caches.by_resource if r.plural == "pods")]
        assert not cache.watchers
        watches = server.metrics.registry.get_sample_value("apiserver_request_total", dict(zip(
            (*REQUEST_LABELS, "code"), ("WATCH", "", "", "v1", "pods", "", "namespace", "apiserver", "200"),
            strict=True)))
        assert watches == 1


# --- the authorization shortcut: never a different decision than the full check -------------------------------

NODE_USER = UserInfo("system:node:n1", groups=("system:nodes", "system:authenticated"))
MASTER_NODE = UserInfo("system:node:n1", groups=("system:nodes", "system:masters"))
PLAIN_USER = UserInfo("alice", groups=("system:authenticated",))
REQUESTS = [("GET", f"{PODS}/p"), ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n2"),
            ("DELETE", "/api/v1/nodes/n2"), ("POST", PODS), ("GET", "/metrics")]


@pytest.mark.parametrize(("modes", "user", "shortcut"), [
    pytest.param(("RBAC",), ADMIN_USER, True, id="RBAC: a system:masters member"),
    pytest.param(("RBAC",), PLAIN_USER, False, id="RBAC: any other user is checked"),
    pytest.param(("Node", "RBAC"), NODE_USER, False, id="Node: a node is checked"),
    pytest.param(("Node", "RBAC"), MASTER_NODE, False, id="Node: a node in system:masters still meets NodeRestriction"),
    pytest.param(("AlwaysDeny",), ADMIN_USER, True, id="AlwaysDeny after the privileged groups: masters pass"),
    pytest.param(("AlwaysDeny",), ANONYMOUS_USER, False, id="AlwaysDeny: anyone else is checked"),
    pytest.param((), UNSECURED_USER, True, id="no modes (AlwaysAllow): the unsecured user"),
    pytest.param((), ANONYMOUS_USER, True, id="no modes (AlwaysAllow): anyone"),
])
async def test_authorization_shortcut_agrees_with_the_full_check(tmp_path: Path, modes: tuple[str, ...],
                                                                 user: UserInfo, shortcut: bool) -> None:
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, FakeClock(), tokens=frozenset({TOKEN}), auth=AuthConfig(authorization_modes=modes))
    try:
        assert server._allowed_anything(user) is shortcut
        if not shortcut:
            return
        for method, path in REQUESTS:  # what the shortcut skips would have allowed every one of these
            attributes = RequestAttributes(user, new_request_info(method, path, {}))
            assert server.authorization.authorizer.authorize(attributes)[0] is Decision.ALLOW
            assert restrict_request(attributes, server.registry) is None
    finally:
        await store.close()


async def test_watchers_never_share_the_servers_objects(tmp_path: Path) -> None:
    """Each in-process watcher decodes its own copy of an event: mutating one changes neither the other
    watcher's nor the watch cache's."""
    async with _servers(tmp_path) as (_, inprocess, servers):
        listed = await inprocess.get(PODS)
        watching = [asyncio.create_task(_raw_events(inprocess, listed["metadata"]["resourceVersion"]))
                    for _ in range(2)]
        await asyncio.sleep(0.05)
        await inprocess.create(PODS, make_pod("a").obj())  # one event, one encoding, two watchers
        first, second = await asyncio.wait_for(asyncio.gather(*watching), 10)
        first[0]["object"]["metadata"]["labels"] = {"mutated": "yes"}
        first[0]["object"]["spec"]["containers"].clear()
        assert "labels" not in second[0]["object"]["metadata"] and second[0]["object"]["spec"]["containers"]
        cached = servers[1].registry.get("pods", "default", "a")
        assert cached is not None and "labels" not in cached["metadata"] and cached["spec"]["containers"]


async def _raw_events(client: InProcessClient, resource_version: str) -> list[dict[str, Any]]:
    async for event in client.watch(PODS, {"resourceVersion": resource_version}):
        return [event]
    return []
