"""RBAC through a real API server (SQLite, HTTP on loopback) with `--authorization-mode RBAC`: the default
policy, 403s with upstream's message, escalation prevention, the access reviews and aggregation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.auth.bootstrappolicy import AUTOUPDATE, ensure_bootstrap_policy
from kubelite.apiserver.auth.config import AuthConfig
from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from kubelite.controllers.clusterroleaggregation import ClusterRoleAggregationController
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod
from tests.conftest import SHARED_LOOP, serving_server

Client = TestClient  # type: ignore[type-arg]
ADMIN = "admin-token"
USERS = {"alice-token": UserInfo("alice"), "bob-token": UserInfo("bob"), "carol-token": UserInfo("carol")}
RBAC = "/apis/rbac.authorization.k8s.io/v1"
AUTHZ = "/apis/authorization.k8s.io/v1"


@contextlib.asynccontextmanager
async def rbac_server(db: Path) -> AsyncIterator[tuple[Client, ApiServer]]:
    """A real ApiServer on `db` authorizing with RBAC, and the aggregation controller that fills view/edit/admin."""
    async with serving_server(await SQLiteStore.open(db), frozenset({ADMIN}),
                              AuthConfig(USERS, authorization_modes=("RBAC",))) as (server, client):
        aggregation = asyncio.create_task(ClusterRoleAggregationController(InProcessClient(server), RealClock()).run())
        try:
            yield client, server
        finally:
            aggregation.cancel()
            await asyncio.gather(aggregation, return_exceptions=True)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Client, ApiServer]]:
    async with rbac_server(tmp_path / "state.db") as pair:
        yield pair


@pytest.fixture
async def api(served: tuple[Client, ApiServer]) -> Client:
    return served[0]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def alice_views(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    """One server for the module's read-only cases (reviews, refusals, the default policy): alice is bound to
    `view` in default once the aggregation controller has filled it; no case writes anything else."""
    async with rbac_server(tmp_path_factory.mktemp("rbac") / "state.db") as (client, _):
        await aggregated(client, "view")
        await bind_in_default(client, "alice", "view")
        yield client


async def call(api: Client, method: str, path: str, body: Any = None, token: str = ADMIN,
               expect: int | None = None) -> Any:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    resp = await api.request(method, path, data=None if body is None else orjson.dumps(body), headers=headers)
    out = orjson.loads(await resp.read())
    if expect is not None:
        assert resp.status == expect, out
    return out


def binding(kind: str, name: str, role_kind: str, role: str, user: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}


async def bind_in_default(api: Client, user: str, cluster_role: str) -> None:
    await call(api, "POST", f"{RBAC}/namespaces/default/rolebindings",
               binding("RoleBinding", f"{user}-{cluster_role}", "ClusterRole", cluster_role, user), expect=201)


async def eventually(api: Client, name: str, holds: Callable[[list[dict[str, Any]]], bool]) -> None:
    """Wait for the aggregation controller to give the cluster role rules that satisfy `holds`."""
    for _ in range(250):
        role = await call(api, "GET", f"{RBAC}/clusterroles/{name}")
        if holds(role.get("rules") or []):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} was never aggregated as expected")


async def aggregated(api: Client, name: str) -> None:
    await eventually(api, name, bool)


@SHARED_LOOP
async def test_default_policy_is_bootstrapped(alice_views: Client) -> None:
    listed = await call(alice_views, "GET", f"{RBAC}/clusterroles", expect=200)
    roles = {r["metadata"]["name"]: r for r in listed["items"]}
    for name in ("cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery",
                 "system:public-info-viewer", "system:kube-scheduler", "system:kube-controller-manager",
                 "system:node", "system:node-bootstrapper",
                 "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                 "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"):
        assert roles[name]["metadata"]["annotations"][AUTOUPDATE] == "true", name
    assert roles["view"]["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]
    admins = await call(alice_views, "GET", f"{RBAC}/clusterrolebindings/cluster-admin", expect=200)
    assert admins["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                   "name": "system:masters"}]


async def test_aggregation_fills_view_edit_admin(api: Client) -> None:
    for name in ("view", "edit", "admin"):
        await aggregated(api, name)
    view = (await call(api, "GET", f"{RBAC}/clusterroles/view"))["rules"]
    # edit aggregates view's rules (view is labelled aggregate-to-edit), admin edit's
    await eventually(api, "edit", lambda rules: all(r in rules for r in view))
    await eventually(api, "admin", lambda rules: all(r in rules for r in view))
    widgets = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}
    await call(api, "POST", f"{RBAC}/clusterroles", {"metadata": {"name": "crd-viewer", "labels": {
        "rbac.authorization.k8s.io/aggregate-to-view": "true"}}, "rules": [widgets]}, expect=201)
    for name in ("view", "edit", "admin"):  # a new role labelled aggregate-to-view reaches all three
        await eventually(api, name, lambda rules: widgets in rules)


RECONCILE = [  # the bootstrap-roles hook at each start
    ("autoupdate true: missing rules are put back", "true", True),
    ("autoupdate false: the object is left alone", "false", False),
]


@pytest.mark.parametrize("name,autoupdate,restored", RECONCILE, ids=[c[0] for c in RECONCILE])
async def test_reconcile_at_start(served: tuple[Client, ApiServer], name: str, autoupdate: str,
                                  restored: bool) -> None:
    api, server = served
    role = await call(api, "GET", f"{RBAC}/clusterroles/system:discovery")
    role["metadata"]["annotations"][AUTOUPDATE] = autoupdate
    role["rules"] = []
    await call(api, "PUT", f"{RBAC}/clusterroles/system:discovery", role, expect=200)
    await ensure_bootstrap_policy(server.registry)
    role = await call(api, "GET", f"{RBAC}/clusterroles/system:discovery")
    assert bool(role["rules"]) is restored


async def test_view_user_lists_pods_but_cannot_create(api: Client) -> None:
    await aggregated(api, "view")
    await bind_in_default(api, "alice", "view")
    await call(api, "GET", "/api/v1/namespaces/default/pods", token="alice-token", expect=200)
    refused = await call(api, "POST", "/api/v1/namespaces/default/pods", make_pod("p").obj(), token="alice-token",
                         expect=403)
    assert refused["reason"] == "Forbidden"
    assert refused["message"] == ('pods is forbidden: User "alice" cannot create resource "pods" in API group "" '
                                  'in the namespace "default"')
    assert refused["details"] == {"kind": "pods"}
    other = await call(api, "GET", "/api/v1/namespaces/kube-system/pods", token="alice-token", expect=403)
    assert other["message"].endswith('in the namespace "kube-system"')
    secret = await call(api, "GET", "/api/v1/namespaces/default/secrets/s1", token="alice-token", expect=403)
    assert secret["message"] == ('secrets "s1" is forbidden: User "alice" cannot get resource "secrets" in API '
                                 'group "" in the namespace "default"')


@SHARED_LOOP
async def test_nonresource_paths(alice_views: Client) -> None:
    resp = await alice_views.get("/apis", headers={"Authorization": "Bearer carol-token"})
    assert resp.status == 200  # system:discovery, bound to system:authenticated
    refused = await call(alice_views, "GET", "/metrics", token="carol-token", expect=403)
    assert refused["message"] == 'forbidden: User "carol" cannot get path "/metrics"'


ESCALATION = [  # as pkg/registry/rbac/*/policybased: bob is `admin` in default
    ("role with rules bob holds", "roles", {"metadata": {"name": "r"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "create"]}]}, None, 201),
    ("role with rules bob does not hold", "roles", {"metadata": {"name": "r"}, "rules": [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}, None, 403),
    ("role bob may escalate", "roles", {"metadata": {"name": "r"}, "rules": [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}, "escalate", 201),
    ("binding to a role bob holds the rules of", "rolebindings",
     binding("RoleBinding", "b", "ClusterRole", "view", "alice"), None, 201),
    ("binding to a role bob does not hold the rules of", "rolebindings",
     binding("RoleBinding", "b", "ClusterRole", "cluster-admin", "alice"), None, 403),
    ("binding to a role bob may bind", "rolebindings",
     binding("RoleBinding", "b", "ClusterRole", "cluster-admin", "alice"), "bind", 201),
    ("binding to a missing role", "rolebindings",
     binding("RoleBinding", "b", "ClusterRole", "nonexistent", "alice"), None, 403),
]


@pytest.mark.parametrize("name,resource,body,grant,code", ESCALATION, ids=[c[0] for c in ESCALATION])
async def test_escalation_prevention(api: Client, name: str, resource: str, body: dict[str, Any],
                                     grant: str | None, code: int) -> None:
    await aggregated(api, "view")
    view = (await call(api, "GET", f"{RBAC}/clusterroles/view"))["rules"]
    await eventually(api, "admin", lambda rules: all(r in rules for r in view))
    await bind_in_default(api, "bob", "admin")
    if grant is not None:
        target = "clusterroles" if grant == "bind" else "roles"
        await call(api, "POST", f"{RBAC}/clusterroles", {"metadata": {"name": f"may-{grant}"}, "rules": [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": [target], "verbs": [grant]}]}, expect=201)
        await bind_in_default(api, "bob", f"may-{grant}")
    out = await call(api, "POST", f"{RBAC}/namespaces/default/{resource}", body, token="bob-token", expect=code)
    if code == 403 and "nonexistent" not in name and "missing" not in name:
        kind = f"{resource}.rbac.authorization.k8s.io"
        assert out["message"].startswith(
            f'{kind} "{body["metadata"]["name"]}" is forbidden: user "bob" (groups=["system:authenticated"]) is '
            "attempting to grant RBAC permissions not currently held:\n{"), out["message"]


def access_review(verb: str, resource: str, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace}, **extra}}


CAN_I = [  # kubectl auth can-i VERB RESOURCE as alice (view in default)
    ("list pods", "list", "pods", "default", True),
    ("watch deployments", "watch", "deployments", "default", True),
    ("create pods", "create", "pods", "default", False),
    ("delete pods", "delete", "pods", "default", False),
    ("get secrets", "get", "secrets", "default", False),
    ("list pods in another namespace", "list", "pods", "kube-system", False),
]


@SHARED_LOOP
@pytest.mark.parametrize("name,verb,resource,namespace,allowed", CAN_I, ids=[c[0] for c in CAN_I])
async def test_self_subject_access_review(alice_views: Client, name: str, verb: str, resource: str,
                                          namespace: str, allowed: bool) -> None:
    body = access_review(verb, resource, namespace)
    if resource == "deployments":
        body["spec"]["resourceAttributes"]["group"] = "apps"
    out = await call(alice_views, "POST", f"{AUTHZ}/selfsubjectaccessreviews", body, token="alice-token", expect=201)
    assert out["status"]["allowed"] is allowed


@SHARED_LOOP
async def test_subject_access_review_for_another_user(alice_views: Client) -> None:
    body = {"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods",
                                                             "namespace": "default"}}}
    out = await call(alice_views, "POST", f"{AUTHZ}/subjectaccessreviews", body, expect=201)
    assert out["status"]["allowed"] is True
    assert out["status"]["reason"].startswith('RBAC: allowed by RoleBinding "default/alice-view" of ClusterRole')
    # not hers to ask
    await call(alice_views, "POST", f"{AUTHZ}/subjectaccessreviews", body, token="alice-token", expect=403)


INVALID_REVIEWS = [
    ("no attributes", {"user": "alice"}, "spec.resourceAttributes"),
    ("both attributes", {"user": "alice", "resourceAttributes": {"verb": "get"},
                         "nonResourceAttributes": {"path": "/", "verb": "get"}}, "spec.nonResourceAttributes"),
    ("no user nor group", {"resourceAttributes": {"verb": "get"}}, "spec.user"),
]


@SHARED_LOOP
@pytest.mark.parametrize("name,spec,field", INVALID_REVIEWS, ids=[c[0] for c in INVALID_REVIEWS])
async def test_invalid_subject_access_review(alice_views: Client, name: str, spec: dict[str, Any],
                                             field: str) -> None:
    out = await call(alice_views, "POST", f"{AUTHZ}/subjectaccessreviews", {"spec": spec}, expect=422)
    assert field in [c["field"] for c in out["details"]["causes"]]


@SHARED_LOOP
async def test_self_subject_rules_review(alice_views: Client) -> None:
    out = await call(alice_views, "POST", f"{AUTHZ}/selfsubjectrulesreviews", {"spec": {"namespace": "default"}},
                     token="alice-token", expect=201)
    status = out["status"]
    assert status["incomplete"] is False
    assert any("pods" in r["resources"] and "list" in r["verbs"] for r in status["resourceRules"])
    assert any("/version" in r["nonResourceURLs"] for r in status["nonResourceRules"])


async def test_binding_validation(api: Client) -> None:
    body = binding("RoleBinding", "b", "Role", "r", "alice")
    created = await call(api, "POST", f"{RBAC}/namespaces/default/rolebindings", body, expect=201)
    created["roleRef"]["name"] = "other"
    out = await call(api, "PUT", f"{RBAC}/namespaces/default/rolebindings/b", created, expect=422)
    assert out["details"]["causes"][0]["field"] == "roleRef"
    bad = binding("ClusterRoleBinding", "c", "Role", "r", "alice")
    out = await call(api, "POST", f"{RBAC}/clusterrolebindings", bad, expect=422)
    assert out["details"]["causes"][0]["field"] == "roleRef.kind"
