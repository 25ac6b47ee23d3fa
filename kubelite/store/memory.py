"""The in-memory store: the SQLite store's data model in Python dicts and lists, for simulations.

A simulation runs the whole control plane on one loop; with SQLite committed inline, the store's SQL was a
tenth of all CPU at 5,000 nodes (issue 14). Here a write is a dict assignment and an append to the change
log, and nothing survives the process — what a simulation wants. The semantics are the SQLite store's, case
for case (tests/contract/test_store_contract.py runs the same table on both, and tests/unit/test_memory_store.py
replays one sequence of operations against both and compares every answer):

- one global revision, each successful write one step; create/mod revisions as etcd's;
- the change log keeps every event with the previous value, so watches resume from a revision and lists are
  served as of an older one; `compact(r)` drops events up to `r` (the API server compacts every five minutes
  to the revision of five minutes before, so the log holds at most about ten minutes of writes);
- a write is applied at once and acknowledged through `loop.call_soon`, as the SQLite store acknowledges a
  commit: watchers get the event first, then the writer's future is resolved, in submission order. The
  callers therefore wake in the same order as over SQLite committed inline on the loop (the simulator's
  store before this one), and a simulation's output is byte for byte what it was.
"""

from __future__ import annotations

import asyncio
import builtins
from bisect import bisect_left
from collections.abc import AsyncIterator
from typing import Any

from kubelite.store.feed import Feed
from kubelite.store.interface import (
    Compacted,
    Event,
    EventType,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    RevisionMismatch,
    StoreError,
    prefix_end,
)


