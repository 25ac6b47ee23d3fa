"""The embedded store: one SQLite file in WAL mode with synchronous=FULL.

Writes go to one writer thread that commits them in groups (up to `BATCH` per
transaction): an acknowledged write has been fsynced, so it survives `kill -9`
and power loss, while group commit keeps throughput near 10k writes/s
(research/deps.md §2). Reads use a second connection on the caller's thread;
WAL lets them run beside the writer. `kv` holds the latest value of each key and
`events` is the append-only change log that watches resume from; it keeps each
change's previous value too, so a list can be served as of an older revision.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import queue
import sqlite3
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
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
    Unavailable,
    prefix_end,
)

BATCH = 256
COMPACT_CHUNK = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY CHECK (id = 1), rev INTEGER NOT NULL,
                                 compacted INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (id, rev, compacted) VALUES (1, 0, 0);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, create_rev INTEGER NOT NULL,
                               mod_rev INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS events (rev INTEGER PRIMARY KEY, key TEXT NOT NULL, type INTEGER NOT NULL,
                                   value BLOB NOT NULL, create_rev INTEGER NOT NULL,
                                   prev_value BLOB, prev_mod_rev INTEGER);
CREATE INDEX IF NOT EXISTS events_key ON events (key, rev);
"""


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA cache_size=-65536")
    conn.execute("PRAGMA journal_size_limit=67108864")
    conn.execute("PRAGMA busy_timeout=10000")
    return conn


@dataclass(slots=True)
class _Op:
    kind: str
    key: str
    value: bytes = b""
    expected: int = 0
    future: asyncio.Future[Any] | None = None
    result: Any = None
    error: BaseException | None = None


def _event_from_row(row: tuple[Any, ...]) -> Event:
    rev, key, typ, value, create_rev, prev_value, prev_mod = row
    prev = KeyValue(key, prev_value, create_rev, prev_mod) if prev_value is not None else None
    return Event(EventType.DELETE if typ else EventType.PUT, KeyValue(key, value, create_rev, rev), prev, rev)


