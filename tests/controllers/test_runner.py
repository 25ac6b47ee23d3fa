"""The reconciler runner: client-go workqueue semantics (dedup, one worker per key, rate-limited retries)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter

import pytest

from kubelite.api.errors import conflict, unavailable
from kubelite.clock import FakeClock
from kubelite.controllers.runner import ItemExponentialFailureRateLimiter, Runner

MS = 0.001


def test_item_exponential_failure_rate_limiter() -> None:
    """TestItemExponentialFailureRateLimiter."""
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1 * MS, 1.0)
    assert [limiter.when("one") for _ in range(5)] == pytest.approx([1 * MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS])
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == pytest.approx([1 * MS, 2 * MS])
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == pytest.approx(1 * MS)


@pytest.mark.parametrize(("base", "cap", "failures", "expected"), [
    pytest.param(1 * MS, 1000.0, 5, 32 * MS, id="TestItemExponentialFailureRateLimiterOverFlow: 1ms x2^5"),
    pytest.param(1 * MS, 1000.0, 1000, 1000.0, id="TestItemExponentialFailureRateLimiterOverFlow: capped"),
    pytest.param(60.0, 1000 * 3600.0, 2, 240.0, id="TestItemExponentialFailureRateLimiterOverFlow: minutes"),
    pytest.param(0.005, 1000.0, 0, 0.005, id="default: 5 ms first"),
    pytest.param(0.005, 1000.0, 30, 1000.0, id="default: 1000 s at most"),
])
def test_rate_limiter_overflow(base: float, cap: float, failures: int, expected: float) -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(base, cap)
    for _ in range(failures):
        limiter.when("one")
    assert limiter.when("one") == pytest.approx(expected)


async def _run(runner: Runner[str], clock: FakeClock, seconds: float, step: float = 0.001) -> None:
    task = asyncio.create_task(runner.run())
    elapsed = 0.0
    while elapsed < seconds:
        await clock.advance(step)
        elapsed += step
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_dedup_while_queued() -> None:
    clock = FakeClock()
    seen: list[str] = []

    async def reconcile(key: str) -> None:
        seen.append(key)

    runner = Runner("t", reconcile, clock)
    for key in ("a", "a", "b", "a", "b"):
        runner.enqueue(key)
    assert runner.queue.queued() == ["a", "b"]
    await _run(runner, clock, 0.01)
    assert seen == ["a", "b"]


async def test_one_worker_per_key_and_no_change_lost() -> None:
    """A key re-added while reconciling waits for that reconcile, then runs once more (4 workers)."""
    clock = FakeClock()
    gate = asyncio.Event()
    running: Counter[str] = Counter()
    most: Counter[str] = Counter()
    runs: Counter[str] = Counter()

    async def reconcile(key: str) -> None:
        running[key] += 1
        most[key] = max(most[key], running[key])
        runs[key] += 1
        if runs[key] == 1:
            await gate.wait()
        running[key] -= 1

    runner = Runner("t", reconcile, clock, workers=4)
    runner.enqueue("a")
    task = asyncio.create_task(runner.run())
    await clock.advance(0.001)
    runner.enqueue("a")  # while "a" is being reconciled
    runner.enqueue("a")
    await clock.advance(0.001)
    assert runs["a"] == 1
    gate.set()
    await clock.advance(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert runs["a"] == 2 and most["a"] == 1


@pytest.mark.parametrize("error", [
    pytest.param(unavailable("refused"), id="unavailable"),
    pytest.param(conflict("poddisruptionbudgets", "b", "modified"), id="conflict"),
    pytest.param(KeyError("status"), id="a bug in reconcile"),
])
async def test_failures_retry_with_exponential_back_off_then_forget(error: Exception) -> None:
    clock = FakeClock()
    attempts: list[float] = []

    async def reconcile(key: str) -> None:
        attempts.append(clock.monotonic())
        if len(attempts) <= 3:
            raise error

    runner = Runner("t", reconcile, clock)
    runner.enqueue("a")
    await _run(runner, clock, 0.1, step=0.0005)
    gaps = [round(b - a, 4) for a, b in itertools.pairwise(attempts)]
    assert gaps == [0.005, 0.01, 0.02]  # 5 ms doubling
    assert runner.failures == 3
    assert runner.queue.limiter.num_requeues("a") == 0  # forgotten on success


@pytest.mark.parametrize(("error", "level"), [
    pytest.param(conflict("poddisruptionbudgets", "b", "modified"), logging.DEBUG, id="a conflict is retried quietly"),
    pytest.param(unavailable("refused"), logging.WARNING, id="an unavailable server is a warning"),
    pytest.param(KeyError("status"), logging.WARNING, id="a bug is a warning with its traceback"),
])
async def test_failure_log_level(error: Exception, level: int, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()

    async def reconcile(key: str) -> None:
        raise error

    runner = Runner("t", reconcile, clock)
    runner.enqueue("a")
    with caplog.at_level(logging.DEBUG, logger="kubelite.controllers"):
        await _run(runner, clock, 0.004, step=0.001)
    (record,) = [r for r in caplog.records if r.name == "kubelite.controllers"]
    assert record.levelno == level
    assert bool(record.exc_info) == isinstance(error, KeyError)


@pytest.mark.parametrize(("delays", "due"), [
    pytest.param([10.0, 5.0], 5.0, id="an earlier add_after wins"),
    pytest.param([1.0, 3.0], 1.0, id="a later add_after is ignored"),
    pytest.param([2.0, 2.0], 2.0, id="the same time twice: one add"),
])
async def test_add_after_keeps_the_earliest_time(delays: list[float], due: float) -> None:
    clock = FakeClock()
    seen: list[float] = []

    async def reconcile(key: str) -> None:
        seen.append(clock.monotonic())

    runner = Runner("t", reconcile, clock)
    for d in delays:
        runner.queue.add_after("a", d)
    await _run(runner, clock, 12.0, step=0.5)
    assert seen == [pytest.approx(due)]  # the superseded timer adds nothing


async def test_cancelling_the_runner_leaves_no_task_behind() -> None:
    clock = FakeClock()

    async def reconcile(key: str) -> None:
        raise unavailable("refused")

    runner = Runner("t", reconcile, clock, workers=3)
    for key in "abc":
        runner.enqueue(key)
    before = asyncio.all_tasks()
    task = asyncio.create_task(runner.run())
    await clock.advance(0.001)
    assert len(asyncio.all_tasks() - before) > 3  # workers and pending retries
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() - before == set()

