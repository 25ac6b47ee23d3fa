"""Impersonation through a real ApiServer's middleware over HTTP, ported from upstream's
staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation_test.go (TestImpersonationFilter), case by name.

As upstream's test, the filter runs in front of a handler that records the user it sees and fails on any
Impersonate-* header left over; the authorizer is upstream's impersonateAuthorizer. Here the filter is the
server's own middleware (authentication by static tokens, then impersonation, then authorization), so the
authorizer also allows every verb but `impersonate`: the request's own authorization is not under test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict, CIMultiDictProxy

from kubelite.apiserver.app import USER
from kubelite.apiserver.auth import impersonation
from kubelite.apiserver.auth.authorizer import Decision
from kubelite.apiserver.auth.config import AuthConfig
from kubelite.apiserver.auth.requestinfo import RequestAttributes
from kubelite.apiserver.auth.serviceaccount import split_username
from kubelite.apiserver.auth.user import UserInfo
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import SHARED_LOOP, running
from tests.rbac.test_rbac_api import ADMIN as ADMIN_TOKEN
from tests.rbac.test_rbac_api import aggregated, bind_in_default, rbac_server

AUTHENTICATION = "authentication.k8s.io"


class ImpersonateAuthorizer:
    """Upstream's impersonateAuthorizer, rule for rule. Its "tester" returns an error, which the filter treats as
    a refusal; kubelite's authorizers have no error result, so here it is NoOpinion with the error's text."""

    def authorize(self, a: RequestAttributes) -> tuple[Decision, str]:
        if a.verb != "impersonate":  # the impersonated request's own authorization: not under test
            return Decision.ALLOW, ""
        user, groups = a.user.name, a.user.groups
        first = groups[0] if groups else ""
        second = groups[1] if len(groups) > 1 else ""
        if user == "system:admin":
            return Decision.ALLOW, ""
        if user == "tester":
            return Decision.NO_OPINION, "works on my machine"
        if user == "deny-me":
            return Decision.NO_OPINION, "denied"
        allowed = (
            (first == "wheel" and a.resource == "users")
            or (first == "sa-impersonater" and a.resource == "serviceaccounts")
            or (first == "regular-impersonater" and a.resource == "users")
            or (second == "group-impersonater" and a.resource == "groups")
            or (second == "extra-setter-scopes" and a.resource == "userextras" and a.subresource == "scopes")
            or second in ("escaped-scopes", "almost-escaped-scopes")
            or (second == "extra-setter-particular-scopes" and a.resource == "userextras"
                and a.subresource == "scopes" and a.name == "scope-a" and a.api_group == AUTHENTICATION)
            or (second == "extra-setter-project" and a.resource == "userextras" and a.subresource == "project"
                and a.api_group == AUTHENTICATION)
            or (first == "everything-impersonater" and (
                (a.resource in ("users", "groups") and a.api_group == "")
                or (a.resource == "uids" and a.name == "some-uid" and a.api_group == AUTHENTICATION)
                or (a.resource == "userextras" and a.subresource == "scopes" and a.api_group == AUTHENTICATION)))
        )
        return (Decision.ALLOW, "") if allowed else (Decision.NO_OPINION, "deny by default")


def requestor(name: str, *groups: str) -> UserInfo:
    return UserInfo(name, groups=groups)


# The requesters, by bearer token (the authenticator adds system:authenticated after their groups, where
# upstream's authorizer, reading groups[0] and groups[1], does not see it).
USERS = {f"t{i}": u for i, u in enumerate((
    requestor("tester"), requestor("dev", "wheel"), requestor("dev", "wheel", "group-impersonater"),
    requestor("dev", "wheel", "extra-setter-project"), requestor("dev", "wheel", "extra-setter-particular-scopes"),
    requestor("dev", "wheel", "extra-setter-scopes"), requestor("dev", "wheel", "escaped-scopes"),
    requestor("dev", "wheel", "almost-escaped-scopes"), requestor("dev", "regular-impersonater"),
    requestor("dev", "sa-impersonater"), requestor("system:admin"), requestor("dev", "everything-impersonater"),
))}
_TOKENS = {(u.name, u.groups): t for t, u in USERS.items()}


def bearer(user: UserInfo) -> str:
    return f"Bearer {_TOKENS[user.name, user.groups]}"


@dataclass(frozen=True)
class Case:
    name: str
    user: UserInfo
    impersonation_user: str = ""
    impersonation_groups: tuple[str, ...] = ()
    impersonation_user_extras: dict[str, tuple[str, ...]] = field(default_factory=dict)
    impersonation_uid: str = ""
    expected_user: UserInfo | None = None  # None: the handler is never reached (upstream: the requester's user)
    expected_code: int = 200


def acting(name: str, *groups: str, uid: str = "", extra: dict[str, tuple[str, ...]] | None = None) -> UserInfo:
    return UserInfo(name, uid, groups, extra or {})


SCOPES = {"scopes": ("scope-a", "scope-b")}
CASES = [
    Case("not-impersonating", requestor("tester"), expected_user=acting("tester", "system:authenticated")),
    Case("impersonating-error", requestor("tester"), "anyone", expected_code=403),
    Case("impersonating-group-without-user", requestor("tester"), impersonation_groups=("some-group",),
         expected_code=500),
    Case("impersonating-extra-without-user", requestor("tester"), impersonation_user_extras={"scopes": ("scope-a",)},
         expected_code=500),
    Case("impersonating-uid-without-user", requestor("tester"), impersonation_uid="some-uid", expected_code=500),
    Case("disallowed-group", requestor("dev", "wheel"), "system:admin", ("some-group",), expected_code=403),
    Case("allowed-group", requestor("dev", "wheel", "group-impersonater"), "system:admin", ("some-group",),
         expected_user=acting("system:admin", "some-group", "system:authenticated")),
    Case("disallowed-userextra-1", requestor("dev", "wheel"), "system:admin", ("some-group",),
         {"scopes": ("scope-a",)}, expected_code=403),
    Case("disallowed-userextra-2", requestor("dev", "wheel", "extra-setter-project"), "system:admin",
         ("some-group",), {"scopes": ("scope-a",)}, expected_code=403),
    Case("disallowed-userextra-3", requestor("dev", "wheel", "extra-setter-particular-scopes"), "system:admin",
         ("some-group",), SCOPES, expected_code=403),
    Case("allowed-userextras", requestor("dev", "wheel", "extra-setter-scopes"), "system:admin",
         impersonation_user_extras=SCOPES,
         expected_user=acting("system:admin", "system:authenticated", extra=SCOPES)),
    Case("percent-escaped-userextras", requestor("dev", "wheel", "escaped-scopes"), "system:admin",
         impersonation_user_extras={"example.com%2fescaped%e1%9b%84scopes": ("scope-a", "scope-b")},
         expected_user=acting("system:admin", "system:authenticated",
                              extra={"example.com/escaped\u16c4scopes": ("scope-a", "scope-b")})),
    Case("almost-percent-escaped-userextras", requestor("dev", "wheel", "almost-escaped-scopes"), "system:admin",
         impersonation_user_extras={"almost%zzpercent%xxencoded": ("scope-a", "scope-b")},
         expected_user=acting("system:admin", "system:authenticated",
                              extra={"almost%zzpercent%xxencoded": ("scope-a", "scope-b")})),
    Case("allowed-users-impersonation", requestor("dev", "regular-impersonater"), "tester",
         expected_user=acting("tester", "system:authenticated")),
    Case("disallowed-impersonating", requestor("dev", "sa-impersonater"), "tester", expected_code=403),
    Case("allowed-sa-impersonating", requestor("dev", "sa-impersonater"), "system:serviceaccount:foo:default",
         expected_user=acting("system:serviceaccount:foo:default", "system:serviceaccounts",
                              "system:serviceaccounts:foo", "system:authenticated")),
    Case("anonymous-username-prevents-adding-authenticated-group", requestor("system:admin"), "system:anonymous",
         expected_user=acting("system:anonymous", "system:unauthenticated")),
    Case("unauthenticated-group-prevents-adding-authenticated-group", requestor("system:admin"), "unknown",
         ("system:unauthenticated",), expected_user=acting("unknown", "system:unauthenticated")),
    Case("unauthenticated-group-prevents-double-adding-authenticated-group", requestor("system:admin"), "unknown",
         ("system:authenticated",), expected_user=acting("unknown", "system:authenticated")),
    Case("specified-authenticated-group-prevents-double-adding-authenticated-group",
         requestor("dev", "wheel", "group-impersonater"), "system:admin", ("some-group", "system:authenticated"),
         expected_user=acting("system:admin", "some-group", "system:authenticated")),
    Case("anonymous-user-should-include-unauthenticated-group", requestor("system:admin"), "system:anonymous",
         expected_user=acting("system:anonymous", "system:unauthenticated")),
    Case("anonymous-user-prevents-double-adding-unauthenticated-group", requestor("system:admin"),
         "system:anonymous", ("system:unauthenticated",),
         expected_user=acting("system:anonymous", "system:unauthenticated")),
    Case("allowed-user-impersonation-with-uid", requestor("dev", "everything-impersonater"), "tester",
         impersonation_uid="some-uid", expected_user=acting("tester", "system:authenticated", uid="some-uid")),
    Case("disallowed-user-impersonation-with-uid", requestor("dev", "everything-impersonater"), "tester",
         impersonation_uid="disallowed-uid", expected_code=403),
    Case("allowed-impersonation-with-all-headers", requestor("dev", "everything-impersonater"), "tester",
         ("system:authenticated",), SCOPES, "some-uid",
         expected_user=acting("tester", "system:authenticated", uid="some-uid", extra=SCOPES)),
]


@dataclass
class Recorder:
    """Upstream's doNothingHandler: the user the request reached the handler as, and its headers."""

    seen: list[tuple[UserInfo, CIMultiDictProxy[str]]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request[USER], request.headers))
        return web.Response(text="ok")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def filtered(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[TestClient, Recorder]]:  # type: ignore[type-arg]
    """A real ApiServer (SQLite) whose middleware fronts the recording handler, over HTTP on loopback."""
    auth = AuthConfig(USERS, authorizer=ImpersonateAuthorizer())
    async with running(await SQLiteStore.open(tmp_path_factory.mktemp("imp") / "state.db"), auth=auth) as server:
        recorder = Recorder()
        app = web.Application(middlewares=[server._middleware])
        app.router.add_route("*", "/{tail:.*}", recorder.handle)
        client = TestClient(TestServer(app))
        await client.start_server()
        try:
            yield client, recorder
        finally:
            await client.close()