class SQLiteStore:
    """`Store` over one SQLite file; create with `await SQLiteStore.open(path)`."""

    def __init__(self, path: Path, loop: asyncio.AbstractEventLoop) -> None:
        self._path = path
        self._loop = loop
        self._reader = _connect(path)
        self._reader.executescript(_SCHEMA)
        rev, compacted = self._reader.execute("SELECT rev, compacted FROM meta").fetchone()
        self._rev = rev  # the writer thread's view
        self._visible_rev = rev  # what has been acknowledged to the loop
        self._compacted = compacted
        self._ops: queue.Queue[_Op | None] = queue.Queue()
        self._feed = Feed()
        self._closed = False
        self._thread = threading.Thread(target=self._writer, name="sqlite-writer", daemon=True)
        self._thread.start()

    @classmethod
    async def open(cls, path: Path | str) -> SQLiteStore:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        return cls(p, asyncio.get_running_loop())

    # --- properties ------------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        return int(self._visible_rev)

    @property
    def compacted_revision(self) -> int:
        return int(self._compacted)

    # --- reads -----------------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        row = self._reader.execute("SELECT value, create_rev, mod_rev FROM kv WHERE key = ?", (key,)).fetchone()
        return KeyValue(key, row[0], row[1], row[2]) if row else None

    async def list(self, prefix: str, revision: int = 0) -> ListResult:
        end = prefix_end(prefix)
        cur = self._reader.cursor()
        cur.execute("BEGIN")
        try:
            current, compacted = cur.execute("SELECT rev, compacted FROM meta").fetchone()
            rows = cur.execute("SELECT key, value, create_rev, mod_rev FROM kv WHERE key >= ? AND key < ? "
                               "ORDER BY key", (prefix, end)).fetchall()
            items = {r[0]: KeyValue(r[0], r[1], r[2], r[3]) for r in rows}
            if revision and revision < current:
                if revision < compacted:
                    raise Compacted(revision, compacted)
                undo = cur.execute("SELECT rev, key, type, value, create_rev, prev_value, prev_mod_rev FROM events "
                                   "WHERE rev > ? AND key >= ? AND key < ? ORDER BY rev DESC",
                                   (revision, prefix, end)).fetchall()
                for row in undo:
                    ev = _event_from_row(row)
                    if ev.prev is None:
                        items.pop(ev.kv.key, None)
                    else:
                        items[ev.kv.key] = ev.prev
                current = revision
            elif revision > current:
                raise FutureRevision(revision, current)
        finally:
            cur.execute("COMMIT")
        return ListResult(sorted(items.values(), key=lambda kv: kv.key), current)

    # --- writes ----------------------------------------------------------------------------------

    async def _submit(self, op: _Op) -> Any:
        if self._closed:
            raise RuntimeError("store is closed")
        op.future = self._loop.create_future()
        self._ops.put(op)
        return await op.future

    async def create(self, key: str, value: bytes) -> KeyValue:
        result: KeyValue = await self._submit(_Op("create", key, value))
        return result

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KeyValue:
        result: KeyValue = await self._submit(_Op("update", key, value, expected_mod_revision))
        return result

    async def delete(self, key: str, expected_mod_revision: int = 0) -> KeyValue:
        result: KeyValue = await self._submit(_Op("delete", key, expected=expected_mod_revision))
        return result

    async def compact(self, revision: int) -> None:
        await self._submit(_Op("compact", "", expected=revision))

    async def health(self, timeout: float) -> None:
        """The database answers a read, and the writer thread, through which every write goes, is alive. (A read
        of one row: `timeout` is not needed, a local file answers at once or raises.)"""
        try:
            self._reader.execute("SELECT rev FROM meta").fetchone()
        except sqlite3.Error as exc:
            raise Unavailable(f"sqlite: {exc}") from None
        if not self._thread.is_alive():
            raise Unavailable("sqlite: the writer thread has stopped")

    # --- the writer thread -----------------------------------------------------------------------

    def _writer(self) -> None:
        conn = _connect(self._path)
        while True:
            first = self._ops.get()
            if first is None:
                conn.close()
                return
            batch = [first]
            while len(batch) < BATCH:
                try:
                    nxt = self._ops.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._ops.put(None)
                    break
                batch.append(nxt)
            self._commit(conn, batch)

    def _commit(self, conn: sqlite3.Connection, batch: builtins.list[_Op]) -> None:
        start_rev = self._rev
        events: builtins.list[Event] = []
        cur = conn.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")
            for op in batch:
                try:
                    if op.kind == "compact":
                        self._compact_in(cur, op.expected)
                    else:
                        ev = self._apply(cur, op)
                        events.append(ev)
                        op.result = ev.kv
                except (KeyExists, KeyNotFound, RevisionMismatch, Compacted, FutureRevision) as exc:
                    op.error = exc
            cur.execute("UPDATE meta SET rev = ?", (self._rev,))
            cur.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                cur.execute("ROLLBACK")
            self._rev = start_rev
            events = []
            for op in batch:
                op.error, op.result = exc, None
        self._loop.call_soon_threadsafe(self._complete, batch, events, self._rev)

    def _apply(self, cur: sqlite3.Cursor, op: _Op) -> Event:
        row = cur.execute("SELECT value, create_rev, mod_rev FROM kv WHERE key = ?", (op.key,)).fetchone()
        current = KeyValue(op.key, row[0], row[1], row[2]) if row else None
        if op.kind == "create":
            if current is not None:
                raise KeyExists(op.key)
            self._rev += 1
            kv = KeyValue(op.key, op.value, self._rev, self._rev)
            cur.execute("INSERT INTO kv (key, value, create_rev, mod_rev) VALUES (?, ?, ?, ?)",
                        (op.key, op.value, self._rev, self._rev))
            cur.execute("INSERT INTO events (rev, key, type, value, create_rev) VALUES (?, ?, 0, ?, ?)",
                        (self._rev, op.key, op.value, self._rev))
            return Event(EventType.PUT, kv, None, self._rev)
        if current is None:
            raise KeyNotFound(op.key)
        if op.expected and current.mod_revision != op.expected:
            raise RevisionMismatch(op.key, current)
        self._rev += 1
        if op.kind == "update":
            kv = KeyValue(op.key, op.value, current.create_revision, self._rev)
            cur.execute("UPDATE kv SET value = ?, mod_rev = ? WHERE key = ?", (op.value, self._rev, op.key))
            typ = EventType.PUT
        else:
            kv = KeyValue(op.key, current.value, current.create_revision, self._rev)
            cur.execute("DELETE FROM kv WHERE key = ?", (op.key,))
            typ = EventType.DELETE
        cur.execute("INSERT INTO events (rev, key, type, value, create_rev, prev_value, prev_mod_rev) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (self._rev, op.key, 1 if typ is EventType.DELETE else 0, kv.value, kv.create_revision,
                     current.value, current.mod_revision))
        return Event(typ, kv, current, self._rev)

    def _compact_in(self, cur: sqlite3.Cursor, revision: int) -> None:
        if revision > self._rev:
            raise FutureRevision(revision, self._rev)
        # Chunked so that one huge delete never holds the write lock for long (deps.md pitfall 8).
        while True:
            cur.execute("DELETE FROM events WHERE rev IN (SELECT rev FROM events WHERE rev <= ? LIMIT ?)",
                        (revision, COMPACT_CHUNK))
            if cur.rowcount < COMPACT_CHUNK:
                break
        cur.execute("UPDATE meta SET compacted = MAX(compacted, ?)", (revision,))
        self._compacted = max(self._compacted, revision)

    def _complete(self, batch: builtins.list[_Op], events: builtins.list[Event], rev: int) -> None:
        """Runs on the loop: publish events to watchers first, then acknowledge the writes."""
        self._visible_rev = max(self._visible_rev, rev)
        for ev in events:
            self._feed.publish(ev)
        for op in batch:
            fut = op.future
            if fut is None or fut.done():
                continue
            if op.error is not None:
                fut.set_exception(op.error)
            else:
                fut.set_result(op.result)

    # --- watch -----------------------------------------------------------------------------------

    def watch(self, prefix: str, from_revision: int, progress: bool = False) -> AsyncIterator[Event]:
        # `progress` asks for nothing here: this watch is fed by the one writer, so it is never behind its writes
        return self._feed.follow(prefix, from_revision, self._history)

    def _history(self, prefix: str, end: str, from_revision: int) -> tuple[int, builtins.list[Event]]:
        start = from_revision if from_revision else self._visible_rev
        if start < self._compacted:
            raise Compacted(start, self._compacted)
        rows = self._reader.execute(
            "SELECT rev, key, type, value, create_rev, prev_value, prev_mod_rev FROM events "
            "WHERE rev > ? AND key >= ? AND key < ? ORDER BY rev", (start, prefix, end)).fetchall()
        if start < self._compacted:  # compacted by the writer thread while the rows were read
            raise Compacted(start, self._compacted)
        return start, [_event_from_row(r) for r in rows]

    # --- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._ops.put(None)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        self._feed.close()
        self._reader.close()

