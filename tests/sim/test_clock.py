"""The virtual-time loop: timers, timeouts and executor work on virtual time, taking no real time."""

from __future__ import annotations

import asyncio
import collections
import math
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable

import pytest

from kubelite.clock import bounded
from kubelite.sim.clock import ControlledLoop, VirtualClock, VirtualTimeLoop


async def _sleeps(clock: VirtualClock) -> None:
    await asyncio.gather(*(clock.sleep(s) for s in (3600.0, 10.0, 86_400.0)))


async def _wait_for_timeout(clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.Event().wait(), 7200)


async def _bounded(clock: VirtualClock) -> None:
    finished, _ = await bounded(clock, asyncio.Event().wait(), 90)
    assert not finished


async def _executor(clock: VirtualClock) -> None:
    assert await asyncio.to_thread(lambda: 42) == 42  # inline: no thread decides ordering


async def _deadline_loop(clock: VirtualClock) -> None:
    """A loop sleeping the remainder to a deadline (the pattern that livelocks a naive autojump clock)."""
    deadline = clock.monotonic() + 1 / 3
    while clock.monotonic() < deadline:
        await clock.sleep(deadline - clock.monotonic())


CASES = [
    pytest.param(_sleeps, 86_400.0, id="concurrent sleeps: time jumps to the last"),
    pytest.param(_wait_for_timeout, 7200.0, id="asyncio.wait_for times out on virtual time"),
    pytest.param(_bounded, 90.0, id="kubelite.clock.bounded on virtual time"),
    pytest.param(_executor, 0.0, id="executor work runs inline, no time passes"),
    pytest.param(_deadline_loop, 1 / 3, id="sleeping to a deadline reaches it"),
]


@pytest.mark.parametrize("work,virtual", CASES)
def test_virtual_time(work: Callable[[VirtualClock], Awaitable[None]], virtual: float) -> None:
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)
    start = time.perf_counter()
    try:
        loop.run_until_complete(work(clock))
    finally:
        loop.close()
    assert clock.monotonic() == pytest.approx(virtual, abs=1e-6)
    assert clock.now() == pytest.approx(clock.epoch + virtual, abs=1e-6)
    assert time.perf_counter() - start < 5.0


async def _ticks(clock: VirtualClock, every: float, into: list[float]) -> None:
    while True:
        await clock.sleep(every)
        into.append(clock.monotonic())


async def _real_sleep(loop: ControlledLoop, seconds: float) -> None:
    """Real time passing, told the loop by another thread (outside I/O: its self-pipe); the loop waits meanwhile,
    as it decides (executor work would run inline and block it)."""
    done = loop.create_future()
    threading.Timer(seconds, loop.call_soon_threadsafe, (done.set_result, None)).start()
    await done


async def _paused_stands_still(loop: ControlledLoop, clock: VirtualClock, ticks: list[float]) -> None:
    await _real_sleep(loop, 0.2)  # real time: the loop's own timers stand still
    assert ticks == [] and clock.monotonic() == 0.0


async def _step_runs_the_timers_in_it(loop: ControlledLoop, clock: VirtualClock, ticks: list[float]) -> None:
    began = time.perf_counter()
    await loop.step(3605)
    assert time.perf_counter() - began < 5.0  # an hour of 10 s ticks, as fast as they run
    assert len(ticks) == 360 and ticks[-1] == pytest.approx(3600, abs=1e-6)
    assert loop.paused and clock.monotonic() == pytest.approx(3605, abs=1e-6)


