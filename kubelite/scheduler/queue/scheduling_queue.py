"""The scheduling queue (P3, L19): activeQ, backoffQ and the unschedulable pods.

Mirrors pkg/scheduler/backend/queue: activeQ is ordered by PrioritySort (priority, then
the time the pod entered the queue); a failed pod backs off `initial * 2^(attempts-1)`
up to the maximum; a pod found unschedulable is parked until a cluster event might help
(then it goes to backoffQ if its backoff has not expired, else activeQ) or for at most
five minutes. A parked pod never blocks the pods behind it. Gated pods are not queued at all.
The nominator (which pending pod was promised which node) lives beside the queue, as upstream's.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field

from kubelite.clock import Clock, bounded
from kubelite.scheduler.podinfo import PodInfo
from kubelite.scheduler.queue.nominator import Nominator

UNSCHEDULABLE_TIMEOUT = 300.0


@dataclass(slots=True)
class QueuedPod:
    info: PodInfo
    attempts: int = 0
    enqueued: float = 0.0  # when it first entered the queue (PrioritySort's tie-break)
    last_failure: float = 0.0
    generation: int = 0
    where: str = ""  # active | backoff | unschedulable | in-flight
    popped_at_move: int = 0  # the queue's move counter when this attempt began
    unschedulable_plugins: set[str] = field(default_factory=set)


class SchedulingQueue:
    def __init__(self, clock: Clock, initial_backoff: float = 1.0, max_backoff: float = 10.0) -> None:
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.pods: dict[str, QueuedPod] = {}
        self._active: list[tuple[int, float, int, int, str]] = []
        self._backoff: list[tuple[float, int, int, str]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._moves = 0  # counts cluster events, so an attempt knows if one happened while it ran
        self.nominator = Nominator()

    def __len__(self) -> int:
        return len(self.pods)

    # --- membership ------------------------------------------------------------------------------

    def add(self, info: PodInfo) -> None:
        qp = self.pods.get(info.uid)
        if qp is None:
            qp = QueuedPod(info, enqueued=self.clock.monotonic())
            self.pods[info.uid] = qp
            self._to_active(qp)
            return
        qp.info = info
        if qp.where == "unschedulable":  # the pod itself changed: it may fit now
            self._requeue(qp)
        elif qp.where == "active":
            self._to_active(qp)  # re-sort: priority may not change, but keep the newest info

    def delete(self, uid: str) -> None:
        qp = self.pods.pop(uid, None)
        if qp is not None:
            qp.generation += 1  # invalidates its heap entries

    def contains(self, uid: str) -> bool:
        return uid in self.pods

    # --- results of an attempt -------------------------------------------------------------------

    def unschedulable(self, qp: QueuedPod, plugins: set[str]) -> None:
        if self.pods.get(qp.info.uid) is not qp:
            return
        qp.attempts += 1
        qp.last_failure = self.clock.monotonic()
        qp.unschedulable_plugins = plugins
        if self._moves != qp.popped_at_move:
            self._to_backoff(qp)  # the cluster changed during the attempt: retry rather than park
            return
        qp.generation += 1
        qp.where = "unschedulable"

    def error(self, qp: QueuedPod) -> None:
        """A bind or API failure: retry after backoff."""
        if self.pods.get(qp.info.uid) is not qp:
            return
        qp.attempts += 1
        qp.last_failure = self.clock.monotonic()
        self._to_backoff(qp)

    def done(self, uid: str) -> None:
        self.delete(uid)

    # --- cluster events --------------------------------------------------------------------------

    def move_all(self) -> None:
        """A node was added or changed, or a pod went away: parked pods get another chance."""
        self._moves += 1
        for qp in list(self.pods.values()):
            if qp.where == "unschedulable":
                self._requeue(qp)

    def flush_backoff(self) -> None:
        """Pods whose backoff has expired move to activeQ (checked on every pop: a heap peek)."""
        now = self.clock.monotonic()
        while self._backoff and self._backoff[0][0] <= now:
            _, _, gen, uid = heapq.heappop(self._backoff)
            qp = self.pods.get(uid)
            if qp is not None and qp.generation == gen and qp.where == "backoff":
                self._to_active(qp)

    def flush_unschedulable(self) -> None:
        """Pods parked for longer than five minutes get another attempt (run periodically, not per pop)."""
        now = self.clock.monotonic()
        for qp in list(self.pods.values()):
            if qp.where == "unschedulable" and now - qp.last_failure >= UNSCHEDULABLE_TIMEOUT:
                self._requeue(qp)

    def flush(self) -> None:
        self.flush_backoff()
        self.flush_unschedulable()

    def backoff_duration(self, qp: QueuedPod) -> float:
        if qp.attempts <= 0:
            return 0.0
        return float(min(self.initial_backoff * 2 ** (qp.attempts - 1), self.max_backoff))

    def next_backoff_expiry(self) -> float | None:
        return self._backoff[0][0] if self._backoff else None

    # --- popping ---------------------------------------------------------------------------------

    def pop_nowait(self) -> QueuedPod | None:
        while self._active:
            _, _, _, gen, uid = heapq.heappop(self._active)
            qp = self.pods.get(uid)
            if qp is not None and qp.generation == gen and qp.where == "active":
                qp.where = "in-flight"
                qp.generation += 1
                qp.popped_at_move = self._moves
                return qp
        return None

    async def pop(self) -> QueuedPod:
        while True:
            self.flush_backoff()
            qp = self.pop_nowait()
            if qp is not None:
                return qp
            self._wake.clear()
            expiry = self.next_backoff_expiry()
            timeout = None if expiry is None else max(0.0, expiry - self.clock.monotonic())
            if timeout is None:
                await self._wake.wait()
            else:
                await bounded(self.clock, self._wake.wait(), timeout)

    # --- internals -------------------------------------------------------------------------------

    def _requeue(self, qp: QueuedPod) -> None:
        if self.clock.monotonic() < qp.last_failure + self.backoff_duration(qp):
            self._to_backoff(qp)
        else:
            self._to_active(qp)

    def _to_active(self, qp: QueuedPod) -> None:
        qp.generation += 1
        qp.where = "active"
        heapq.heappush(self._active, (-qp.info.priority, qp.enqueued, next(self._seq), qp.generation, qp.info.uid))
        self._wake.set()

    def _to_backoff(self, qp: QueuedPod) -> None:
        qp.generation += 1
        qp.where = "backoff"
        until = qp.last_failure + self.backoff_duration(qp)
        heapq.heappush(self._backoff, (until, next(self._seq), qp.generation, qp.info.uid))
        self._wake.set()
