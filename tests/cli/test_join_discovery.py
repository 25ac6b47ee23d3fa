"""`kubelite join`'s discovery of the cluster CA, ported from kubeadm's TestRetrieveValidatedConfigInfo
(cmd/kubeadm/app/discovery/token/token_test.go), case names kept, on a FakeClock. Not ported: "valid: retrieve a
valid kubeconfig without CA verification" (kubelite join always requires --ca-cert-hash). Added: a server whose
answer over verified TLS differs from the unverified one is refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver import pki
from kubelite.cli.join import JoinError, cluster_info_objects, retrieve_validated_ca
from kubelite.clock import FakeClock
from kubelite.controllers.bootstrapsigner import compute_detached_signature

Obj = dict[str, Any]
TOKEN_ID, TOKEN_SECRET = "123456", "abcdef1234567890"


class FakeServer:
    """cluster-info as served: `data` (None: no such ConfigMap); `secure_data` when the verified read differs."""

    def __init__(self, data: dict[str, str] | None, secure_data: dict[str, str] | None = None) -> None:
        self.data = data
        self.secure_data = secure_data
        self.reads: list[bytes | None] = []

    async def __call__(self, ca_pem: bytes | None) -> Obj:
        self.reads.append(ca_pem)
        data = self.secure_data if ca_pem is not None and self.secure_data is not None else self.data
        if data is None:
            raise ApiError(404, "NotFound", 'configmaps "cluster-info" not found')
        return {"metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": dict(data)}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, str]:
    ca_crt, _, _ = pki.ensure_pki(tmp_path_factory.mktemp("pki"), ["127.0.0.1"])
    return ca_crt.read_bytes(), pki.ca_cert_hash(ca_crt.read_bytes())


def kubeconfig(ca_pem: bytes) -> str:
    return str(cluster_info_objects("https://127.0.0.1:6443", ca_pem)[0][1]["data"]["kubeconfig"])


def signed(content: str, token_id: str = TOKEN_ID, secret: str = TOKEN_SECRET) -> dict[str, str]:
    return {"kubeconfig": content, f"jws-kubeconfig-{token_id}": compute_detached_signature(content, token_id, secret)}


async def discover(server: FakeServer, token: str, hashes: tuple[str, ...], clock: FakeClock,
                   sign_after: float | None = None, signature: dict[str, str] | None = None) -> bytes:
    """Run discovery, driving fake time; after `sign_after` seconds the server's data becomes `signature`."""
    task = asyncio.create_task(retrieve_validated_ca(server, token, hashes, clock, timeout=5.0))
    elapsed = 0.0
    while not task.done():
        await clock.advance(0.1)
        await asyncio.sleep(0)
        elapsed += 0.1
        if sign_after is not None and elapsed >= sign_after and signature is not None:
            server.data = signature
    return await task


async def test_valid_retrieve_a_valid_kubeconfig_with_ca_verification_and_delayed_jws_signature(
        ca: tuple[bytes, str]) -> None:
    content = kubeconfig(ca[0])
    server = FakeServer({"kubeconfig": content})
    assert await discover(server, f"{TOKEN_ID}.{TOKEN_SECRET}", (ca[1],), FakeClock(), sign_after=0.6,
                          signature=signed(content)) == ca[0]
    assert server.reads[0] is None and server.reads[-1] == ca[0]  # unverified first, then verified by the CA


async def test_valid_retrieve_a_valid_kubeconfig_with_ca_verification(ca: tuple[bytes, str]) -> None:
    server = FakeServer(signed(kubeconfig(ca[0])))
    assert await discover(server, f"{TOKEN_ID}.{TOKEN_SECRET}", (ca[1],), FakeClock()) == ca[0]
    assert server.reads == [None, ca[0]]


INVALID = [  # (name, server data given the valid kubeconfig, token, hashes or None for the right one, message)
    ("invalid: token format is invalid", lambda c: signed(c, "foo", "bar"), "foo.bar", None,
     "was not of the form"),
    ("invalid: missing cluster-info ConfigMap", lambda c: None, f"{TOKEN_ID}.{TOKEN_SECRET}", None,
     "failed to request the cluster-info ConfigMap"),
    ("invalid: wrong JWS signature", lambda c: {"kubeconfig": "foo", f"jws-kubeconfig-{TOKEN_ID}": "bar"},
     f"{TOKEN_ID}.{TOKEN_SECRET}", None, "failed to verify JWS signature of received cluster info object"),
    ("invalid: signed with another token's secret", lambda c: signed(c, secret="0000000000000000"),
     f"{TOKEN_ID}.{TOKEN_SECRET}", None, "failed to verify JWS signature of received cluster info object"),
    ("invalid: missing key for JWSSignatureKeyPrefix", lambda c: {"kubeconfig": "foo"}, f"{TOKEN_ID}.{TOKEN_SECRET}",
     None, f"could not find a JWS signature in the cluster-info ConfigMap for token ID '{TOKEN_ID}'"),
    ("invalid: wrong CA cert hash", signed, f"{TOKEN_ID}.{TOKEN_SECRET}", ("foo",),
     "cluster CA found in cluster-info ConfigMap is invalid"),
]


@pytest.mark.parametrize("name,data,token,hashes,message", INVALID, ids=[c[0] for c in INVALID])
async def test_retrieve_validated_config_info_refuses(ca: tuple[bytes, str], name: str, data: Any, token: str,
                                                      hashes: tuple[str, ...] | None, message: str) -> None:
    server = FakeServer(data(kubeconfig(ca[0])))
    with pytest.raises(JoinError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await discover(server, token, hashes or (ca[1],), FakeClock())
    assert all(read is None for read in server.reads)  # never trusted: no verified read


async def test_second_kubeconfig_over_verified_tls_must_match_the_first(ca: tuple[bytes, str]) -> None:
    content = kubeconfig(ca[0])
    server = FakeServer(signed(content), secure_data=signed(content.replace("127.0.0.1", "10.9.9.9")))
    with pytest.raises(JoinError, match="was different from the first"):
        await discover(server, f"{TOKEN_ID}.{TOKEN_SECRET}", (ca[1],), FakeClock())
