"""The validity period of an x509 certificate, as Go's crypto/x509 checks it. Asked by both stacks: the API
server's client-certificate authenticator and the node agent about its own client certificate."""

from __future__ import annotations

from cryptography import x509

from kubelite.clock import rfc3339


def validity_error(cert: x509.Certificate, now: float) -> str | None:
    """Go's CertificateInvalidError(Expired) detail when `now` (epoch seconds) is outside the certificate's
    period, None within it (both ends included, as Go's Before/After)."""
    if now < cert.not_valid_before_utc.timestamp():
        return f"current time {rfc3339(now)} is before {rfc3339(cert.not_valid_before_utc.timestamp())}"
    if now > cert.not_valid_after_utc.timestamp():
        return f"current time {rfc3339(now)} is after {rfc3339(cert.not_valid_after_utc.timestamp())}"
    return None