def headers_of(case: Case) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict({"Authorization": bearer(case.user)})
    if case.impersonation_user:
        headers.add("Impersonate-User", case.impersonation_user)
    for group in case.impersonation_groups:
        headers.add("Impersonate-Group", group)
    for key, values in case.impersonation_user_extras.items():
        for value in values:
            headers.add(f"Impersonate-Extra-{key}", value)
    if case.impersonation_uid:
        headers.add("Impersonate-Uid", case.impersonation_uid)
    return headers


@SHARED_LOOP
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_impersonation_filter(filtered: tuple[TestClient, Recorder], case: Case) -> None:  # type: ignore[type-arg]
    client, recorder = filtered
    recorder.seen.clear()
    resp = await client.get("/api/v1/namespaces/default/pods", headers=headers_of(case))
    assert resp.status == case.expected_code, await resp.text()
    if case.expected_user is None:
        assert recorder.seen == []
        return
    [(user, headers)] = recorder.seen
    assert user == case.expected_user
    assert [k for k in headers if k.lower().startswith("impersonate-")] == []


ADMIN = requestor("system:admin")


@dataclass(frozen=True)
class Refusal:
    name: str
    user: UserInfo
    headers: dict[str, str]
    status: int
    body: str


REFUSALS = [
    Refusal("a denied user is upstream's Forbidden Status", requestor("dev", "sa-impersonater"),
            {"Impersonate-User": "nobody"}, 403,
            'users "nobody" is forbidden: User "dev" cannot impersonate resource "users" in API group "" at the '
            "cluster scope: deny by default"),
    Refusal("a denied service account is asked in its namespace", requestor("dev", "wheel"),
            {"Impersonate-User": "system:serviceaccount:ns1:robot"}, 403,
            'serviceaccounts "robot" is forbidden: User "dev" cannot impersonate resource "serviceaccounts" in API '
            'group "" in the namespace "ns1": deny by default'),
    Refusal("a denied extra names its key as the subresource", requestor("dev", "wheel", "extra-setter-project"),
            {"Impersonate-User": "someone", "Impersonate-Extra-Scopes": "s<1>"}, 403,
            'userextras.authentication.k8s.io "s<1>" is forbidden: User "dev" cannot impersonate resource '
            '"userextras/scopes" in API group "authentication.k8s.io" at the cluster scope: deny by default'),
    Refusal("an extra key that decodes to HTML is sanitized in the message", requestor("dev", "wheel"),
            {"Impersonate-User": "someone", "Impersonate-Extra-%3Cx%3E": "v"}, 403,
            'userextras.authentication.k8s.io "v" is forbidden: User "dev" cannot impersonate resource '
            '"userextras/&lt;x&gt;" in API group "authentication.k8s.io" at the cluster scope: deny by default'),
    Refusal("groups without a user are upstream's plain-text internal error", ADMIN,
            {"Impersonate-Group": "g1", "Impersonate-Uid": "u1"}, 500,
            'Internal Server Error: "/api/v1/pods?limit=1": requested [{Group  g1    } '
            "{UID  u1  authentication.k8s.io/v1  }] without impersonating a user\n"),
]


