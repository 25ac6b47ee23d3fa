"""The bootstrap token authenticator, as upstream's TestTokenAuthenticator (plugin/pkg/auth/authenticator/token/
bootstrap/bootstrap_test.go), case names kept; and `kubelite token create`'s Secret authenticating its token."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kubelite.apiserver.auth.bootstraptoken import BootstrapTokens, generate
from kubelite.apiserver.auth.user import UserInfo
from kubelite.cli.join import token_secret
from kubelite.clock import FakeClock, parse_rfc3339
from tests.rbac.test_rbac_authorizer import FakeLookup

Obj = dict[str, Any]
NOW = parse_rfc3339("2026-11-24T12:00:00Z")
TOKEN_ID, TOKEN_SECRET = "foobar", "circumnavigation"


def secret(name: str = "bootstrap-token-foobar", type_: str = "bootstrap.kubernetes.io/token",
           deleted: bool = False, **data: str) -> Obj:
    values = {"token-id": TOKEN_ID, "token-secret": TOKEN_SECRET, "usage-bootstrap-authentication": "true",
              **data}
    meta: Obj = {"name": name, "namespace": "kube-system"}
    if deleted:
        meta["deletionTimestamp"] = "2026-11-24T11:00:00Z"
    return {"metadata": meta, "type": type_,
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items() if v != "<absent>"}}


USER = UserInfo("system:bootstrap:foobar", groups=("system:bootstrappers",))
CASES = [  # (name, secrets, token, user)
    ("valid token", [secret()], "foobar.circumnavigation", USER),
    ("valid token with extra group", [secret(**{"auth-extra-groups": "system:bootstrappers:foo"})],
     "foobar.circumnavigation", UserInfo("system:bootstrap:foobar",
                                         groups=("system:bootstrappers", "system:bootstrappers:foo"))),
    ("invalid group", [secret(**{"auth-extra-groups": "foo"})], "foobar.circumnavigation", None),
    ("invalid secret name", [secret(name="bad-name")], "foobar.circumnavigation", None),
    ("no usage", [secret(**{"usage-bootstrap-authentication": "<absent>"})], "foobar.circumnavigation", None),
    ("wrong token", [secret()], "barfoo.circumnavigation", None),
    ("wrong secret", [secret()], "foobar.circumnavigatiom", None),
    ("deleted token", [secret(deleted=True)], "foobar.circumnavigation", None),
    ("expired token", [secret(expiration="2026-11-24T11:59:59Z")], "foobar.circumnavigation", None),
    ("not expired token", [secret(expiration="2026-11-24T12:00:01Z")], "foobar.circumnavigation", USER),
    ("token id does not match the secret's", [secret(**{"token-id": "barfoo"})], "foobar.circumnavigation", None),
    ("wrong type", [secret(type_="Opaque")], "foobar.circumnavigation", None),
    ("not a bootstrap token", [secret()], "some-other-bearer-token", None),
]


@pytest.mark.parametrize("name,objects,token,user", CASES, ids=[c[0] for c in CASES])
def test_token_authenticator(name: str, objects: list[Obj], token: str, user: UserInfo | None) -> None:
    authenticator = BootstrapTokens(FakeLookup({("secrets", "kube-system"): objects}), FakeClock(NOW))
    assert authenticator.authenticate_token(token) == user


async def test_token_create_secret_authenticates_its_token_until_it_expires() -> None:
    token = generate()
    clock = FakeClock(NOW)
    stored = token_secret(token, 3600, NOW, "test")
    authenticator = BootstrapTokens(FakeLookup({("secrets", "kube-system"): [stored]}), clock)
    user = authenticator.authenticate_token(token)
    assert user is not None and user.name == f"system:bootstrap:{token.split('.')[0]}"
    assert user.groups == ("system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token")
    await clock.advance(3601)
    assert authenticator.authenticate_token(token) is None
