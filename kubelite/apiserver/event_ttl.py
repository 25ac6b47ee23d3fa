"""Events expire `--event-ttl` after their last write, as kube-apiserver's (default 1h).

Upstream's events registry (pkg/registry/core/event/storage) gives every create and every update of an Event
a TTL (`TTLFunc` returns the flag's seconds, whatever the object), and its etcd3 store attaches the key to an
etcd lease: the key vanishes when the lease expires and watchers see a DELETE. Leases are reused across writes
(etcd3 `leaseManager`): a lease is granted for ttl + min(60 s, 5 % of ttl) and taken by every write that
needs at most that much, so an Event is gone between ttl and ttl + that reuse window after its last write.

kubelite's stores (SQLite, memory, etcd) have no leases, so the API server sweeps instead, and the window is
the same: `ExpiringKeys` follows every write under a prefix through a store watch (every server's writes,
not only its own), gives each a deadline of ttl after it saw the write, and at each multiple of the reuse
window deletes what is due with a guarded delete (expected mod revision = the write it scheduled). A newer
write makes that delete fail harmlessly and has its own deadline; several API servers on one store
(etcd) each sweep, and the guarded delete makes a double sweep a lost race, nothing worse. The deletes go
through the store, so the watch cache, and every watcher, see a DELETE, as with a lease.

A store keeps no write times. On start-up (and on a relist, when the watch's history was compacted away)
the Events already stored are given ttl from then: never before upstream would have expired them, at most
ttl later — and an upgrade from a kubelite that kept Events forever sheds its backlog an hour after start.

Partial: events.k8s.io/v1 is not served by kubelite (only core/v1 `events`), so only that prefix expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from typing import NamedTuple

from kubelite.clock import Clock, parse_duration
from kubelite.store.interface import Compacted, EventType, KeyNotFound, RevisionMismatch, Store

log = logging.getLogger("kubelite.apiserver")

DEFAULT_EVENT_TTL = 3600  # kube-apiserver's --event-ttl default, 1h0m0s
# etcd3 leaseManager's defaults (newDefaultLeaseManager; storagebackend.DefaultLeaseReuseDurationSeconds)
LEASE_REUSE_SECONDS = 60
LEASE_REUSE_PERCENT = 0.05
RETRY_DELAY = 10.0  # after a failed sweep or a broken watch: the store is likely unavailable for a while
# Deletes in flight at once: concurrent so that SQLite's writer commits them in one transaction (its group
# commit), not one fsync each, and bounded so that a backlog (a start-up after a long outage) is not one burst.
SWEEP_BATCH = 256


def parse_event_ttl(text: str) -> int:
    """`--event-ttl`: a Go duration (1h0m0s, 30m, 90s) in whole seconds, truncated as upstream's
    uint64(EventTTL.Seconds()); 0 (or under a second) is no TTL, Events kept forever. Negative: refused."""
    try:
        ns = parse_duration(text.strip())
    except ValueError:
        raise ValueError(f"invalid duration {text!r} (a duration such as 1h0m0s, 30m, 90s)") from None
    if ns < 0:
        raise ValueError(f"{text!r} is negative (0 keeps Events forever)")
    return ns // 10**9


def reuse_window(ttl: int) -> int:
    """etcd3 `getReuseDurationSecondsLocked`: how much longer than `ttl` an Event may live, in whole seconds."""
    return min(LEASE_REUSE_SECONDS, int(LEASE_REUSE_PERCENT * ttl))


class _Due(NamedTuple):
    deadline: float  # on the clock's monotonic time
    key: str
    mod_revision: int


class ExpiringKeys:
    """The keys under `prefix` expire `ttl` seconds (>0) after their last write: `start`, then `run` as a task.

    Deadlines are kept in a FIFO, not a heap: every deadline is the time a write was seen plus the one ttl, on
    a clock that never goes back, so they arrive in order and the FIFO is already sorted (O(1) a write).
    A key written n times within ttl has n entries; only the one of its latest write (`_latest`) counts, the
    others are dropped when they come due. Memory: one entry per write in the last ttl.
    """

    def __init__(self, store: Store, clock: Clock, prefix: str, ttl: int) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive (0 means no expiry: make no ExpiringKeys)")
        self.store, self.clock, self.prefix, self.ttl = store, clock, prefix, ttl
        self.window = reuse_window(ttl)
        self._latest: dict[str, int] = {}  # key -> mod revision of the write its deadline is for
        self._due: deque[_Due] = deque()
        self._wake = asyncio.Event()  # set when a deadline is added
        self._revision = 0  # the watch resumes after this revision

    @property
    def scheduled(self) -> int:
        """How many keys have a deadline (tests read it)."""
        return len(self._latest)

    async def start(self) -> None:
        """Schedule the keys already stored (their write times unknown: ttl from now)."""
        await self._relist()

    async def run(self) -> None:
        """Follow the writes and sweep, until cancelled; neither ever stops on an error."""
        follower = asyncio.create_task(self._follow(), name="event-ttl-watch")
        try:
            await self._sweep_forever()
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower

    # --- the writes --------------------------------------------------------------------------------

    def _schedule(self, key: str, mod_revision: int, seen: float) -> None:
        self._latest[key] = mod_revision
        self._due.append(_Due(seen + self.ttl, key, mod_revision))
        self._wake.set()

    async def _relist(self) -> None:
        """Reconcile with the store: a key written since it was scheduled (or new) gets ttl from now, a key
        whose write was already scheduled keeps its deadline, a key gone is forgotten."""
        listed = await self.store.list(self.prefix)
        now = self.clock.monotonic()
        present = {kv.key: kv.mod_revision for kv in listed.items}
        for key in [k for k in self._latest if k not in present]:
            del self._latest[key]
        for key, rev in present.items():
            if self._latest.get(key) != rev:
                self._schedule(key, rev, now)
        self._revision = listed.revision

    async def _follow(self) -> None:
        """Every write under the prefix, from the last list on. A compacted resume point is relisted at once (a
        reflector's 410); any other error (a store that is away) or an ended stream, after RETRY_DELAY."""
        while True:
            try:
                async for ev in self.store.watch(self.prefix, self._revision):
                    if ev.type is EventType.PUT:
                        self._schedule(ev.kv.key, ev.kv.mod_revision, self.clock.monotonic())
                    elif ev.type is EventType.DELETE:
                        self._latest.pop(ev.kv.key, None)
                    self._revision = ev.revision
                log.warning("event TTL: the store's watch of %s ended; relisting", self.prefix)
                await self.clock.sleep(RETRY_DELAY)
            except asyncio.CancelledError:
                raise
            except Compacted as exc:
                log.info("event TTL: %s; relisting %s", exc, self.prefix)
            except Exception:
                log.exception("event TTL: watching %s failed; relisting in %.0f s", self.prefix, RETRY_DELAY)
                await self.clock.sleep(RETRY_DELAY)
            try:
                await self._relist()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("event TTL: listing %s failed; retrying in %.0f s", self.prefix, RETRY_DELAY)

    # --- the sweep ---------------------------------------------------------------------------------

    def _wake_at(self, deadline: float) -> float:
        """When to sweep a deadline: the next multiple of the reuse window (never before the deadline), so one
        wake-up takes every deadline of a window — one instant a simulation's clock stops at per window, not
        per Event — and each Event still goes between ttl and ttl + window after its write, as upstream's."""
        if not self.window:
            return deadline
        return max(deadline, math.ceil(deadline / self.window) * self.window)

    async def _sweep_forever(self) -> None:
        while True:
            try:
                if not self._due:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                wait = self._wake_at(self._due[0].deadline) - self.clock.monotonic()
                if wait > 0:
                    await self.clock.sleep(wait)
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:  # the entries not deleted stay due: the next sweep tries them again
                log.exception("event TTL: sweeping %s failed; retrying in %.0f s", self.prefix, RETRY_DELAY)
                await self.clock.sleep(RETRY_DELAY)

    async def sweep(self) -> int:
        """Delete every key whose deadline has passed (guarded by the revision it was scheduled for); the number
        deleted. A store error is raised after the batch, the failed entries left at the head of the queue."""
        deleted = 0
        now = self.clock.monotonic()
        while self._due and self._due[0].deadline <= now:
            batch: list[_Due] = []
            while self._due and self._due[0].deadline <= now and len(batch) < SWEEP_BATCH:
                entry = self._due.popleft()
                if self._latest.get(entry.key) == entry.mod_revision:  # else written again or gone since
                    batch.append(entry)
            results = await asyncio.gather(*(self.store.delete(e.key, e.mod_revision) for e in batch),
                                           return_exceptions=True)
            failed: list[tuple[_Due, BaseException]] = []
            for entry, result in zip(batch, results, strict=True):
                if isinstance(result, KeyNotFound | RevisionMismatch):
                    pass  # deleted by another server, or written again: that write has its own deadline
                elif isinstance(result, BaseException):
                    failed.append((entry, result))
                    continue
                else:
                    deleted += 1
                if self._latest.get(entry.key) == entry.mod_revision:
                    del self._latest[entry.key]
            if failed:
                self._due.extendleft(e for e, _ in reversed(failed))  # still due, still first
                log.debug("event TTL: %d expired keys deleted before a store error", deleted)
                raise failed[0][1]
        if deleted:
            log.debug("event TTL: %d expired keys deleted under %s", deleted, self.prefix)
        return deleted
