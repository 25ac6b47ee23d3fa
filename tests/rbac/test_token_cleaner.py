"""The bootstrap token cleaner against a real API server on a FakeClock: expired tokens go, others stay until
they expire, tokens without an expiration and Secrets of other types are never touched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.cli.join import token_secret
from kubelite.controllers.tokencleaner import TokenCleaner
from tests.controllers.harness import running

SECRETS = "/api/v1/namespaces/kube-system/secrets"


async def exists(client: Any, name: str) -> bool:
    try:
        await client.get(f"{SECRETS}/{name}")
    except ApiError as exc:
        assert exc.code == 404
        return False
    return True


async def test_expired_tokens_are_deleted(tmp_path: Path) -> None:
    async with running(tmp_path, TokenCleaner) as h:
        now = h.clock.now()
        await h.client.create(SECRETS, token_secret("aaaaaa.aaaaaaaaaaaaaaaa", 0.5, now - 1, "expired"))
        await h.client.create(SECRETS, token_secret("bbbbbb.bbbbbbbbbbbbbbbb", 2, now, "expires in 2 s"))
        await h.client.create(SECRETS, token_secret("cccccc.cccccccccccccccc", 0, now, "never expires"))
        opaque = token_secret("dddddd.dddddddddddddddd", 0.5, now - 1, "not a token")
        opaque["type"] = "Opaque"
        await h.client.create(SECRETS, opaque)

        async def expired_gone() -> bool:
            return not await exists(h.client, "bootstrap-token-aaaaaa")

        await h.until(expired_gone, "the expired token to be deleted")
        assert await exists(h.client, "bootstrap-token-bbbbbb")

        async def later_gone() -> bool:
            return not await exists(h.client, "bootstrap-token-bbbbbb")

        await h.until(later_gone, "the second token to be deleted once expired", step=0.05)
        assert await exists(h.client, "bootstrap-token-cccccc")
        assert await exists(h.client, "bootstrap-token-dddddd")
