"""Bootstrap tokens (plugin/pkg/auth/authenticator/token/bootstrap): `ID.SECRET` bearer tokens kept as Secrets.

A token `abcdef.0123456789abcdef` is the Secret `kube-system/bootstrap-token-abcdef` of type
`bootstrap.kubernetes.io/token` whose `token-secret` matches, not expired (`expiration`, RFC 3339),
with `usage-bootstrap-authentication: "true"`; it authenticates as `system:bootstrap:ID` in
`system:bootstrappers` and the `auth-extra-groups` (each `system:bootstrappers:…`). As upstream,
a token that fails any of this is "not mine" (never an error that would hide another authenticator).
"""

from __future__ import annotations

import base64
import hmac
import logging
import re
import secrets

from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.registry.base import Lookup, Obj
from kubelite.clock import Clock, parse_rfc3339

log = logging.getLogger("kubelite.apiserver.auth")
TOKEN_RE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
NAMESPACE = "kube-system"
USER_PREFIX = "system:bootstrap:"
GROUP = "system:bootstrappers"
DEFAULT_NODE_GROUP = "system:bootstrappers:kubeadm:default-node-token"  # kubeadm's, bound to join nodes
# kubeadm's discovery reads this without credentials (it does not trust the server yet), so with bootstrap
# tokens on it is served to anonymous requests even under --anonymous-auth=false; the JWS signatures in it
# (the bootstrapsigner controller's) are what a joining machine checks.
CLUSTER_INFO_PATH = "/api/v1/namespaces/kube-public/configmaps/cluster-info"
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def generate() -> str:
    """bootstraputil.GenerateBootstrapToken: six and sixteen random characters of [a-z0-9]."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(6)) + "." + \
        "".join(secrets.choice(_ALPHABET) for _ in range(16))


def secret_data(secret: Obj) -> dict[str, str]:
    """The Secret's data decoded (undecodable values dropped: a malformed token secret authenticates nothing)."""
    out: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            out[key] = base64.b64decode(value, validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            continue
    return out


class BootstrapTokens:
    def __init__(self, lookup: Lookup, clock: Clock) -> None:
        self.lookup = lookup
        self.clock = clock

    def authenticate_token(self, token: str) -> UserInfo | None:
        match = TOKEN_RE.match(token)
        if match is None:
            return None
        token_id, token_secret = match.groups()
        secret = self.lookup.get("secrets", NAMESPACE, SECRET_PREFIX + token_id)
        if secret is None or secret.get("type") != SECRET_TYPE or secret["metadata"].get("deletionTimestamp"):
            return None
        data = secret_data(secret)
        if data.get("token-id") != token_id or not hmac.compare_digest(data.get("token-secret", ""), token_secret):
            log.debug("bootstrap token %s: secret mismatch", token_id)
            return None
        expiration = data.get("expiration")
        if expiration:
            try:
                if parse_rfc3339(expiration) <= self.clock.now():
                    return None
            except ValueError:
                return None
        if data.get("usage-bootstrap-authentication") != "true":
            return None
        extra = [g.strip() for g in data.get("auth-extra-groups", "").split(",") if g.strip()]
        if any(not g.startswith(GROUP + ":") for g in extra):
            return None
        return UserInfo(USER_PREFIX + token_id, groups=(GROUP, *extra))
