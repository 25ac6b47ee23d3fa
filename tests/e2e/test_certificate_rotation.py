"""Client certificate rotation of a node agent against a real server over TLS: a node certificate living five
seconds is renewed through a CSR the csrapproving controller approves as a self-renewal (selfnodeclient) and
csrsigning signs; the kubeconfig is rewritten (0600) and the client, once the old certificate has expired, still
gets in on a fresh connection, which the old certificate no longer does. Then the deadline's jitter (70-90% of the
lifetime, as kubelet's), a failing rotation that keeps retrying on a FakeClock, the agent's exit once it has had
no valid certificate for five minutes while the server answers (kubelet's UpdateTransport), and which kubeconfig
a restarted `kubelite join` reuses (isClientConfigStillValid)."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubelite.agent.certificates import (
    EXIT_AFTER,
    EXIT_CHECK,
    CertificateManager,
    kubeconfig_certificate,
    rotation_deadline,
    with_certificate_rotation,
)
from kubelite.api.errors import ApiError
from kubelite.apiserver import pki
from kubelite.cli.join import still_valid
from kubelite.client.http import ApiClient
from kubelite.clock import FakeClock
from tests.conftest import ServerProcess, start_server

LIFETIME = 5.0


def short_lived_node_certificate(pki_dir: Path, node: str, seconds: float) -> tuple[bytes, bytes]:
    ca = x509.load_pem_x509_certificate((pki_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki_dir / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(seconds=1 + max(0.0, -seconds)))
            .not_valid_after(now + dt.timedelta(seconds=seconds))
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = start_server(tmp_path / "data", tmp_path / "home", extra=["--disable", "scheduler"])
    try:
        yield srv
    finally:
        srv.stop()


@pytest.mark.e2e
async def test_short_lived_certificate_is_rotated_and_used(server: ServerProcess, tmp_path: Path) -> None:
    pki_dir = server.data_dir / "pki"
    old = short_lived_node_certificate(pki_dir, "rot", LIFETIME)
    kubeconfig = tmp_path / "node.kubeconfig"
    pki.write_kubeconfig(kubeconfig, f"https://127.0.0.1:{server.port}", None, pki_dir / "ca.crt", old)
    client = ApiClient.from_kubeconfig(kubeconfig)
    clock = FakeClock(time.time())
    manager = CertificateManager(kubeconfig, client, clock, random.Random(0))
    run = asyncio.create_task(manager.run())
    try:
        await client.get("/api/v1/nodes")  # the old certificate gets in while valid
        for _ in range(400):  # fake time to the rotation deadline and through the CSR polls; real time for the API
            if manager.rotations:
                break
            await clock.advance(0.5)
            await asyncio.sleep(0.02)
        assert manager.rotations == 1
        new = kubeconfig_certificate(kubeconfig)
        assert new is not None and new[0] != old[0] and new[1] != old[1]
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
        cert = x509.load_pem_x509_certificate(new[0])
        assert cert.subject.rfc4514_string() == "CN=system:node:rot,O=system:nodes"
        csrs = (await ApiClient.from_kubeconfig(server.kubeconfig).get(
            "/apis/certificates.k8s.io/v1/certificatesigningrequests"))["items"]
        assert [(c["spec"]["username"], [x["reason"] for x in c["status"]["conditions"]]) for c in csrs] == \
            [("system:node:rot", ["AutoApproved"])]

        expired = x509.load_pem_x509_certificate(old[0]).not_valid_after_utc.timestamp()
        await asyncio.sleep(max(0.0, expired - time.time() + 1.5))
        await client.get("/api/v1/nodes")  # a fresh connection (rotation closed the old ones) with the new certificate
        stale = ApiClient(client.server, None, (pki_dir / "ca.crt").read_bytes(), client_cert=old)
        try:  # the server answers an expired certificate, as kube-apiserver: 401, not a refused handshake
            with pytest.raises(ApiError) as refused:
                await stale.get("/api/v1/nodes")
            assert (refused.value.code, refused.value.reason) == (401, "Unauthorized")
        finally:
            await stale.close()
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await client.close()


class Cert:
    """Only what rotation_deadline reads."""

    not_valid_before_utc = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    not_valid_after_utc = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=1000)


class Fixed(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize("draw,fraction", [(0.0, 0.7), (0.5, 0.8), (1.0, 0.9)],
                         ids=["earliest: 70% of the lifetime", "middle: 80%", "latest: 90%"])
def test_rotation_deadline_jitter(draw: float, fraction: float) -> None:
    start = Cert.not_valid_before_utc.timestamp()
    assert rotation_deadline(Cert(), Fixed(draw)) == pytest.approx(start + 1000 * fraction)  # type: ignore[arg-type]


class RefusingClient:
    def __init__(self) -> None:
        self.attempts = 0

    async def create(self, path: str, obj: Any) -> Any:
        self.attempts += 1
        raise ApiError(503, "ServiceUnavailable", "the server is unavailable")

    def use_client_certificate(self, cert: bytes, key: bytes) -> None:
        raise AssertionError("nothing was issued")

    async def close_connections(self) -> None:
        raise AssertionError("nothing was issued")


async def test_failed_rotation_is_retried_and_never_ends_the_loop(tmp_path: Path) -> None:
    pki.ensure_pki(tmp_path / "pki", ["127.0.0.1"])
    cert, key = short_lived_node_certificate(tmp_path / "pki", "n", 100)
    kubeconfig = tmp_path / "kubeconfig"
    pki.write_kubeconfig(kubeconfig, "https://127.0.0.1:1", None, tmp_path / "pki" / "ca.crt", (cert, key))
    client = RefusingClient()
    clock = FakeClock(time.time())
    run = asyncio.create_task(CertificateManager(kubeconfig, client, clock).run())  # type: ignore[arg-type]
    for _ in range(40):
        await clock.advance(10)
        await asyncio.sleep(0)
    assert not run.done() and client.attempts >= 4
    assert kubeconfig_certificate(kubeconfig) == (cert, key)
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)


class AnsweringClient(RefusingClient):
    """A server that refuses each certificate request with `code`: 401 for an expired certificate, 503 when
    a proxy or load balancer answers for an unreachable one."""

    def __init__(self, code: int) -> None:
        super().__init__()
        self.code = code

    async def create(self, path: str, obj: Any) -> Any:
        self.attempts += 1
        raise ApiError(self.code, "Unauthorized" if self.code == 401 else "ServiceUnavailable", "refused")


@dataclass(frozen=True)
class ExpiryCase:
    name: str
    lifetime: float  # seconds the certificate has left at the start
    code: int  # what the server answers each request
    exits_after: float | None  # fake seconds until `fatal` is called; None: never within the run


# kubelet's UpdateTransport (exitAfter 5 min) with client-go's updateServerError deciding "the server is responsive"
EXPIRY_CASES = [
    ExpiryCase("expired and the server answers 401: exit 5 minutes after start", -10, 401, EXIT_AFTER),
    ExpiryCase("expires later, server answers 401: exit 5 minutes after expiry", 100, 401, 100 + EXIT_AFTER),
    ExpiryCase("expired but the server is unreachable: keep trying", -10, 503, None),
    ExpiryCase("forbidden counts as a responsive server too", -10, 403, EXIT_AFTER),
]


class Exited(Exception):
    pass


@pytest.mark.parametrize("case", EXPIRY_CASES, ids=lambda c: c.name)
async def test_agent_exits_without_a_valid_certificate(tmp_path: Path, case: ExpiryCase) -> None:
    pki.ensure_pki(tmp_path / "pki", ["127.0.0.1"])
    kubeconfig = tmp_path / "kubeconfig"
    # A certificate's notAfter is whole seconds (truncated): the fake clock starts on a whole second taken before
    # the certificate is made, so its expiry is never before start + lifetime.
    start = float(int(time.time()))
    pki.write_kubeconfig(kubeconfig, "https://127.0.0.1:1", None, tmp_path / "pki" / "ca.crt",
                         short_lived_node_certificate(tmp_path / "pki", "n", case.lifetime))
    clock = FakeClock(start)
    exits: list[float] = []

    def fatal(code: int) -> NoReturn:
        exits.append(clock.now() - start)
        raise Exited(code)

    agent = asyncio.Event()
    client = AnsweringClient(case.code)
    run = asyncio.create_task(with_certificate_rotation(
        kubeconfig, client, clock, agent.wait(), fatal))  # type: ignore[arg-type]
    for _ in range(200):  # 2,000 fake seconds in 10 s steps
        await clock.advance(10)
        await asyncio.sleep(0)
    if case.exits_after is None:
        assert not exits and not run.done() and client.attempts > 10
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
    else:
        # checked before each retry, at most EXIT_CHECK apart while the certificate is not valid (and the
        # test's clock moves in 10 s steps)
        assert len(exits) == 1 and case.exits_after <= exits[0] <= case.exits_after + EXIT_CHECK + 10


STILL_VALID_CASES = {  # bootstrap.go isClientConfigStillValid
    "no kubeconfig yet": (None, False),
    "a kubeconfig without a client certificate": ("token", False),
    "an unreadable kubeconfig": ("garbage", False),
    "an expired certificate": (-10.0, False),
    "a key that is not the certificate's": ("mismatched", False),
    "a valid certificate": (100.0, True),
}


@pytest.mark.parametrize(("content", "valid"), STILL_VALID_CASES.values(), ids=STILL_VALID_CASES.keys())
def test_kubeconfig_still_valid(tmp_path: Path, content: float | str | None, valid: bool) -> None:
    pki.ensure_pki(tmp_path / "pki", ["127.0.0.1"])
    kubeconfig = tmp_path / "kubeconfig"
    if content == "token":
        pki.write_kubeconfig(kubeconfig, "https://127.0.0.1:1", "t", tmp_path / "pki" / "ca.crt")
    elif content == "garbage":
        kubeconfig.write_text("users: [{user: {client-certificate-data: not-base64!, client-key-data: x}}]")
    elif content == "mismatched":
        cert, _ = short_lived_node_certificate(tmp_path / "pki", "n", 100)
        _, other_key = short_lived_node_certificate(tmp_path / "pki", "n", 100)
        pki.write_kubeconfig(kubeconfig, "https://127.0.0.1:1", None, tmp_path / "pki" / "ca.crt", (cert, other_key))
    elif isinstance(content, float):
        pki.write_kubeconfig(kubeconfig, "https://127.0.0.1:1", None, tmp_path / "pki" / "ca.crt",
                             short_lived_node_certificate(tmp_path / "pki", "n", content))
    assert still_valid(kubeconfig, time.time()) is valid
