"""kubelite.clock.timer and bounded on each kind of clock: a loop timer where the clock offers call_later
(RealClock, a simulation's VirtualClock), a sleeping task on any other (FakeClock); and coarse timers (timeouts
that almost never fire), coalesced into buckets on every kind of clock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kubelite.clock import TIMER_GRANULARITY, Cancellable, Clock, FakeClock, RealClock, bounded, timer
from kubelite.sim.clock import VirtualClock, VirtualTimeLoop

Step = Callable[[float], Awaitable[None]]  # let `seconds` of the clock's time pass


async def _timer_fires_after_its_time_unless_cancelled(clock: Clock, step: Step) -> None:
    fired: list[str] = []
    timer(clock, 0.05, lambda: fired.append("kept"))
    cancelled = timer(clock, 0.05, lambda: fired.append("cancelled"))
    await step(0.02)
    assert fired == [], "not before its time"
    cancelled.cancel()
    await step(0.1)
    assert fired == ["kept"]


async def _bounded_returns_what_finished_first(clock: Clock, step: Step) -> None:
    async def quick() -> int:
        return 7

    assert await bounded(clock, quick(), 10) == (True, 7)
    never = asyncio.Event()
    waiting = asyncio.ensure_future(bounded(clock, never.wait(), 0.05))
    await step(0)  # it starts (and sets its timer) before time moves
    await step(0.1)
    assert waiting.done() and waiting.result() == (False, None), "unfinished work times out"


CHECKS = [_timer_fires_after_its_time_unless_cancelled, _bounded_returns_what_finished_first]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.strip("_").replace("_", " "))
async def test_on_a_fake_clock_through_a_sleeping_task(check: Callable[[Clock, Step], Awaitable[None]]) -> None:
    clock = FakeClock()
    assert not hasattr(clock, "call_later")
    await check(clock, clock.advance)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.strip("_").replace("_", " "))
async def test_on_the_real_clock_through_a_loop_timer(check: Callable[[Clock, Step], Awaitable[None]]) -> None:
    clock = RealClock()
    await check(clock, clock.sleep)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.strip("_").replace("_", " "))
def test_on_virtual_time_through_a_loop_timer(check: Callable[[Clock, Step], Awaitable[None]]) -> None:
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)
    try:
        loop.run_until_complete(check(clock, clock.sleep))
    finally:
        loop.close()


# --- coarse timers: deadlines rounded up into TIMER_GRANULARITY buckets, one exact timer per bucket -------------

COARSE_CASES = [
    # (fake time when set, seconds): the timer is due at start + seconds and must fire within [due, due + G]
    pytest.param(0.0, 10.0, id="a deadline on a bucket boundary fires on it"),
    pytest.param(0.3, 10.0, id="a deadline inside a bucket fires at its end, never before"),
    pytest.param(0.999, 0.002, id="a deadline just past a boundary waits for the next"),
    pytest.param(5.5, 0.0, id="a zero timeout fires at the next boundary"),
    pytest.param(2.25, 30.5, id="a long timeout"),
]


@pytest.mark.parametrize(("start", "seconds"), COARSE_CASES)
async def test_a_coarse_timer_never_fires_early_and_at_most_one_bucket_late(start: float, seconds: float) -> None:
    clock = FakeClock()
    await clock.advance(start)
    fired: list[float] = []
    timer(clock, seconds, lambda: fired.append(clock.monotonic()), coarse=True)
    due = start + seconds
    step = TIMER_GRANULARITY / 8
    while clock.monotonic() < due + 2 * TIMER_GRANULARITY:
        await clock.advance(step)
    assert len(fired) == 1
    assert due <= fired[0] <= due + TIMER_GRANULARITY


async def test_a_cancelled_coarse_timer_never_fires_and_the_rest_of_its_bucket_does_in_order() -> None:
    clock = FakeClock()
    fired: list[str] = []
    for name in ("a", "b", "c", "d"):  # all due in the same bucket
        handle = timer(clock, 0.5, lambda n=name: fired.append(n), coarse=True)
        if name == "c":
            handle.cancel()
    handle.cancel()  # d: cancelled too, and cancelling twice is harmless
    handle.cancel()
    await clock.advance(3 * TIMER_GRANULARITY)
    assert fired == ["a", "b"]


async def test_a_coarse_timer_cancelled_by_an_earlier_one_of_its_bucket_is_skipped() -> None:
    clock = FakeClock()
    fired: list[str] = []
    later: list[Cancellable] = []
    timer(clock, 0.5, lambda: (fired.append("first"), later[0].cancel()), coarse=True)
    later.append(timer(clock, 0.5, lambda: fired.append("second"), coarse=True))
    await clock.advance(3 * TIMER_GRANULARITY)
    assert fired == ["first"]


async def test_a_coarse_callback_that_raises_is_reported_and_the_others_still_run() -> None:
    clock = FakeClock()
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    fired: list[str] = []
    try:
        timer(clock, 0.5, lambda: fired.append(str(1 / 0)), coarse=True)
        timer(clock, 0.5, lambda: fired.append("after"), coarse=True)
        await clock.advance(3 * TIMER_GRANULARITY)
    finally:
        loop.set_exception_handler(None)
    assert fired == ["after"]
    assert [type(c["exception"]) for c in reported] == [ZeroDivisionError]


async def test_bounded_with_a_coarse_limit_times_out_within_one_bucket_late() -> None:
    clock = FakeClock()
    await clock.advance(0.4)
    never = asyncio.Event()
    waiting = asyncio.ensure_future(bounded(clock, never.wait(), 10, coarse=True))
    await clock.advance(0)
    await clock.advance(9.6 - 0.01)  # just before 10 s have passed: still waiting
    assert not waiting.done()
    await clock.advance(TIMER_GRANULARITY + 0.02)
    assert waiting.done() and waiting.result() == (False, None)


@pytest.mark.parametrize("coarse", [False, True], ids=["exact limit", "coarse limit"])
async def test_bounded_cancels_its_work_when_its_caller_is_cancelled(coarse: bool) -> None:
    """A caller cancelled while it waits (an agent stopped mid-request) takes its work with it: before, the work
    ran on as an orphan task (a stopped agent's requests went on, and a simulation ended with leftover tasks)."""
    clock = FakeClock()
    never = asyncio.Event()
    work = asyncio.ensure_future(never.wait())
    caller = asyncio.ensure_future(bounded(clock, work, 10, coarse=coarse))
    await clock.advance(1)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.sleep(0)
    assert work.cancelled()


def test_coarse_timers_on_virtual_time_share_one_loop_timer_per_bucket() -> None:
    """Thousands of timeouts set and cancelled (an agent's API calls) leave at most one loop timer per bucket in
    asyncio's heap, where exact ones left one each; the live one still fires, not early."""
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)

    async def main() -> tuple[int, list[float]]:
        await clock.sleep(0.25)
        fired: list[float] = []
        for i in range(5000):
            timer(clock, 10 + i / 5000, lambda: None, coarse=True).cancel()
        timer(clock, 10, lambda: fired.append(clock.monotonic()), coarse=True)
        armed = len(loop._scheduled)  # type: ignore[attr-defined]  # asyncio's timer heap
        await clock.sleep(12)
        return armed, fired

    try:
        armed, fired = loop.run_until_complete(main())
    finally:
        loop.close()
    assert armed <= 2  # the buckets ending at 11 and 12 s
    assert len(fired) == 1 and 10.25 <= fired[0] <= 10.25 + TIMER_GRANULARITY


