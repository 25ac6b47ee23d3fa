"""Projected service account tokens: kubelet's token manager (pkg/kubelet/token/token_manager.go).

A serviceAccountToken source is served by the TokenRequest API, `POST
/api/v1/namespaces/NS/serviceaccounts/NAME/token`, with the source's audience and
expirationSeconds and the pod as the bound object, so the token dies with the pod. Tokens are
cached per pod, service account, audience and lifetime, and asked for again once 80% of their
lifetime has passed (or 24 hours, whichever is first); a failed refresh keeps serving the cached
token while it is still valid. Upstream also subtracts up to 10 s of random jitter from the
refresh time; that is left out here, so refreshes are deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubelite.agent.loops import timed
from kubelite.agent.volumes.projection import DEFAULT_TOKEN_EXPIRATION, MountError
from kubelite.api.errors import ApiError
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_rfc3339

Obj = dict[str, Any]
MAX_TTL = 24 * 3600.0
REFRESH_FRACTION = 0.8


@dataclass(frozen=True)
class Token:
    value: str
    expires_at: float
    refresh_at: float


def token_request(pod: Obj, source: Obj) -> Obj:
    """The TokenRequest kubelet sends for one serviceAccountToken projection of `pod`."""
    audience = source.get("audience")
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": [audience] if audience else [],
                     "expirationSeconds": int(source.get("expirationSeconds") or DEFAULT_TOKEN_EXPIRATION),
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                                        "uid": pod["metadata"]["uid"]}}}


class TokenManager:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self._cache: dict[tuple[str, ...], Token] = {}

    async def token(self, pod: Obj, source: Obj) -> tuple[str, float]:
        """The token for `source` and when to ask again; MountError when none can be had."""
        meta = pod["metadata"]
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        request = token_request(pod, source)
        key = (meta["uid"], meta["namespace"], account, ",".join(request["spec"]["audiences"]),
               str(request["spec"]["expirationSeconds"]))
        now = self.clock.now()
        cached = self._cache.get(key)
        if cached is not None and now < cached.refresh_at:
            return cached.value, cached.refresh_at
        path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token"
        try:
            answer = await timed(self.clock, self.client.create(path, request))
            status, spec = answer.get("status") or {}, answer.get("spec") or {}
            value, expires_at = str(status["token"]), parse_rfc3339(status["expirationTimestamp"])
        except (ApiError, KeyError, ValueError, TypeError) as exc:
            if cached is not None and now < cached.expires_at:
                return cached.value, min(cached.expires_at, now + 10.0)  # still valid: serve it, retry soon
            reason = exc.message if isinstance(exc, ApiError) else f"malformed TokenRequest answer ({exc!r})"
            raise MountError(f"failed to fetch token: {reason}") from None
        ttl = float(spec.get("expirationSeconds") or request["spec"]["expirationSeconds"])
        issued = expires_at - ttl
        refresh_at = min(issued + ttl * REFRESH_FRACTION, issued + MAX_TTL)
        self._cache[key] = Token(value, expires_at, refresh_at)
        return value, refresh_at

    def forget(self, uid: str) -> None:
        """The pod is gone: its tokens are no use to anyone (DeleteServiceAccountToken)."""
        for key in [k for k in self._cache if k[0] == uid]:
            del self._cache[key]
