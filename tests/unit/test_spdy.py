"""The agent's SPDY/3.1 server session, driven frame by frame as moby/spdystream's client drives it."""

from __future__ import annotations

import struct
import zlib

import orjson
import pytest

from kubelite.agent.streaming import channels, spdy
from kubelite.agent.streaming.spdy_dictionary import DICTIONARY


class Client:
    """The client's side: its own header compression context, and everything the session sent back."""

    def __init__(self) -> None:
        self.deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, zdict=DICTIONARY)
        self.inflate = zlib.decompressobj(zdict=DICTIONARY)
        self.received = bytearray()
        self.streams: list[spdy.Stream] = []
        self.session = spdy.Session(self._receive, self.streams.append)

    async def _receive(self, frame: bytes) -> None:
        self.received += frame

    def syn_stream(self, stream_id: int, headers: dict[str, str], fin: bool = False) -> bytes:
        block = self.deflate.compress(spdy.encode_headers(headers)) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        return spdy.control(spdy.SYN_STREAM, spdy.FLAG_FIN if fin else 0,
                            struct.pack(">IIH", stream_id, 0, 0) + block)

    def frames(self) -> list[tuple[str, int, int, bytes]]:
        """(kind, stream id or control type, flags, payload) of what the session sent, headers decompressed."""
        out, buf = [], bytes(self.received)
        while buf:
            length = int.from_bytes(buf[5:8], "big")
            head, body, buf = buf[:8], buf[8:8 + length], buf[8 + length:]
            if head[0] & 0x80:
                kind = struct.unpack(">H", head[2:4])[0]
                if kind == spdy.SYN_REPLY:
                    body = body[:4] + self.inflate.decompress(body[4:])
                out.append(("control", kind, head[4], body))
            else:
                out.append(("data", int.from_bytes(head[:4], "big"), head[4], body))
        return out


async def test_streams_are_accepted_with_headers_and_data_flows_both_ways() -> None:
    c = Client()
    await c.session.feed(c.syn_stream(1, {"streamType": "error", "port": "80", "requestID": "0"}))
    await c.session.feed(c.syn_stream(3, {"streamType": "data", "port": "80", "requestID": "0"}))
    assert [s.headers for s in c.streams] == [{"streamtype": "error", "port": "80", "requestid": "0"},
                                              {"streamtype": "data", "port": "80", "requestid": "0"}]
    replies = c.frames()
    assert [(k, t, body[:4]) for k, t, _, body in replies] == [("control", spdy.SYN_REPLY, b"\0\0\0\1"),
                                                              ("control", spdy.SYN_REPLY, b"\0\0\0\3")]
    assert spdy.decode_headers(replies[1][3][4:]) == {}
    whole = spdy.data(3, 0, b"GET / HTTP/1.0\r\n\r\n") + spdy.data(3, spdy.FLAG_FIN, b"")
    for i in range(0, len(whole), 5):  # frames split anywhere across transport messages
        await c.session.feed(whole[i:i + 5])
    data = c.streams[1]
    assert await data.read() == b"GET / HTTP/1.0\r\n\r\n" and await data.read() == b""
    c.received.clear()
    await data.write(b"x" * (spdy.DATA_CHUNK + 1))
    await data.close()
    assert [(k, sid, flags, len(body)) for k, sid, flags, body in c.frames()] == [
        ("data", 3, 0, spdy.DATA_CHUNK), ("data", 3, 0, 1), ("data", 3, spdy.FLAG_FIN, 0)]


CONTROL_CASES = [
    # (name, frame, expected frames back)
    ("ping_is_echoed", spdy.control(spdy.PING, 0, b"\0\0\0\7"), [("control", spdy.PING, 0, b"\0\0\0\7")]),
    ("settings_are_ignored", spdy.control(spdy.SETTINGS, 0, b"\0\0\0\1\0\0\0\4\0\1\0\0"), []),
    ("window_update_is_ignored", spdy.control(spdy.WINDOW_UPDATE, 0, b"\0\0\0\1\0\0\1\0"), []),
    ("data_for_an_unknown_stream_is_dropped", spdy.data(9, 0, b"x"), []),
]


@pytest.mark.parametrize(("frame", "expected"), [c[1:] for c in CONTROL_CASES], ids=[c[0] for c in CONTROL_CASES])
async def test_control_frames(frame: bytes, expected: list[tuple[str, int, int, bytes]]) -> None:
    c = Client()
    await c.session.feed(frame)
    assert c.frames() == expected


async def test_reset_and_goaway_end_streams() -> None:
    c = Client()
    await c.session.feed(c.syn_stream(1, {"streamtype": "data"}))
    await c.session.feed(c.syn_stream(3, {"streamtype": "data"}))
    await c.session.feed(spdy.control(spdy.RST_STREAM, 0, struct.pack(">II", 1, spdy.RST_CANCEL)))
    assert await c.streams[0].read() == b""
    await c.session.feed(spdy.control(spdy.GOAWAY, 0, struct.pack(">II", 3, 0)))
    assert c.session.closed.is_set() and await c.streams[1].read() == b""


BAD_CASES = [
    ("wrong_version", struct.pack(">HHI", 0x8002, spdy.PING, 4) + b"\0\0\0\1", "unsupported SPDY version 2"),
    ("short_syn_stream", spdy.control(spdy.SYN_STREAM, 0, b"\0\0\0\1"), "short SYN_STREAM"),
    ("headers_not_compressed", spdy.control(spdy.SYN_STREAM, 0, b"\0\0\0\1\0\0\0\0\0\0garbage"), "header block"),
]


@pytest.mark.parametrize(("frame", "message"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
async def test_protocol_errors(frame: bytes, message: str) -> None:
    with pytest.raises(spdy.ProtocolError, match=message):
        await Client().session.feed(frame)


def test_dictionary_is_spdy3s() -> None:
    """Its size and zlib's Adler-32 (the dictionary id both ends check: kubectl's port-forward accepts it)."""
    assert (len(DICTIONARY), zlib.adler32(DICTIONARY)) == (1423, 0xE3C6A7C2)


RESIZE_CASES = [
    ("well_formed", b'{"Width":120,"Height":40}', (120, 40)),
    ("zero_is_ignored", b'{"Width":0,"Height":40}', None),
    ("not_json", b"12x40", None),
    ("not_an_object", b"[1,2]", None),
    ("too_large", b'{"Width":70000,"Height":40}', None),
]


@pytest.mark.parametrize(("payload", "size"), [c[1:] for c in RESIZE_CASES], ids=[c[0] for c in RESIZE_CASES])
def test_resize_messages(payload: bytes, size: tuple[int, int] | None) -> None:
    assert channels.resize(payload) == size


def test_exit_status_as_kubelet_writes_it() -> None:
    assert orjson.loads(channels.exit_status(0)) == {"metadata": {}, "status": "Success"}
    failed = orjson.loads(channels.exit_status(3))
    assert (failed["reason"], failed["details"]["causes"]) == ("NonZeroExitCode",
                                                               [{"reason": "ExitCode", "message": "3"}])
