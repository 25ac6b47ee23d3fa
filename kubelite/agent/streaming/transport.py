"""The two ways kubectl carries exec/attach streams: WebSocket channels, or SPDY/3.1 streams (its fallback).

Both are presented as one `Channels` interface (send on a channel number, receive numbered
messages, close) so that exec and attach do not care which one the client chose:

- WebSocket (`v5.channel.k8s.io`, `v4.channel.k8s.io`): one binary message per write, its first
  byte the channel (channels.py).
- SPDY (`Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version: v4.channel.k8s.io`, kubelet's
  remotecommand/httpstream.go): the client opens one stream per channel, named by its
  `streamtype` header (error, stdin, stdout, stderr, resize); the server waits for the streams the
  query asked for; stdin's end is the stream's FIN; resize is a sequence of JSON objects.

A SPDY upgrade takes over the raw connection (`RawConnection`): aiohttp only switches
protocols itself for WebSocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import WSMsgType, web

from kubelite.agent.streaming import channels, spdy
from kubelite.clock import Clock, bounded

SPDY_UPGRADE = "SPDY/3.1"
SPDY_PROTOCOLS = ("v4.channel.k8s.io",)  # what exec and attach speak over SPDY (v4: Status JSON on error)
STREAM_TIMEOUT = 30.0  # kubelet's stream creation timeout
_CHANNELS = {"stdin": channels.STDIN, "stdout": channels.STDOUT, "stderr": channels.STDERR,
             "error": channels.ERROR, "resize": channels.RESIZE}


def is_spdy(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == SPDY_UPGRADE.lower()


def offered(request: web.Request) -> list[str]:
    """The client's X-Stream-Protocol-Version values, in its order of preference."""
    return [p.strip() for h in request.headers.getall("X-Stream-Protocol-Version", []) for p in h.split(",")
            if p.strip()]


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true", "t")


@dataclass(frozen=True)
class Streams:
    """The streams a request asks for (with a terminal, stderr is merged into stdout, as upstream)."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    @classmethod
    def of(cls, request: web.Request) -> Streams:
        tty = _flag(request, "tty")
        return cls(_flag(request, "stdin"), _flag(request, "stdout"), _flag(request, "stderr") and not tty, tty)

    def channels(self) -> set[int]:
        wanted = {channels.ERROR}
        for on, channel in ((self.stdin, channels.STDIN), (self.stdout, channels.STDOUT),
                            (self.stderr, channels.STDERR), (self.tty, channels.RESIZE)):
            if on:
                wanted.add(channel)
        return wanted


class Channels(Protocol):
    async def send(self, channel: int, data: bytes) -> None: ...

    def incoming(self) -> AsyncIterator[tuple[int, bytes]]:
        """(channel, payload) from the client until it goes away; (CLOSE, [STDIN]) at the end of stdin."""
        ...

    async def close(self) -> None: ...


class WebSocketChannels:
    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws

    async def send(self, channel: int, data: bytes) -> None:
        await self.ws.send_bytes(channels.frame(channel, data))

    async def incoming(self) -> AsyncIterator[tuple[int, bytes]]:
        async for msg in self.ws:
            if msg.type == WSMsgType.BINARY and msg.data:
                yield msg.data[0], msg.data[1:]

    async def close(self) -> None:
        await self.ws.close()


class RawConnection:
    """An upgraded connection's bytes: aiohttp's reader on the client's connection is replaced by a queue."""

    def __init__(self, request: web.Request) -> None:
        assert request.transport is not None
        self.transport = request.transport
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        protocol: Any = request.protocol
        protocol.set_parser(self)

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.queue.put_nowait(data)
        return False, b""

    def feed_eof(self) -> None:
        self.queue.put_nowait(b"")

    async def read(self) -> bytes:
        """The client's next bytes; b"" once it closed the connection."""
        return await self.queue.get()

    async def write(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)

    def close(self) -> None:
        self.transport.close()


async def switch_to_spdy(request: web.Request, protocol: str) -> tuple[web.StreamResponse, RawConnection]:
    """Answer 101 for SPDY/3.1 with the negotiated stream protocol, then take over the connection."""
    resp = web.StreamResponse(status=101, reason="Switching Protocols", headers={
        "Connection": "Upgrade", "Upgrade": SPDY_UPGRADE, "X-Stream-Protocol-Version": protocol})
    resp.force_close()
    await resp.prepare(request)
    return resp, RawConnection(request)


async def serve_spdy(conn: RawConnection, session: spdy.Session) -> None:
    """Feed the client's bytes to the SPDY session until the connection or the session ends."""
    try:
        while chunk := await conn.read():
            await session.feed(chunk)
    except spdy.ProtocolError:
        pass
    finally:
        session.close()


