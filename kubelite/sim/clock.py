"""Virtual time for a whole asyncio loop: the clock jumps to the next timer when every task waits.

Like trio's autojump clock. `VirtualTimeLoop.time()` is a number the loop advances itself: when the
loop has nothing ready and would block in `select()` until its earliest timer, it polls for I/O
without blocking and, if none is pending, moves time forward to that timer instead of waiting. So
every component runs unchanged — `asyncio.sleep`, `call_later`, aiohttp's and asyncio's timeouts
all read `loop.time()` — and an hour of cluster life passes as fast as the code runs.

Determinism needs the work itself to stay on the loop: `run_in_executor` (and so `asyncio.to_thread`)
runs its function inline, so no thread's timing decides what happens first (see also `store.py`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import selectors
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: where a simulation's wall clock starts


class _JumpSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """A selector that, instead of blocking until a timer is due, tells the loop it is idle."""

    def __init__(self, idle: Callable[[], None]) -> None:
        super().__init__()
        self._idle = idle

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events: list[tuple[selectors.SelectorKey, int]] = super().select(0)
        if events:
            return events
        if timeout is None:  # no timer at all: only outside I/O (a signal) can wake the loop, so wait for it
            blocking: list[tuple[selectors.SelectorKey, int]] = super().select(None)
            return blocking
        self._idle()
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time (see the module doc)."""

    def __init__(self) -> None:
        self._virtual = 0.0
        super().__init__(_JumpSelector(self._jump))
        # A timer is due when its time has come, not "within resolution": otherwise a loop sleeping the
        # last nanoseconds to a deadline would find its timer ready at once, again and again, while
        # virtual time (which moves only when the loop is idle) stands still.
        self._clock_resolution = 0.0

    def _jump(self) -> None:
        """Nothing is ready: move just past the earliest timer (asyncio runs those strictly before now)."""
        ready, scheduled = self._ready, self._scheduled  # type: ignore[attr-defined]  # asyncio's own queues
        if not ready and scheduled:  # the head of asyncio's timer heap is live at this point
            self._virtual = math.nextafter(max(self._virtual, scheduled[0].when()), math.inf)

    def time(self) -> float:
        return self._virtual

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:  # type: ignore[override]
        """Inline, on the loop: a thread's timing must not decide the order of events."""
        fut: asyncio.Future[T] = self.create_future()
        try:
            fut.set_result(func(*args))
        except BaseException as exc:  # handed to the awaiting task, as the executor would
            fut.set_exception(exc)
        return fut

    def set_default_executor(self, executor: concurrent.futures.Executor) -> None:
        raise RuntimeError("a virtual-time loop runs executor work inline")


class _PacedSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Blocks for the real time a virtual timeout takes at `speed`x real time."""

    def __init__(self, speed: float) -> None:
        super().__init__()
        self._speed = speed

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events: list[tuple[selectors.SelectorKey, int]] = super().select(
            None if timeout is None else timeout / self._speed)
        return events


class PacedLoop(asyncio.SelectorEventLoop):
    """A loop whose time runs at `speed`x real time (for `kubelite sim serve`: a simulation kubectl can watch).

    Unlike `VirtualTimeLoop` it waits for real I/O (HTTP clients), so runs are not reproducible."""

    def __init__(self, speed: float) -> None:
        super().__init__(_PacedSelector(speed))
        self._speed = speed
        self._real_start = time.monotonic()  # noqa: TID251 - the one real clock this loop's time is paced by

    def time(self) -> float:
        return (time.monotonic() - self._real_start) * self._speed  # noqa: TID251 - see __init__


class VirtualClock:
    """The `kubelite.clock.Clock` of a simulation: the running virtual-time (or paced) loop's time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, epoch: float = EPOCH) -> None:
        self.loop = loop
        self.epoch = epoch

    def now(self) -> float:
        return self.epoch + self.loop.time()

    def monotonic(self) -> float:
        return self.loop.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))  # noqa: TID251 - asyncio's timers are virtual on this loop
