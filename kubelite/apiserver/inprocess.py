"""The in-process transport of the client seam: components in the server's process call its request handling.

As httpx's `ASGITransport` calls an ASGI app without a socket, `InProcessClient` hands each request
to the API server's own middleware and dispatch: the same routing, handlers, admission, validation,
authorization and watch cache as over HTTP — never the store — minus what only the network needs: no
TCP, no TLS, no HTTP framing. Bodies travel as JSON bytes and answers are decoded from the server's
JSON, so a component never holds a reference into the server's cache and cannot corrupt it by
mutating what it was given (orjson's decode is the cheapest deep copy there is: see
benchmarks/inprocess.py).

Two paths, one set of handlers:
- `request` and `watch` build a `LoopbackRequest`: a `web.Request` whose method, path, query, headers
  and body are set directly (no message parsing, no StreamReader, no writer, no task). A watch is
  handed back unwritten (`watch.WatchResponse`) and its chunks are read in the caller's own task;
  everything else answers whole, as a `web.Response`. Requests whose handlers stream over a
  connection (pod logs, exec/attach/portforward) get a complete request, as `exchange` builds it.
- `exchange` builds a complete aiohttp `web.Request` in memory and collects what the handler
  writes, chunk by chunk, as a client reads HTTP: status, headers, body (tests read any answer so).

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
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy
from yarl import URL

from kubelite.api.transport import JSON, RestVerbs, status_error
from kubelite.apiserver import streaming
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.watch import LOOPBACK, WatchResponse, bookmark_object

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


class _Body:
    """A loopback request's body, read as `read_body` reads a socket's StreamReader: up to n bytes a call, then b""."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self, n: int = -1) -> bytes:
        if n < 0 or n >= len(self._data):
            data, self._data = self._data, b""
        else:
            data, self._data = self._data[:n], self._data[n:]
        return data


_NO_QUERY: MultiDictProxy[str] = MultiDictProxy(MultiDict())
_PROTOCOL = _Protocol()
# The handlers that write to a connection as they go (resp.prepare): these requests get a complete web.Request.
_STREAMED = frozenset({"log", *streaming.SUBRESOURCES})


class LoopbackRequest(web.Request):
    """A `web.Request` for one in-process call, with what the server reads of a request set directly.

    `web.Request.__init__` is deliberately not called: it wants a parsed HTTP message, a payload
    StreamReader, a connection's protocol, a response writer and the serving task, none of which a
    handler reads (building one and reading its body: 8.4 µs, against 2.3 for this). aiohttp's
    properties of a request are cached in `_cache`, so method, path, query, headers and content are put
    there; the URL (rel_url, path_qs for the server's log) is built only if something asks for it (`_rel_url`:
    nothing does on the way of a request that succeeds; yarl's URL.build was a µs of each). No Content-Length:
    `read_body` bounds what it reads itself. A handler that prepares a streamed response needs the
    writer this request has not got: those paths (`_STREAMED`) get a complete one (`_streamed`).
    """

    def __init__(self, method: str, path: str, query: MultiDictProxy[str], headers: CIMultiDictProxy[str],
                 body: bytes) -> None:
        self._method = method
        self._headers = headers
        self._state = {LOOPBACK: True}
        self._protocol = cast(Any, _PROTOCOL)
        self._cache = {"method": method, "path": path, "query": query, "headers": headers, "content": _Body(body)}

    @property
    def _rel_url(self) -> URL:  # type: ignore[override]  # web.Request's attribute, built on first use here
        cache = self._cache
        url = cache.get("_rel_url")
        if url is None:
            url = cache["_rel_url"] = URL.build(path=cache["path"], query=cache["query"])
        return cast(URL, url)


