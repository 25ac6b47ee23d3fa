"""port-forward's error for a port the pod does not serve, as containerd's dial (Go's net.OpError) words it."""

from __future__ import annotations

import asyncio
import errno
import socket

import pytest

from kubelite.agent.streaming.portforward import POD_HOST, dial_error


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind((POD_HOST, 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("exc,want", [
    pytest.param(ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed ('127.0.0.1', 5)"),
                 "dial tcp4 127.0.0.1:5: connect: connection refused", id="refused"),
    pytest.param(OSError(errno.ENETUNREACH, "Network is unreachable"),
                 "dial tcp4 127.0.0.1:5: connect: network is unreachable", id="unreachable"),
    pytest.param(TimeoutError(), "dial tcp4 127.0.0.1:5: i/o timeout", id="our connect timeout"),
    pytest.param(TimeoutError(errno.ETIMEDOUT, "Connection timed out"),
                 "dial tcp4 127.0.0.1:5: connect: connection timed out", id="the kernel's connect timeout"),
])
def test_dial_error_words_it_as_go(exc: OSError, want: str) -> None:
    assert dial_error(5, exc) == want


async def test_a_real_refused_connection() -> None:
    port = _closed_port()
    with pytest.raises(OSError) as caught:
        await asyncio.open_connection(POD_HOST, port)
    assert dial_error(port, caught.value) == f"dial tcp4 127.0.0.1:{port}: connect: connection refused"
