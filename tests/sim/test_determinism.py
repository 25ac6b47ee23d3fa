"""The mechanisms a simulation's byte-for-byte replay rests on, each pinned where it once broke.

The whole-run check is in test_runs.py; these are its cheap, specific causes.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import cast

import orjson
import pytest

from kubelite.api import errors
from kubelite.apiserver.allocators import RangeAllocator
from kubelite.apiserver.auth.admission import ServiceAccountAdmission
from kubelite.apiserver.cache import Caches, Watcher
from kubelite.apiserver.registry import RESOURCES
from kubelite.client import events, retry
from kubelite.client.informer import Handlers
from kubelite.client.interface import Client
from kubelite.controllers.informers import SharedInformerHandle, _Shared
from kubelite.sim.runner import seeded
from kubelite.store.interface import Event, EventType, KeyValue, Store

CONFIGMAPS = next(r for r in RESOURCES if r.key_prefix == "/registry/core/configmaps/")


def test_watch_cache_fans_an_event_out_to_watchers_in_the_order_they_started() -> None:
    """A set of (id-hashed) watchers woke them in memory-address order: which component heard a write
    first changed from run to run."""
    caches = Caches(Store.__new__(Store), (CONFIGMAPS,))  # apply() reads no store
    cache = caches[CONFIGMAPS]
    heard: list[int] = []

    class Recording(Watcher):
        __slots__ = ("n",)

        def offer(self, ev: object) -> None:
            heard.append(self.n)

    watchers = []
    for n in range(200):
        w = Recording("", None)
        w.n = n
        watchers.append(w)
    for w in random.Random(1).sample(watchers, len(watchers)):  # started in a shuffled order
        cache.add(w)
    value = orjson.dumps({"metadata": {"namespace": "default", "name": "c"}})
    caches.apply(Event(EventType.PUT, KeyValue("/registry/core/configmaps/default/c", value, 2, 2), None, 2))
    assert heard == [w.n for w in cache.watchers]
    assert heard == [w.n for w in random.Random(1).sample(watchers, len(watchers))]


def test_shared_informer_calls_its_handlers_in_the_order_they_subscribed() -> None:
    """A WeakSet of handles called the controllers' handlers in memory-address order: which controller
    queued a change first changed from run to run."""

    class _NoClient:  # never called: the informer is not run
        pass

    client = _NoClient()
    shared = _Shared(cast(Client, client), "/api/v1/pods", _Sleeps())
    heard: list[int] = []
    order = random.Random(1).sample(range(200), 200)
    handles = [SharedInformerHandle(shared, Handlers(on_add=lambda _, n=n: heard.append(n))) for n in order]
    shared._added({"metadata": {"namespace": "default", "name": "p"}})
    assert heard == order and len(handles) == 200


class _Sleeps:
    """A clock that records the delays slept and returns at once."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def now(self) -> float:
        return 0.0

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def _retry_delays() -> list[float]:
    """The delays a retry given no generator (as most callers are) sleeps, each with its jitter."""
    clock = _Sleeps()

    async def unavailable() -> None:
        raise errors.unavailable("down")

    with pytest.raises(errors.Unavailable):
        asyncio.run(retry.on_error(unavailable, clock=clock, retriable=retry.is_unavailable,
                                   backoff=retry.Backoff(1.0, 2.0, 1.0, 4, 10.0)))
    return clock.slept


def _event_name() -> str:
    obj = {"kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u"}}
    return str(events.event_for(obj, "Started", "m", "Pod", "kubelet", 0.0)["metadata"]["name"])


@pytest.mark.parametrize("draw", [
    pytest.param(_event_name, id="event name"),
    pytest.param(lambda: ServiceAccountAdmission().rng.getrandbits(64), id="token volume name suffix"),
    pytest.param(lambda: RangeAllocator(1, 1000, list, _Sleeps()).rng.getrandbits(64), id="allocator picks"),
    pytest.param(_retry_delays, id="retry jitter"),
])
def test_a_seeded_run_draws_the_same_values(draw: Callable[[], object]) -> None:
    """Generators made without a seed (random.Random()) drew from the OS entropy pool: under `seeded`
    they draw from the process's generator instead, so two runs with one seed agree."""
    with seeded(7):
        first = draw()
    with seeded(7):
        second = draw()
    assert first == second