async def _limit_expired_leaves_the_caller_uncancelled(clock: VirtualClock) -> object:
    result = await bounded(clock, asyncio.Event().wait(), 5)
    task = asyncio.current_task()
    assert task is not None
    await clock.sleep(1)  # the caller goes on: no cancellation is left pending on its task
    return result, task.cancelling()


async def _work_swallowing_the_limit_still_did_not_finish(clock: VirtualClock) -> object:
    async def stubborn() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "swallowed"
        return "woken"

    result = await bounded(clock, stubborn(), 5)
    task = asyncio.current_task()
    assert task is not None
    return result, task.cancelling()


async def _work_turning_the_limit_into_an_error_raises_it_uncancelled(clock: VirtualClock) -> object:
    async def converting() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("converted") from None

    task = asyncio.current_task()
    assert task is not None
    try:
        await bounded(clock, converting(), 5)
    except RuntimeError as exc:
        return str(exc), task.cancelling()
    return "no error", task.cancelling()


async def _caller_cancelled_as_the_limit_expires_is_cancelled(clock: VirtualClock) -> object:
    caller = asyncio.ensure_future(bounded(clock, asyncio.Event().wait(), 5))
    clock.call_later(5, caller.cancel)  # set after the limit's timer, at the same instant: fires after it
    await clock.sleep(0)
    try:
        return await caller
    except asyncio.CancelledError:
        return "cancelled"


