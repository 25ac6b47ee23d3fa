"""The csrsigning controller (pkg/controller/certificates/signer): signs approved requests with the cluster CA.

For the kube-apiserver client signers (kubelet and generic): an approved, not yet signed request gets a
certificate with the request's subject and public key, the extended key usages its `usages` name,
valid for `expirationSeconds` (at most, and by default, a year: --cluster-signing-duration), written
to `/status`. Requests to other signers are left to their own signers.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.csr import (
    KUBE_APISERVER_CLIENT_SIGNER,
    KUBELET_CLIENT_SIGNER,
    CertificateController,
    Obj,
    condition,
    parse_request,
)

SIGNERS = frozenset({KUBELET_CLIENT_SIGNER, KUBE_APISERVER_CLIENT_SIGNER})
MAX_DURATION = 365 * 24 * 3600
BACKDATE = 300  # upstream backdates five minutes for clock skew
_EXTENDED_USAGES = {"client auth": ExtendedKeyUsageOID.CLIENT_AUTH, "server auth": ExtendedKeyUsageOID.SERVER_AUTH}


def sign(request: x509.CertificateSigningRequest, usages: list[str], ca_cert: bytes, ca_key: bytes, now: float,
         seconds: int) -> bytes:
    """The PEM certificate for the request, issued by the CA."""
    ca = x509.load_pem_x509_certificate(ca_cert)
    key = serialization.load_pem_private_key(ca_key, password=None)
    assert isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey))
    start = dt.datetime.fromtimestamp(now - BACKDATE, dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(request.subject).issuer_name(ca.subject)
               .public_key(request.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(start + dt.timedelta(seconds=seconds + BACKDATE))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    extended = [_EXTENDED_USAGES[u] for u in usages if u in _EXTENDED_USAGES]
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


class CSRSigningController(CertificateController):
    def __init__(self, client: Client, clock: Clock, ca_cert: bytes, ca_key: bytes) -> None:
        super().__init__("csrsigning", client, clock)
        self.ca_cert, self.ca_key = ca_cert, ca_key

    def wants(self, csr: Obj) -> bool:
        return condition(csr, "Approved") and not (csr.get("status") or {}).get("certificate")

    async def handle(self, csr: Obj) -> None:
        if not condition(csr, "Approved") or condition(csr, "Failed") \
                or (csr.get("status") or {}).get("certificate"):
            return
        spec = csr.get("spec") or {}
        request = parse_request(csr)
        if spec.get("signerName") not in SIGNERS or request is None:
            return
        seconds = min(int(spec.get("expirationSeconds") or MAX_DURATION), MAX_DURATION)
        pem = sign(request, list(spec.get("usages") or []), self.ca_cert, self.ca_key, self.clock.now(), seconds)
        signed = {**csr, "status": {**(csr.get("status") or {}), "certificate": base64.b64encode(pem).decode()}}
        await self.put(signed, "status")


def factory(ca_cert: bytes, ca_key: bytes) -> functools.partial[CSRSigningController]:
    """The registry entry with the cluster CA the composition root read (`kubelite server`'s pki/ca.*)."""
    return functools.partial(CSRSigningController, ca_cert=ca_cert, ca_key=ca_key)
