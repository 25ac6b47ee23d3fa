"""ApiClient.close_connections (kubelet's closeAllConns): every open connection, in flight or idle, is
closed at once, what was waiting on one fails with Unavailable, and the client keeps working."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kubelite.api.errors import Unavailable
from kubelite.client.http import ApiClient
from tests.client.test_transport_errors import EVENT, chunked, raw_server, replies, response

SILENT = 3600.0  # read timeouts far past the test: only close_connections can end the wait

Call = Callable[[ApiClient], Awaitable[Any]]


async def _watch(client: ApiClient) -> list[str]:
    return [e["type"] async for e in client.watch("/api/v1/pods", {"allowWatchBookmarks": "true"})]


async def _get(client: ApiClient) -> Any:
    return await client.request("GET", "/api/v1/pods/a")


@pytest.mark.parametrize("name,server_sends,call", [
    ("a watch silent on a half-open connection fails at once", chunked(EVENT), _watch),
    ("a request waiting on a half-open connection fails at once", b"", _get),
])
async def test_close_connections_fails_what_waits_on_them(name: str, server_sends: bytes, call: Call) -> None:
    async with raw_server(replies(server_sends, then_close=False)) as url:
        client = ApiClient(url, read_timeout=SILENT, watch_read_timeout=SILENT)
        try:
            waiting = asyncio.ensure_future(call(client))
            await asyncio.sleep(0.2)  # real sockets: let the request reach the server (no clock involved)
            assert not waiting.done()
            await client.close_connections()
            with pytest.raises(Unavailable):
                await asyncio.wait_for(waiting, 5)
        finally:
            await client.close()


async def test_the_client_opens_fresh_connections_after_closing_them() -> None:
    body = b'{"metadata":{"name":"a"}}'
    async with raw_server(replies(response("200 OK", body))) as url:
        client = ApiClient(url)
        try:
            await client.close_connections()  # nothing open yet: a no-op
            assert (await _get(client))["metadata"]["name"] == "a"
            await client.close_connections()
            assert (await _get(client))["metadata"]["name"] == "a"
        finally:
            await client.close()
