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
import contextvars
import heapq
import math
import selectors
import time
from asyncio import format_helpers
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: where a simulation's wall clock starts


# How much real time may pass between two polls for I/O while only the loop's self-pipe is registered (see
# VirtualTimeLoop._run_once): the latency with which a signal handled by the loop (add_signal_handler) or a
# thread's call_soon_threadsafe is noticed during a run.
SELF_PIPE_POLL = 0.01

# asyncio's own thresholds (base_events) for rebuilding the timer heap without its cancelled timers.
_MIN_TIMERS_TO_PURGE = 100
_CANCELLED_FRACTION_TO_PURGE = 0.5


class _Handle(asyncio.Handle):
    """asyncio's Handle, built without asking the loop for its debug mode (a method call per handle): a
    `VirtualTimeLoop` makes these only when not in debug mode, where a handle keeps no creation traceback."""

    __slots__ = ()

    def __init__(self, callback: Callable[..., object], args: tuple[Any, ...], loop: asyncio.AbstractEventLoop,
                 context: contextvars.Context | None) -> None:
        self._context = contextvars.copy_context() if context is None else context
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None


class _TimerHandle(_Handle, asyncio.TimerHandle):
    """asyncio's TimerHandle, built as `_Handle` is (TimerHandle.__init__ goes through Handle's and the loop's
    get_debug: three Python calls for each sleep and timeout)."""

    __slots__ = ()

    def __init__(self, when: float, callback: Callable[..., object], args: tuple[Any, ...],
                 loop: asyncio.AbstractEventLoop, context: contextvars.Context | None) -> None:
        _Handle.__init__(self, callback, args, loop, context)
        self._when = when
        self._scheduled = True  # it goes on the loop's heap at once (call_at)


