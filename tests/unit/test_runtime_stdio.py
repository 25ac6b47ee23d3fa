"""The process runtime's stdin and terminal (for attach): a real shim, real pipes and a real pty."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from kubelite.agent.logs import _format
from kubelite.agent.runtime.interface import Exit
from kubelite.agent.runtime.process import ProcessRuntime
from kubelite.clock import RealClock

ENV = {"PATH": "/usr/bin:/bin"}


def _stdout(p_log: Path) -> bytes:
    return b"".join(_format(e, False) for e in p_log.read_bytes().splitlines(keepends=True) if b" stdout " in e)


async def _logged(p_log: Path, text: bytes) -> None:
    """Until the container has written `text` (its log is written as output arrives)."""
    while text not in _stdout(p_log):
        await asyncio.sleep(0.02)


CASES = [
    # (name, script, stdin, tty, input, close stdin, expected stdout, exit)
    ("no stdin reads EOF at once", "cat; echo end", False, False, b"", False, b"end\n", Exit(0)),
    ("stdin takes what the agent writes and ends when closed", "cat; echo end", True, False, b"hi\n", True,
     b"hi\nend\n", Exit(0)),
    ("a terminal is the controlling tty, output with CR LF",
     "test -t 0 && tty >/dev/null && echo is-tty; read l; echo got:$l; exit 4", False, True, b"abc\n", False,
     b"is-tty\r\nabc\r\ngot:abc\r\n", Exit(4)),
]


@pytest.mark.parametrize(("name", "script", "stdin", "tty", "data", "close", "expected", "exit"), CASES,
                         ids=[c[0] for c in CASES])
async def test_stdio(tmp_path: Path, name: str, script: str, stdin: bool, tty: bool, data: bytes, close: bool,
                     expected: bytes, exit: Exit) -> None:
    rt = ProcessRuntime(RealClock())
    p = await rt.start(["sh", "-c", script], ENV, None, tmp_path / "0.log", stdin=stdin, tty=tty)
    assert p.has_stdin == (stdin or tty)
    if tty:  # what is typed is echoed at once: type after the container's first line, for a stable order
        await asyncio.wait_for(_logged(p.log_path, b"is-tty"), 10)
    await p.write_stdin(data)
    if close:
        p.close_stdin()
    assert await asyncio.wait_for(rt.wait(p), 10) == exit
    await asyncio.wait_for(asyncio.gather(*p.readers), 5)
    assert _stdout(p.log_path) == expected
    assert not p.has_stdin


async def test_terminal_resize_reaches_the_container(tmp_path: Path) -> None:
    rt = ProcessRuntime(RealClock())
    p = await rt.start(["sh", "-c", "trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done"],
                       ENV, None, tmp_path / "0.log", tty=True)
    await asyncio.wait_for(_logged(p.log_path, b"ready"), 10)
    p.resize(132, 43)
    assert await asyncio.wait_for(rt.wait(p), 10) == Exit(0)
    await asyncio.wait_for(asyncio.gather(*p.readers), 5)
    assert _stdout(p.log_path).endswith(b"43 132\r\n")


async def test_a_terminal_container_stops_on_its_stop_signal(tmp_path: Path) -> None:
    rt = ProcessRuntime(RealClock())
    p = await rt.start(["sh", "-c", "echo ready; sleep 30"], ENV, None, tmp_path / "0.log", tty=True)
    await asyncio.wait_for(_logged(p.log_path, b"ready"), 10)
    rt.signal(p, signal.SIGTERM)
    assert await asyncio.wait_for(rt.wait(p), 10) == Exit(143)
