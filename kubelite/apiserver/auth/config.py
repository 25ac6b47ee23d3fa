"""What the server authenticates with and authorizes by, loaded once by the composition root (`kubelite server`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cryptography import x509

from kubelite.apiserver.auth.authorizer import AlwaysAllow, Authorizer
from kubelite.apiserver.auth.jwt import PrivateKey, PublicKey
from kubelite.apiserver.auth.serviceaccount import DEFAULT_ISSUER
from kubelite.apiserver.auth.user import SYSTEM_PRIVILEGED_GROUP, UserInfo

# The admin token `kubelite server` writes into its kubeconfig (and its own components' loopback credential).
ADMIN_USER = UserInfo("kubernetes-admin", groups=(SYSTEM_PRIVILEGED_GROUP,))


@dataclass(frozen=True)
class ServiceAccountConfig:
    """--service-account-issuer, --service-account-signing-key-file, --service-account-key-file, --api-audiences,
    --service-account-jwks-uri."""

    signing_key: PrivateKey | None
    public_keys: tuple[PublicKey, ...]
    issuer: str = DEFAULT_ISSUER
    api_audiences: tuple[str, ...] = ()  # empty: the issuer, as upstream's default
    extend_expiration: bool = True
    admission: bool = True  # the ServiceAccount admission plugin (needs the serviceaccount controller running)
    mount_tokens: bool = True  # the plugin's MountServiceAccountToken: the projected kube-api-access volume
    jwks_uri: str = ""  # the discovery document's jwks_uri; empty: https://ADVERTISED-ADDRESS:PORT/openid/v1/jwks

    @property
    def audiences(self) -> tuple[str, ...]:
        return self.api_audiences or (self.issuer,)


@dataclass(frozen=True)
class AuthConfig:
    static_tokens: Mapping[str, UserInfo] = field(default_factory=dict)  # --token-auth-file
    client_certificates: bool = False  # TLS asks for client certificates signed by the cluster CA
    client_authorities: tuple[x509.Certificate, ...] = ()  # --client-ca-file's certificates (validity checked)
    anonymous: bool = False  # --anonymous-auth
    service_accounts: ServiceAccountConfig | None = None
    authorizer: Authorizer = field(default_factory=AlwaysAllow)
    bootstrap_tokens: bool = False  # --enable-bootstrap-token-auth
    authorization_modes: tuple[str, ...] = ()  # --authorization-mode; when set, replaces `authorizer`
