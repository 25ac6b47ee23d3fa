"""Pod workers: one task per pod that sequences its syncs, and nothing else (kubelet's pod_workers.go).

The work itself sits behind `PodSyncer` (pod_sync.PodSync). The worker keeps the facts that
decide which kind of work is next, and they only move forward:

    update_pod ──► sync_pod (repeated) ──► terminating_at set ──► sync_terminating_pod ──► terminated_at set
                                                                                           ──► sync_terminated_pod

`terminating_at` is set by a deletion, a force delete (`remove_pod`), a terminal pod, or a stop
decision (`stop_pod`: activeDeadlineSeconds, node-pressure eviction, node shutdown); once set it
is never cleared, and the termination's deadline only moves earlier. Updates replace the pending
pod object (the latest wins) and wake the worker; a container exit, a probe change or a back-off
timer wakes it too. Each sync is retried with a back-off until it returns without error;
cancelling a worker (agent shutdown) stops the sequencing only — it never stops a container.

    could_have_running_containers(uid):  true ──────────────────────────────► false after sync_terminating_pod
    is_terminating(uid):                 false ───► true from terminating_at on
    is_finished(uid):                    false ────────────────────────────────────────► true after sync_terminated_pod

A finished pod's entry stays (updates to it are ignored: it never runs again) until `forget`,
which the agent calls once the pod object is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubelite.agent.termination import Termination, pod_grace
from kubelite.clock import Clock, bounded

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]
RETRY_INITIAL = 1.0
RETRY_MAX = 10.0


@dataclass(frozen=True)
class SyncResult:
    terminal: bool = False  # every container has finished for good: stop what is left, report the phase
    stop: tuple[str, str] | None = None  # a decision to stop the pod (reason, message), with the pod's grace
    resync_at: float | None = None  # call sync_pod again at this clock.now() time (a back-off, a deadline)


class PodSyncer(Protocol):
    """The work of one pod. Each method is invoked until it returns without error."""

    async def sync_pod(self, pod: Obj) -> SyncResult: ...

    async def sync_terminating_pod(self, pod: Obj, termination: Termination) -> None: ...

    async def sync_terminated_pod(self, pod: Obj, termination: Termination) -> None: ...


SyncerFactory = Callable[[Obj, Callable[[], None]], PodSyncer]  # (pod, wake) → the pod's syncer


@dataclass
class PodSyncStatus:
    pod: Obj  # the object the current or last sync saw
    syncer: PodSyncer
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    pending: Obj | None = None  # the newest update, not yet seen by a sync (the latest wins)
    terminating_at: float | None = None
    terminated_at: float | None = None
    termination: Termination | None = None
    task: asyncio.Task[None] | None = None

    def work_type(self) -> str:
        return "terminated" if self.terminated_at is not None else (
            "terminating" if self.terminating_at is not None else "sync")


class PodWorkers:
    def __init__(self, clock: Clock, new_syncer: SyncerFactory,
                 on_finished: Callable[[str], None] = lambda uid: None) -> None:
        self.clock = clock
        self.new_syncer = new_syncer
        self.on_finished = on_finished  # called with the uid when a pod has been fully terminated
        self.on_sync: Callable[[str, float], None] = lambda operation, seconds: None  # for kubelet's metrics
        self.pods: dict[str, PodSyncStatus] = {}

    # --- inputs ------------------------------------------------------------------------------------

    def update_pod(self, pod: Obj) -> None:
        """A new or changed pod object bound to this node (from the informer)."""
        uid = pod["metadata"]["uid"]
        st = self.pods.get(uid)
        if st is not None and self.is_finished(uid):
            return  # finished processing: no further updates
        if st is None:
            st = PodSyncStatus(pod, syncer=None)  # type: ignore[arg-type]
            st.syncer = self.new_syncer(pod, st.wake.set)
            self.pods[uid] = st
            st.task = asyncio.create_task(self._work(uid, st), name=f"pod {pod['metadata']['name']}")
        else:
            st.pending = pod
            st.wake.set()
        if pod["metadata"].get("deletionTimestamp"):
            self._terminate(st, pod_grace(pod))

    def remove_pod(self, uid: str) -> None:
        """The object is gone (force delete): stop the containers within the minimum window, write nothing."""
        st = self.pods.get(uid)
        if st is not None and st.terminated_at is None:
            self._terminate(st, pod_grace(st.pending or st.pod))
            assert st.termination is not None
            st.termination.remove(self.clock.now())

    def stop_pod(self, uid: str, grace: float, reason: str, message: str) -> bool:
        """A decision to stop this pod now with `grace` seconds, then mark it Failed with `reason` and `message`
        (node-pressure eviction, activeDeadlineSeconds). False when no worker runs this pod."""
        st = self.pods.get(uid)
        if st is None or st.terminated_at is not None:
            return False
        self._terminate(st, grace, reason, message)
        return True

    def shut_down(self, grace: float) -> list[asyncio.Task[None]]:
        """Graceful node shutdown: stop every pod within `grace`; their checkpoints stay. Returns the workers."""
        running = [st for st in self.pods.values() if st.terminated_at is None]
        for st in running:
            self._terminate(st, grace)
            assert st.termination is not None
            st.termination.shutdown = True
        return [st.task for st in running if st.task is not None]

    def forget(self, uid: str) -> None:
        """The pod object is gone and the pod is finished here: drop what is known of it."""
        if self.is_finished(uid):
            del self.pods[uid]

    def _terminate(self, st: PodSyncStatus, grace: float, reason: str = "", message: str = "") -> None:
        now = self.clock.now()
        if st.termination is None:
            st.terminating_at = now
            st.termination = Termination(now, now + grace, reason, message)
        else:
            st.termination.shorten(grace)  # the effective grace only shrinks; the first reason stays
        st.wake.set()

    # --- what other components may ask ---------------------------------------------------------------

    def could_have_running_containers(self, uid: str) -> bool:
        st = self.pods.get(uid)
        return st is not None and st.terminated_at is None

    def is_terminating(self, uid: str) -> bool:
        st = self.pods.get(uid)
        return st is not None and st.terminating_at is not None

    def is_finished(self, uid: str) -> bool:
        st = self.pods.get(uid)
        return st is not None and st.task is not None and st.task.done() and st.terminated_at is not None

    # --- the worker ----------------------------------------------------------------------------------

    async def _work(self, uid: str, st: PodSyncStatus) -> None:
        await self._sync_until_terminating(st)
        await self._retried(st, lambda: st.syncer.sync_terminating_pod(self._take(st), self._termination(st)))
        st.terminated_at = self.clock.now()
        await self._retried(st, lambda: st.syncer.sync_terminated_pod(self._take(st), self._termination(st)))
        asyncio.get_running_loop().call_soon(self.on_finished, uid)  # once this task is done (is_finished)

    async def _sync_until_terminating(self, st: PodSyncStatus) -> None:
        delay = RETRY_INITIAL
        operation = "create"
        while st.termination is None:
            st.wake.clear()
            operation = "update" if operation != "create" and st.pending is not None else operation
            pod = self._take(st)
            started = self.clock.monotonic()
            try:
                result = await st.syncer.sync_pod(pod)
                delay = RETRY_INITIAL
            except Exception:
                log.exception("pod %s: sync failed; retrying in %.0f s", pod["metadata"].get("name"), delay)
                result = SyncResult(resync_at=self.clock.now() + delay)
                delay = min(RETRY_MAX, delay * 2)
            self.on_sync(operation, self.clock.monotonic() - started)
            operation = "sync"
            if st.termination is not None:
                return
            if result.stop is not None:
                self._terminate(st, pod_grace(pod), *result.stop)
                return
            if result.terminal:
                self._terminate(st, pod_grace(pod))
                return
            if st.wake.is_set():
                continue
            if result.resync_at is None:
                await st.wake.wait()
            else:
                await bounded(self.clock, st.wake.wait(), result.resync_at - self.clock.now())

    async def _retried(self, st: PodSyncStatus, work: Callable[[], Awaitable[None]]) -> None:
        delay = RETRY_INITIAL
        while True:
            try:
                await work()
                return
            except Exception:
                log.exception("pod %s: termination step failed; retrying in %.0f s", st.pod["metadata"].get("name"),
                              delay)
            await self.clock.sleep(delay)
            delay = min(RETRY_MAX, delay * 2)

    @staticmethod
    def _take(st: PodSyncStatus) -> Obj:
        if st.pending is not None:
            st.pod, st.pending = st.pending, None
        return st.pod

    @staticmethod
    def _termination(st: PodSyncStatus) -> Termination:
        assert st.termination is not None
        return st.termination

    async def stop(self) -> None:
        """Agent shutdown: end the sequencing; the containers keep running for the next agent."""
        tasks = [st.task for st in self.pods.values() if st.task is not None and not st.task.done()]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