@SHARED_LOOP
@pytest.mark.parametrize("case", REFUSALS, ids=lambda c: c.name)
async def test_refusals_are_upstreams(filtered: tuple[TestClient, Recorder], case: Refusal) -> None:  # type: ignore[type-arg]
    client, recorder = filtered
    recorder.seen.clear()
    resp = await client.get("/api/v1/pods?limit=1",
                            headers={"Authorization": bearer(case.user), **case.headers})
    assert resp.status == case.status
    assert recorder.seen == []
    if case.status == 500:
        assert resp.content_type == "text/plain" and resp.headers["X-Content-Type-Options"] == "nosniff"
        assert await resp.text() == case.body
    else:
        status = orjson.loads(await resp.read())
        assert (status["reason"], status["code"]) == ("Forbidden", 403)
        assert status["message"] == case.body


@SHARED_LOOP
async def test_other_impersonate_headers_pass_untouched(filtered: tuple[TestClient, Recorder]) -> None:  # type: ignore[type-arg]
    """Only User, Group, Uid and Extra-* ask for anything (and are removed); an unknown Impersonate-* header is
    an ordinary header, and an empty Impersonate-User asks for nothing, as upstream."""
    client, recorder = filtered
    recorder.seen.clear()
    headers = {"Authorization": bearer(ADMIN), "Impersonate-Other": "x", "Impersonate-User": ""}
    resp = await client.get("/api/v1/pods", headers=headers)
    assert resp.status == 200
    [(user, seen)] = recorder.seen
    assert user == acting("system:admin", "system:authenticated")
    assert (seen["Impersonate-Other"], seen["Impersonate-User"]) == ("x", "")
    recorder.seen.clear()
    resp = await client.get("/api/v1/pods", headers={**headers, "Impersonate-User": "u"})
    [(user, seen)] = recorder.seen
    assert user == acting("u", "system:authenticated")
    assert seen["Impersonate-Other"] == "x" and "Impersonate-User" not in seen