async def _resumed_runs_at_its_speed(loop: ControlledLoop, clock: VirtualClock, ticks: list[float]) -> None:
    loop.set_speed(100)
    loop.resume()
    await _real_sleep(loop, 0.5)  # real time: ~50 simulated seconds
    loop.pause()
    assert 2 <= len(ticks) <= 10 and 20 <= clock.monotonic() <= 100
    await _real_sleep(loop, 0.1)  # idle: time goes up to where the pace was when paused, and stays there
    paused_at = clock.monotonic()
    await _real_sleep(loop, 0.2)
    assert clock.monotonic() == paused_at and len(ticks) == int(paused_at // 10)


async def _paused_while_behind_catches_up(loop: ControlledLoop, clock: VirtualClock, ticks: list[float]) -> None:
    """Paused after its paced time ran ahead of the work (a busy loop): the timers up to where it was paused
    still run, none after it."""
    loop.set_speed(1000)
    loop.resume()
    time.sleep(0.1)  # the loop busy for 0.1 s of real time: paced ~100 simulated seconds ahead of its timers
    loop.pause()
    assert ticks == []
    await _real_sleep(loop, 0.2)
    caught_up = len(ticks)
    assert caught_up >= 9 and ticks[-1] <= clock.monotonic() < ticks[-1] + 10  # up to the pause, no tick past it
    await _real_sleep(loop, 0.2)
    assert len(ticks) == caught_up


async def _step_extended_then_resumed(loop: ControlledLoop, clock: VirtualClock, ticks: list[float]) -> None:
    """A step asked for during a step extends it; resumed from the step's end, time runs on from there."""
    first, second = loop.step(25), loop.step(20)
    await first
    assert second.done() and len(ticks) == 4 and clock.monotonic() == 45
    loop.set_speed(1000)
    loop.resume()
    await _real_sleep(loop, 0.1)
    assert len(ticks) >= 6 and clock.monotonic() > 55


async def _outside_io_sees_the_paced_time(loop: ControlledLoop, clock: VirtualClock, ticks: list[float]) -> None:
    """Moving, between two timers: what outside I/O wakes (kubectl, the control endpoint) runs at the paced
    time, not at the time the loop went idle (it had seen 0.002 s after a real second)."""
    loop.resume()  # at 1x: the next tick is 10 real seconds away
    await _real_sleep(loop, 0.5)
    assert ticks == [] and 0.4 <= clock.monotonic() <= 2.0
    assert loop.state()["time"] == clock.monotonic()


CONTROL_CASES = [
    pytest.param(_paused_stands_still, id="paused: no timer fires, time stands still"),
    pytest.param(_step_runs_the_timers_in_it, id="a step jumps through its timers and pauses at its end"),
    pytest.param(_resumed_runs_at_its_speed, id="resumed at 100x: about 50 simulated seconds in half a second"),
    pytest.param(_paused_while_behind_catches_up, id="paused while behind its pace: runs up to where it paused"),
    pytest.param(_step_extended_then_resumed, id="a step during a step extends it; resumed, time runs on"),
    pytest.param(_outside_io_sees_the_paced_time, id="moving: outside I/O between timers runs at the paced time"),
]


@pytest.mark.parametrize("case", CONTROL_CASES)
def test_controlled_loop(case: Callable[[ControlledLoop, VirtualClock, list[float]], Awaitable[None]]) -> None:
    loop = ControlledLoop(speed=1.0, paused=True)
    clock = VirtualClock(loop)
    ticks: list[float] = []

    async def main() -> None:
        ticker = asyncio.ensure_future(_ticks(clock, 10.0, ticks))
        try:
            await case(loop, clock, ticks)
        finally:
            ticker.cancel()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


# --- polling for I/O: every turn while a socket is registered, every SELF_PIPE_POLL of real time otherwise ------


async def _signal_stops_a_busy_run(loop: VirtualTimeLoop, clock: VirtualClock) -> None:
    """A run that never idles (a timer always pending) still hears a signal the loop handles, within real time."""
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, stop.set)
    try:
        ticker = asyncio.ensure_future(_ticks(clock, 1.0, []))
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        await stop.wait()
        ticker.cancel()
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)


async def _socket_read_before_time_moves(loop: VirtualTimeLoop, clock: VirtualClock) -> None:
    """With a socket registered the loop polls every turn: data already there is read before virtual time jumps
    past the pending timers (polled only every few ms of real time, a day of timers would pass first)."""
    ticker = asyncio.ensure_future(_ticks(clock, 1.0, []))
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    try:
        for _ in range(20):
            began = clock.monotonic()
            reading = asyncio.ensure_future(loop.sock_recv(a, 1))
            await asyncio.sleep(0)  # nothing to read yet: the reader registers the socket and waits
            b.send(b"x")
            assert await reading == b"x"
            assert clock.monotonic() - began <= 1.0
    finally:
        ticker.cancel()
        a.close()
        b.close()


@pytest.mark.parametrize("case", [
    pytest.param(_signal_stops_a_busy_run, id="a handled signal stops a run that never idles"),
    pytest.param(_socket_read_before_time_moves, id="a registered socket is polled every turn"),
])
def test_polling(case: Callable[[VirtualTimeLoop, VirtualClock], Awaitable[None]]) -> None:
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)
    began = time.perf_counter()
    try:
        loop.run_until_complete(asyncio.wait_for(case(loop, clock), 86_400))  # ~2 s of real time, if it hangs
    finally:
        loop.close()
    assert time.perf_counter() - began < 5.0


