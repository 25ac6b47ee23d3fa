"""The bootstrap signer (pkg/controller/bootstrap/bootstrapsigner.go) and its detached JWS
(k8s.io/cluster-bootstrap/token/jws).

`kube-public/cluster-info` holds the cluster's address and CA for joining machines, which read it before
they can trust the server. For each valid signing token (a `bootstrap.kubernetes.io/token` Secret with
`usage-bootstrap-signing: "true"`, not expired) this controller keeps `jws-kubeconfig-<token-id>`: an
HS256 signature of the `kubeconfig` value keyed by the token's secret. A joining machine that knows the
token checks it, so a server that does not know the token cannot hand it a forged CA, and the token is
never sent to a server not yet trusted. Signatures of tokens that are gone are removed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging

from kubelite.api.errors import ApiError
from kubelite.client.informer import Handlers, Informer
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.bootstrap_secrets import NAMESPACE, SECRET_TYPE, get_data, get_expiration, parse_name
from kubelite.controllers.csr import Obj
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers")

CONFIGMAP_NAMESPACE = "kube-public"
CONFIGMAP_NAME = "cluster-info"
KUBECONFIG_KEY = "kubeconfig"
JWS_PREFIX = "jws-kubeconfig-"
WORKERS = 1
_MIN_HS256_KEY = 32  # go-jose refuses shorter HS256 keys; upstream pads the token secret with zeros


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def compute_detached_signature(content: str, token_id: str, token_secret: str) -> str:
    """ComputeDetachedSignature: a compact HS256 JWS of `content` (RFC 7515 appendix F: payload elided),
    protected header `{"alg":"HS256","kid":ID}` as go-jose writes it, byte for byte."""
    key = token_secret.encode().ljust(_MIN_HS256_KEY, b"\0")
    header = _b64url(json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":")).encode())
    signing_input = f"{header}.{_b64url(content.encode())}".encode()
    return f"{header}..{_b64url(hmac.new(key, signing_input, hashlib.sha256).digest())}"


def detached_token_is_valid(detached: str, content: str, token_id: str, token_secret: str) -> bool:
    """DetachedTokenIsValid (compared in constant time)."""
    return hmac.compare_digest(detached, compute_detached_signature(content, token_id, token_secret))


def validate_secret_for_signing(secret: Obj, now: float) -> tuple[str, str] | None:
    """validateSecretForSigning: (token id, token secret) of a Secret that may sign, else None."""
    name_id = parse_name(secret["metadata"]["name"])
    token_id = get_data(secret, "token-id")
    token_secret = get_data(secret, "token-secret")
    if name_id is None or not token_id or name_id != token_id or not token_secret:
        return None
    if get_expiration(secret, now)[1] or get_data(secret, "usage-bootstrap-signing") != "true":
        return None
    return token_id, token_secret


def signed(config_map: Obj, tokens: dict[str, str]) -> Obj | None:
    """signConfigMap's decision: the ConfigMap with exactly one signature per token, or None when it already
    has them (or has no kubeconfig to sign)."""
    data = dict(config_map.get("data") or {})
    content = data.get(KUBECONFIG_KEY)
    if content is None:
        return None
    old = {k[len(JWS_PREFIX):]: data.pop(k) for k in list(data) if k.startswith(JWS_PREFIX)}
    for token_id, token_secret in tokens.items():
        data[JWS_PREFIX + token_id] = compute_detached_signature(content, token_id, token_secret)
    new = {k[len(JWS_PREFIX):]: v for k, v in data.items() if k.startswith(JWS_PREFIX)}
    return None if new == old else {**config_map, "data": data}


class BootstrapSigner:
    """One work item (the ConfigMap), poked by any change to it or to a token Secret, as upstream's queue."""

    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[str] = Runner("bootstrap-signer", self.sync, clock, WORKERS)
        self.config_maps = Informer(client, f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps", clock,
                                    self._handlers(), params={"fieldSelector": f"metadata.name={CONFIGMAP_NAME}"})
        self.secrets = Informer(client, f"/api/v1/namespaces/{NAMESPACE}/secrets", clock, self._handlers(),
                                params={"fieldSelector": f"type={SECRET_TYPE}"})

    def _poke(self, _obj: Obj | None = None) -> None:
        self.runner.enqueue(CONFIGMAP_NAME)

    def _handlers(self) -> Handlers:
        return Handlers(self._poke, lambda old, new: self._poke(), self._poke)

    async def run(self) -> None:
        await run_synced((self.config_maps, self.secrets), (self.runner.run,))

    def tokens(self) -> dict[str, str]:
        """getTokens: token id → secret of every Secret that may sign (the first of duplicates wins)."""
        out: dict[str, str] = {}
        now = self.clock.now()
        for secret in self.secrets.store.values():
            valid = validate_secret_for_signing(secret, now) if secret.get("type") == SECRET_TYPE else None
            if valid is not None:
                out.setdefault(*valid)
        return out

    async def sync(self, _key: str) -> None:
        config_map = self.config_maps.get(CONFIGMAP_NAMESPACE, CONFIGMAP_NAME)
        if config_map is None:
            return
        update = signed(config_map, self.tokens())
        if update is None:
            return
        try:
            await self.client.request(
                "PUT", f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps/{CONFIGMAP_NAME}", update)
        except ApiError as exc:
            if exc.code not in (404, 409):  # gone, or changed since: its event pokes the queue again
                raise
