"""The one source of time for every component.

Backoff, grace periods, probes, leases and compaction all ask a `Clock`, so tests
drive them with `FakeClock` instead of sleeping and the simulator reuses the same
code on virtual time. Direct calls to `time.time`, `time.monotonic` and
`asyncio.sleep` are banned elsewhere by lint (ruff TID251).
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import math
import re
import time
import weakref
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


# How late a coarse timer (`timer(..., coarse=True)`) may fire: its deadline is rounded up to a multiple of this.
TIMER_GRANULARITY = 1.0


class _Coarse:
    """One coarse timer: an entry of its bucket (a dict, insertion-ordered, so a bucket's callbacks run in the
    order they were set, the same from run to run); `cancel` takes it out, O(1), leaving no handle behind."""

    __slots__ = ("_bucket",)

    def __init__(self, bucket: dict[_Coarse, Callable[[], None]]) -> None:
        self._bucket = bucket

    def cancel(self) -> None:
        self._bucket.pop(self, None)


class _Wheel:
    """The coarse timers of one time base, in buckets of TIMER_GRANULARITY: one exact timer per bucket.

    Why: every API call of every node agent is bounded by a timeout that almost never fires (kubelite.agent.loops
    `timed`). As a loop timer each was a TimerHandle pushed on asyncio's heap (Python-level comparisons, tens of
    thousands of entries at 5,000 nodes) and, once cancelled, left there until popped; and on virtual time each
    distinct deadline was an instant the loop stopped at. Here a timeout is a dict entry in its bucket and its
    cancellation a dict pop; the bucket's one timer stays armed even when emptied (arming anew for each call
    that came and went would cost what this saves) and fires once, finding what is left.

    A bucket's callbacks run in the context of the call that made the bucket (unlike `call_later`'s, which keep
    their own): what they do here (wake a future, a watch) reads no context variable."""

    __slots__ = ("_arm", "_buckets", "_now", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, now: Callable[[], float],
                 arm: Callable[[float, Callable[[], None]], object]) -> None:
        self.loop = loop
        self._now, self._arm = now, arm  # arm(when, callback): an exact timer at `when` on `now`'s time base
        self._buckets: dict[int, dict[_Coarse, Callable[[], None]]] = {}

    def add(self, seconds: float, callback: Callable[[], None]) -> _Coarse:
        slot = math.ceil((self._now() + max(0.0, seconds)) / TIMER_GRANULARITY)  # never early
        bucket = self._buckets.get(slot)
        if bucket is None:
            bucket = self._buckets[slot] = {}
            self._arm(slot * TIMER_GRANULARITY, functools.partial(self._fire, slot))
        entry = _Coarse(bucket)
        bucket[entry] = callback
        return entry

    def _fire(self, slot: int) -> None:
        """Run the bucket's callbacks; one cancelled by another meanwhile is skipped, one that raises is reported
        as the loop reports a failed callback, and the rest still run."""
        bucket = self._buckets.pop(slot)
        for entry in list(bucket):
            callback = bucket.pop(entry, None)
            if callback is None:
                continue
            try:
                callback()
            except Exception as exc:
                self.loop.call_exception_handler({"message": "coarse timer callback failed", "exception": exc})


# One wheel per loop for the clocks whose time is the loop's (RealClock, a simulation's VirtualClock: they share
# it), one per clock for any other (FakeClock), remade if the clock moves to another loop (a test's next).
_wheels: weakref.WeakKeyDictionary[object, _Wheel] = weakref.WeakKeyDictionary()
# The wheel last looked up, by its key: a simulation asks for the same one with every agent API call, and a
# WeakKeyDictionary lookup makes a weak reference each time. (The wheel keeps its loop alive, as its entry in
# `_wheels` already did.)
_recent: list[tuple[object, _Wheel]] = []


def _wheel(clock: Clock) -> _Wheel:
    loop = asyncio.get_running_loop()
    loop_time = hasattr(clock, "call_later")
    key: object = loop if loop_time else clock
    if _recent:
        recent_key, recent = _recent[0]
        if recent_key is key and recent.loop is loop:
            return recent
    wheel = _wheels.get(key)
    if wheel is None or wheel.loop is not loop:
        if loop_time:
            wheel = _Wheel(loop, loop.time, loop.call_at)
        else:
            wheel = _Wheel(loop, clock.monotonic, lambda when, cb: _sleeping(clock, when - clock.monotonic(), cb))
        _wheels[key] = wheel
    _recent[:] = [(key, wheel)]
    return wheel


def _sleeping(clock: Clock, seconds: float, callback: Callable[[], None]) -> Cancellable:
    """A timer on a clock whose time is not the loop's: a task that sleeps on it, until a time fixed now (the task
    starts a loop turn later, when a FakeClock may have moved on)."""
    sleeper = asyncio.ensure_future(_sleep_until(clock, clock.monotonic() + max(0.0, seconds)))
    sleeper.add_done_callback(lambda s: None if s.cancelled() else callback())
    return sleeper


async def _sleep_until(clock: Clock, when: float) -> None:
    await clock.sleep(when - clock.monotonic())


def timer(clock: Clock, seconds: float, callback: Callable[[], None], *, coarse: bool = False) -> Cancellable:
    """Call `callback` after `seconds` of `clock` time, unless cancelled first.

    Exact (the default): a clock whose time is the loop's (RealClock, a simulation's) offers `call_later`, one
    loop timer; any other gets a task that sleeps on it — a task, a coroutine, a future and a timer, and two loop
    turns to cancel. `coarse`: the callback may run up to TIMER_GRANULARITY late, never early, and the timer costs
    a dict entry (`_Wheel`) — for timeouts that almost never fire (every node agent's API calls), never for a time
    something is scheduled at (a back-off, a grace period, a probe's period)."""
    if coarse:
        return _wheel(clock).add(seconds, callback)
    call_later = getattr(clock, "call_later", None)
    if call_later is not None:
        handle: Cancellable = call_later(seconds, callback)
        return handle
    return _sleeping(clock, seconds, callback)


async def bounded(clock: Clock, work: Awaitable[T], seconds: float, *, coarse: bool = False) -> tuple[bool, T | None]:
    """Run `work` for at most `seconds` of `clock` time: (finished, result); unfinished work is cancelled — also
    when the caller is (a stopped agent's requests must not go on without it, as asyncio.wait_for's do not).
    `coarse`: the limit is a timeout that may end the work up to TIMER_GRANULARITY late (see `timer`).

    The work runs in the caller's own task, and the limit cancels that task, as `asyncio.timeout` does (whose
    deadline is on the loop's time only, and one exact timer): no task, future and done-callbacks per call — this
    runs for every API call of every node agent (a simulation's hot path), and a request the in-process transport
    answers inline then finishes in the caller's turn, not a turn later. A cancellation is the limit's only when
    it expired and no other came with it (`Task.uncancel`, as `asyncio.timeout`); work that finishes at the very
    turn its limit expires, or swallows the cancellation, counts as not finished; work that turns it into another
    exception raises that, the cancellation taken back."""
    task = asyncio.current_task()
    assert task is not None, "bounded() runs inside a task"
    cancelling = task.cancelling()
    expiry = _Expiry(task)
    deadline = timer(clock, seconds, expiry.fire, coarse=coarse)
    try:
        result = await work
    except BaseException as exc:
        # the limit's cancellation is taken back whatever the work made of it (as asyncio.timeout); it is the
        # answer only if it is what came out and no other cancellation came with it
        if expiry.fired and task.uncancel() <= cancelling and isinstance(exc, asyncio.CancelledError):
            return False, None
        raise
    finally:
        expiry.disarm()  # a timer that can no longer be cancelled (a sleeping task ending this turn) stays harmless
        deadline.cancel()
    if expiry.fired:  # the work swallowed the limit's cancellation: it still did not finish in time
        task.uncancel()
        return False, None
    return True, result


class _Expiry:
    """A `bounded` limit's callback: cancels the task, remembering that it did — until disarmed, when the call
    it bounds has ended (after that the task is running something else)."""

    __slots__ = ("_task", "fired")

    def __init__(self, task: asyncio.Task[object]) -> None:
        self._task: asyncio.Task[object] | None = task
        self.fired = False

    def fire(self) -> None:
        if self._task is not None:
            self.fired = True
            self._task.cancel()

    def disarm(self) -> None:
        self._task = None


_DURATION_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9,
                   "h": 3600 * 10**9}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> int:
    """Go's time.ParseDuration → nanoseconds (a flag such as --event-ttl, protobuf's meta.v1.Duration, the
    wait in kubelet's CrashLoopBackOff message)."""
    sign, body = (-1, text[1:]) if text.startswith("-") else (1, text.removeprefix("+"))
    if body == "0":
        return 0
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if pos != len(body) or not body:
        raise ValueError(f'invalid duration "{text[:64]}"')
    return sign * round(total)


def format_duration(ns: int) -> str:
    """Go's time.Duration.String() of `ns` nanoseconds: "1h2m3.5s", "1m20s", "1.5ms", "0s" — how Go components
    print a duration in a message (kubelet's CrashLoopBackOff wait) and protobuf's meta.v1.Duration reads."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if ns >= size:
                return sign + _decimal(ns, size) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = _decimal(rest, 10**9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    return f"{sign}{minutes}m{text}" if minutes else sign + text


def _decimal(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    digits = len(str(unit)) - 1
    return f"{whole}.{fraction:0{digits}d}".rstrip("0").rstrip(".") if fraction else str(whole)


def rfc3339(ts: float) -> str:
    """Kubernetes' metav1.Time wire form: second precision, UTC, trailing Z.

    The last second formatted is remembered: the API server stamps many objects in the same second (creation
    times, events, conditions), and strftime costs ≈ 2 µs a call."""
    global _last_second
    second = int(ts)
    last = _last_second
    if last[0] != second:
        last = _last_second = (second, datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return last[1]


_last_second: tuple[int | None, str] = (None, "")  # (second, its rfc3339): one tuple, swapped whole (threads)
_last_micro: tuple[float | None, str] = (None, "")  # (instant, its micro_time): likewise


def micro_time(ts: float) -> str:
    """metav1.MicroTime's wire form (a Lease's acquireTime and renewTime): microseconds, UTC, trailing Z.

    The last instant formatted is remembered, as `rfc3339` remembers its second: in a simulation the nodes that
    started together renew their Leases at the same virtual instant (200 nodes renew at 7 distinct ones)."""
    global _last_micro
    last = _last_micro
    if last[0] != ts:
        last = _last_micro = (ts, datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    return last[1]


def parse_rfc3339(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