class _SimSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The platform's selector, also telling whether the loop must poll it every turn (`sockets`: anything but the
    loop's self-pipe is registered, or ALWAYS_POLL), which decides how often a `VirtualTimeLoop` polls it: kept
    up to date here so the loop's every turn reads one attribute instead of counting the registrations."""

    ALWAYS_POLL = False  # True for a selector whose every poll decides how long its loop waits (_ControlledSelector)

    def __init__(self) -> None:
        super().__init__()
        self.sockets = self.ALWAYS_POLL

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key: selectors.SelectorKey = super().register(fileobj, events, data)
        self.sockets = self.ALWAYS_POLL or len(self.get_map()) > 1
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        key: selectors.SelectorKey = super().unregister(fileobj)
        self.sockets = self.ALWAYS_POLL or len(self.get_map()) > 1
        return key


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time (see the module doc), with its own lean turn of the loop.

    A large simulation spends a quarter of its CPU in asyncio's own pure-Python machinery — a turn of the loop per
    callback batch and per jump, a Handle per task wake-up, Python-level `TimerHandle.__lt__` for every heap
    comparison. So this loop keeps its timers in a heap of plain `(when, seq, handle)` tuples (compared in C;
    `seq` makes timers due at the same instant run in the order they were set, whatever other timers the heap
    holds — asyncio orders such ties by heap position), makes its handles without the debug-mode checks, and
    turns with a `_run_once` made for virtual time: no blocking wait while a timer is pending, no slow-callback
    timing (a callback takes no virtual time). asyncio's contract holds: ready callbacks run first in, first
    out, timers strictly in time order, cancelled handles never. In debug mode (`loop.set_debug(True)`) handles
    are asyncio's own, made with its checks and creation tracebacks; the turn stays this lean one (no
    slow-callback warnings, no current handle in error reports).

    It is written against CPython 3.11's asyncio internals (the loop's `_ready` queue, its cancelled-timer count,
    the handles' slots): `tests/sim/test_clock.py` checks that they are there, so a Python whose asyncio differs
    fails that test rather than a simulation."""

    def __init__(self, selector: _SimSelector | None = None) -> None:
        self._virtual = 0.0
        self._timers: list[tuple[float, int, asyncio.TimerHandle]] = []
        self._timer_seq = 0
        self._polled = time.monotonic()  # noqa: TID251 - real time paces the polls, not the simulation
        super().__init__(selector or _SimSelector())
        # A timer is due when its time has come, not "within resolution": otherwise a loop sleeping the
        # last nanoseconds to a deadline would find its timer ready at once, again and again, while
        # virtual time (which moves only when the loop is idle) stands still.
        self._clock_resolution = 0.0

    def time(self) -> float:
        return self._virtual

    def call_soon(self, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        """asyncio's call_soon (every task wake-up and future callback comes here) in one Python call."""
        if self._closed:  # type: ignore[attr-defined]  # asyncio's own flag (BaseEventLoop._check_closed)
            raise RuntimeError("Event loop is closed")
        if self._debug:  # type: ignore[attr-defined]  # asyncio's checks and creation tracebacks
            return super().call_soon(callback, *args, context=context)
        handle = _Handle(callback, args, self, context)
        self._ready.append(handle)  # type: ignore[attr-defined]  # asyncio's queue of callbacks due now
        return handle

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                   context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        if delay is None:
            raise TypeError("delay must not be None")
        return self.call_at(self._virtual + delay, callback, *args, context=context)

    def call_at(self, when: float, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        """A timer on the loop's tuple heap (see the class doc)."""
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:  # type: ignore[attr-defined]  # see call_soon
            raise RuntimeError("Event loop is closed")
        timer: asyncio.TimerHandle
        if self._debug:  # type: ignore[attr-defined]  # see call_soon
            self._check_thread()  # type: ignore[attr-defined]  # asyncio's debug-mode checks, as its call_at
            self._check_callback(callback, "call_at")  # type: ignore[attr-defined]
            timer = asyncio.TimerHandle(when, callback, args, self, context)
            timer._scheduled = True  # type: ignore[attr-defined]  # counted by _timer_handle_cancelled
        else:
            timer = _TimerHandle(when, callback, args, self, context)
        self._timer_seq += 1
        heapq.heappush(self._timers, (when, self._timer_seq, timer))
        return timer

    def _drop_cancelled_timers(self, rebuild: bool) -> None:
        """As asyncio does: rebuild the heap once most of it is cancelled timers, else pop those at its head."""
        timers = self._timers
        if rebuild:
            live = []
            for entry in timers:
                if entry[2]._cancelled:  # type: ignore[attr-defined]  # asyncio's own flag
                    entry[2]._scheduled = False  # type: ignore[attr-defined]
                else:
                    live.append(entry)
            heapq.heapify(live)  # (when, seq) is a total order: the same order as before, only shorter
            self._timers = live
            self._timer_cancelled_count = 0
        else:
            while timers and timers[0][2]._cancelled:  # type: ignore[attr-defined]
                self._timer_cancelled_count -= 1
                heapq.heappop(timers)[2]._scheduled = False  # type: ignore[attr-defined]

    def _run_once(self) -> None:
        """One turn: poll for I/O (or, with nothing to do, jump to the earliest timer), queue the timers now due,
        run the callbacks ready then (those queued before the turn, the timers just due, the I/O callbacks just
        processed); what they queue runs next turn.

        The poll for I/O is an epoll syscall, and there is a turn per callback batch and per jump: hundreds of
        thousands in a large simulation. While the only file descriptor registered is the loop's self-pipe (a
        simulation run: no sockets), the only I/O there can be is a signal or another thread waking the loop,
        so it polls only once SELF_PIPE_POLL of real time has passed since it last did. Ctrl-C needs no poll at
        all: Python's own SIGINT handler raises KeyboardInterrupt (asyncio.run's cancels the main task) wherever
        the loop is. With any other descriptor registered it polls every turn (a `ControlledLoop` always does, and
        its selector decides how long the poll may wait). With no timer and nothing ready only outside I/O can
        wake the loop, so it waits for that."""
        timers = self._timers
        if timers:
            rebuild = (len(timers) > _MIN_TIMERS_TO_PURGE  # asyncio's count of cancelled timers on the heap:
                       and self._timer_cancelled_count > _CANCELLED_FRACTION_TO_PURGE * len(timers))  # type: ignore[has-type]
            if rebuild or timers[0][2]._cancelled:  # type: ignore[attr-defined]  # a call only when there is work
                self._drop_cancelled_timers(rebuild)
                timers = self._timers
        ready, selector = self._ready, self._selector  # type: ignore[attr-defined]
        if not ready and not timers and not self._stopping:  # type: ignore[attr-defined]  # asyncio's flag
            self._process_events(selector.select(None))  # type: ignore[attr-defined]  # asyncio's dispatch
        else:
            real = time.monotonic()  # noqa: TID251 - see __init__
            events = None
            if selector.sockets or real - self._polled >= SELF_PIPE_POLL:
                self._polled = real
                events = selector.select(0)
                self._process_events(events)  # type: ignore[attr-defined]
            if not events and not ready and timers:  # idle: just past the earliest timer (run strictly before now)
                self._virtual = math.nextafter(max(self._virtual, timers[0][0]), math.inf)
        now = self._virtual
        while timers and timers[0][0] < now:
            timer = heapq.heappop(timers)[2]
            timer._scheduled = False  # type: ignore[attr-defined]  # asyncio's flag: off the heap
            ready.append(timer)
        # Only the callbacks queued before this point: those they queue run next turn, after the next poll.
        # Handle._run inlined (a Python call per callback saved), its error report in _callback_failed.
        for _ in range(len(ready)):
            handle = ready.popleft()
            if handle._cancelled:
                continue
            try:
                handle._context.run(handle._callback, *handle._args)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:  # as asyncio: a failed callback is reported, the loop goes on
                self._callback_failed(handle, exc)
        handle = None  # as asyncio: no reference cycle through a failed callback's traceback

    def _callback_failed(self, handle: asyncio.Handle, exc: BaseException) -> None:
        """What asyncio's Handle._run reports for a callback that raised."""
        source = format_helpers._format_callback_source(handle._callback, handle._args)  # type: ignore[attr-defined]
        context: dict[str, Any] = {"message": f"Exception in callback {source}", "exception": exc, "handle": handle}
        if handle._source_traceback:  # type: ignore[attr-defined]
            context["source_traceback"] = handle._source_traceback  # type: ignore[attr-defined]
        self.call_exception_handler(context)

    def close(self) -> None:
        super().close()
        self._timers.clear()

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


class _ControlledSelector(_SimSelector):
    """Polled every turn of its `ControlledLoop` (ALWAYS_POLL), and waits as long as the loop says: not at all
    while there is work or a timer is due, until paced real time reaches the next timer, or for I/O only."""

    ALWAYS_POLL = True

    def __init__(self) -> None:
        super().__init__()
        self.loop: ControlledLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self.loop
        assert loop is not None
        wait = loop._real_timeout()
        events: list[tuple[selectors.SelectorKey, int]] = super().select(wait)
        if wait != 0 and events:  # outside I/O cut an idle wait short: what it wakes runs at the time reached since
            loop._virtual = max(loop._virtual, min(loop._reach(), loop._timers[0][0] if loop._timers else math.inf))
        return events


class ControlledLoop(VirtualTimeLoop):
    """A loop for `kubelite sim serve`: `VirtualTimeLoop` itself — its timer heap, handles and turn — with time let
    forward as it is controlled. Moving, it runs at `speed`x real time; paused, it stands still; during a step it
    jumps from timer to timer as fast as the work allows, pausing again at the step's end.

    In every state time advances only as `VirtualTimeLoop`'s does: when nothing is ready, to just past the next
    timer, and only that instant's timers become due in the turn. What changes is how long the turn may wait
    first (`_real_timeout`): not at all when that timer is within reach (within the step, or already reached by
    the paced real time: a run that falls behind its speed goes as fast as it can), until the paced real time
    reaches it when moving, for I/O only when paused. So a served run orders its work exactly as `sim run` of
    the same scenario and seed does, whatever the speed, pauses and steps — unless a client writes to it.
    Outside I/O (kubectl, the control endpoint) is polled every turn and served in every state; while the loop
    idles, its time is moved up to where the control lets it be (the paced time, the step's end) so what a client
    reads or writes is stamped then — no simulation callback runs at such a time, only the client's.
    Control calls (`pause`, `resume`, `set_speed`, `step`) are made on the loop itself, by its handlers."""

    def __init__(self, speed: float = 1.0, paused: bool = False) -> None:
        selector = _ControlledSelector()
        super().__init__(selector)
        selector.loop = self
        self.speed = speed
        self.paused = paused
        self.step_until: float | None = None
        # Where time may go: paused, up to `_goal` (where it was paused); moving, up to `_goal` plus the real time
        # since `_real_anchor` at `speed`.
        self._goal = 0.0
        self._real_anchor = time.monotonic()  # noqa: TID251 - the one real clock this loop's time is paced by
        self.step_done: list[asyncio.Future[None]] = []  # who waits for the current step to end

    def _moving(self) -> bool:
        return not self.paused and self.step_until is None

    def _reach(self) -> float:
        """How far time may go now: the step's end, where it was paused, or the paced real time."""
        if self.step_until is not None:
            return self.step_until
        if self.paused:
            return self._goal
        return self._goal + (time.monotonic() - self._real_anchor) * self.speed  # noqa: TID251 - see __init__

    def _anchor(self) -> None:
        """Before a change of state or speed: the paced time reached so far becomes the new starting point."""
        if self._moving():
            self._goal = self._reach()
        self._real_anchor = time.monotonic()  # noqa: TID251 - see __init__

    def state(self) -> dict[str, Any]:
        return {"time": self.time(), "speed": self.speed, "paused": self.paused,
                "stepUntil": self.step_until}

    def pause(self) -> None:
        self._anchor()
        self.paused = True

    def resume(self) -> None:
        self._anchor()
        self.paused = False

    def set_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self._anchor()
        self.speed = speed

    def step(self, seconds: float) -> asyncio.Future[None]:
        """Pause, then run the next `seconds` of simulated time as fast as the work allows; the future is done
        when time has reached the step's end (paused again). A step asked for during a step extends it."""
        if seconds < 0:
            raise ValueError("a step is a non-negative duration")
        self._anchor()
        self.paused = True
        start = self.step_until if self.step_until is not None else max(self._goal, self._virtual)
        self.step_until = start + seconds
        done = self.create_future()
        self.step_done.append(done)
        return done

    def _end_step(self) -> None:
        """Time has reached the step's end: paused there (or moving on from there, if resumed meanwhile)."""
        assert self.step_until is not None
        self._goal, self.step_until = self.step_until, None
        self._real_anchor = time.monotonic()  # noqa: TID251 - see __init__
        for fut in self.step_done:
            if not fut.done():
                fut.set_result(None)
        self.step_done.clear()

    def _real_timeout(self) -> float | None:
        """How long this turn's poll may block for I/O (real seconds; None: until there is some). Called by the
        selector in `VirtualTimeLoop._run_once`, after it dropped the cancelled timers at the heap's head and
        before it moves time to the next timer — which it does if the poll finds no I/O and nothing is ready."""
        if self._ready or self._stopping:  # type: ignore[attr-defined]  # asyncio's queue and flag: work to do now
            return 0  # (stopping before a turn — loop.stop() called before run_forever — the turn moves on as ever)
        due = self._timers[0][0] if self._timers else math.inf
        reach = self._reach()
        if due <= reach:
            return 0  # within reach: the turn moves time just past it, as VirtualTimeLoop's
        # Idle short of the next timer: time may stand where the control lets it (only outside I/O will see it).
        self._virtual = max(self._virtual, reach)
        if self.step_until is not None:
            self._end_step()
            if self._ready:  # type: ignore[attr-defined]  # the step's waiters: the turn runs them (no jump)
                return 0
        if not self._moving():
            return None  # paused: only I/O (a request, a signal) wakes the loop, and the turn then runs it
        return None if due == math.inf else (due - reach) / self.speed


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

    def call_later(self, seconds: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        """A loop timer on virtual time: kubelite.clock.timer's, instead of a sleeping task."""
        return self.loop.call_later(max(0.0, seconds), callback)