class InProcessClient(RestVerbs):
    def __init__(self, server: ApiServer) -> None:
        self.server = server
        # As kube-apiserver's loopback client: the server's own components present a token it trusts.
        token = next(iter(sorted(server.tokens)), None)
        self._auth = {"Authorization": f"Bearer {token}"} if token else {}
        # The headers of a loopback request by Content-Type (immutable: one proxy serves every such request)
        self._headers: dict[str, CIMultiDictProxy[str]] = {}

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        """The server's own middleware (authentication, errors rendered as Status) and routing."""
        return await self.server._middleware(request, self.server._dispatch)

    def _loopback(self, method: str, path: str, params: Mapping[str, str] | None, body: bytes,
                  content_type: str) -> LoopbackRequest:
        """`content_type` "" for a request without a body: no Content-Type header, as ApiClient sends it."""
        headers = self._headers.get(content_type)
        if headers is None:
            fields = {"Accept": JSON, **self._auth, **({"Content-Type": content_type} if content_type else {})}
            headers = self._headers[content_type] = CIMultiDictProxy(CIMultiDict(fields))
        if "%" in path or "?" in path:  # escapes or a query in the path: read by yarl as aiohttp would read them
            url = URL(path).update_query(dict(params or {}))
            path, params = url.path, url.query
        query = MultiDictProxy(MultiDict(params)) if params else _NO_QUERY
        return LoopbackRequest(method, path, query, headers, body)

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
        if path.rsplit("/", 1)[-1] in _STREAMED:
            return await self._streamed(method, path, data, content_type, params)
        resp = await self._serve(self._loopback(method, path, params, data, content_type if data else ""))
        if type(resp) is WatchResponse:  # ?watch=true asked of request(): the whole stream is the body, as HTTP
            try:
                payload = b"".join([chunk async for chunk in resp.stream.chunks()])
            finally:
                resp.stream.close()
            return self._decoded(resp.status, resp.content_type, payload)
        return self._decoded(resp.status, resp.headers.get("Content-Type", JSON),
                             cast(bytes, cast(web.Response, resp).body or b""))

    async def _streamed(self, method: str, path: str, data: bytes, content_type: str,
                        params: Mapping[str, str] | None) -> Any:
        """A request whose handler may stream (pod logs): a complete web.Request, its body collected."""
        headers = {**self._auth, "Content-Type": content_type} if data else self._auth
        collector = _Collector()
        resp = await self._serve(_request(method, path, params, data, headers, collector))
        if resp.prepared:  # streamed and finished: the body is in the collector
            await resp.write_eof()  # as aiohttp's server does after the handler; nothing if the handler did
            payload = b"".join(c for c in iter(collector.chunks.get_nowait, None) if c)
            return self._decoded(collector.status, collector.headers.get("Content-Type", JSON), payload)
        return self._decoded(resp.status, resp.content_type, cast(bytes, cast(web.Response, resp).body or b""))

    @staticmethod
    def _decoded(status: int, content_type: str, payload: bytes) -> Any:
        out = orjson.loads(payload) if payload and content_type.split(";", 1)[0] == JSON else payload
        if status >= 400:
            raise status_error(status, out)
        return out

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        """Yield watch events until the server ends the stream; an ERROR event raises its Status.

        The watch is read in the caller's task, driving the stream itself (`WatchStream.take`, no generator
        between): each batch of events the watch cache hands over is split into its lines and each decoded (the
        shared encoding is made once per event, the copy once per watcher). A periodic bookmark is made here as
        the object its JSON line decodes to, not encoded to be decoded again: most of a simulation's watches get
        nothing else. Closing the iterator takes the watch out of the cache.
        """
        resp = await self._serve(self._loopback("GET", path, {**params, "watch": "true"}, b"", ""))
        if not isinstance(resp, WatchResponse):  # refused: a Status
            self._decoded(resp.status, resp.content_type, cast(bytes, cast(web.Response, resp).body or b"{}"))
            raise status_error(resp.status, {})  # a non-error answer to a watch: never served
        stream = resp.stream
        try:
            while (item := stream.take()) is not None:
                if type(item) is bytes:
                    # most batches are one event: decoded as it is (orjson reads past the newline), not split first
                    for line in (item,) if item.count(b"\n") == 1 else item.splitlines():
                        event: Obj = orjson.loads(line)
                        if event.get("type") == "ERROR":
                            raise status_error(int(event["object"].get("code", 500)), event["object"])
                        yield event
                elif type(item) is int:
                    yield {"type": "BOOKMARK", "object": bookmark_object(stream.shown, item)}
                else:
                    await cast(asyncio.Future[None], item)
        finally:
            stream.close()

    async def close(self) -> None:
        return None
