"""The in-process transport of the client seam: components in the server's process call its request handling.

As httpx's `ASGITransport` calls an ASGI app without a socket, `InProcessClient` builds an
aiohttp `web.Request` in memory and hands it to the API server's own middleware and dispatch: the same
routing, handlers, admission, validation and watch cache as over HTTP — never the store —
minus what only the network needs: no TCP, no TLS. Bodies still travel as
JSON bytes, so a component never holds a reference into the server's cache and cannot
corrupt it by mutating what it was given.

It satisfies `kubelite.client.interface.Client` structurally (it may not import the client
package: the apiserver and client stacks are kept apart by import contracts). Requests pass the
server's own middleware, presenting the server's token as kube-apiserver's loopback client does,
so errors are rendered exactly as over HTTP and read back into `ApiError` the same way.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import orjson
from aiohttp import StreamReader, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.base_protocol import BaseProtocol
from aiohttp.http import HttpVersion11, RawRequestMessage
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from kubelite.api.transport import JSON, RestVerbs, status_error
from kubelite.apiserver.app import ApiServer

Obj = dict[str, Any]


class _Protocol:
    """What a web.Request asks of its connection: nothing, in process."""

    ssl_context = None
    peername = None
    sockname = None
    transport = None


class _Collector(AbstractStreamWriter):
    """The response side of an in-memory exchange: status and headers, then the body as it is written.

    A plain response's body is put here whole; a streamed one (a watch, pod logs) chunk by chunk
    as the handler writes it, so the caller reads it while the handler is still running.
    """

    def __init__(self) -> None:
        self.chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.started = asyncio.Event()
        self.status = 200
        self.headers: CIMultiDict[str] = CIMultiDict()

    async def write(self, chunk: bytes | bytearray | memoryview) -> None:
        if chunk:
            self.chunks.put_nowait(bytes(chunk))

    async def write_eof(self, chunk: bytes = b"") -> None:
        await self.write(chunk)
        self.chunks.put_nowait(None)

    async def drain(self) -> None:
        return None

    def enable_compression(self, encoding: str = "deflate", strategy: int | None = None) -> None:
        return None

    def enable_chunking(self) -> None:
        return None

    async def write_headers(self, status_line: str, headers: CIMultiDict[str]) -> None:
        self.status = int(status_line.split(" ", 2)[1])
        self.headers = CIMultiDict(headers)
        self.started.set()


class Reply:
    """One response, read as a client reads HTTP: status, headers, then the body whole or line by line.

    Each chunk is split into lines once, when it arrives: a watch that fell behind gets its backlog
    as one chunk of thousands of events, and re-scanning and re-copying the rest of that chunk for
    every line read was quadratic (16,000 events: a minute with the server's event loop blocked).
    """

    def __init__(self, collector: _Collector, serving: asyncio.Task[web.StreamResponse]) -> None:
        self._collector = collector
        self._serving = serving
        self._lines: collections.deque[bytes] = collections.deque()  # complete lines, newline included
        self._partial = b""  # the start of a line whose end has not arrived
        self._eof = False
        self.status = collector.status
        self.headers = CIMultiDictProxy(collector.headers)
        self.content_type = self.headers.get("Content-Type", JSON).split(";", 1)[0].strip()

    async def _more(self) -> bool:
        if self._eof:
            return False
        chunk = await self._collector.chunks.get()
        if chunk is None:
            self._eof = True
            return False
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        self._lines.extend(line + b"\n" for line in lines)
        return True

    async def read(self) -> bytes:
        while await self._more():
            pass
        out = b"".join(self._lines) + self._partial
        self._lines.clear()
        self._partial = b""
        return out

    async def readline(self) -> bytes:
        """The next line with its newline; at the end, what is left without one, then b""."""
        while not self._lines and await self._more():
            pass
        if self._lines:
            return self._lines.popleft()
        out, self._partial = self._partial, b""
        return out

    def close(self) -> None:
        self._serving.cancel()


def _request(method: str, path: str, params: Mapping[str, str] | None, body: bytes,
             headers: Mapping[str, str], writer: _Collector) -> web.Request:
    url = URL(path)
    if params:
        url = url.update_query(dict(params))
    all_headers = CIMultiDict({"Accept": JSON, **headers, "Content-Length": str(len(body))})
    message = RawRequestMessage(method, str(url), HttpVersion11, CIMultiDictProxy(all_headers), (), False, None,
                                False, False, url)
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    # The body is complete: a real StreamReader holding all of it, read by the handlers as from a socket.
    payload = StreamReader(BaseProtocol(loop), max(2 ** 16, len(body)), loop=loop)  # never asks to pause
    payload.feed_data(body)
    payload.feed_eof()
    return web.Request(message, payload, cast(Any, _Protocol()), writer, task, loop)


class InProcessClient(RestVerbs):
    def __init__(self, server: ApiServer) -> None:
        self.server = server
        # As kube-apiserver's loopback client: the server's own components present a token it trusts.
        token = next(iter(sorted(server.tokens)), None)
        self._auth = {"Authorization": f"Bearer {token}"} if token else {}

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        """The server's own middleware (authentication, errors rendered as Status) and routing."""
        return await self.server._middleware(request, self.server._dispatch)

    async def exchange(self, method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None,
                       params: Mapping[str, str] | None = None) -> Reply:
        """One request, answered as soon as the status is known (a streamed body keeps arriving after)."""
        collector = _Collector()
        request = _request(method, path, params, body, {**self._auth, **(headers or {})}, collector)
        serving = asyncio.create_task(self._serve(request))
        started = asyncio.create_task(collector.started.wait())
        try:
            await asyncio.wait({serving, started}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            serving.cancel()
            raise
        finally:
            started.cancel()
        if serving.done():
            resp = serving.result()
            if not resp.prepared:  # a plain response, returned whole
                collector.status, collector.headers = resp.status, CIMultiDict(resp.headers)
                collector.headers.setdefault("Content-Type", resp.content_type)
                body_bytes = cast(web.Response, resp).body
                collector.chunks.put_nowait(cast(bytes, body_bytes or b""))
                collector.chunks.put_nowait(None)
        else:  # streaming: the body ends when the handler does
            serving.add_done_callback(lambda _: collector.chunks.put_nowait(None))
        return Reply(collector, serving)

    async def request(self, method: str, path: str, body: Any = None, content_type: str = JSON,
                      params: Mapping[str, str] | None = None) -> Any:
        """Awaits the handler inline (no task: it answers whole), then decodes the body as ApiClient does."""
        data = orjson.dumps(body) if body is not None else b""
        headers = {**self._auth, "Content-Type": content_type} if data else self._auth
        collector = _Collector()
        resp = await self._serve(_request(method, path, params, data, headers, collector))
        if resp.prepared:  # streamed (pod logs) and finished: the body is in the collector
            await resp.write_eof()  # as aiohttp's server does after the handler; nothing if the handler did
            payload = b"".join(c for c in iter(collector.chunks.get_nowait, None) if c)
            status, ctype = collector.status, collector.headers.get("Content-Type", JSON)
        else:
            payload, status, ctype = cast(bytes, cast(web.Response, resp).body or b""), resp.status, resp.content_type
        out = orjson.loads(payload) if payload and ctype.split(";", 1)[0] == JSON else payload
        if status >= 400:
            raise status_error(status, out)
        return out

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        """Yield watch events until the server ends the stream; an ERROR event raises its Status.

        The watch handler runs as a task and writes whole lines; closing the iterator cancels it.
        """
        reply = await self.exchange("GET", path, params={**params, "watch": "true"})
        try:
            if reply.status >= 400:
                raise status_error(reply.status, orjson.loads(await reply.read() or b"{}"))
            while line := await reply.readline():
                event: Obj = orjson.loads(line)
                if event.get("type") == "ERROR":
                    raise status_error(int(event["object"].get("code", 500)), event["object"])
                yield event
        finally:
            reply.close()

    async def close(self) -> None:
        return None
