"""The projected service-account token source (kubelite/agent/volumes/tokens.py) against a scripted client: the
TokenRequest kubelet sends, caching, the refresh at 80% of the lifetime (pkg/kubelet/token TestRequiresRefresh's
idea), a still-valid token served through a failed refresh, and a clear error when the API is missing (404)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from kubelite.agent.volumes.projection import MountError
from kubelite.agent.volumes.tokens import TokenManager
from kubelite.api.errors import ApiError
from kubelite.clock import FakeClock, rfc3339

Obj = dict[str, Any]
POD: Obj = {"metadata": {"name": "web", "namespace": "team", "uid": "uid-1"}, "spec": {"serviceAccountName": "robot"}}
START = 1_700_000_000.0


class TokenApi:
    """Answers TokenRequests in order from a script: an expiry in seconds from now, or an ApiError to raise."""

    def __init__(self, clock: FakeClock, script: list[float | ApiError]) -> None:
        self.clock = clock
        self.script = script
        self.requests: list[tuple[str, Obj]] = []

    async def create(self, path: str, obj: Obj) -> Obj:
        self.requests.append((path, obj))
        step = self.script.pop(0)
        if isinstance(step, ApiError):
            raise step
        return {**obj, "status": {"token": f"jwt-{len(self.requests)}",
                                  "expirationTimestamp": rfc3339(self.clock.now() + step)}}

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "",
                      params: Mapping[str, str] | None = None) -> Any:
        raise NotImplementedError

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        raise NotImplementedError

    async def patch(self, path: str, patch: Any, content_type: str = "") -> Obj:
        raise NotImplementedError

    async def delete(self, path: str, options: Obj | None = None) -> Obj:
        raise NotImplementedError

    def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        raise NotImplementedError

    async def close(self) -> None:
        return None


def _manager(script: list[float | ApiError]) -> tuple[TokenManager, TokenApi, FakeClock]:
    clock = FakeClock(START)
    api = TokenApi(clock, script)
    return TokenManager(api, clock), api, clock


async def test_request_names_the_pod_audience_and_lifetime() -> None:
    manager, api, _ = _manager([3607])
    token, _ = await manager.token(POD, {"path": "token", "audience": "vault", "expirationSeconds": 3607})
    assert token == "jwt-1"
    path, body = api.requests[0]
    assert path == "/api/v1/namespaces/team/serviceaccounts/robot/token"
    assert body == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": ["vault"], "expirationSeconds": 3607,
                             "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "uid-1"}}}


async def test_default_lifetime_and_audiences() -> None:
    manager, api, _ = _manager([3600])
    await manager.token(POD, {"path": "token"})
    assert api.requests[0][1]["spec"]["audiences"] == [] and api.requests[0][1]["spec"]["expirationSeconds"] == 3600


# (seconds after the first request, whether a new TokenRequest is sent): lifetime 1000 s, refresh at 800 s.
REFRESH = [
    pytest.param(0, False, id="fresh token is cached"),
    pytest.param(799, False, id="before 80% of the lifetime"),
    pytest.param(800, True, id="at 80% of the lifetime"),
    pytest.param(999, True, id="just before expiry"),
]


@pytest.mark.parametrize("after,refreshed", REFRESH)
async def test_refresh_at_eighty_percent(after: float, refreshed: bool) -> None:
    manager, api, clock = _manager([1000, 1000])
    _, refresh_at = await manager.token(POD, {"expirationSeconds": 1000})
    assert refresh_at == START + 800
    await clock.advance(after)
    token, _ = await manager.token(POD, {"expirationSeconds": 1000})
    assert (len(api.requests) == 2) == refreshed and token == ("jwt-2" if refreshed else "jwt-1")


async def test_lifetime_capped_at_a_day_for_refresh() -> None:
    manager, _, _ = _manager([7 * 24 * 3600])
    _, refresh_at = await manager.token(POD, {"expirationSeconds": 7 * 24 * 3600})
    assert refresh_at == START + 24 * 3600


async def test_failed_refresh_serves_the_still_valid_token() -> None:
    manager, _, clock = _manager([1000, ApiError(503, "ServiceUnavailable", "busy")])
    await manager.token(POD, {"expirationSeconds": 1000})
    await clock.advance(900)
    token, retry_at = await manager.token(POD, {"expirationSeconds": 1000})
    assert token == "jwt-1" and retry_at == START + 910


async def test_missing_token_api_is_a_clear_mount_error() -> None:
    manager, _, _ = _manager([ApiError(404, "NotFound", "the server could not find the requested resource")])
    with pytest.raises(MountError) as err:
        await manager.token(POD, {"path": "token"})
    assert str(err.value) == "failed to fetch token: the server could not find the requested resource"


async def test_tokens_are_per_pod_and_forgotten_with_it() -> None:
    manager, api, _ = _manager([1000, 1000, 1000])
    other = {**POD, "metadata": {**POD["metadata"], "uid": "uid-2", "name": "web-2"}}
    await manager.token(POD, {})
    await manager.token(other, {})
    manager.forget("uid-1")
    await manager.token(POD, {})
    assert len(api.requests) == 3
