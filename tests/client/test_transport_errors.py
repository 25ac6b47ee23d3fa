"""Every transport failure reaches callers as one error, Unavailable; API errors stay what they are."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from kubelite.api.errors import ApiError, Unavailable
from kubelite.client.http import ApiClient

STATUS_503 = (b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable",'
              b'"message":"etcd is down","code":503}')
STATUS_409 = (b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict",'
              b'"message":"the object has been modified","code":409}')
EVENT = b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}\n'


def response(status: str, body: bytes, content_type: str = "application/json", length: int | None = None) -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n\r\n")
    return head.encode() + body


def chunked(*chunks: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)


Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def replies(raw: bytes, then_close: bool = True) -> Behaviour:
    """A server that reads the request head, writes `raw` and closes (or keeps the socket open, silent)."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(raw)
        await writer.drain()
        if then_close:
            writer.close()
        else:
            await asyncio.Event().wait()
    return serve


async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A stalled server (as under SIGSTOP): the kernel accepted the connection, nobody replies."""
    await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def raw_server(behaviour: Behaviour | None) -> AsyncIterator[str]:
    """A real loopback socket with `behaviour`; None: a port nobody listens on (connection refused)."""
    if behaviour is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        yield f"http://127.0.0.1:{port}"
        return
    tasks: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await behaviour(reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for t in tasks:
            t.cancel()
        server.close()


@pytest.mark.parametrize("behaviour", [
    pytest.param(None, id="connection refused"),
    pytest.param(replies(b""), id="server closes without answering"),
    pytest.param(replies(response("200 OK", b'{"kind":"Pod","meta', length=400)), id="server closes mid-body"),
    pytest.param(never_answers, id="stalled server: accepts and never answers"),
    pytest.param(replies(response("200 OK", b'{"kind":"Pod"', length=400), then_close=False),
                 id="stalled server: stops mid-body"),
    pytest.param(replies(response("503 Service Unavailable", STATUS_503)), id="503 Status from the server"),
    pytest.param(replies(response("503 Service Unavailable", b"upstream down", "text/plain")),
                 id="503 without a Status body (a proxy)"),
    pytest.param(replies(b"this is not HTTP\r\n\r\n"), id="garbage instead of HTTP"),
    pytest.param(replies(response("200 OK", b'{"kind": truncated')), id="malformed JSON body"),
])
async def test_request_transport_failure_is_unavailable(behaviour: Behaviour | None) -> None:
    async with raw_server(behaviour) as url:
        client = ApiClient(url, read_timeout=0.5)
        try:
            with pytest.raises(Unavailable) as info:
                await asyncio.wait_for(client.get("/api/v1/pods"), 20)
        finally:
            await client.close()
    assert info.value.code == 503


@pytest.mark.parametrize(("raw", "code", "reason"), [
    pytest.param(response("409 Conflict", STATUS_409), 409, "Conflict", id="409 Conflict stays a Conflict"),
    pytest.param(response("404 Not Found", b'{"kind":"Status","reason":"NotFound","message":"x","code":404}'),
                 404, "NotFound", id="404 stays NotFound"),
])
async def test_api_errors_are_not_unavailable(raw: bytes, code: int, reason: str) -> None:
    async with raw_server(replies(raw)) as url:
        client = ApiClient(url, read_timeout=5)
        try:
            with pytest.raises(ApiError) as info:
                await client.get("/api/v1/pods")
        finally:
            await client.close()
    assert not isinstance(info.value, Unavailable)
    assert (info.value.code, info.value.reason) == (code, reason)


async def _drain(client: ApiClient, params: dict[str, str]) -> list[str]:
    seen: list[str] = []
    async for event in client.watch("/api/v1/pods", params):
        seen.append(event["object"]["metadata"]["name"])
    return seen


@pytest.mark.parametrize(("behaviour", "params", "delivered"), [
    pytest.param(None, {}, 0, id="watch: connection refused"),
    pytest.param(replies(chunked(EVENT, b'{"type":"MODIFIED","obj')), {}, 1, id="watch: stream cut mid-event"),
    pytest.param(replies(chunked(EVENT)[:-4]), {}, 0, id="watch: stream cut inside a chunk"),
    pytest.param(replies(response("503 Service Unavailable", STATUS_503)), {}, 0, id="watch: 503"),
    pytest.param(replies(chunked(EVENT), then_close=False), {"allowWatchBookmarks": "true"}, 1,
                 id="watch with bookmarks: server goes silent"),
])
async def test_watch_transport_failure_is_unavailable(behaviour: Behaviour | None, params: dict[str, str],
                                                      delivered: int) -> None:
    async with raw_server(behaviour) as url:
        client = ApiClient(url, watch_read_timeout=0.5)
        seen: list[str] = []
        try:
            with pytest.raises(Unavailable):
                async for event in client.watch("/api/v1/pods", params):
                    seen.append(event["object"]["metadata"]["name"])
        finally:
            await client.close()
    assert len(seen) == delivered


async def test_watch_clean_end_of_stream_returns() -> None:
    """The server ending a watch (its timeout) is not a failure: the events arrive and iteration stops."""
    async with raw_server(replies(chunked(EVENT) + b"0\r\n\r\n")) as url:
        client = ApiClient(url)
        try:
            assert await _drain(client, {}) == ["a"]
        finally:
            await client.close()
