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


# How much real time may pass between two polls for I/O while only the loop's self-pipe is registered (see
# _JumpSelector): the latency with which a signal handled by the loop (add_signal_handler) or a thread's
# call_soon_threadsafe is noticed during a run.
SELF_PIPE_POLL = 0.01


class _JumpSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """A selector that, instead of blocking until a timer is due, tells the loop it is idle.

    Each turn of the loop asks it for I/O without blocking: an epoll syscall, once per callback batch and per
    jump, hundreds of thousands of times in a large simulation. While the only file descriptor registered is the
    loop's self-pipe (a simulation run: no sockets), the only I/O there can be is a signal or another thread
    waking the loop, so it polls only once SELF_PIPE_POLL of real time has passed since it last did. Ctrl-C
    needs no poll at all: Python's own SIGINT handler raises KeyboardInterrupt (asyncio.run's cancels the main
    task) wherever the loop is. With any other descriptor registered it polls every turn."""

    def __init__(self, idle: Callable[[], None]) -> None:
        super().__init__()
        self._idle = idle
        self._polled = time.monotonic()  # noqa: TID251 - real time paces the polls, not the simulation

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:  # no timer at all: only outside I/O (a signal) can wake the loop, so wait for it
            blocking: list[tuple[selectors.SelectorKey, int]] = super().select(None)
            return blocking
        real = time.monotonic()  # noqa: TID251 - see __init__
        if len(self.get_map()) > 1 or real - self._polled >= SELF_PIPE_POLL:
            self._polled = real
            events: list[tuple[selectors.SelectorKey, int]] = super().select(0)
            if events:
                return events
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


class _ControlledSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Waits as its `ControlledLoop` says: the paced share of a timeout, for I/O only, or not at all."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: ControlledLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        assert self.loop is not None
        events: list[tuple[selectors.SelectorKey, int]] = super().select(self.loop._real_timeout(timeout))
        return events


class ControlledLoop(asyncio.SelectorEventLoop):
    """A loop for `kubelite sim serve`: its time runs at `speed`x real time, stands still while paused, or jumps
    from timer to timer (as `VirtualTimeLoop`) during a step, pausing again at the step's end.

    It waits for real I/O (kubectl, the control endpoint) in every state, so runs are not reproducible.
    Control calls (`pause`, `resume`, `set_speed`, `step`) are made on the loop itself, by its handlers."""

    def __init__(self, speed: float = 1.0, paused: bool = False) -> None:
        selector = _ControlledSelector()
        super().__init__(selector)
        selector.loop = self
        self._clock_resolution = 0.0  # as VirtualTimeLoop: a step must not spin on timers "due within resolution"
        self.speed = speed
        self.paused = paused
        self.step_until: float | None = None
        self._virtual = 0.0  # the loop's time at `_real_anchor`
        self._real_anchor = time.monotonic()  # noqa: TID251 - the one real clock this loop's time is paced by
        self.step_done: list[asyncio.Future[None]] = []  # who waits for the current step to end

    def _moving(self) -> bool:
        return not self.paused and self.step_until is None

    def time(self) -> float:
        if not self._moving():
            return self._virtual
        return self._virtual + (time.monotonic() - self._real_anchor) * self.speed  # noqa: TID251 - see __init__

    def _anchor(self) -> None:
        self._virtual = self.time()
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
        self.step_until = max(self.step_until or self._virtual, self._virtual) + seconds
        done = self.create_future()
        self.step_done.append(done)
        return done

    def _real_timeout(self, timeout: float | None) -> float | None:
        """How long the selector may block for I/O, given asyncio's `timeout` to its earliest timer (loop time)."""
        if self._ready:  # type: ignore[attr-defined]  # asyncio's own queue of callbacks due now
            return 0
        scheduled = self._scheduled  # type: ignore[attr-defined]  # asyncio's timer heap (its head is live here)
        nxt = scheduled[0].when() if scheduled else math.inf
        if self.step_until is not None:
            if nxt <= self.step_until:  # jump to the next timer within the step (just past it, as VirtualTimeLoop)
                self._virtual = math.nextafter(max(self._virtual, nxt), math.inf)
                return 0
            self._virtual, self.step_until = max(self._virtual, self.step_until), None  # paused at the step's end
            for fut in self.step_done:
                if not fut.done():
                    fut.set_result(None)
            self.step_done.clear()
            return 0
        if self.paused:
            if nxt <= self._virtual:  # a timer due at the very instant time stopped: let it run, not spin
                self._virtual = math.nextafter(self._virtual, math.inf)
                return 0
            return None  # timers stand still: only I/O (a request, a signal) wakes the loop
        return None if timeout is None else timeout / self.speed


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
