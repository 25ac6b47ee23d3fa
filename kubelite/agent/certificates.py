"""The node's client certificate: its request (kubelet's bootstrap and certificate manager, k8s.io/client-go/util/
certificate) and its rotation.

A joined node authenticates with a certificate (`system:node:NAME` in `system:nodes`) the cluster CA signed for
its CertificateSigningRequest. When 70-90% of the certificate's lifetime has passed (kubelet's jitter, so a
fleet of nodes joined together does not renew together) the agent makes a new key and asks for a new
certificate with the current one: the csrapproving controller approves a node's request for its own name
(`selfnodeclient`, bound to system:nodes), csrsigning signs it. The kubeconfig is then rewritten atomically
(a crash leaves the old file or the new, never half of one), the client presents the new certificate from its
next handshake on and closes its connections, as kubelet's closeAllConns, so every request and watch reconnects
under it. A failed attempt is retried with back-off; the loop never ends on an error but one: when the agent has
had no valid certificate for five minutes and the server answers it (a 401, 403 or 404: client-go's
`updateServerError`), it raises `NoValidCertificate` and the agent exits at once, as kubelet's UpdateTransport
(`exitAfter`) — no graceful node shutdown, its containers keep running — so that its supervisor's restart of
`kubelite join` bootstraps a new certificate with the bootstrap token (kubelite/cli/join.py); an unreachable
server only makes it keep trying.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import random
import secrets
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn, Protocol

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubelite.api.certificates import validity_error
from kubelite.api.errors import ApiError
from kubelite.client.interface import Client
from kubelite.clock import Clock

log = logging.getLogger("kubelite.agent")

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
POLL = 0.5
CSR_WAIT = 300.0
RETRY = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)  # back-off between failed rotations, then every 128 s
EXIT_AFTER = 300.0  # kubelet's UpdateTransport exitAfter: how long without a valid certificate before exiting
EXIT_CHECK = 10.0  # how often UpdateTransport looks: the longest retry wait while the certificate is not valid


class CertificateRequestError(Exception):
    """A certificate request that was denied, refused or not answered in time: its message is for the user;
    `refusal` is the server's answer when it refused one."""

    def __init__(self, message: str, refusal: ApiError | None = None) -> None:
        super().__init__(message)
        self.refusal = refusal


class NoValidCertificate(Exception):
    """The client certificate has expired (or is not yet valid) for EXIT_AFTER while the server answers: only a
    new bootstrap can bring the agent back."""


def server_answered(exc: Exception) -> bool:
    """client-go's updateServerError: a 401 (a TLS-terminating proxy's too), 403 or 404 comes from a server
    that is up and refuses the credential; anything else (5xx, unreachable) says nothing about it."""
    refusal = exc.refusal if isinstance(exc, CertificateRequestError) else exc
    return isinstance(refusal, ApiError) and refusal.code in (401, 403, 404)



class RotatingClient(Client, Protocol):
    def use_client_certificate(self, cert: bytes, key: bytes) -> None: ...

    async def close_connections(self) -> None: ...


def node_certificate_request(node_name: str) -> tuple[bytes, bytes]:
    """A new key (PEM) and the CSR (PEM) for `system:node:NAME` in `system:nodes`, as kubelet's bootstrap makes."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                         x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node_name}")])
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return pem_key, csr.public_bytes(serialization.Encoding.PEM)


async def request_client_certificate(client: Client, node_name: str, clock: Clock,
                                     timeout: float = CSR_WAIT) -> tuple[bytes, bytes]:
    """Make a key and a node client CSR through `client`, and wait for its certificate: (certificate PEM, key PEM)."""
    key, csr = node_certificate_request(node_name)
    name = f"node-csr-{secrets.token_hex(8)}"
    try:
        await client.create(CSR_PATH, {
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": base64.b64encode(csr).decode(), "signerName": KUBELET_CLIENT_SIGNER,
                     "usages": ["digital signature", "key encipherment", "client auth"]}})
        deadline = clock.monotonic() + timeout
        while clock.monotonic() < deadline:
            status = (await client.get(f"{CSR_PATH}/{name}")).get("status") or {}
            if any(c.get("type") in ("Denied", "Failed") for c in status.get("conditions") or []):
                raise CertificateRequestError(f"certificate signing request {name} was denied")
            if status.get("certificate"):
                return base64.b64decode(status["certificate"]), key
            await clock.sleep(POLL)
    except ApiError as exc:
        raise CertificateRequestError(f"certificate signing request refused: {exc}", exc) from None
    raise CertificateRequestError(f"timed out waiting for certificate signing request {name} to be approved and "
                                  "signed")


def rotation_deadline(cert: x509.Certificate, rng: random.Random) -> float:
    """nextRotationDeadline: notBefore + 70-90% of the lifetime (jitteryDuration), as epoch seconds."""
    start, end = cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()
    return start + (end - start) * (0.7 + 0.2 * rng.random())


def kubeconfig_certificate(kubeconfig: Path) -> tuple[bytes, bytes] | None:
    """The (certificate, key) PEMs embedded in the kubeconfig's first user, None without a client certificate."""
    config = yaml.safe_load(kubeconfig.read_text())
    user = ((config.get("users") or [{}])[0] or {}).get("user") or {}
    cert, key = user.get("client-certificate-data"), user.get("client-key-data")
    return (base64.b64decode(cert), base64.b64decode(key)) if cert and key else None


