"""A Ctrl-C during start-up is never lost (kubelite/cli/interrupts.py): Python raises it wherever the main thread
is, and raised inside a callback (importlib's weakref callbacks run during every import) it is dropped — a CI run
saw `kubelite server` start and run on after one. Noted first, it makes `stop_on_signals` stop at once."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import pytest

from kubelite.cli import interrupts
from kubelite.cli.components import stop_on_signals


async def stopping_at_once() -> bool:
    return stop_on_signals().is_set()


@pytest.mark.parametrize(("interrupted", "stops"), [
    pytest.param(False, False, id="no Ctrl-C: the command runs"),
    pytest.param(True, True, id="a Ctrl-C lost during start-up: the command stops at once"),
])
def test_stop_on_signals_after_start_up(monkeypatch: pytest.MonkeyPatch, interrupted: bool, stops: bool) -> None:
    monkeypatch.setattr(interrupts, "_seen", False)
    if interrupted:
        with contextlib.suppress(KeyboardInterrupt):  # the handler, its raise swallowed (as in a weakref callback)
            interrupts._noted(signal.SIGINT, None)
    assert asyncio.run(stopping_at_once()) is stops


def test_note_leaves_an_ignored_sigint_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        interrupts.note()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        interrupts.note()
        assert signal.getsignal(signal.SIGINT) is interrupts._noted
    finally:
        signal.signal(signal.SIGINT, previous)