async def _inner_limit_ends_the_inner_work_only(clock: VirtualClock) -> object:
    return await bounded(clock, bounded(clock, asyncio.Event().wait(), 5), 50)


async def _outer_limit_ends_the_inner_work_too(clock: VirtualClock) -> object:
    inner_result: list[object] = []

    async def inner() -> None:
        inner_result.append(await bounded(clock, asyncio.Event().wait(), 50))

    began = clock.monotonic()
    return await bounded(clock, inner(), 5), inner_result, round(clock.monotonic() - began, 6)


@pytest.mark.parametrize(("check", "want"), [
    pytest.param(_limit_expired_leaves_the_caller_uncancelled, ((False, None), 0),
                 id="a limit that expired leaves the caller's task uncancelled"),
    pytest.param(_work_swallowing_the_limit_still_did_not_finish, ((False, None), 0),
                 id="work that swallows the limit's cancellation still did not finish in time"),
    pytest.param(_work_turning_the_limit_into_an_error_raises_it_uncancelled, ("converted", 0),
                 id="work that turns the limit's cancellation into an error raises it, the cancellation taken back"),
    pytest.param(_caller_cancelled_as_the_limit_expires_is_cancelled, "cancelled",
                 id="a caller cancelled at the instant its limit expires is cancelled"),
    pytest.param(_inner_limit_ends_the_inner_work_only, (True, (False, None)),
                 id="an inner limit's expiry ends the inner work only"),
    pytest.param(_outer_limit_ends_the_inner_work_too, ((False, None), [], 5.0),
                 id="an outer limit's expiry ends the inner work and is the outer's"),
])
def test_bounded_limit_is_a_cancellation_of_the_callers_own_task(
        check: Callable[[VirtualClock], Awaitable[object]], want: object) -> None:
    """The work runs in the caller's task and the limit cancels that task (as asyncio.timeout): a limit's
    cancellation must end only what it bounds and be accounted for (Task.cancelling), never taken for the
    caller's own cancellation nor hide it."""
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)
    try:
        got = loop.run_until_complete(check(clock))
    finally:
        loop.close()
    assert got == want


async def test_a_limit_firing_as_its_work_finishes_does_not_cancel_the_caller_later() -> None:
    """On a clock whose timers are sleeping tasks (FakeClock), a limit's task that ends in the turn the work
    finishes cannot be cancelled any more; its callback runs a turn later, when the caller has moved on, and must
    not cancel what the caller does next."""
    clock = FakeClock()

    async def two_turns() -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return "done"

    task = asyncio.current_task()
    assert task is not None
    assert await bounded(clock, two_turns(), 0) == (True, "done")
    for _ in range(3):
        await asyncio.sleep(0)  # a stray cancellation would be raised here
    assert task.cancelling() == 0


@pytest.mark.parametrize(("ns", "text"), [
    pytest.param(80 * 10**9, "1m20s", id="minutes and seconds, as kubelet's CrashLoopBackOff wait prints"),
    pytest.param(300 * 10**9, "5m0s", id="whole minutes keep their 0s"),
    pytest.param(10 * 10**9, "10s", id="seconds alone"),
    pytest.param(3723 * 10**9 + 5 * 10**8, "1h2m3.5s", id="hours, minutes and a fraction"),
    pytest.param(1_500_000, "1.5ms", id="below a second: the largest unit"),
    pytest.param(0, "0s", id="zero"),
])
def test_go_durations_print_and_parse_back(ns: int, text: str) -> None:
    """format_duration is Go's Duration.String(); parse_duration, time.ParseDuration, reads it back."""
    from kubelite.clock import format_duration, parse_duration

    assert format_duration(ns) == text
    assert parse_duration(text) == ns