class SpdyChannels:
    """exec/attach streams over SPDY: one stream per channel, as the client opened them."""

    def __init__(self, conn: RawConnection, session: spdy.Session, streams: dict[int, spdy.Stream],
                 reader: asyncio.Task[None]) -> None:
        self.conn, self.session, self.streams, self.reader = conn, session, streams, reader

    @classmethod
    async def accept(cls, conn: RawConnection, wanted: set[int], clock: Clock) -> SpdyChannels | None:
        """Wait for the streams the request asked for (None if they do not all come in time)."""
        streams: dict[int, spdy.Stream] = {}
        arrived = asyncio.Event()

        def opened(stream: spdy.Stream) -> None:
            channel = _CHANNELS.get(stream.headers.get("streamtype", ""))
            if channel is not None:
                streams[channel] = stream
            if wanted <= set(streams):
                arrived.set()

        session = spdy.Session(conn.write, opened)
        reader = asyncio.ensure_future(serve_spdy(conn, session))
        waiting = asyncio.ensure_future(arrived.wait())
        await bounded(clock, asyncio.wait({waiting, reader}, return_when=asyncio.FIRST_COMPLETED), STREAM_TIMEOUT)
        waiting.cancel()
        if not arrived.is_set():
            reader.cancel()
            conn.close()
            return None
        return cls(conn, session, streams, reader)

    async def send(self, channel: int, data: bytes) -> None:
        stream = self.streams.get(channel)
        if stream is not None:
            await stream.write(data)

    async def incoming(self) -> AsyncIterator[tuple[int, bytes]]:
        queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue()
        tasks = [asyncio.ensure_future(self._stdin(queue))] if channels.STDIN in self.streams else []
        tasks += [asyncio.ensure_future(self._resizes(queue))] if channels.RESIZE in self.streams else []
        self.reader.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
        finally:
            for t in tasks:
                t.cancel()

    async def _stdin(self, queue: asyncio.Queue[tuple[int, bytes] | None]) -> None:
        stream = self.streams[channels.STDIN]
        while data := await stream.read():
            queue.put_nowait((channels.STDIN, data))
        queue.put_nowait((channels.CLOSE, bytes([channels.STDIN])))

    async def _resizes(self, queue: asyncio.Queue[tuple[int, bytes] | None]) -> None:
        stream, buffer, decoder = self.streams[channels.RESIZE], "", json.JSONDecoder()
        while data := await stream.read():
            buffer = (buffer + data.decode(errors="replace")).lstrip()
            while buffer:
                try:
                    value, end = decoder.raw_decode(buffer)
                except json.JSONDecodeError:
                    break  # an object still arriving
                buffer = buffer[end:].lstrip()
                queue.put_nowait((channels.RESIZE, json.dumps(value).encode()))

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError):
            for channel in (channels.STDOUT, channels.STDERR, channels.ERROR):
                if channel in self.streams:
                    await self.streams[channel].close()
        self.reader.cancel()
        self.conn.close()


class Refused(Exception):
    """The streams could not be set up: the request gets this status instead."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def open_channels(request: web.Request, streams: Streams,
                        clock: Clock) -> tuple[web.StreamResponse, Channels]:
    """Upgrade to WebSocket channels or SPDY streams, as the client asked. kubelet's first WebSocket message,
    an empty frame on the lowest writable channel, tells the client the streams are set up."""
    if is_spdy(request):
        protocol = next((p for p in offered(request) if p in SPDY_PROTOCOLS), None)
        if protocol is None:
            raise Refused(403, f"no supported stream protocol among {offered(request)}; supported: "
                               f"{list(SPDY_PROTOCOLS)}")
        resp, conn = await switch_to_spdy(request, protocol)
        spdy_channels = await SpdyChannels.accept(conn, streams.channels(), clock)
        if spdy_channels is None:
            return resp, _Gone()
        return resp, spdy_channels
    ws = web.WebSocketResponse(protocols=channels.PROTOCOLS, max_msg_size=0)
    await ws.prepare(request)
    first = channels.STDOUT if streams.stdout else channels.STDERR if streams.stderr else channels.ERROR
    await ws.send_bytes(channels.frame(first, b""))
    return ws, WebSocketChannels(ws)


class _Gone:
    """A client that never opened its streams: nothing to send or receive."""

    async def send(self, channel: int, data: bytes) -> None:
        pass

    async def incoming(self) -> AsyncIterator[tuple[int, bytes]]:
        return
        yield

    async def close(self) -> None:
        pass
