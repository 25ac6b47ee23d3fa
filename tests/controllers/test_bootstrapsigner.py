"""The bootstrap signer and its detached JWS, ported from upstream's bootstrapsigner_test.go, util_test.go
(TestValidateSecretForSigning) and cluster-bootstrap's jws_test.go, case names kept; then the controller
against a real API server: it signs cluster-info for each token, re-signs when the kubeconfig changes and
drops a deleted token's signature."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.cli.join import token_secret
from kubelite.clock import parse_rfc3339, rfc3339
from kubelite.controllers.bootstrapsigner import (
    BootstrapSigner,
    compute_detached_signature,
    detached_token_is_valid,
    signed,
    validate_secret_for_signing,
)
from tests.controllers.harness import running

Obj = dict[str, Any]
NOW = parse_rfc3339("2026-11-27T09:00:00Z")

# jws_test.go
CONTENT = "Hello from the other side. I must have called a thousand times."
SECRET, ID = "my voice is my passcode", "joshua"
JWS_CASES = [
    ("TestComputeDetachedSignature", CONTENT, SECRET,
     "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8"),
    ("TestComputeDetachedSignature null content", "", SECRET,
     "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk"),
    ("TestComputeDetachedSignature no secret", CONTENT, "",
     "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8"),
]


@pytest.mark.parametrize("name,content,secret,want", JWS_CASES, ids=[c[0] for c in JWS_CASES])
def test_compute_detached_signature(name: str, content: str, secret: str, want: str) -> None:
    assert compute_detached_signature(content, ID, secret) == want


def test_detached_token_is_valid() -> None:
    sig = JWS_CASES[0][3]
    assert detached_token_is_valid(sig, CONTENT, ID, SECRET)
    assert not detached_token_is_valid(sig + "foo", CONTENT, ID, SECRET)
    assert not detached_token_is_valid(sig, CONTENT + ".", ID, SECRET)


# util_test.go
GIVEN_ID, GIVEN_ID2, GIVEN_SECRET = "abc123", "def456", "tokenSecret"


def token(token_id: str = GIVEN_ID, secret: str = GIVEN_SECRET, ok_to_sign: str = "true", expiration: str = "",
          name: str = "bootstrap-token-" + GIVEN_ID) -> Obj:
    data = {"token-id": token_id, "token-secret": secret, "usage-bootstrap-signing": ok_to_sign,
            "expiration": expiration}
    return {"metadata": {"name": name, "namespace": "kube-system"}, "type": "bootstrap.kubernetes.io/token",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


VALIDATE_CASES = [
    ("Signing token with no exp", token(), True),
    ("Signing token with valid exp", token(expiration=rfc3339(NOW + 3600)), True),
    ("Expired signing token", token(expiration=rfc3339(NOW - 3600)), False),
    ("Signing token with bad exp", token(expiration="garbage"), False),
    ("Signing token without signing bit", token(ok_to_sign="", expiration="garbage"), False),
    ("Signing token with bad signing bit", token(ok_to_sign=""), False),
    ("Signing token with no ID", token(token_id=""), False),
    ("Signing token with no secret", token(secret=""), False),
    ("TestBadSecretName", token(name=GIVEN_ID), False),
    ("TestMismatchSecretName", token(name="bootstrap-token-" + GIVEN_ID2), False),
]


@pytest.mark.parametrize("name,secret,valid", VALIDATE_CASES, ids=[c[0] for c in VALIDATE_CASES])
def test_validate_secret_for_signing(name: str, secret: Obj, valid: bool) -> None:
    assert validate_secret_for_signing(secret, NOW) == ((GIVEN_ID, GIVEN_SECRET) if valid else None)


# bootstrapsigner_test.go: signConfigMap's decision (None: no update)
SIGNATURE = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiYzEyMyJ9..QSxpUG7Q542CirTI2ECPSZjvBOJURUW5a7XqFpNI958"


def config_map(token_id: str = "", signature: str = "") -> Obj:
    data = {"kubeconfig": "payload"}
    if token_id:
        data["jws-kubeconfig-" + token_id] = signature
    return {"metadata": {"namespace": "kube-public", "name": "cluster-info", "resourceVersion": "1"}, "data": data}


SIGN_CASES = [
    ("TestSimpleSign", config_map(), {GIVEN_ID: GIVEN_SECRET}, config_map(GIVEN_ID, SIGNATURE)),
    ("TestNoSignNeeded", config_map(GIVEN_ID, SIGNATURE), {GIVEN_ID: GIVEN_SECRET}, None),
    ("TestUpdateSignature", config_map(GIVEN_ID, "old signature"), {GIVEN_ID: GIVEN_SECRET},
     config_map(GIVEN_ID, SIGNATURE)),
    ("TestRemoveSignature", config_map(GIVEN_ID, "old signature"), {}, config_map()),
    ("no kubeconfig key: nothing to sign", {"metadata": {"name": "cluster-info"}, "data": {}},
     {GIVEN_ID: GIVEN_SECRET}, None),
]


@pytest.mark.parametrize("name,current,tokens,want", SIGN_CASES, ids=[c[0] for c in SIGN_CASES])
def test_sign_config_map(name: str, current: Obj, tokens: dict[str, str], want: Obj | None) -> None:
    assert signed(current, tokens) == want


CM_PATH = "/api/v1/namespaces/kube-public/configmaps"
SECRETS = "/api/v1/namespaces/kube-system/secrets"


async def test_no_config_map_then_signed_resigned_and_unsigned(tmp_path: Path) -> None:
    """TestNoConfigMap (no ConfigMap: nothing written), then the controller's whole loop on a real server."""
    async with running(tmp_path, BootstrapSigner) as h:
        await h.client.create(SECRETS, token_secret("abcdef.0123456789abcdef", 0, h.clock.now(), "t"))
        await h.client.create(SECRETS, token_secret("zyxwvu.0123456789abcdef", 0, h.clock.now(), "u"))
        await h.clock.advance(0.1)
        await asyncio.sleep(0.1)
        with pytest.raises(ApiError) as missing:  # TestNoConfigMap: the signer never creates cluster-info
            await h.client.get(f"{CM_PATH}/cluster-info")
        assert missing.value.code == 404
        await h.client.create(CM_PATH, {"metadata": {"name": "cluster-info"}, "data": {"kubeconfig": "one"}})

        async def data() -> dict[str, str]:
            return dict((await h.client.get(f"{CM_PATH}/cluster-info")).get("data") or {})

        async def both_signed() -> bool:
            d = await data()
            return all(detached_token_is_valid(d.get(f"jws-kubeconfig-{i}", ""), d["kubeconfig"], i,
                                               "0123456789abcdef") for i in ("abcdef", "zyxwvu"))

        await h.until(both_signed, "both tokens' signatures")
        cm = await h.client.get(f"{CM_PATH}/cluster-info")
        cm["data"]["kubeconfig"] = "two"
        await h.client.request("PUT", f"{CM_PATH}/cluster-info", cm)
        await h.until(both_signed, "signatures over the new kubeconfig")
        await h.client.delete(f"{SECRETS}/bootstrap-token-zyxwvu")

        async def only_first() -> bool:
            return sorted(k for k in await data() if k.startswith("jws-")) == ["jws-kubeconfig-abcdef"]

        await h.until(only_first, "the deleted token's signature to go")
