"""Request bodies are read whole (issue 10, defect 1), whatever the pieces they arrive in; 413 past 3 MiB."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp.test_utils import TestClient

from kubelite.testing.builders import make_pod
from tests.api.test_rest import PODS

Client = TestClient  # type: ignore[type-arg]


async def _pieces(body: bytes, size: int) -> AsyncIterator[bytes]:
    """Chunked transfer, one piece per event-loop turn, so the server sees the body arrive in parts."""
    for i in range(0, len(body), size):
        yield body[i:i + size]
        await asyncio.sleep(0.001)


def _pod(name: str, env_size: int) -> bytes:
    return orjson.dumps(make_pod(name).container("c", env=[{"name": "BIG", "value": "e" * env_size}]).obj())


@pytest.mark.parametrize(("env_size", "piece", "status"), [
    pytest.param(8 * 1024, 1024, 201, id="8 KB in 1 KB pieces"),
    pytest.param(700 * 1024, 64 * 1024, 201, id="700 KB in 64 KB pieces"),
    pytest.param(3 * 1024 * 1024, 256 * 1024, 413, id="over 3 MiB chunked, without a length, is 413"),
])
async def test_body_arriving_in_pieces_is_read_whole(api: Client, env_size: int, piece: int, status: int) -> None:
    resp = await api.post(PODS, data=_pieces(_pod("p", env_size), piece), headers={"Content-Type": "application/json"})
    out = await resp.json()
    assert resp.status == status, out
    if status == 201:
        assert len(out["spec"]["containers"][-1]["env"][0]["value"]) == env_size
    else:
        assert out["reason"] == "RequestEntityTooLarge"
