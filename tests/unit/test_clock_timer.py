"""kubelite.clock.timer and bounded on each kind of clock: a loop timer where the clock offers call_later
(RealClock, a simulation's VirtualClock), a sleeping task on any other (FakeClock)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from kubelite.clock import Clock, FakeClock, RealClock, bounded, timer
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