class MemoryStore:
    """`Store` held in this process's memory; create it on the loop that will use it."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._kv: dict[str, KeyValue] = {}
        # The keys in order, for prefix lists. Lists are rare (the API server lists once and then follows its
        # watch), writes are not: a create or delete only notes the key in `_added`/`_removed`, and the next
        # list folds them in (one merge of two sorted runs) — no per-write insertion into a long list.
        self._keys: builtins.list[str] = []
        self._added: set[str] = set()  # to add to _keys
        self._removed: set[str] = set()  # to drop from _keys (before the additions)
        # Every event after the compacted revision: _events[i] has revision _compacted + 1 + i (each revision
        # is exactly one write, and compaction drops a prefix), so a revision finds its place without a search.
        self._events: builtins.list[Event] = []
        self._rev = 0  # the last write applied
        self._visible_rev = 0  # the last write acknowledged to its caller (the SQLite store's distinction)
        self._compacted = 0
        self._feed = Feed()
        self._closed = False

    # --- properties ------------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        return self._visible_rev

    @property
    def compacted_revision(self) -> int:
        return self._compacted

    # --- reads -----------------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        return self._kv.get(key)

    async def list(self, prefix: str, revision: int = 0) -> ListResult:
        end = prefix_end(prefix)
        keys = self._sorted_keys()
        in_range = keys[bisect_left(keys, prefix):bisect_left(keys, end)]
        current = self._rev
        if revision and revision < current:
            if revision < self._compacted:
                raise Compacted(revision, self._compacted)
            items = {k: self._kv[k] for k in in_range}
            for ev in reversed(self._events[revision - self._compacted:]):  # undo, newest first
                key = ev.kv.key
                if prefix <= key < end:
                    if ev.prev is None:
                        items.pop(key, None)
                    else:
                        items[key] = ev.prev
            return ListResult(sorted(items.values(), key=lambda kv: kv.key), revision)
        if revision > current:
            raise FutureRevision(revision, current)
        kv = self._kv
        return ListResult([kv[k] for k in in_range], current)

    def _sorted_keys(self) -> builtins.list[str]:
        if self._removed:
            removed = self._removed
            self._keys = [k for k in self._keys if k not in removed]
            self._removed = set()
        if self._added:
            self._keys.extend(self._added)
            self._keys.sort()  # timsort keeps the long sorted run, sorts only the additions and merges
            self._added = set()
        return self._keys

    # --- writes ----------------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        fut = self._future()
        if key in self._kv:
            self._settle(fut, KeyExists(key))
        else:
            self._rev = rev = self._rev + 1
            kv = KeyValue(key, value, rev, rev)
            self._kv[key] = kv
            self._added.add(key)  # if it is also in _removed (deleted, then created again), the list drops it first
            self._record(fut, Event(EventType.PUT, kv, None, rev))
        result: KeyValue = await fut
        return result

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KeyValue:
        fut = self._future()
        current = self._kv.get(key)
        error = self._guard(key, current, expected_mod_revision)
        if error is not None or current is None:
            self._settle(fut, error)
        else:
            self._rev = rev = self._rev + 1
            kv = KeyValue(key, value, current.create_revision, rev)
            self._kv[key] = kv
            self._record(fut, Event(EventType.PUT, kv, current, rev))
        result: KeyValue = await fut
        return result

    async def delete(self, key: str, expected_mod_revision: int = 0) -> KeyValue:
        fut = self._future()
        current = self._kv.get(key)
        error = self._guard(key, current, expected_mod_revision)
        if error is not None or current is None:
            self._settle(fut, error)
        else:
            self._rev = rev = self._rev + 1
            tomb = KeyValue(key, current.value, current.create_revision, rev)
            del self._kv[key]
            if key in self._added:
                self._added.discard(key)
            else:
                self._removed.add(key)
            self._record(fut, Event(EventType.DELETE, tomb, current, rev))
        result: KeyValue = await fut
        return result

    def _record(self, fut: asyncio.Future[Any], ev: Event) -> None:
        """A write made: into the change log, acknowledged (after its watchers hear it) in submission order."""
        self._events.append(ev)
        self._loop.call_soon(self._complete, fut, ev, ev.kv, None, ev.revision)

    def _settle(self, fut: asyncio.Future[Any], error: StoreError | None) -> None:
        """An operation that writes nothing (refused with `error`, or a compaction), answered in submission order."""
        self._loop.call_soon(self._complete, fut, None, None, error, self._rev)

    async def health(self, timeout: float) -> None:
        """This process's memory always answers."""

    async def compact(self, revision: int) -> None:
        fut = self._future()
        error: StoreError | None = None
        if revision > self._rev:
            error = FutureRevision(revision, self._rev)
        elif revision > self._compacted:
            del self._events[:revision - self._compacted]
            self._compacted = revision
        self._settle(fut, error)
        await fut

    def _future(self) -> asyncio.Future[Any]:
        if self._closed:
            raise RuntimeError("store is closed")
        return self._loop.create_future()

    @staticmethod
    def _guard(key: str, current: KeyValue | None, expected: int) -> StoreError | None:
        """Why an update or delete of `key` must fail, or None (the SQLite store's checks, in its order)."""
        if current is None:
            return KeyNotFound(key)
        if expected and current.mod_revision != expected:
            return RevisionMismatch(key, current)
        return None

    def _complete(self, fut: asyncio.Future[Any], ev: Event | None, result: KeyValue | None,
                  error: StoreError | None, rev: int) -> None:
        """Runs on the loop after the write: publish its event to watchers first, then acknowledge it (the
        order of `SQLiteStore._complete`, so every task wakes as it would over SQLite)."""
        if rev > self._visible_rev:
            self._visible_rev = rev
        if ev is not None:
            self._feed.publish(ev)
        if fut.done():  # its caller was cancelled: the write stands, as a committed one would
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)

    # --- watch -----------------------------------------------------------------------------------

    def watch(self, prefix: str, from_revision: int, progress: bool = False) -> AsyncIterator[Event]:
        # `progress` asks for nothing here: every event reaches the watchers as it is acknowledged, so a watch
        # is never behind its writes (as over SQLite)
        return self._feed.follow(prefix, from_revision, self._history)

    def _history(self, prefix: str, end: str, from_revision: int) -> tuple[int, builtins.list[Event]]:
        start = from_revision if from_revision else self._visible_rev
        if start < self._compacted:
            raise Compacted(start, self._compacted)
        return start, [e for e in self._events[start - self._compacted:] if prefix <= e.kv.key < end]

    # --- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._feed.close()
