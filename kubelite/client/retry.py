"""Retry with exponential back-off and jitter: the one place callers go to try an API call again.

A port of k8s.io/apimachinery's `wait.Backoff` and client-go's `util/retry` (`OnError`,
`RetryOnConflict`): the caller says which errors are worth another try (a transport failure,
`Unavailable`; an optimistic-concurrency `Conflict`, 409 — usually after re-reading the object)
and how to back off; everything else is raised at once. Sleeping goes through the injected
clock, so tests run the schedule on a FakeClock and the simulator on virtual time.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from kubelite.api.errors import ApiError, Unavailable
from kubelite.clock import Clock

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """wait.Backoff: the n-th delay is duration·factorⁿ (capped at `cap`) plus up to jitter·delay at random.

    `steps` is how many attempts in all (None: until it succeeds or a non-retriable error).
    """

    duration: float
    factor: float = 1.0
    jitter: float = 0.0
    steps: int | None = None
    cap: float | None = None

    def delays(self, rng: random.Random) -> Iterator[float]:
        """The sleeps between attempts: `steps - 1` of them, or endless when steps is None."""
        delay = self.duration
        n = 0
        while self.steps is None or n < self.steps - 1:
            n += 1
            yield delay + (rng.random() * self.jitter * delay if self.jitter > 0 else 0.0)
            delay *= self.factor
            if self.cap is not None and delay > self.cap:
                delay = self.cap


# client-go's retry.DefaultRetry (for conflicts: a few quick tries) and retry.DefaultBackoff.
DEFAULT_RETRY = Backoff(duration=0.010, factor=1.0, jitter=0.1, steps=5)
DEFAULT_BACKOFF = Backoff(duration=0.010, factor=5.0, jitter=0.1, steps=4)
# For loops that must outlive an API server restart: from 0.2 s doubling to 30 s, forever.
UNTIL_AVAILABLE = Backoff(duration=0.2, factor=2.0, jitter=0.1, steps=None, cap=30.0)


def is_unavailable(exc: ApiError) -> bool:
    return isinstance(exc, Unavailable)


def is_conflict(exc: ApiError) -> bool:
    return exc.code == 409 and exc.reason == "Conflict"


def is_unavailable_or_conflict(exc: ApiError) -> bool:
    return is_unavailable(exc) or is_conflict(exc)


async def on_error(fn: Callable[[], Awaitable[T]], *, clock: Clock, retriable: Callable[[ApiError], bool],
                   backoff: Backoff = DEFAULT_BACKOFF, rng: random.Random | None = None) -> T:
    """retry.OnError: call `fn` until it succeeds, an error is not `retriable`, or the steps run out
    (then the last error is raised)."""
    # Made on the first failure (most calls succeed at once), from the process's generator: a simulation seeds
    # it, where a fresh random.Random() would seed from the OS entropy pool (and a syscall per call).
    delays: Iterator[float] | None = None
    while True:
        try:
            return await fn()
        except ApiError as exc:
            if not retriable(exc):
                raise
            if delays is None:
                delays = backoff.delays(rng or random.Random(random.getrandbits(64)))
            delay = next(delays, None)
            if delay is None:
                raise
        await clock.sleep(delay)


async def retry_on_conflict(fn: Callable[[], Awaitable[T]], *, clock: Clock, backoff: Backoff = DEFAULT_RETRY,
                            rng: random.Random | None = None) -> T:
    """retry.RetryOnConflict: `fn` should re-read the object and re-apply its change each time."""
    return await on_error(fn, clock=clock, retriable=is_conflict, backoff=backoff, rng=rng)
