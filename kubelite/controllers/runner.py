"""One reconciler runner for every controller: a work queue keyed by object, rate-limited retries, a TaskGroup.

A port of client-go's workqueue as controllers use it (k8s.io/client-go/util/workqueue):
- **Dedup while queued.** Adding a key that is already waiting does nothing: ten pod events
  for one budget become one reconcile of it.
- **One worker per key at a time.** A key added while it is being reconciled is held back (the
  `dirty` set) and queued again when that reconcile is done, so two workers never reconcile the
  same object at once, and no change is lost.
- **Rate-limited retries.** A reconcile that raises (the API unavailable, a conflict) is retried
  after the per-item exponential failure back-off (`ItemExponentialFailureRateLimiter`: 5 ms
  doubling to 1000 s); a success forgets the item's failures.
- **Delayed adds** (`add_after`) keep only the earliest pending time per key, as the delaying queue.

Every task — workers and delayed adds — belongs to the runner's `asyncio.TaskGroup`, so `run()`
returning or being cancelled leaves nothing behind. Waiting goes through the injected clock.

`run_synced` is every controller's `Run`: start the informers, wait for their caches to sync, then
start the workers (runners and periodic loops).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from kubelite.api.errors import ApiError
from kubelite.clock import Clock
from kubelite.controllers.metrics import PROVIDER, QueueMetrics

log = logging.getLogger("kubelite.controllers")

K = TypeVar("K", bound=Hashable)
BASE_DELAY = 0.005
MAX_DELAY = 1000.0


class ItemExponentialFailureRateLimiter(Generic[K]):
    """workqueue.NewItemExponentialFailureRateLimiter: base·2^failures, capped; forget resets the item."""

    def __init__(self, base: float = BASE_DELAY, cap: float = MAX_DELAY) -> None:
        self.base = base
        self.cap = cap
        self.failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        exp = self.failures.get(item, 0)
        self.failures[item] = exp + 1
        if exp > 64:  # 2**exp overflows any sensible delay long before this
            return self.cap
        return min(self.base * (1 << exp), self.cap)

    def num_requeues(self, item: K) -> int:
        return self.failures.get(item, 0)

    def forget(self, item: K) -> None:
        self.failures.pop(item, None)


class WorkQueue(Generic[K]):
    """workqueue.Type with its delaying and rate-limiting layers; `run_delays` must run in a TaskGroup."""

    def __init__(self, clock: Clock, limiter: ItemExponentialFailureRateLimiter[K] | None = None) -> None:
        self.clock = clock
        self.limiter: ItemExponentialFailureRateLimiter[K] = limiter or ItemExponentialFailureRateLimiter()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()  # wants processing (queued, or re-added while processing)
        self._processing: set[K] = set()
        self._ready = asyncio.Event()  # set while the queue may hold keys
        self._waiting: dict[K, float] = {}  # delayed keys → when they are due (monotonic)
        self._tasks: asyncio.TaskGroup | None = None
        self._early: list[tuple[K, float]] = []  # delayed adds made before the TaskGroup exists
        self.metrics: QueueMetrics | None = None  # client-go's queue metrics, when the component measures them

    def __len__(self) -> int:
        return len(self._queue)

    def queued(self) -> list[K]:
        return list(self._queue)

    def add(self, key: K) -> None:
        if key in self._dirty:
            return
        if self.metrics is not None:
            self.metrics.add(key)
        self._dirty.add(key)
        if key in self._processing:
            return  # queued again by done()
        self._queue.append(key)
        self._ready.set()

    async def get(self) -> K:
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        if self.metrics is not None:
            self.metrics.get(key)
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        if self.metrics is not None:
            self.metrics.done(key)
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._ready.set()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        due = self.clock.monotonic() + delay
        if key in self._waiting and self._waiting[key] <= due:
            return  # already due sooner
        self._waiting[key] = due
        if self._tasks is None:
            self._early.append((key, due))
        else:
            self._tasks.create_task(self._add_when_due(key, due))

    def add_rate_limited(self, key: K) -> None:
        if self.metrics is not None:
            self.metrics.retry()
        self.add_after(key, self.limiter.when(key))

    def forget(self, key: K) -> None:
        self.limiter.forget(key)

    async def _add_when_due(self, key: K, due: float) -> None:
        await self.clock.sleep(due - self.clock.monotonic())
        if self._waiting.get(key) == due:  # not superseded by an earlier add_after
            del self._waiting[key]
            self.add(key)

    def attach(self, tasks: asyncio.TaskGroup) -> None:
        """Own the queue's timers by `tasks`, starting those requested before."""
        self._tasks = tasks
        for key, due in self._early:
            tasks.create_task(self._add_when_due(key, due))
        self._early.clear()


class Runner(Generic[K]):
    """Runs `reconcile(key)` for queued keys on `workers` workers until cancelled."""

    def __init__(self, name: str, reconcile: Callable[[K], Awaitable[None]], clock: Clock, workers: int = 1) -> None:
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        self.queue: WorkQueue[K] = WorkQueue(clock)
        self.failures = 0  # reconciles that raised (each logged and retried)
        provider = PROVIDER.get()
        if provider is not None:
            self.queue.metrics = provider.queue(name)

    def enqueue(self, key: K) -> None:
        self.queue.add(key)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            self.queue.attach(tasks)
            for _ in range(self.workers):
                tasks.create_task(self._worker())

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.reconcile(key)
            except Exception as exc:
                self.failures += 1
                # A conflict only says the informer's copy was behind a newer write: the retry starts from the
                # newer copy, so it is logged quietly (debug) — a PDB's status under churn conflicts all the time.
                # Other API errors (unavailable) are warnings without a traceback; anything else is a bug.
                level = logging.DEBUG if isinstance(exc, ApiError) and exc.code == 409 else logging.WARNING
                log.log(level, "%s: reconciling %s failed (retry %d): %s", self.name, key,
                        self.queue.limiter.num_requeues(key) + 1, exc, exc_info=not isinstance(exc, ApiError))
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
            finally:
                self.queue.done(key)



class Syncing(Protocol):
    """What `run_synced` starts and waits for: an informer, a controller's own or a shared one's handle."""

    synced: asyncio.Event

    async def run(self) -> None: ...


Start = Callable[[], Coroutine[Any, Any, None]]
"""A task to start: a coroutine function taking nothing (`runner.run`), called only when it is started."""


async def run_synced(informers: Iterable[Syncing], workers: Iterable[Start], *, alongside: Iterable[Start] = ()
                     ) -> None:
    """A controller's Run: start `informers` (and `alongside`, which reads no cache: the event sink), wait
    until every informer's cache is synced, then start `workers`.

    As upstream's `WaitForCacheSync` before the workers: a worker that read a half-listed cache would act
    on objects as missing (create a pod that exists, delete an orphan whose owner is not listed yet).
    Everything runs in one TaskGroup, so one task failing cancels the rest — the controller manager
    restarts the controller whole — and cancelling this leaves nothing behind.
    """
    informers = list(informers)
    async with asyncio.TaskGroup() as tasks:
        for informer in informers:
            tasks.create_task(informer.run())
        for start in alongside:
            tasks.create_task(start())
        for informer in informers:
            await informer.synced.wait()
        for start in workers:
            tasks.create_task(start())
