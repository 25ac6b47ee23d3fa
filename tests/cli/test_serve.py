"""The composition root keeps its in-process components running: a component that fails is started afresh."""

from __future__ import annotations

import asyncio

import pytest

from kubelite.cli.serve import keep_running
from kubelite.clock import FakeClock


@pytest.mark.parametrize(("outcomes", "starts_after"), [
    pytest.param(["fail", "fail", "run"], [0.0, 1.0, 3.0], id="failed twice: restarted after 1 s, then 2 s"),
    pytest.param(["return", "run"], [0.0, 1.0], id="returned: restarted too"),
    pytest.param(["run"], [0.0], id="healthy: started once"),
])
async def test_failed_component_is_restarted_with_back_off(outcomes: list[str], starts_after: list[float]) -> None:
    clock = FakeClock()
    starts: list[float] = []
    plan = iter(outcomes)

    async def component() -> None:
        starts.append(clock.monotonic())
        outcome = next(plan)
        if outcome == "fail":
            raise RuntimeError("a bug in a handler")
        if outcome == "run":
            await asyncio.Event().wait()

    task = asyncio.create_task(keep_running("component", component, clock))
    await clock.advance(0)  # the first start happens at t=0, before time moves
    for _ in range(100):
        await clock.advance(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # FakeClock wakes a sleeper at its deadline, so each gap is one back-off delay: nominal plus up to 10% jitter.
    assert len(starts) == len(starts_after) and starts[0] == 0.0
    for prev, cur, nominal_prev, nominal in zip(starts, starts[1:], starts_after, starts_after[1:], strict=False):
        delay = nominal - nominal_prev
        assert delay <= cur - prev <= delay * 1.1 + 1e-9