def write_kubeconfig_certificate(kubeconfig: Path, cert: bytes, key: bytes) -> None:
    """Replace the kubeconfig's client certificate and key atomically (temp file, fsync, rename), mode 0600."""
    config = yaml.safe_load(kubeconfig.read_text())
    user = config["users"][0].setdefault("user", {})
    user["client-certificate-data"] = base64.b64encode(cert).decode()
    user["client-key-data"] = base64.b64encode(key).decode()
    tmp = kubeconfig.with_name(f".{kubeconfig.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(yaml.safe_dump(config, sort_keys=False))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, kubeconfig)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(kubeconfig.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class CertificateManager:
    """Rotates the client certificate of `kubeconfig` used by `client`, on `clock`."""

    def __init__(self, kubeconfig: Path, client: RotatingClient, clock: Clock,
                 rng: random.Random | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.client = client
        self.clock = clock
        self.rng = rng or random.Random()
        self.rotations = 0

    def current(self) -> x509.Certificate | None:
        pair = kubeconfig_certificate(self.kubeconfig)
        return x509.load_pem_x509_certificate(pair[0]) if pair else None

    async def rotate(self, cert: x509.Certificate) -> None:
        """One renewal: request, write, present."""
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        node_name = str(names[0].value).removeprefix("system:node:")
        new_cert, new_key = await request_client_certificate(self.client, node_name, self.clock)
        write_kubeconfig_certificate(self.kubeconfig, new_cert, new_key)
        self.client.use_client_certificate(new_cert, new_key)
        await self.client.close_connections()
        self.rotations += 1
        log.info("rotated the client certificate of %s (now valid until %s)", node_name,
                 x509.load_pem_x509_certificate(new_cert).not_valid_after_utc.isoformat())

    async def run(self) -> None:
        """Rotate until cancelled; raises NoValidCertificate (see the module's docstring)."""
        failures = 0
        last_valid = self.clock.now()
        answered = False  # whether the server answered the last failed attempt: client-go's serverHealth
        valid = True
        while True:
            try:
                cert = self.current()
                if cert is None:
                    return  # a token or no credential: nothing to rotate
                now = self.clock.now()
                valid = validity_error(cert, now) is None
                if valid:
                    last_valid = now
                elif (expired := cert.not_valid_after_utc.timestamp()) <= now:
                    # valid until its notAfter, not only at the last look, which the retries' back-off may have
                    # made long before: kubelet's UpdateTransport looks every 10 s and counts from its last look
                    last_valid = max(last_valid, expired)
                if not valid and answered and now - last_valid >= EXIT_AFTER:
                    raise NoValidCertificate(
                        f"it has been {EXIT_AFTER:.0f} s since a valid client certificate was found (the one in "
                        f"{self.kubeconfig} is valid until {cert.not_valid_after_utc.isoformat()}) and the server "
                        "is responsive: exiting, to be bootstrapped anew")
                await self.clock.sleep(max(0.0, rotation_deadline(cert, self.rng) - now))
                await self.rotate(cert)
                failures = 0
            except (CertificateRequestError, ApiError, OSError, ValueError, KeyError, yaml.YAMLError) as exc:
                answered = server_answered(exc)
                delay = RETRY[min(failures, len(RETRY) - 1)]
                if not valid:  # the exit must come within EXIT_CHECK of its time, as UpdateTransport's 10 s tick
                    delay = min(delay, EXIT_CHECK)
                failures += 1
                log.warning("client certificate rotation failed (retrying in %.0f s): %s", delay, exc)
                await self.clock.sleep(delay)


async def with_certificate_rotation(kubeconfig: Path, client: RotatingClient, clock: Clock,
                                    main: Coroutine[Any, Any, None],
                                    fatal: Callable[[int], NoReturn] = os._exit) -> None:
    """Run `main` (the agent) with its kubeconfig's client certificate rotated beside it, until `main` ends.

    When rotation gives up (NoValidCertificate) the process ends at once through `fatal`, as kubelet's
    klog.Fatalf: no graceful node shutdown, the containers keep running for the agent the supervisor starts.
    """
    async def rotate() -> None:
        try:
            await CertificateManager(kubeconfig, client, clock).run()
        except NoValidCertificate as exc:
            log.critical("%s", exc)
            fatal(1)

    rotation = asyncio.create_task(rotate(), name="certificate-rotation")
    try:
        await main
    finally:
        rotation.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await rotation