# --- the loop's own turn: asyncio's ordering contract, and timers due at one instant in the order they were set --

Log = list[tuple[str, float]]


def _note(loop: VirtualTimeLoop, log: Log, name: str) -> Callable[[], None]:
    return lambda: log.append((name, loop.time()))


def _same_instant_timers(loop: VirtualTimeLoop, log: Log) -> None:
    """Five timers whose heap, ordered by time alone (asyncio's TimerHandle), pops b before a."""
    for name, when in (("a", 5.0), ("x", 1.0), ("b", 5.0), ("y", 1.0), ("z", 6.0)):
        loop.call_at(when, _note(loop, log, name))


def _ready_fifo(loop: VirtualTimeLoop, log: Log) -> None:
    def first() -> None:
        log.append(("first", loop.time()))
        loop.call_soon(_note(loop, log, "queued by first"))
    loop.call_soon(first)
    loop.call_soon(_note(loop, log, "second"))


def _time_order(loop: VirtualTimeLoop, log: Log) -> None:
    for delay in (3.0, 1.0, 2.0):
        loop.call_later(delay, _note(loop, log, f"after {delay:g}"))


def _cancelled(loop: VirtualTimeLoop, log: Log) -> None:
    loop.call_later(1.0, _note(loop, log, "cancelled timer")).cancel()
    loop.call_soon(_note(loop, log, "cancelled callback")).cancel()
    later = loop.call_later(3.0, _note(loop, log, "cancelled by a timer"))
    loop.call_later(2.0, later.cancel)
    loop.call_later(4.0, _note(loop, log, "live"))


def _instant_by_instant(loop: VirtualTimeLoop, log: Log) -> None:
    """What a timer queues runs before the next instant's timers, even when both instants are already due (a
    ControlledLoop behind its pace): asyncio's turn would run all due timers first."""
    def first() -> None:
        log.append(("at 1", loop.time()))
        loop.call_soon(_note(loop, log, "queued at 1"))
    loop.call_at(1.0, first)
    loop.call_at(2.0, _note(loop, log, "at 2"))


def _after(when: float) -> float:
    return math.nextafter(when, math.inf)


ORDER_CASES = [
    pytest.param(_same_instant_timers, [("x", _after(1)), ("y", _after(1)), ("a", _after(5)), ("b", _after(5)),
                                        ("z", _after(6))], id="timers due at one instant run in the order set"),
    pytest.param(_ready_fifo, [("first", 0.0), ("second", 0.0), ("queued by first", 0.0)],
                 id="ready callbacks run first in, first out"),
    pytest.param(_time_order, [("after 1", _after(1)), ("after 2", _after(2)), ("after 3", _after(3))],
                 id="timers run in time order, each just past its time"),
    pytest.param(_cancelled, [("live", _after(4))], id="cancelled timers and callbacks never run"),
    pytest.param(_instant_by_instant, [("at 1", _after(1)), ("queued at 1", _after(1)), ("at 2", _after(2))],
                 id="one instant at a time: what a timer queues runs before the next instant's timers"),
]


def _stepping() -> VirtualTimeLoop:
    loop = ControlledLoop(paused=True)
    loop.step(100)  # beyond the cases' timers
    return loop


# The loops that must run a simulation alike: `sim run`'s, and `sim serve`'s stepping or far behind its pace.
LOOPS = [
    pytest.param(VirtualTimeLoop, id="virtual time"),
    pytest.param(_stepping, id="controlled, stepping"),
    pytest.param(lambda: ControlledLoop(speed=1e9), id="controlled, at 1e9x"),
]


@pytest.mark.parametrize("make", LOOPS)
@pytest.mark.parametrize("debug", [pytest.param(False, id="lean"), pytest.param(True, id="asyncio debug mode")])
@pytest.mark.parametrize("schedule,expected", ORDER_CASES)
def test_order(schedule: Callable[[VirtualTimeLoop, Log], None], expected: Log, debug: bool,
               make: Callable[[], VirtualTimeLoop]) -> None:
    loop = make()
    loop.set_debug(debug)
    log: Log = []
    try:
        schedule(loop, log)
        loop.run_until_complete(asyncio.sleep(10))
    finally:
        loop.close()
    assert log == expected


