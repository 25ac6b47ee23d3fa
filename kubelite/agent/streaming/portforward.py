"""port-forward: kubectl's SPDY port-forward protocol, tunnelled in WebSocket binary messages.

kubectl v1.32 (KUBECTL_PORT_FORWARD_WEBSOCKETS, on by default) offers the subprotocol
`SPDY/3.1+portforward.k8s.io`: the messages carry the bytes of a SPDY connection
(client-go tools/portforward tunneling_connection.go). Its fallback, a plain `Upgrade: SPDY/3.1`
with `X-Stream-Protocol-Version: portforward.k8s.io`, carries the same SPDY on the raw connection.

For each local connection the client opens an `error` and a `data` stream with the same
`requestID` and the pod's `port`; the agent connects to that port (pods share the node's network
here: localhost) and copies both ways; a failure to connect is written on the error stream, as
kubelet does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import WSMsgType, web

from kubelite.agent.hooks import errno_text
from kubelite.agent.streaming import spdy, transport
from kubelite.api.errors import ApiError
from kubelite.clock import Clock, bounded

log = logging.getLogger("kubelite.agent.portforward")

SPDY_PROTOCOL = "portforward.k8s.io"
PROTOCOL = "SPDY/3.1+" + SPDY_PROTOCOL  # tunnelled in WebSocket
POD_HOST = "127.0.0.1"  # pods use the host network (README, isolation table)
PAIR_TIMEOUT = 30.0  # kubelet's stream creation timeout: the second stream of a request must come by then
READ_SIZE = 32 * 1024
CONNECT_TIMEOUT = 10.0


def dial_error(port: int, exc: OSError) -> str:
    """Why the connection to the pod's port failed, as Go's net.Dial("tcp4", …) says it in containerd's
    PortForward: `dial tcp4 127.0.0.1:PORT: connect: connection refused` (the syscall's strerror, lower-cased as
    Go's errno table has it), `… i/o timeout` when the connect timed out — not Python's "[Errno 111] Connect call
    failed (…)". containerd wraps it in "failed to connect to localhost:PORT inside namespace <sandbox ID>";
    kubelite's pods have no network namespace (nor its ID), so only the dial's own error follows kubelet's prefix."""
    where = f"dial tcp4 {POD_HOST}:{port}"
    if isinstance(exc, TimeoutError) and exc.errno is None:
        return f"{where}: i/o timeout"
    if exc.errno is None:
        return f"{where}: {exc}"
    return f"{where}: connect: {errno_text(exc.errno)}"


class Forwarder:
    """Pairs each request's error and data streams, then forwards the data stream to the pod's port."""

    def __init__(self, pod: str, uid: str, clock: Clock) -> None:
        self.pod, self.uid, self.clock = pod, uid, clock
        self.pending: dict[str, dict[str, spdy.Stream]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def on_stream(self, stream: spdy.Stream) -> None:
        request = stream.headers.get("requestid", "")
        kind = stream.headers.get("streamtype", "")
        pair = self.pending.setdefault(request, {})
        pair[kind] = stream
        if "error" in pair and "data" in pair:
            del self.pending[request]
            task = asyncio.create_task(self._forward(pair["data"], pair["error"]))
        elif len(pair) == 1:
            task = asyncio.create_task(self._expire(request))
        else:
            return
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _expire(self, request: str) -> None:
        await self.clock.sleep(PAIR_TIMEOUT)
        pair = self.pending.pop(request, {})
        for stream in pair.values():
            with contextlib.suppress(ConnectionError):
                await stream.close()

    async def _forward(self, data: spdy.Stream, error: spdy.Stream) -> None:
        try:
            port = int(data.headers.get("port", ""))
            if not 0 < port < 65536:
                raise ValueError(port)
        except ValueError:
            await self._fail(data, error, f'invalid port header "{data.headers.get("port", "")}"')
            return
        try:
            finished, conn = await bounded(self.clock, asyncio.open_connection(POD_HOST, port), CONNECT_TIMEOUT)
            if not finished or conn is None:
                raise TimeoutError
        except OSError as exc:
            await self._fail(data, error,
                             f"error forwarding port {port} to pod {self.pod}, uid {self.uid}: {dial_error(port, exc)}")
            return
        reader, writer = conn
        to_pod = asyncio.create_task(self._to_pod(data, writer))
        try:
            while chunk := await reader.read(READ_SIZE):
                await data.write(chunk)
            await data.close()
            await to_pod
        except ConnectionError:
            pass
        finally:
            to_pod.cancel()
            writer.close()
            with contextlib.suppress(ConnectionError):
                await error.close()

    @staticmethod
    async def _to_pod(data: spdy.Stream, writer: asyncio.StreamWriter) -> None:
        while chunk := await data.read():
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    @staticmethod
    async def _fail(data: spdy.Stream, error: spdy.Stream, message: str) -> None:
        with contextlib.suppress(ConnectionError):
            await error.write(message.encode())
            await error.close()
            await data.close()

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()


async def serve(request: web.Request, pod: str, uid: str, clock: Clock) -> web.StreamResponse:
    """SPDY tunnelled in WebSocket (kubectl's default), or plain SPDY/3.1 (its fallback)."""
    forwarder = Forwarder(pod, uid, clock)
    try:
        if transport.is_spdy(request):
            return await _serve_spdy(request, forwarder)
        return await _serve_tunnelled(request, forwarder)
    finally:
        forwarder.close()


async def _serve_spdy(request: web.Request, forwarder: Forwarder) -> web.StreamResponse:
    if SPDY_PROTOCOL not in transport.offered(request):
        err = ApiError(403, "Forbidden", f"no supported stream protocol among {transport.offered(request)}; "
                                         f"supported: [{SPDY_PROTOCOL}]")
        return web.json_response(err.status(), status=err.code)
    resp, conn = await transport.switch_to_spdy(request, SPDY_PROTOCOL)
    try:
        await transport.serve_spdy(conn, spdy.Session(conn.write, forwarder.on_stream))
    finally:
        conn.close()
    return resp


async def _serve_tunnelled(request: web.Request, forwarder: Forwarder) -> web.StreamResponse:
    ws = web.WebSocketResponse(protocols=(PROTOCOL,), max_msg_size=0)
    await ws.prepare(request)
    if ws.ws_protocol != PROTOCOL:
        await ws.close(message=b"port-forward needs the subprotocol " + PROTOCOL.encode())
        return ws
    session = spdy.Session(ws.send_bytes, forwarder.on_stream)
    try:
        async for msg in ws:
            if msg.type == WSMsgType.BINARY:
                await session.feed(msg.data)
    except spdy.ProtocolError as exc:
        log.info("port-forward to %s ended: %s", forwarder.pod, exc)
    except ConnectionError:
        pass
    finally:
        session.close()
        await ws.close()
    return ws
