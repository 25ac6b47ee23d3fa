"""A TCP proxy whose link can be broken at runtime, standing for the network between an agent and the
API server (S8). It forwards bytes, not HTTP: TLS goes through untouched, so the agent sees exactly what
a real network fault would show it.

Faults (`LinkProxy.set`): `cut` resets every connection and every new one (RST, as a firewall's reject);
`drop` forwards nothing in either direction but keeps the sockets (a silent drop: the bytes wait, as TCP
retransmits them, and flow again on heal unless an endpoint gave up first); `up`/`down` drop one
direction only (agent→server or server→agent); `half_open` closes the server's side of every existing
connection while the agent's side sees nothing at all; `delay` holds every chunk for a fixed time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from dataclasses import dataclass, field

from kubelite.clock import Clock, RealClock

log = logging.getLogger(__name__)

UP, DOWN = "up", "down"  # agent→server, server→agent
MODES = ("ok", "cut", "drop", UP, DOWN, "half_open", "delay")
CHUNK = 65536


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST rather than a FIN (SO_LINGER 0), as a refused or reset connection looks."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass(eq=False)  # kept in a set by identity
class _Conn:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    half_open: bool = False  # the server side was closed; the client side is left hanging


class LinkProxy:
    """One listening port forwarding to one target port; `set(mode)` switches the fault at once."""

    def __init__(self, name: str, target_port: int, host: str = "127.0.0.1", clock: Clock | None = None) -> None:
        self.clock = clock or RealClock()
        self.name = name
        self.host = host
        self.target_port = target_port
        self.port = 0
        self.mode = "ok"
        self.delay = 0.0
        self._open = {UP: asyncio.Event(), DOWN: asyncio.Event()}
        for ev in self._open.values():
            ev.set()
        self._conns: set[_Conn] = set()
        self._server: asyncio.Server | None = None

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            self._close(conn)
        if self._server is not None:
            await self._server.wait_closed()

    def set(self, mode: str, delay: float = 0.0) -> None:
        """Switch the link to `mode` (one of MODES); "ok" heals it."""
        if mode not in MODES:
            raise ValueError(f"unknown link mode {mode!r}")
        self.mode, self.delay = mode, delay
        blocked = {"drop": (UP, DOWN), UP: (UP,), DOWN: (DOWN,)}.get(mode, ())
        for direction, ev in self._open.items():
            if direction in blocked:
                ev.clear()
            else:
                ev.set()
        if mode == "cut":
            for conn in list(self._conns):
                self._close(conn)
        elif mode == "half_open":
            for conn in list(self._conns):
                conn.half_open = True
                if conn.server is not None:
                    _reset(conn.server)
        log.info("link %s: %s%s", self.name, mode, f" {delay}s" if mode == "delay" else "")

    def _close(self, conn: _Conn) -> None:
        for task in conn.tasks:
            task.cancel()
        _reset(conn.client)
        if conn.server is not None:
            _reset(conn.server)
        self._conns.discard(conn)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "cut":
            _reset(writer)
            return
        conn = _Conn(writer)
        self._conns.add(conn)
        try:
            await self._open[UP].wait()  # a dropped link: the SYN "reaches" nobody until it heals
            up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)
        except (OSError, asyncio.CancelledError):
            self._close(conn)
            return
        if conn not in self._conns:  # cut while connecting
            _reset(up_writer)
            return
        conn.server = up_writer
        conn.tasks = [asyncio.create_task(self._pump(conn, reader, up_writer, UP)),
                      asyncio.create_task(self._pump(conn, up_reader, writer, DOWN))]
        try:
            await asyncio.gather(*conn.tasks, return_exceptions=True)
        except asyncio.CancelledError:
            return  # the proxy is stopping (a half-open connection's pumps never end on their own)
        if conn in self._conns:
            self._close(conn)

    async def _pump(self, conn: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    direction: str) -> None:
        """Read into a queue at once and write from it when the direction is open and the delay has passed,
        so that a delay holds each chunk for `delay` from its arrival, not from the previous write."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            try:
                while data := await reader.read(CHUNK):
                    queue.put_nowait((self.clock.monotonic(), data))
            except (OSError, ConnectionError):
                pass  # a reset reads as the end of the stream: the other side is closed in turn
            finally:
                queue.put_nowait((self.clock.monotonic(), b""))

        reading = asyncio.create_task(read())
        try:
            while True:
                arrived, data = await queue.get()
                await self._open[direction].wait()
                if self.mode == "delay" and self.delay > 0:
                    await self.clock.sleep(max(0.0, arrived + self.delay - self.clock.monotonic()))
                if conn.half_open:
                    continue  # the other side is gone and this one never hears of it
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            return
        finally:
            reading.cancel()