@pytest.mark.parametrize("make", LOOPS)
@pytest.mark.parametrize("seed", range(3))
def test_many_timers_mostly_cancelled_run_in_order(seed: int, make: Callable[[], VirtualTimeLoop]) -> None:
    """2,000 timers on 40 instants, 60 % cancelled before the run (the heap is rebuilt without them) and more
    by the timers themselves: the rest run by time, those due at one instant in the order they were set."""
    rng = random.Random(seed)
    loop = make()
    ran: list[int] = []
    victims: dict[int, int] = {}  # timer -> the timer it cancels when it runs

    def run(i: int) -> None:
        ran.append(i)
        if i in victims:
            handles[victims[i]].cancel()

    whens = [float(rng.randrange(40)) for _ in range(2000)]
    handles = [loop.call_at(when, run, i) for i, when in enumerate(whens)]
    order = sorted(range(len(whens)), key=lambda i: (whens[i], i))
    cancelled = {i for i in order if rng.random() < 0.6}
    for i in cancelled:
        handles[i].cancel()
    for position, i in enumerate(order[:-1]):
        if i not in cancelled and rng.random() < 0.2:
            victims[i] = order[rng.randrange(position + 1, len(order))]  # one due after i
            cancelled.add(victims[i])
    try:
        loop.run_until_complete(asyncio.sleep(50))
    finally:
        loop.close()
    assert ran == [i for i in order if i not in cancelled]


def _call_soon(loop: VirtualTimeLoop) -> object:
    return loop.call_soon(print)


def _call_at(loop: VirtualTimeLoop) -> object:
    return loop.call_at(1.0, print)


def _call_later_none(loop: VirtualTimeLoop) -> object:
    return loop.call_later(None, print)  # type: ignore[arg-type]


@pytest.mark.parametrize("call,closed,error", [
    pytest.param(_call_soon, True, RuntimeError, id="call_soon on a closed loop"),
    pytest.param(_call_at, True, RuntimeError, id="call_at on a closed loop"),
    pytest.param(_call_later_none, False, TypeError, id="call_later without a delay"),
])
def test_refused(call: Callable[[VirtualTimeLoop], object], closed: bool, error: type[Exception]) -> None:
    loop = VirtualTimeLoop()
    if closed:
        loop.close()
    try:
        with pytest.raises(error):
            call(loop)
    finally:
        loop.close()


def _fail() -> None:
    raise ValueError("a callback's bug")


@pytest.mark.parametrize("debug", [pytest.param(False, id="lean"), pytest.param(True, id="asyncio debug mode")])
def test_failed_callback_reported_loop_goes_on(debug: bool) -> None:
    """As asyncio's Handle._run: the loop's exception handler hears of it, the callbacks after it still run."""
    loop = VirtualTimeLoop()
    loop.set_debug(debug)
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    log: Log = []
    failing = loop.call_soon(_fail)
    loop.call_later(1.0, _note(loop, log, "after"))
    try:
        loop.run_until_complete(asyncio.sleep(2))
    finally:
        loop.close()
    assert log == [("after", _after(1))]
    assert [(str(c["message"]), type(c["exception"]), c["handle"]) for c in reported] == [
        ("Exception in callback _fail() at " + f"{__file__}:{_fail.__code__.co_firstlineno}", ValueError, failing)]


INTERNALS = [
    pytest.param(lambda loop: isinstance(loop._ready, collections.deque), id="the loop's ready queue"),
    pytest.param(lambda loop: loop._timer_cancelled_count == 0, id="the loop's count of cancelled timers"),
    pytest.param(lambda loop: loop._stopping is False and loop._closed is False,
                 id="the loop's stopping and closed flags"),
    pytest.param(lambda loop: callable(loop._process_events), id="the loop's dispatch of I/O events"),
    pytest.param(lambda loop: {"_callback", "_args", "_context", "_cancelled", "_source_traceback"}
                 <= set(asyncio.Handle.__slots__), id="a handle's slots"),
    pytest.param(lambda loop: {"_scheduled", "_when"} <= set(asyncio.TimerHandle.__slots__),
                 id="a timer handle's slots"),
    pytest.param(lambda loop: "_timer_handle_cancelled" in dir(loop), id="a cancelled timer tells its loop"),
]


@pytest.mark.parametrize("present", INTERNALS)
def test_the_asyncio_internals_the_lean_turn_uses_are_there(present: Callable[[VirtualTimeLoop], bool]) -> None:
    """VirtualTimeLoop's turn reads and writes these (written against CPython 3.11): a Python whose asyncio lacks
    one fails here, not in a simulation."""
    loop = VirtualTimeLoop()
    try:
        assert present(loop)
    finally:
        loop.close()
