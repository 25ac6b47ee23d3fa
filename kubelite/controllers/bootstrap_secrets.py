"""Reading bootstrap token Secrets (k8s.io/cluster-bootstrap/util/secrets), shared by the token cleaner and
the bootstrap signer so both agree on what a token's id, secret and expiry are."""

from __future__ import annotations

import base64
import binascii

from kubelite.clock import parse_rfc3339
from kubelite.controllers.csr import Obj

NAMESPACE = "kube-system"
SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"


def get_data(secret: Obj, key: str) -> str:
    """GetData: the decoded value of `key`, "" when absent or undecodable."""
    raw = (secret.get("data") or {}).get(key)
    if not raw:
        return ""
    try:
        return base64.b64decode(raw, validate=True).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return ""


def parse_name(name: str) -> str | None:
    """ParseName: the token id of a `bootstrap-token-ID` Secret name (six [a-z0-9]), else None."""
    if not name.startswith(SECRET_PREFIX):
        return None
    token_id = name[len(SECRET_PREFIX):]
    ok = len(token_id) == 6 and all(c.isdigit() or "a" <= c <= "z" for c in token_id)
    return token_id if ok else None


def get_expiration(secret: Obj, now: float) -> tuple[float, bool]:
    """GetExpiration: (seconds left, expired). No expiration never expires; one that does not parse counts as
    expired (as upstream: a token whose lifetime cannot be read must not be trusted)."""
    raw = get_data(secret, "expiration")
    if not raw:
        return 0.0, False
    try:
        left = parse_rfc3339(raw) - now
    except ValueError:
        return 0.0, True
    return (left, False) if left > 0 else (0.0, True)
