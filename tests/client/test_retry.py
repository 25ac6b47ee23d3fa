"""The retry helper: which errors are retried, on what schedule (FakeClock), and when it gives up."""

from __future__ import annotations

import asyncio
import random

import pytest

from kubelite.api.errors import ApiError, conflict, not_found, unavailable
from kubelite.client.retry import (
    DEFAULT_BACKOFF,
    Backoff,
    is_conflict,
    is_unavailable,
    is_unavailable_or_conflict,
    on_error,
    retry_on_conflict,
)
from kubelite.clock import FakeClock

UNAVAILABLE = unavailable("connection refused")
CONFLICT = conflict("pods", "p", "the object has been modified")
NOT_FOUND = not_found("pods", "p")


@pytest.mark.parametrize(("backoff", "expected"), [
    pytest.param(Backoff(1.0, factor=2.0, steps=5), [1, 2, 4, 8], id="doubling: steps-1 sleeps"),
    pytest.param(Backoff(1.0, factor=2.0, steps=6, cap=5.0), [1, 2, 4, 5, 5], id="capped"),
    pytest.param(Backoff(0.01, factor=1.0, steps=1), [], id="one step: no sleep"),
    pytest.param(DEFAULT_BACKOFF, [0.01, 0.05, 0.25], id="client-go DefaultBackoff without jitter"),
])
def test_backoff_delays(backoff: Backoff, expected: list[float]) -> None:
    plain = Backoff(backoff.duration, backoff.factor, 0.0, backoff.steps, backoff.cap)
    assert list(plain.delays(random.Random(0))) == pytest.approx(expected)


def test_jitter_stays_within_its_fraction() -> None:
    delays = list(Backoff(1.0, factor=2.0, jitter=0.5, steps=8).delays(random.Random(7)))
    base = [2.0 ** n for n in range(7)]
    assert all(b <= d <= b * 1.5 for b, d in zip(base, delays, strict=True))
    assert delays != base  # the jitter does move them


def test_endless_backoff_keeps_yielding_the_cap() -> None:
    gen = Backoff(0.2, factor=2.0, cap=30.0).delays(random.Random(0))
    delays = [next(gen) for _ in range(20)]
    assert delays[-1] == 30.0 and delays[0] == 0.2


@pytest.mark.parametrize(("failures", "retriable", "outcome", "elapsed", "calls"), [
    pytest.param([UNAVAILABLE, UNAVAILABLE], is_unavailable, "ok", 3.0, 3, id="unavailable twice then ok"),
    pytest.param([CONFLICT], is_conflict, "ok", 1.0, 2, id="conflict once then ok"),
    pytest.param([CONFLICT, UNAVAILABLE], is_unavailable_or_conflict, "ok", 3.0, 3,
                 id="either, as the caller chooses"),
    pytest.param([CONFLICT], is_unavailable, CONFLICT, 0.0, 1, id="conflict not retried when only unavailable is"),
    pytest.param([NOT_FOUND], is_unavailable_or_conflict, NOT_FOUND, 0.0, 1, id="other errors raised at once"),
    pytest.param([UNAVAILABLE] * 5, is_unavailable, UNAVAILABLE, 7.0, 4, id="steps exhausted: the last error"),
])
async def test_on_error(failures: list[ApiError], retriable: object, outcome: object, elapsed: float,
                        calls: int) -> None:
    clock = FakeClock()
    pending = list(failures)
    made = 0

    async def op() -> str:
        nonlocal made
        made += 1
        if pending:
            raise pending.pop(0)
        return "ok"

    task = asyncio.create_task(on_error(op, clock=clock, retriable=retriable,  # type: ignore[arg-type]
                                        backoff=Backoff(1.0, factor=2.0, steps=4)))
    while not task.done():
        await clock.advance(0.5)
    if isinstance(outcome, ApiError):
        with pytest.raises(ApiError) as info:
            task.result()
        assert info.value is outcome
    else:
        assert task.result() == outcome
    assert clock.monotonic() == pytest.approx(elapsed, abs=0.5)
    assert made == calls


async def test_retry_on_conflict_rereads_each_attempt() -> None:
    """RetryOnConflict calls the whole read-modify-write again, so each attempt sees the newest object."""
    clock = FakeClock()
    versions = iter(["1", "2", "3"])
    attempts: list[str] = []

    async def update() -> str:
        seen = next(versions)
        attempts.append(seen)
        if seen != "3":
            raise CONFLICT
        return seen

    task = asyncio.create_task(retry_on_conflict(update, clock=clock))
    while not task.done():
        await clock.advance(0.01)
    assert task.result() == "3" and attempts == ["1", "2", "3"]


@pytest.mark.parametrize(("failures", "seeded"), [
    pytest.param([], 0, id="success at once: no random source made"),
    pytest.param([UNAVAILABLE], 1, id="first failure: one random source for the whole schedule"),
    pytest.param([UNAVAILABLE, UNAVAILABLE], 1, id="further failures reuse it"),
])
async def test_on_error_seeds_jitter_only_when_it_backs_off(monkeypatch: pytest.MonkeyPatch,
                                                           failures: list[ApiError], seeded: int) -> None:
    """Regression: every call (each event sent, each status written) seeded a random.Random from the OS
    entropy pool even when the first attempt succeeded, as nearly all do."""
    made: list[random.Random] = []

    class Counting(random.Random):
        def __init__(self, seed: int | None = None) -> None:  # seeded from the process's generator
            super().__init__(0)
            made.append(self)

    monkeypatch.setattr("kubelite.client.retry.random.Random", Counting)
    clock = FakeClock()
    pending = list(failures)

    async def op() -> str:
        if pending:
            raise pending.pop(0)
        return "ok"

    task = asyncio.create_task(on_error(op, clock=clock, retriable=is_unavailable, backoff=Backoff(1.0, steps=4)))
    while not task.done():
        await clock.advance(0.5)
    assert task.result() == "ok" and len(made) == seeded
