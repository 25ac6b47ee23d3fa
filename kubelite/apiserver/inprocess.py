"""The in-process transport of the client seam: components in the server's process call its request handling.

As httpx's `ASGITransport` calls an ASGI app without a socket, `InProcessClient` builds an
aiohttp `web.Request` in memory and hands it to the API server's own dispatch: the same
routing, handlers, admission, validation and watch cache as over HTTP — never the store —
minus what only the network needs: no TCP, no TLS, no authentication (the caller is trusted
code in the same process, as kube-apiserver's loopback client is). Bodies still travel as
JSON bytes, so a component never holds a reference into the server's cache and cannot
corrupt it by mutating what it was given.

It satisfies `kubelite.client.interface.Client` structurally (it may not import the client
package: the apiserver and client stacks are kept apart by import contracts). Errors arrive as
the `ApiError` the handlers raised; an unexpected exception becomes a 500 `ApiError`, as the
HTTP middleware renders it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import orjson
from aiohttp import StreamReader, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.base_protocol import BaseProtocol
from aiohttp.http import HttpVersion11, RawRequestMessage
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from kubelite.api import errors
from kubelite.api.errors import ApiError
from kubelite.api.transport import JSON, RestVerbs, status_error
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.handlers import respond

log = logging.getLogger("kubelite.apiserver.inprocess")

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
    """One response, read as a client reads HTTP: status, headers, then the body whole or line by line."""

    def __init__(self, collector: _Collector, serving: asyncio.Task[web.StreamResponse]) -> None:
        self._collector = collector
        self._serving = serving
        self._buffer = b""
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
        self._buffer += chunk
        return True

    async def read(self) -> bytes:
        while await self._more():
            pass
        out, self._buffer = self._buffer, b""
        return out

    async def readline(self) -> bytes:
        while b"\n" not in self._buffer and await self._more():
            pass
        line, sep, rest = self._buffer.partition(b"\n")
        self._buffer = rest
        return line + sep

    def failure(self) -> BaseException | None:
        """What the handler raised after it had started streaming, if it did."""
        if self._serving.done() and not self._serving.cancelled():
            return self._serving.exception()
        return None

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

    async def _dispatch(self, request: web.Request, render_errors: bool) -> web.StreamResponse:
        try:
            # The server's own routing, without the HTTP middleware: no authentication for a trusted
            # in-process caller, and errors stay ApiError objects unless asked for as Status bodies.
            return await self.server._dispatch(request)
        except ApiError as exc:
            if render_errors:
                return respond(exc.status(), exc.code)
            raise
        except (asyncio.CancelledError, web.HTTPException):
            raise
        except Exception as exc:  # as the middleware: logged, never a traceback to the caller
            log.exception("internal error serving %s %s in process", request.method, request.path)
            err = errors.internal(f"{type(exc).__name__}: {exc}")
            if render_errors:
                return respond(err.status(), err.code)
            raise err from None

    async def exchange(self, method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None,
                       params: Mapping[str, str] | None = None, render_errors: bool = True) -> Reply:
        """One request, answered as soon as the status is known (a streamed body keeps arriving after).

        With render_errors (the HTTP view, for tests comparing transports) an ApiError is a Status
        response, as the middleware renders it; without, it is raised.
        """
        collector = _Collector()
        request = _request(method, path, params, body, headers or {}, collector)
        serving = asyncio.create_task(self._dispatch(request, render_errors))
        started = asyncio.create_task(collector.started.wait())
        try:
            await asyncio.wait({serving, started}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            serving.cancel()
            raise
        finally:
            started.cancel()
        if serving.done():
            resp = serving.result()  # raises the ApiError when errors are not rendered
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
        collector = _Collector()
        resp = await self._dispatch(_request(method, path, params, data, {"Content-Type": content_type} if data
                                             else {}, collector), render_errors=False)
        if resp.prepared:  # streamed (pod logs) and finished: the body is in the collector
            await resp.write_eof()  # as aiohttp's server does after the handler; nothing if the handler did
            payload = b"".join(c for c in iter(collector.chunks.get_nowait, None) if c)
            status, ctype = collector.status, collector.headers.get("Content-Type", JSON)
        else:
            payload, status, ctype = cast(bytes, cast(web.Response, resp).body or b""), resp.status, resp.content_type
        out = orjson.loads(payload) if payload and ctype.split(";", 1)[0] == JSON else payload
        if status >= 400:  # a handler answered with an error response instead of raising (readyz)
            raise status_error(status, out)
        return out

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        """Yield watch events until the server ends the stream; an ERROR event raises its Status.

        The watch handler runs as a task and writes whole lines; closing the iterator cancels it.
        """
        reply = await self.exchange("GET", path, params={**params, "watch": "true"}, render_errors=False)
        try:
            while line := await reply.readline():
                event: Obj = orjson.loads(line)
                if event.get("type") == "ERROR":
                    raise status_error(int(event["object"].get("code", 500)), event["object"])
                yield event
            failure = reply.failure()
            if failure is not None:
                raise failure
        finally:
            reply.close()

    async def close(self) -> None:
        return None
