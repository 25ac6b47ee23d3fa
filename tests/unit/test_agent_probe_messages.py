"""Probe failures in upstream's words (pkg/probe/http, pkg/probe/tcp and the exec runtime's timeout): the Go
error texts kubectl users see in Unhealthy events, from real sockets, a real HTTP server and real child processes
— never Python's or aiohttp's (`Cannot connect to host … [Connect call failed …]`)."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kubelite.agent.hooks import run_handler, run_hook, timeout_message
from kubelite.agent.prober import Prober
from kubelite.clock import RealClock
from tests.conftest import free_port

Obj = dict[str, Any]
CONTAINER: Obj = {"name": "c", "ports": [{"name": "web", "containerPort": 8080}]}


CLOSED = free_port()
FAILURES = [
    pytest.param({"httpGet": {"path": "/", "port": CLOSED}},
                 f'Get "http://127.0.0.1:{CLOSED}/": dial tcp 127.0.0.1:{CLOSED}: connect: connection refused',
                 id="http probe to a closed port: Go's dial error inside the url.Error"),
    pytest.param({"httpGet": {"port": CLOSED, "host": "nosuch.invalid"}},
                 f'Get "http://nosuch.invalid:{CLOSED}/": dial tcp: lookup nosuch.invalid: no such host',
                 id="http probe to an unknown host: the lookup error, path defaulting to /"),
    pytest.param({"httpGet": {"path": "/healthz", "port": "SERVER"}}, "HTTP probe failed with statuscode: 500",
                 id="http probe answered 500: the status code, never the body"),
    pytest.param({"httpGet": {"path": "/", "port": "HANGUP"}}, 'Get "http://127.0.0.1:HANGUP/": EOF',
                 id="http probe to a server that hangs up without answering: EOF"),
    pytest.param({"tcpSocket": {"port": CLOSED}}, f"dial tcp 127.0.0.1:{CLOSED}: connect: connection refused",
                 id="tcp probe to a closed port: Go's dial error"),
    pytest.param({"tcpSocket": {"port": CLOSED, "host": "nosuch.invalid"}},
                 "dial tcp: lookup nosuch.invalid: no such host", id="tcp probe to an unknown host"),
]


@pytest.fixture(scope="module")
def hang_up_port() -> Iterator[int]:
    """A server that reads each request and closes the connection without a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


@pytest.mark.parametrize("handler,message", FAILURES)
async def test_failure_message(server_port: int, hang_up_port: int, handler: Obj, message: str) -> None:
    ports = {"SERVER": server_port, "HANGUP": hang_up_port}
    for kind in ("httpGet", "tcpSocket"):
        if handler.get(kind, {}).get("port") in ports:
            handler = {kind: {**handler[kind], "port": ports[handler[kind]["port"]]}}
    message = message.replace("HANGUP", str(hang_up_port))
    assert await run_handler(handler, CONTAINER, {}, "127.0.0.1", RealClock()) == (False, message)


TIMEOUTS = [
    pytest.param({"exec": {"command": ["sh", "-c", "sleep 10"]}}, 'command "sh -c sleep 10" timed out',
                 id="exec: the runtime's DeadlineExceeded as kubelet words it"),
    pytest.param({"httpGet": {"path": "/ready", "port": "web"}},
                 'Get "http://10.0.0.1:8080/ready": context deadline exceeded (Client.Timeout exceeded while awaiting '
                 'headers)', id="httpGet: Go's http.Client timeout, a named port resolved"),
    pytest.param({"httpGet": {"port": 80, "host": "::1", "scheme": "HTTPS"}},
                 'Get "https://[::1]:80/": context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
                 id="httpGet: an IPv6 host in brackets, the scheme lower-cased"),
    pytest.param({"tcpSocket": {"port": 5432}}, "dial tcp 10.0.0.1:5432: i/o timeout", id="tcpSocket: a dial timeout"),
]


@pytest.mark.parametrize("handler,message", TIMEOUTS)
def test_timeout_message(handler: Obj, message: str) -> None:
    assert timeout_message(handler, CONTAINER, "10.0.0.1") == message


async def test_a_probe_that_outlives_its_timeout_reports_upstreams_words() -> None:
    """A real server that accepts and never answers: the prober's timeoutSeconds ends the probe."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    seen: list[tuple[str, str]] = []
    done = asyncio.Event()

    def unhealthy(kind: str, message: str, grace: float | None) -> None:
        seen.append((kind, message))
        done.set()

    spec = {"livenessProbe": {"httpGet": {"port": port}, "timeoutSeconds": 1, "failureThreshold": 1}}
    prober = Prober(RealClock(), {"name": "c", **spec}, {}, "127.0.0.1", RealClock().now(), lambda: None, unhealthy)
    try:
        await asyncio.wait_for(done.wait(), 10)
    finally:
        prober.stop()
        listener.close()
    assert seen == [("Liveness", f'Get "http://127.0.0.1:{port}/": context deadline exceeded (Client.Timeout exceeded '
                                 "while awaiting headers)")]


@pytest.fixture
def resetting_server() -> Iterator[tuple[int, list[int]]]:
    """A server that reads each request and resets the connection (SO_LINGER 0): its port, and the client ports
    it was reached from."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    peers: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, peer = listener.accept()
            except OSError:
                return
            peers.append(peer[1])
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1], peers
    listener.close()


@pytest.mark.parametrize("hook", [
    pytest.param(False, id="http probe: Go's read error names both ends of the connection"),
    pytest.param(True, id="http lifecycle hook: the same error inside the hook's message"),
])
async def test_connection_reset_mid_request(resetting_server: tuple[int, list[int]], hook: bool) -> None:
    """The connection is reset after the request was sent: Transport.roundTrip returns the read's net.OpError as is
    (golang/go#16465), and — a fresh connection — sends the request once (aiohttp would have retried it)."""
    port, peers = resetting_server
    handler = {"httpGet": {"path": "/healthz", "port": port}}
    if hook:
        message = await run_hook(handler, CONTAINER, {}, "127.0.0.1", RealClock(), "p_default(u1)")
    else:
        ok, message = await run_handler(handler, CONTAINER, {}, "127.0.0.1", RealClock())
        assert not ok
    assert len(peers) == 1
    error = (f'Get "http://127.0.0.1:{port}/healthz": read tcp 127.0.0.1:{peers[0]}->127.0.0.1:{port}: read: '
             "connection reset by peer")
    in_hook = f'HTTP lifecycle hook (/healthz) for Container "c" in Pod "p_default(u1)" failed - error: {error}'
    assert message == (in_hook if hook else error)
