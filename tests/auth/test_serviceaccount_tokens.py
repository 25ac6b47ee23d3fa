"""Service-account JWTs: the claims issued and every reason a token stops authenticating (pkg/serviceaccount).

Table cases after upstream's jwt_test.go / claims_test.go: what a TokenRequest puts in the token,
and which changes of time, audience, signature, account or bound pod make it fail.
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kubelite.apiserver.auth import jwt
from kubelite.apiserver.auth.authenticator import InvalidCredential
from kubelite.apiserver.auth.serviceaccount import (
    DEFAULT_ISSUER,
    EXPIRATION_EXTENSION,
    Binding,
    ServiceAccountTokens,
)
from kubelite.clock import FakeClock, rfc3339

Obj = dict[str, Any]
NOW = 1_800_000_000.0


@dataclass
class Objects:
    """A Lookup over a dict, for the authenticator's checks of live objects."""

    items: dict[tuple[str, str, str], Obj] = field(default_factory=dict)

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self.items.get((resource, namespace, name))

    def list(self, resource: str, namespace: str = "") -> list[Obj]:
        return [o for (r, ns, _), o in self.items.items() if r == resource and (not namespace or ns == namespace)]

    def put(self, resource: str, obj: Obj) -> Obj:
        self.items[(resource, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = obj
        return obj


def _obj(name: str, uid: str, namespace: str = "ns", **extra: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid, **extra}}


EC_KEY = ec.generate_private_key(ec.SECP256R1())
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = ec.generate_private_key(ec.SECP256R1())


def _tokens(objects: Objects, clock: FakeClock, key: jwt.PrivateKey = EC_KEY,
            audiences: tuple[str, ...] = (DEFAULT_ISSUER,)) -> ServiceAccountTokens:
    return ServiceAccountTokens(DEFAULT_ISSUER, key, [key.public_key()], audiences, objects, clock)


@pytest.fixture
def world() -> tuple[Objects, FakeClock]:
    objects = Objects()
    objects.put("serviceaccounts", _obj("default", "sa-uid"))
    objects.put("pods", {**_obj("web", "pod-uid"), "spec": {"serviceAccountName": "default", "nodeName": "n1"}})
    objects.put("nodes", _obj("n1", "node-uid", namespace=""))
    return objects, FakeClock(NOW)


def _issue(objects: Objects, clock: FakeClock, seconds: int = 3600, pod: bool = False,
           audiences: tuple[str, ...] = (DEFAULT_ISSUER,), key: jwt.PrivateKey = EC_KEY) -> tuple[str, int]:
    sa = objects.get("serviceaccounts", "ns", "default")
    assert sa is not None
    binding = Binding(pod=objects.get("pods", "ns", "web"), node=objects.get("nodes", "", "n1")) if pod else Binding()
    issued = _tokens(objects, clock, key).issue(sa, list(audiences), seconds, binding)
    return issued.token, issued.expiration


def _verified(token: str) -> dict[str, Any]:
    parsed = jwt.parse(token)
    assert parsed is not None
    return jwt.verify(parsed, [EC_KEY.public_key()])


def test_claims_of_a_pod_bound_token(world: tuple[Objects, FakeClock]) -> None:
    objects, clock = world
    token, _ = _issue(objects, clock, seconds=1200, pod=True)
    claims = _verified(token)
    jti = claims.pop("jti")
    assert isinstance(jti, str) and len(jti) == 36
    assert claims == {
        "aud": [DEFAULT_ISSUER], "exp": int(NOW) + 1200, "iat": int(NOW), "nbf": int(NOW), "iss": DEFAULT_ISSUER,
        "sub": "system:serviceaccount:ns:default",
        "kubernetes.io": {"namespace": "ns", "serviceaccount": {"name": "default", "uid": "sa-uid"},
                          "pod": {"name": "web", "uid": "pod-uid"}, "node": {"name": "n1", "uid": "node-uid"}},
    }


@dataclass(frozen=True)
class ExpiryCase:
    name: str
    seconds: int
    pod: bool
    audiences: tuple[str, ...]
    exp_after: int
    warnafter: int | None


# token.go: a pod-bound token asking for exactly 3607 s (the projected volume's default) for the API's
# audiences lives a year, with warnafter at the requested expiry; anything else gets what it asked.
EXPIRY_CASES = [
    ExpiryCase("projected volume default is extended to a year", 3607, True, (DEFAULT_ISSUER,), EXPIRATION_EXTENSION,
               3607),
    ExpiryCase("not bound to a pod: not extended", 3607, False, (DEFAULT_ISSUER,), 3607, None),
    ExpiryCase("other duration: not extended", 3600, True, (DEFAULT_ISSUER,), 3600, None),
    ExpiryCase("other audience: not extended", 3607, True, ("vault",), 3607, None),
]


@pytest.mark.parametrize("case", EXPIRY_CASES, ids=lambda c: c.name)
def test_expiration_extension(world: tuple[Objects, FakeClock], case: ExpiryCase) -> None:
    objects, clock = world
    token, expiration = _issue(objects, clock, case.seconds, case.pod, case.audiences)
    claims = _verified(token)
    assert claims["exp"] == expiration == int(NOW) + case.exp_after
    warn = claims["kubernetes.io"].get("warnafter")
    assert warn == (None if case.warnafter is None else int(NOW) + case.warnafter)


Change = Callable[[Objects, FakeClock], None]


def _delete(resource: str, namespace: str, name: str) -> Change:
    def change(objects: Objects, clock: FakeClock) -> None:
        del objects.items[(resource, namespace, name)]
    return change


def _recreate(resource: str, name: str) -> Change:
    def change(objects: Objects, clock: FakeClock) -> None:
        obj = copy.deepcopy(objects.items[(resource, "ns", name)])
        obj["metadata"]["uid"] = "new-uid"
        objects.put(resource, obj)
    return change


def _deleting(seconds_ago: float) -> Change:
    def change(objects: Objects, clock: FakeClock) -> None:
        objects.items[("pods", "ns", "web")]["metadata"]["deletionTimestamp"] = rfc3339(clock.now() - seconds_ago)
    return change


def _nothing(objects: Objects, clock: FakeClock) -> None:
    return None


@dataclass(frozen=True)
class ValidationCase:
    name: str
    change: Change
    error: str | None  # None: authenticates
    pod: bool = True
    audiences: tuple[str, ...] = (DEFAULT_ISSUER,)
    key: jwt.PrivateKey = EC_KEY
    at: float = 0.0  # when the token is presented, seconds after it was issued


VALIDATION_CASES = [
    ValidationCase("valid pod-bound token", _nothing, None),
    ValidationCase("valid unbound token", _nothing, None, pod=False),
    ValidationCase("RS256 signed", _nothing, None, key=RSA_KEY),
    ValidationCase("expired within the leeway still valid", _nothing, None, at=3600 + 59),
    ValidationCase("expired", _nothing, "service account token has expired", at=3600 + 61),
    ValidationCase("not valid yet", _nothing, "service account token is not valid yet", at=-120),
    ValidationCase("audience not the API's", _nothing, "token audiences ['vault'] is invalid for the target "
                                                       "audiences", audiences=("vault",)),
    ValidationCase("service account deleted", _delete("serviceaccounts", "ns", "default"),
                   "service account ns/default has been deleted"),
    ValidationCase("service account recreated", _recreate("serviceaccounts", "default"),
                   "service account UID (new-uid) does not match claim (sa-uid)"),
    ValidationCase("bound pod deleted", _delete("pods", "ns", "web"), "pod ns/web has been deleted"),
    ValidationCase("bound pod recreated with the same name", _recreate("pods", "web"),
                   "pod UID (new-uid) does not match claim (pod-uid)"),
    ValidationCase("bound pod terminating for under a minute", _deleting(30), None),
    ValidationCase("bound pod terminating for over a minute", _deleting(90), "pod ns/web has been deleted"),
    ValidationCase("unbound token survives a pod's deletion", _delete("pods", "ns", "web"), None, pod=False),
]


@pytest.mark.parametrize("case", VALIDATION_CASES, ids=lambda c: c.name)
def test_token_validation(world: tuple[Objects, FakeClock], case: ValidationCase) -> None:
    objects, clock = world
    token, _ = _issue(objects, clock, 3600, case.pod, case.audiences, case.key)
    case.change(objects, clock)
    authenticator = ServiceAccountTokens(DEFAULT_ISSUER, None, [EC_KEY.public_key(), RSA_KEY.public_key()],
                                         (DEFAULT_ISSUER,), objects, FakeClock(NOW + case.at))
    if case.error is not None:
        with pytest.raises(InvalidCredential, match=re.escape(case.error)):
            authenticator.authenticate_token(token)
        return
    user = authenticator.authenticate_token(token)
    assert user is not None
    assert (user.name, user.uid, user.groups) == ("system:serviceaccount:ns:default", "sa-uid",
                                                  ("system:serviceaccounts", "system:serviceaccounts:ns"))
    assert user.extra["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")
    if case.pod:
        assert user.extra["authentication.kubernetes.io/pod-name"] == ("web",)
        assert user.extra["authentication.kubernetes.io/pod-uid"] == ("pod-uid",)
        assert user.extra["authentication.kubernetes.io/node-name"] == ("n1",)


@dataclass(frozen=True)
class ForeignCase:
    name: str
    token: Callable[[Objects, FakeClock], str]
    mine: bool  # False: the authenticator answers None (another authenticator's token)
    error: str = ""


def _signed_by_other(objects: Objects, clock: FakeClock) -> str:
    return _issue(objects, clock, key=OTHER_KEY)[0]


def _tampered(objects: Objects, clock: FakeClock) -> str:
    token = _issue(objects, clock)[0]
    head, _, sig = token.split(".")
    parsed = jwt.parse(token)
    assert parsed is not None
    claims = parsed.claims
    claims["sub"] = "system:serviceaccount:ns:admin"
    forged = jwt.sign(claims, OTHER_KEY).split(".")[1]
    return f"{head}.{forged}.{sig}"


def _other_issuer(objects: Objects, clock: FakeClock) -> str:
    return jwt.sign({"iss": "https://elsewhere", "sub": "x"}, EC_KEY)


FOREIGN_CASES = [
    ForeignCase("not a JWT (a static token)", lambda o, c: "abcdef0123456789", False),
    ForeignCase("three dots but not JSON", lambda o, c: "a.b.c", False),
    ForeignCase("another issuer", _other_issuer, False),
    ForeignCase("our issuer, unknown key", _signed_by_other, True, "invalid signature"),
    ForeignCase("claims changed after signing", _tampered, True, "invalid signature"),
]


@pytest.mark.parametrize("case", FOREIGN_CASES, ids=lambda c: c.name)
def test_tokens_not_ours_or_forged(world: tuple[Objects, FakeClock], case: ForeignCase) -> None:
    objects, clock = world
    authenticator = _tokens(objects, clock)
    token = case.token(objects, clock)
    if not case.mine:
        assert authenticator.authenticate_token(token) is None
        return
    with pytest.raises(InvalidCredential, match=case.error):
        authenticator.authenticate_token(token)


def test_key_id_is_the_hash_of_the_public_key() -> None:
    token = jwt.sign({"iss": DEFAULT_ISSUER}, EC_KEY)
    header = orjson.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header == {"alg": "ES256", "kid": jwt.key_id(EC_KEY.public_key())}
    assert len(header["kid"]) == 43 and "=" not in header["kid"]
