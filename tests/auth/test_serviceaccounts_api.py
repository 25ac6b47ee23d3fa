"""ServiceAccounts, TokenRequest, SelfSubjectReview, ServiceAccount admission and the auth seams, through a real
API server (SQLite, HTTP on loopback) configured as `kubelite server` configures it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from cryptography.hazmat.primitives.asymmetric import ec

from kubelite.api.errors import ApiError
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.auth.admission import DEFAULT_WAIT_POLLS, POLL
from kubelite.apiserver.auth.authorizer import Decision
from kubelite.apiserver.auth.config import AuthConfig, ServiceAccountConfig
from kubelite.apiserver.auth.requestinfo import RequestAttributes
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock, parse_rfc3339
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod
from tests.conftest import serving

Client = TestClient  # type: ignore[type-arg]
ADMIN = "admin-token"
KEY = ec.generate_private_key(ec.SECP256R1())
NS = "/api/v1/namespaces/default"


@contextlib.asynccontextmanager
async def _server(tmp_path: Path, auth: AuthConfig) -> AsyncIterator[Client]:
    """A server for one test, stopped however the test ends (a failing assertion inside an `async for` over a bare
    generator left it running, and pytest hung instead of failing)."""
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), frozenset({ADMIN}), auth) as client:
        yield client


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Client]:
    accounts = ServiceAccountConfig(KEY, (KEY.public_key(),))
    async with _server(tmp_path, AuthConfig(service_accounts=accounts)) as client:
        yield client


async def call(api: Client, method: str, path: str, body: Any = None, token: str | None = ADMIN,
               expect: int | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    resp = await api.request(method, path, data=None if body is None else orjson.dumps(body), headers=headers)
    out = orjson.loads(await resp.read())
    if expect is not None:
        assert resp.status == expect, (resp.status, out)
    return out


async def _account(api: Client, name: str = "default", **fields: Any) -> Any:
    return await call(api, "POST", f"{NS}/serviceaccounts", {"metadata": {"name": name}, **fields}, expect=201)


async def test_unauthenticated_is_upstreams_401_status(api: Client) -> None:
    assert await call(api, "GET", f"{NS}/pods", token=None, expect=401) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized",
        "reason": "Unauthorized", "code": 401}
    assert await call(api, "GET", f"{NS}/pods", token="wrong", expect=401)


async def test_self_subject_review_of_the_admin(api: Client) -> None:
    review = await call(api, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, expect=201)
    assert review["kind"] == "SelfSubjectReview"
    assert review["status"]["userInfo"] == {"username": "kubernetes-admin",
                                            "groups": ["system:masters", "system:authenticated"]}
    await call(api, "GET", "/apis/authentication.k8s.io/v1/selfsubjectreviews", expect=405)


@dataclass(frozen=True)
class TokenCase:
    name: str
    spec: dict[str, Any]
    code: int
    message: str = ""


# token.go / ValidateTokenRequest: defaults, bounds, bound objects.
TOKEN_CASES = [
    TokenCase("defaults: an hour, the API audience", {}, 201),
    TokenCase("ten minutes is the least", {"expirationSeconds": 600}, 201),
    TokenCase("under ten minutes", {"expirationSeconds": 599}, 422,
              'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 599: '
              "may not specify a duration less than 10 minutes"),
    TokenCase("over 2^32 seconds", {"expirationSeconds": 2**32 + 1}, 422,
              "may not specify a duration larger than 2^32 seconds"),
    TokenCase("bound to its pod", {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web"}}, 201),
    TokenCase("projected volume request: status keeps the asked lifetime though the token lives a year",
              {"expirationSeconds": 3607, "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web"}}, 201),
    TokenCase("bound to a missing pod", {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "nope"}}, 404,
              'pods "nope" not found'),
    TokenCase("bound to another account's pod",
              {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "other"}}, 400,
              'cannot bind token for serviceaccount "default" to pod running with different serviceaccount name.'),
    TokenCase("bound pod's uid differs",
              {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "old"}}, 409,
              "the UID in the bound object reference (old) does not match the UID in record. The object might have "
              "been deleted and then recreated"),
    TokenCase("bound to a secret", {"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "s"}}, 201),
    TokenCase("bound to a missing secret", {"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "x"}},
              404, 'secrets "x" not found'),
    TokenCase("bound to a node", {"boundObjectRef": {"kind": "Node", "apiVersion": "v1", "name": "n1"}}, 201),
    TokenCase("bound to a missing node", {"boundObjectRef": {"kind": "Node", "apiVersion": "v1", "name": "n9"}},
              404, 'nodes "n9" not found'),
    TokenCase("bound to a Deployment", {"boundObjectRef": {"kind": "Deployment", "apiVersion": "apps/v1",
                                                           "name": "d"}}, 400,
              "cannot bind token to object of type apps/v1, Kind=Deployment"),
    TokenCase("wrong type", {"expirationSeconds": "soon"}, 400),
]


@pytest.mark.parametrize("case", TOKEN_CASES, ids=lambda c: c.name)
async def test_token_request(api: Client, case: TokenCase) -> None:
    await _account(api)
    await _account(api, "other")
    await call(api, "POST", f"{NS}/pods", make_pod("web").obj(), expect=201)
    other = make_pod("other").obj()
    other["spec"]["serviceAccountName"] = "other"
    await call(api, "POST", f"{NS}/pods", other, expect=201)
    await call(api, "POST", f"{NS}/secrets", {"metadata": {"name": "s"}, "stringData": {"k": "v"}}, expect=201)
    await call(api, "POST", "/api/v1/nodes", {"metadata": {"name": "n1"}}, expect=201)
    out = await call(api, "POST", f"{NS}/serviceaccounts/default/token",
                     {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": case.spec})
    if case.code != 201:
        assert out["code"] == case.code and case.message in out["message"], out
        return
    assert out["kind"] == "TokenRequest" and out["status"]["token"].count(".") == 2
    assert out["spec"]["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    assert out["spec"]["expirationSeconds"] == case.spec.get("expirationSeconds", 3600)
    issued = parse_rfc3339(out["metadata"]["creationTimestamp"])
    assert parse_rfc3339(out["status"]["expirationTimestamp"]) - issued == out["spec"]["expirationSeconds"]
    user = (await call(api, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {},
                       token=out["status"]["token"], expect=201))["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:default:default"
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    bound_kind = case.spec.get("boundObjectRef", {}).get("kind")
    assert ("authentication.kubernetes.io/pod-name" in user.get("extra", {})) == (bound_kind == "Pod")
    assert ("authentication.kubernetes.io/node-name" in user.get("extra", {})) == (bound_kind == "Node")


async def test_token_for_a_missing_account_is_not_found(api: Client) -> None:
    out = await call(api, "POST", f"{NS}/serviceaccounts/ghost/token", {}, expect=404)
    assert out["message"] == 'serviceaccounts "ghost" not found'


@pytest.mark.parametrize(("kind", "path", "body"), [
    ("Pod", "pods/web", make_pod("web").obj()),  # unscheduled: deleted at once
    ("Secret", "secrets/web", {"metadata": {"name": "web"}}),
    ("Node", "nodes/web", {"metadata": {"name": "web"}}),
    ("ServiceAccount", "serviceaccounts/default", None),
], ids=["bound pod", "bound secret", "bound node", "the account itself"])
async def test_deleting_what_a_token_is_bound_to_revokes_it(api: Client, kind: str, path: str,
                                                            body: dict[str, Any] | None) -> None:
    await _account(api)
    collection = "/api/v1" if kind == "Node" else NS
    if body is not None:
        await call(api, "POST", f"{collection}/{path.split('/')[0]}", body, expect=201)
    ref = {"boundObjectRef": {"kind": kind, "apiVersion": "v1", "name": "web"}} if body is not None else {}
    token = (await call(api, "POST", f"{NS}/serviceaccounts/default/token", {"spec": ref},
                        expect=201))["status"]["token"]
    await call(api, "GET", f"{NS}/pods", token=token, expect=200)
    await call(api, "DELETE", f"{collection}/{path}", expect=200)
    await call(api, "GET", f"{NS}/pods", token=token, expect=401)


def _mounts(pod: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [c.get("volumeMounts", []) for kind in ("initContainers", "containers") for c in pod["spec"].get(kind, [])]


@dataclass(frozen=True)
class AdmissionCase:
    name: str
    pod_automount: bool | None
    account_automount: bool | None
    mounted: bool


# plugin/pkg/admission/serviceaccount admission_test.go: TestAutomountsAPIToken, TestRespectsExistingMount,
# automount precedence (the pod's field over the account's).
ADMISSION_CASES = [
    AdmissionCase("mounts by default", None, None, True),
    AdmissionCase("account opts out", None, False, False),
    AdmissionCase("pod opts out", False, None, False),
    AdmissionCase("pod opts in over the account", True, False, True),
    AdmissionCase("pod opts out over the account", False, True, False),
]


@pytest.mark.parametrize("case", ADMISSION_CASES, ids=lambda c: c.name)
async def test_service_account_admission(api: Client, case: AdmissionCase) -> None:
    fields = {} if case.account_automount is None else {"automountServiceAccountToken": case.account_automount}
    await _account(api, **fields)
    body = make_pod("p").obj()
    body["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    if case.pod_automount is not None:
        body["spec"]["automountServiceAccountToken"] = case.pod_automount
    pod = await call(api, "POST", f"{NS}/pods", body, expect=201)
    assert pod["spec"]["serviceAccountName"] == pod["spec"]["serviceAccount"] == "default"
    volumes = [v for v in pod["spec"].get("volumes", []) if v["name"].startswith("kube-api-access-")]
    if not case.mounted:
        assert volumes == [] and all(m == [] for m in _mounts(pod))
        return
    assert len(volumes) == 1 and len(volumes[0]["name"]) == len("kube-api-access-") + 5
    assert volumes[0]["projected"] == {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}
    expected = {"name": volumes[0]["name"], "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    assert _mounts(pod) == [[expected], [expected]]


async def test_admission_respects_an_existing_mount(api: Client) -> None:
    await _account(api)
    body = make_pod("p").obj()
    body["spec"]["volumes"] = [{"name": "mine", "emptyDir": {}}]
    body["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "mine", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
    pod = await call(api, "POST", f"{NS}/pods", body, expect=201)
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["mine"]


async def test_admission_copies_the_accounts_image_pull_secrets(api: Client) -> None:
    await _account(api, imagePullSecrets=[{"name": "registry"}])
    pod = await call(api, "POST", f"{NS}/pods", make_pod("p").obj(), expect=201)
    assert pod["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    body = make_pod("q").obj()
    body["spec"]["imagePullSecrets"] = [{"name": "mine"}]
    pod = await call(api, "POST", f"{NS}/pods", body, expect=201)
    assert pod["spec"]["imagePullSecrets"] == [{"name": "mine"}]


async def test_admission_refuses_a_missing_account(api: Client) -> None:
    await _account(api)
    body = make_pod("p").obj()
    body["spec"]["serviceAccountName"] = "ghost"
    out = await call(api, "POST", f"{NS}/pods", body, expect=403)
    assert out["message"] == ('pods "p" is forbidden: error looking up service account default/ghost: '
                              'serviceaccount "ghost" not found')


async def test_discovery_lists_service_accounts_and_the_authentication_group(api: Client) -> None:
    core = await call(api, "GET", "/api/v1", expect=200)
    token = next(r for r in core["resources"] if r["name"] == "serviceaccounts/token")
    assert (token["group"], token["version"], token["kind"], token["verbs"]) == (
        "authentication.k8s.io", "v1", "TokenRequest", ["create"])
    group = await call(api, "GET", "/apis/authentication.k8s.io/v1", expect=200)
    assert [(r["name"], r["verbs"]) for r in group["resources"]] == [("selfsubjectreviews", ["create"])]


@dataclass
class _Recording:
    """An authorizer that denies pods and remembers what it was asked: the seam RBAC plugs into."""

    seen: list[RequestAttributes]

    def authorize(self, attributes: RequestAttributes) -> tuple[Decision, str]:
        self.seen.append(attributes)
        if attributes.resource == "pods":
            return Decision.DENY, "pods are off limits"
        return Decision.ALLOW, ""


async def test_authorizer_sees_the_user_and_request_attributes(tmp_path: Path) -> None:
    recording = _Recording([])
    async with _server(tmp_path, AuthConfig(authorizer=recording)) as api:
        out = await call(api, "GET", f"{NS}/pods/web", expect=403)
        assert out["message"] == ('pods "web" is forbidden: User "kubernetes-admin" cannot get resource "pods" in '
                                  'API group "" in the namespace "default": pods are off limits')
        assert out["details"] == {"name": "web", "kind": "pods"}
        await call(api, "GET", f"{NS}/events", expect=200)
        assert (await api.get("/healthz")).status == 200  # public: neither authenticated nor authorized
    asked = [(a.user.name, a.verb, a.namespace, a.resource, a.name) for a in recording.seen]
    assert asked == [("kubernetes-admin", "get", "default", "pods", "web"),
                     ("kubernetes-admin", "list", "default", "events", "")]


async def test_anonymous_when_enabled(tmp_path: Path) -> None:
    async with _server(tmp_path, AuthConfig(anonymous=True)) as api:
        review = await call(api, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {}, token=None,
                            expect=201)
        assert review["status"]["userInfo"] == {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
        await call(api, "GET", f"{NS}/pods", token="wrong", expect=401)


async def test_pod_create_waits_briefly_for_a_new_namespaces_default_account(tmp_path: Path) -> None:
    """As upstream's admission retries its lookup of `default`: a pod created right after its namespace waits
    (up to a second) for the serviceaccount controller instead of failing; with no controller it is refused."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    clock = FakeClock()
    server = ApiServer(store, clock, frozenset({ADMIN}),
                       auth=AuthConfig(service_accounts=ServiceAccountConfig(KEY, (KEY.public_key(),))))
    await server.start()
    client = InProcessClient(server)
    try:
        for ns in ("fresh", "lonely"):
            await client.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        pod = make_pod("p").obj()
        pod["metadata"].pop("namespace", None)
        creating = asyncio.create_task(client.create("/api/v1/namespaces/fresh/pods", pod))
        await clock.advance(0)  # the create reaches its wait
        await clock.advance(0.5)
        assert not creating.done()
        await client.create("/api/v1/namespaces/fresh/serviceaccounts", {"metadata": {"name": "default"}})
        await clock.advance(0.1)
        assert (await creating)["spec"]["serviceAccountName"] == "default"

        refused = asyncio.create_task(client.create("/api/v1/namespaces/lonely/pods", pod))
        await clock.advance(0)
        await clock.advance(DEFAULT_WAIT_POLLS * POLL + POLL / 2)
        with pytest.raises(ApiError) as err:
            await refused
        assert err.value.code == 403 and 'serviceaccount "default" not found' in err.value.message
    finally:
        await server.stop()
        await store.close()
