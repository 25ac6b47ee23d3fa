"""The server side of a SPDY/3.1 connection (what moby/spdystream speaks for kubectl), over any byte stream.

Only what exec, attach and port-forward need: the client opens streams (SYN_STREAM, headers in a zlib stream
primed with the SPDY dictionary, one compression context per direction for the whole
connection), the server accepts each with a SYN_REPLY, data flows in DATA frames, FIN half-closes
a stream, RST_STREAM ends it, PINGs are echoed and GOAWAY ends the connection. Flow control
(WINDOW_UPDATE, SETTINGS) is not enforced by spdystream and is ignored here the same way.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import zlib
from collections.abc import Awaitable, Callable

from kubelite.agent.streaming.spdy_dictionary import DICTIONARY

log = logging.getLogger("kubelite.agent.spdy")

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
RST_CANCEL = 5
MAX_FRAME = 16 * 1024 * 1024  # 24-bit length field; a longer one cannot be framed
DATA_CHUNK = 32 * 1024


class ProtocolError(Exception):
    """The peer sent something that is not SPDY/3: the connection ends."""


def encode_headers(headers: dict[str, str]) -> bytes:
    out = [struct.pack(">I", len(headers))]
    for name, value in headers.items():
        n, v = name.lower().encode(), value.encode()
        out += [struct.pack(">I", len(n)), n, struct.pack(">I", len(v)), v]
    return b"".join(out)


def decode_headers(block: bytes) -> dict[str, str]:
    try:
        (count,), pos, headers = struct.unpack_from(">I", block), 4, {}
        for _ in range(count):
            (size,) = struct.unpack_from(">I", block, pos)
            name = block[pos + 4:pos + 4 + size].decode()
            pos += 4 + size
            (size,) = struct.unpack_from(">I", block, pos)
            headers[name] = block[pos + 4:pos + 4 + size].decode()
            pos += 4 + size
    except (struct.error, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed header block: {exc}") from None
    return headers


def control(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def data(stream_id: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(payload)) + payload


class Stream:
    """One stream the client opened: its headers, what it sent (b"" once it half-closed), and writes back."""

    def __init__(self, session: Session, stream_id: int, headers: dict[str, str]) -> None:
        self.session, self.id, self.headers = session, stream_id, headers
        self.incoming: asyncio.Queue[bytes] = asyncio.Queue()
        self.remote_closed = False
        self.local_closed = False

    async def read(self) -> bytes:
        """The next chunk from the client; b"" when it half-closed or reset the stream."""
        if self.remote_closed and self.incoming.empty():
            return b""
        return await self.incoming.get()

    async def write(self, payload: bytes) -> None:
        for i in range(0, len(payload), DATA_CHUNK):
            await self.session.send(data(self.id, 0, payload[i:i + DATA_CHUNK]))

    async def close(self) -> None:
        """Half-close: FIN, nothing more from this side."""
        if not self.local_closed:
            self.local_closed = True
            await self.session.send(data(self.id, FLAG_FIN, b""))

    def _received(self, payload: bytes, fin: bool) -> None:
        if payload:
            self.incoming.put_nowait(payload)
        if fin and not self.remote_closed:
            self.remote_closed = True
            self.incoming.put_nowait(b"")


class Session:
    """A SPDY/3.1 server session: `feed` it the client's bytes; `send` carries frames back; `on_stream`
    receives every stream the client opens (after its SYN_REPLY went out)."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]], on_stream: Callable[[Stream], None]) -> None:
        self.send_bytes, self.on_stream = send, on_stream
        self.streams: dict[int, Stream] = {}
        self.buffer = bytearray()
        self.inflate = zlib.decompressobj(zdict=DICTIONARY)
        self.deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, zdict=DICTIONARY)
        self.lock = asyncio.Lock()  # one frame at a time, and headers compressed in the order they are sent
        self.closed = asyncio.Event()

    async def send(self, frame: bytes) -> None:
        async with self.lock:
            await self.send_bytes(frame)

    async def _reply(self, stream_id: int) -> None:
        async with self.lock:
            block = self.deflate.compress(encode_headers({})) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
            await self.send_bytes(control(SYN_REPLY, 0, struct.pack(">I", stream_id) + block))

    async def feed(self, chunk: bytes) -> None:
        """The client's next bytes: every complete frame in the buffer is handled."""
        self.buffer += chunk
        while len(self.buffer) >= 8:
            length = int.from_bytes(self.buffer[5:8], "big")
            if len(self.buffer) < 8 + length:
                return
            head, body = bytes(self.buffer[:8]), bytes(self.buffer[8:8 + length])
            del self.buffer[:8 + length]
            await self._frame(head, body)

    async def _frame(self, head: bytes, body: bytes) -> None:
        flags = head[4]
        if not head[0] & 0x80:  # a data frame
            stream = self.streams.get(int.from_bytes(head[:4], "big") & 0x7FFFFFFF)
            if stream is not None:
                stream._received(body, bool(flags & FLAG_FIN))
            return
        version, kind = struct.unpack(">HH", head[:4])
        if version & 0x7FFF != VERSION:
            raise ProtocolError(f"unsupported SPDY version {version & 0x7FFF}")
        if kind == SYN_STREAM:
            if len(body) < 10:
                raise ProtocolError("short SYN_STREAM")
            stream_id = int.from_bytes(body[:4], "big") & 0x7FFFFFFF
            try:
                headers = decode_headers(self.inflate.decompress(body[10:]))
            except zlib.error as exc:
                raise ProtocolError(f"header block: {exc}") from None
            stream = Stream(self, stream_id, headers)
            self.streams[stream_id] = stream
            if flags & FLAG_FIN:
                stream._received(b"", True)
            await self._reply(stream_id)
            self.on_stream(stream)
        elif kind == RST_STREAM and len(body) >= 4:
            stream = self.streams.pop(int.from_bytes(body[:4], "big") & 0x7FFFFFFF, None)
            if stream is not None:
                stream._received(b"", True)
        elif kind == PING:
            await self.send(control(PING, 0, body))
        elif kind == HEADERS and len(body) >= 4:
            self.inflate.decompress(body[4:])  # keeps the shared zlib context in step; nothing to act on
        elif kind == GOAWAY:
            self.close()
        # SETTINGS and WINDOW_UPDATE: no flow control (see the module's docstring)

    def close(self) -> None:
        for stream in self.streams.values():
            stream._received(b"", True)
        self.closed.set()
