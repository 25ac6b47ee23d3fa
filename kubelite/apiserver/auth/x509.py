"""Client certificates (plugin/pkg/authenticator/request/x509): CN is the user name, O the groups.

The TLS layer has already verified the chain's signatures against the client CA (the server asks for a
certificate with CERT_OPTIONAL and trusts only that CA) but not its validity period (`tls_server_context`
turns OpenSSL's time check off): upstream's authenticator checks the period itself, against the server's
clock, so a client presenting an expired certificate gets a 401 it can tell from an unreachable server — kubelet's
certificate manager counts a 401 as "the server is responsive" and an agent whose certificate has expired
exits to be bootstrapped anew (kubelite/agent/certificates.py). A certificate without a CN authenticates no one
(upstream's CommonNameUserConversion answers "not mine", so the request may still be anonymous).
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

from kubelite.api.certificates import validity_error
from kubelite.apiserver.auth.authenticator import AuthRequest, InvalidCredential
from kubelite.apiserver.auth.user import UserInfo
from kubelite.clock import Clock

# OpenSSL's X509_V_FLAG_NO_CHECK_TIME (ssl has no name for it): verify signatures, not validity periods.
_NO_CHECK_TIME = 0x200000


def tls_server_context(cert_file: Path, key_file: Path,
                       client_ca_file: Path) -> tuple[ssl.SSLContext, tuple[x509.Certificate, ...]]:
    """The API server's TLS: its serving certificate; client certificates asked for, not required
    (CERT_OPTIONAL), trusted only from `client_ca_file`, their validity period left to `ClientCertificates`
    — which gets the client CA's certificates, the second value. Raises OSError (ssl.SSLError) or ValueError."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert_file, key_file)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.verify_flags |= _NO_CHECK_TIME
    ctx.load_verify_locations(client_ca_file)
    return ctx, tuple(x509.load_pem_x509_certificates(client_ca_file.read_bytes()))


def user_from_certificate(cert: x509.Certificate) -> UserInfo | None:
    subject = cert.subject
    names = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if not names or not names[0]:
        return None
    groups = tuple(str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return UserInfo(names[0], groups=groups)


class ClientCertificates:
    """x509.New with CommonNameUserConversion: every certificate from the client's up through the client CA
    (`authorities`, its certificates) must be valid now — the TLS handshake checked the signatures, not the
    dates. Python's ssl shows only the client's own certificate, so an intermediate CA the client sent and the
    bundle does not hold is not date-checked (kubelite's CA signs node and user certificates directly)."""

    def __init__(self, clock: Clock, authorities: Sequence[x509.Certificate] = ()) -> None:
        self.clock = clock
        self.authorities: dict[x509.Name, list[x509.Certificate]] = {}
        for authority in authorities:  # several may share a subject: a CA being rotated
            self.authorities.setdefault(authority.subject, []).append(authority)

    def authenticate(self, request: AuthRequest) -> UserInfo | None:
        if request.peer_certificate is None:
            return None
        try:
            cert = x509.load_der_x509_certificate(request.peer_certificate)
        except ValueError as exc:
            raise InvalidCredential(f"unreadable client certificate: {exc}") from None
        now = self.clock.now()
        for checked in self._chain(cert):
            error = validity_error(checked, now)
            if error is not None:
                raise InvalidCredential(f"verifying certificate SN={checked.serial_number} failed: x509: "
                                        f"certificate has expired or is not yet valid: {error}")
        return user_from_certificate(cert)

    def _chain(self, cert: x509.Certificate) -> list[x509.Certificate]:
        """`cert` and its issuers in the bundle, each the one whose key signed the certificate below (of those
        with its issuer's name), up to a self-signed one."""
        chain = [cert]
        while chain[-1].issuer != chain[-1].subject or len(chain) == 1:
            below = chain[-1]
            issuer = next((ca for ca in self.authorities.get(below.issuer, ()) if _signed(below, ca)), None)
            if issuer is None or issuer in chain:
                break
            chain.append(issuer)
        return chain


def _signed(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
