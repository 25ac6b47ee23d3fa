"""The link proxy over real loopback sockets: each fault does to the bytes what its name says, and healing
lets them through again. "Nothing arrives" is checked over a short real window (the bytes would otherwise
arrive in well under a millisecond); the delay runs on the fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from kubelite.clock import FakeClock
from kubelite.testing.chaos.proxy import DOWN, UP, LinkProxy

QUIET = 0.3  # real seconds in which a blocked direction must deliver nothing
ARRIVES = 5.0  # real seconds within which a open direction must deliver


@dataclass
class Link:
    proxy: LinkProxy
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter]
    server: tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _open(proxy: LinkProxy, accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
                ) -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter],
                           tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    client = await asyncio.open_connection("127.0.0.1", proxy.port)
    return client, await asyncio.wait_for(accepted.get(), ARRIVES)


@pytest.fixture
async def link() -> AsyncIterator[Link]:
    accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def on_connect(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.put_nowait((r, w))

    upstream = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    proxy = LinkProxy("node-a", upstream.sockets[0].getsockname()[1], clock=FakeClock())
    await proxy.start()
    client, server = await _open(proxy, accepted)
    yield Link(proxy, client, server)
    client[1].close()
    await proxy.stop()
    upstream.close()


async def _arrives(reader: asyncio.StreamReader, data: bytes) -> bool:
    try:
        return await asyncio.wait_for(reader.readexactly(len(data)), ARRIVES) == data
    except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
        return False


async def _quiet(reader: asyncio.StreamReader) -> bool:
    try:
        await asyncio.wait_for(reader.read(1), QUIET)
    except TimeoutError:
        return True
    return False


async def _closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), ARRIVES) == b""
    except ConnectionError:
        return True


# mode -> (agent->server delivered, server->agent delivered) while the fault holds
DIRECTIONS = [
    ("ok", True, True),
    ("drop", False, False),
    (UP, False, True),
    (DOWN, True, False),
]


@pytest.mark.parametrize(("mode", "up_ok", "down_ok"), DIRECTIONS, ids=[d[0] for d in DIRECTIONS])
async def test_blocked_directions_deliver_nothing_until_healed_then_everything(
        link: Link, mode: str, up_ok: bool, down_ok: bool) -> None:
    link.proxy.set(mode)
    link.client[1].write(b"ping")
    link.server[1].write(b"pong")
    assert await (_arrives(link.server[0], b"ping") if up_ok else _quiet(link.server[0]))
    assert await (_arrives(link.client[0], b"pong") if down_ok else _quiet(link.client[0]))
    link.proxy.set("ok")  # a silent drop held the bytes, as TCP retransmission would deliver them
    if not up_ok:
        assert await _arrives(link.server[0], b"ping")
    if not down_ok:
        assert await _arrives(link.client[0], b"pong")


async def test_cut_resets_existing_connections_and_refuses_new_ones(link: Link) -> None:
    link.proxy.set("cut")
    assert await _closed(link.client[0])
    assert await _closed(link.server[0])
    reader, _ = await asyncio.open_connection("127.0.0.1", link.proxy.port)
    assert await _closed(reader)


async def test_half_open_closes_the_server_side_and_leaves_the_client_hanging(link: Link) -> None:
    link.proxy.set("half_open")
    assert await _closed(link.server[0])
    link.client[1].write(b"ping")
    assert await _quiet(link.client[0]), "the client hears neither an answer nor a close"


async def test_delay_holds_each_chunk_for_the_delay(link: Link) -> None:
    clock = link.proxy.clock
    assert isinstance(clock, FakeClock)
    link.proxy.set("delay", 2.0)
    link.client[1].write(b"ping")
    await asyncio.sleep(0.05)  # let the proxy read it (real I/O), on the fake clock's instant 0
    await clock.advance(1.5)
    assert await _quiet(link.server[0])
    await clock.advance(1.0)
    assert await _arrives(link.server[0], b"ping")


async def test_unknown_mode_is_refused(link: Link) -> None:
    with pytest.raises(ValueError, match="unknown link mode"):
        link.proxy.set("flaky")
