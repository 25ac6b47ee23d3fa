"""Copying a container's pipe into its CRI log: the entries, and no byte lost when the agent dies (L16).

A byte taken out of the pipe must be in the log before the event loop does anything else: the
agent can be SIGKILLed between any two loop turns, and a restarted agent only gets what is still
in the pipe. These run the loop one turn at a time and check, after every turn, that each byte
written is either still in the pipe or already in the log.
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import os
import termios
from pathlib import Path

import pytest

from kubelite.agent.logs import _format
from kubelite.agent.runtime.cri_log import MAX_LINE, entries, pump
from kubelite.clock import FakeClock

NOW = 1_700_000_000.0
TS = b"2023-11-14T22:13:20.000000000Z"


@pytest.mark.parametrize("chunk,want", [
    pytest.param(b"a\nb\n", [b"F a", b"F b"], id="whole lines are full (F) entries"),
    pytest.param(b"\n", [b"F "], id="an empty line is an empty F entry"),
    pytest.param(b"a\nbc", [b"F a", b"P bc"], id="a read ending inside a line writes that piece as partial (P)"),
    pytest.param(b"x" * (MAX_LINE + 1) + b"\n", [b"P " + b"x" * MAX_LINE, b"F x"],
                 id="a line longer than MAX_LINE is split into partial entries"),
    pytest.param(b"", [], id="nothing read, nothing written"),
])
def test_entries(chunk: bytes, want: list[bytes]) -> None:
    assert entries(b"stdout", chunk, NOW).splitlines() == [TS + b" stdout " + w for w in want]


def _in_pipe(fd: int) -> int:
    n = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, n)
    return n[0]


def _served(log: Path) -> bytes:
    return b"".join(_format(e, False) for e in log.read_bytes().splitlines(keepends=True))


async def test_every_byte_is_in_the_pipe_or_in_the_log_after_each_loop_turn(tmp_path: Path) -> None:
    r, w = os.pipe()
    os.set_blocking(r, False)
    path = tmp_path / "0.log"
    with path.open("ab", buffering=0) as log:
        done = pump(r, b"stdout", log, FakeClock())
        written = b""
        for piece in (b"tick 0\ntick 1\n", b"tick 2 is wri", b"tten in two\n"):
            os.write(w, piece)
            written += piece
            for _ in range(5):
                await asyncio.sleep(0)  # one loop turn: a SIGKILL could come right after it
                assert len(_served(path)) + _in_pipe(r) == len(written)
        os.close(w)
        await asyncio.wait_for(done, 5)
    assert _served(path) == written


async def test_an_agent_killed_mid_line_loses_nothing(tmp_path: Path) -> None:
    """The first agent stops reading after half a line (it is killed); the next one reopens the pipe."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    again = os.dup(r)  # the restarted agent's reopening of the named pipe
    path = tmp_path / "0.log"
    with path.open("ab", buffering=0) as log:
        first = pump(r, b"stdout", log, FakeClock())
        os.write(w, b"tick 0\ntick 1 par")
        for _ in range(5):
            await asyncio.sleep(0)
        first.cancel()  # killed: no end of output, no flush
        await asyncio.sleep(0)
    with path.open("ab", buffering=0) as log:
        second = pump(again, b"stdout", log, FakeClock())
        os.write(w, b"t\ntick 2\n")
        os.close(w)
        await asyncio.wait_for(second, 5)
    assert _served(path) == b"tick 0\ntick 1 part\ntick 2\n"