@pytest.mark.parametrize(("name", "expected"), [
    ("system:serviceaccount:ns:sa", ("ns", "sa")),
    ("system:serviceaccount:ns:sa.dotted", ("ns", "sa.dotted")),
    ("system:serviceaccount:ns.dotted:sa", None),  # a namespace is a DNS-1123 label
    ("system:serviceaccount:ns:sa:extra", None),
    ("system:serviceaccount:ns", None),
    ("system:serviceaccount::sa", None),
    ("system:serviceaccount:NS:sa", None),
    ("system:serviceaccounts:ns:sa", None),
    ("nobody", None),
])
def test_split_username(name: str, expected: tuple[str, str] | None) -> None:
    """serviceaccount.SplitUsername: only a valid namespace and name make a service account's user."""
    assert split_username(name) == expected


@pytest.mark.parametrize(("encoded", "key"), [
    ("scopes", "scopes"),
    ("example.com%2fescaped%e1%9b%84scopes", "example.com/escaped\u16c4scopes"),
    ("almost%zzpercent%xxencoded", "almost%zzpercent%xxencoded"),
    ("trailing%2", "trailing%2"),
    ("plus+stays", "plus+stays"),  # PathUnescape, not QueryUnescape
    ("bad%ffutf8", "bad\ufffdutf8"),
])
def test_unescape_extra_key(encoded: str, key: str) -> None:
    assert impersonation.unescape_extra_key(encoded) == key



WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


@pytest.mark.parametrize(("token", "as_user", "status"), [
    ("alice-token", "system:serviceaccount:default:robot", 201),  # edit's impersonate on serviceaccounts
    ("alice-token", "system:serviceaccount:kube-system:robot", 403),  # bound in default only
    ("alice-token", "bob", 403),
    ("bob-token", "system:serviceaccount:default:robot", 403),  # no binding at all
    (ADMIN_TOKEN, "bob", 201),  # system:masters: cluster-admin's `*`
], ids=["edit-in-its-namespace", "edit-elsewhere", "edit-a-user", "unbound", "cluster-admin"])
async def test_default_policy_grants_impersonation_as_upstream(
        tmp_path: Path, token: str, as_user: str, status: int) -> None:
    """Under RBAC's bootstrap policy (aggregated by the real controller): `edit` (system:aggregate-to-edit) may
    impersonate the service accounts of its namespace, cluster-admin anyone, and a user bound to nothing no one."""
    async with rbac_server(tmp_path / "state.db") as (client, _):
        await aggregated(client, "edit")
        await bind_in_default(client, "alice", "edit")
        resp = await client.post(WHOAMI, data=b"{}", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json", "Impersonate-User": as_user})
        assert resp.status == status, await resp.text()
        if status == 201:
            assert orjson.loads(await resp.read())["status"]["userInfo"]["username"] == as_user
