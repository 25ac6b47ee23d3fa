"""Client certificates (plugin/pkg/authenticator/request/x509): CN is the user name, O the groups.

The TLS layer has already verified the chain against the cluster CA (the server asks for a
certificate with CERT_OPTIONAL and trusts only that CA), so this authenticator only maps the
verified certificate to a user. A certificate without a CN authenticates no one (upstream's
CommonNameUserConversion answers "not mine", so the request may still be anonymous).
"""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from kubelite.apiserver.auth.authenticator import AuthRequest, InvalidCredential
from kubelite.apiserver.auth.user import UserInfo


def user_from_certificate(cert: x509.Certificate) -> UserInfo | None:
    subject = cert.subject
    names = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if not names or not names[0]:
        return None
    groups = tuple(str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return UserInfo(names[0], groups=groups)


class ClientCertificates:
    def authenticate(self, request: AuthRequest) -> UserInfo | None:
        if request.peer_certificate is None:
            return None
        try:
            cert = x509.load_der_x509_certificate(request.peer_certificate)
        except ValueError as exc:
            raise InvalidCredential(f"unreadable client certificate: {exc}") from None
        return user_from_certificate(cert)
