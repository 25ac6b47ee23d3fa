"""The one source of time for every component.

Backoff, grace periods, probes, leases and compaction all ask a `Clock`, so tests
drive them with `FakeClock` instead of sleeping and the simulator reuses the same
code on virtual time. Direct calls to `time.time`, `time.monotonic` and
`asyncio.sleep` are banned elsewhere by lint (ruff TID251).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock seconds since the epoch (for timestamps written to objects)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for measuring intervals)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_later(self, seconds: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        """`callback` after `seconds`, on a loop timer (see `timer`)."""
        return asyncio.get_running_loop().call_later(max(0.0, seconds), callback)


class FakeClock:
    """A clock that moves only when told to.

    `advance()` wakes every sleeper whose deadline has passed, in deadline order, and
    lets the loop run (SETTLE iterations) after each wake-up, so the chains of work a
    wake-up starts finish at that instant of fake time before time moves on.
    """

    SETTLE = 50

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._mono = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), fut))
        await fut

    async def advance(self, seconds: float) -> None:
        target = self._mono + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, fut = heapq.heappop(self._sleepers)
            self._now += deadline - self._mono
            self._mono = deadline
            if not fut.done():
                fut.set_result(None)
            await self._settle()
        self._now += target - self._mono
        self._mono = target
        await self._settle()

    async def _settle(self) -> None:
        for _ in range(self.SETTLE):
            await asyncio.sleep(0)


class Cancellable(Protocol):
    def cancel(self) -> object: ...


def timer(clock: Clock, seconds: float, callback: Callable[[], None]) -> Cancellable:
    """Call `callback` after `seconds` of `clock` time, unless cancelled first. A clock whose time is the loop's
    (RealClock, a simulation's) offers `call_later`, one loop timer; any other gets a task that sleeps on it —
    a task, a coroutine, a future and a timer, and two loop turns to cancel: for the timeouts of every node
    agent's API calls and status waits, one of an idle simulation's larger costs (BENCHMARKS.md, Idle node cost)."""
    call_later = getattr(clock, "call_later", None)
    if call_later is not None:
        handle: Cancellable = call_later(seconds, callback)
        return handle
    sleeper = asyncio.ensure_future(clock.sleep(max(0.0, seconds)))
    sleeper.add_done_callback(lambda s: None if s.cancelled() else callback())
    return sleeper


async def bounded(clock: Clock, work: Awaitable[T], seconds: float) -> tuple[bool, T | None]:
    """Run `work` for at most `seconds` of `clock` time: (finished, result); unfinished work is cancelled."""
    task = asyncio.ensure_future(work)
    # asyncio.wait(FIRST_COMPLETED) by hand: no sets, no per-call closures over both — this runs for every
    # API call of every node agent (a simulation's hot path)
    first: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def done(_: object = None) -> None:
        if not first.done():
            first.set_result(None)

    task.add_done_callback(done)
    deadline = timer(clock, seconds, done)
    try:
        await first
    finally:
        task.remove_done_callback(done)
        deadline.cancel()
    if task.done():
        return True, task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return False, None


def rfc3339(ts: float) -> str:
    """Kubernetes' metav1.Time wire form: second precision, UTC, trailing Z."""
    return datetime.fromtimestamp(int(ts), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(ts: float) -> str:
    """metav1.MicroTime's wire form (a Lease's acquireTime and renewTime): microseconds, UTC, trailing Z."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
