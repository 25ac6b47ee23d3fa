"""The in-memory store against the SQLite store, answer for answer, and the order in which it wakes its callers.

The contract table (tests/contract/test_store_contract.py) runs on both stores; here one seeded sequence of
creates, updates, deletes (guarded or not, succeeding or failing) and compactions is replayed on a real SQLite
file and on `MemoryStore`, and after every step each store is asked the same questions — every result and every
error, a list of every prefix as of every revision, a watch of every prefix from every revision — and must
answer alike. The simulator's determinism rests on the second part: events reach watchers before the writer's
acknowledgement, and acknowledgements come in submission order, failures included.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from kubelite.store.interface import KeyValue, Store, StoreError
from kubelite.store.memory import MemoryStore
from kubelite.store.sqlite import SQLiteStore

KEYS = ["/r/a/1", "/r/a/2", "/r/a10/3", "/r/b/1", "/s/x"]
PREFIXES = ["/", "/r/", "/r/a/", "/r/a", "/s/", "/t/"]


async def _outcome(call: Awaitable[object]) -> object:
    """A result, or the error's type and message: what a caller can tell apart."""
    try:
        return await call
    except StoreError as exc:
        return (type(exc).__name__, str(exc), getattr(exc, "current", None))


async def _step(store: Store, rng: random.Random) -> object:
    key = rng.choice(KEYS)
    value = str(rng.random()).encode()
    current = await store.get(key)
    guess = current.mod_revision if current is not None and rng.random() < 0.8 else rng.randint(0, 5)
    match rng.randrange(10):
        case 0 | 1 | 2 | 3:
            return await _outcome(store.create(key, value))
        case 4 | 5 | 6:
            return await _outcome(store.update(key, value, guess))
        case 7 | 8:
            return await _outcome(store.delete(key, guess if rng.random() < 0.5 else 0))
        case _:
            return await _outcome(store.compact(rng.randint(0, store.revision + 1)))


async def _history(store: Store, prefix: str, after: int, expected: int) -> object:
    """The first `expected` events of a watch from `after` (its history: nothing newer is written meanwhile)."""
    events: list[object] = []
    try:
        it = store.watch(prefix, after)
        while len(events) < expected:
            events.append(await asyncio.wait_for(anext(it), 5))
        await it.aclose()  # type: ignore[attr-defined]
    except StoreError as exc:
        return (type(exc).__name__, str(exc))
    return events


async def _answers(store: Store, log: list[tuple[int, str]]) -> list[object]:
    out: list[object] = [store.revision, store.compacted_revision]
    for key in KEYS:
        out.append(await store.get(key))
    for prefix in PREFIXES:
        for rev in range(store.revision + 2):
            out.append(await _outcome(store.list(prefix, rev)))
            # from 0: from now on, so no history
            expected = sum(1 for r, k in log if r > rev and k.startswith(prefix)) if rev else 0
            out.append(await _history(store, prefix, rev, expected))
    return out


@pytest.mark.parametrize("seed", range(4))
async def test_memory_store_answers_as_sqlite(tmp_path: Path, seed: int) -> None:
    sqlite, memory = await SQLiteStore.open(tmp_path / "state.db"), MemoryStore()
    log: list[tuple[int, str]] = []  # (revision, key) of every successful write, for the watches' lengths
    try:
        rng_s, rng_m = random.Random(seed), random.Random(seed)
        for _ in range(60):
            got_s, got_m = await _step(sqlite, rng_s), await _step(memory, rng_m)
            assert got_m == got_s
            if isinstance(got_m, KeyValue):
                log.append((got_m.mod_revision, got_m.key))
            assert await _answers(memory, log) == await _answers(sqlite, log)
    finally:
        await sqlite.close()
        await memory.close()


Write = Callable[[MemoryStore], Awaitable[object]]

ORDER_CASES: dict[str, tuple[list[tuple[str, Write]], list[str]]] = {
    "events_reach_watchers_before_any_writer_wakes": (
        [("a", lambda s: s.create("/k/a", b"1")), ("b", lambda s: s.create("/k/b", b"2")),
         ("c", lambda s: s.create("/k/c", b"3"))],
        ["event /k/a", "event /k/b", "event /k/c", "ack a", "ack b", "ack c"]),
    "failures_are_acknowledged_in_submission_order_too": (
        [("a", lambda s: s.create("/k/a", b"1")), ("dup", lambda s: s.create("/k/a", b"2")),
         ("missing", lambda s: s.update("/k/none", b"x", 0)), ("b", lambda s: s.create("/k/b", b"3"))],
        ["event /k/a", "event /k/b", "ack a", "error dup KeyExists", "error missing KeyNotFound", "ack b"]),
    "a_compaction_is_acknowledged_in_its_place": (
        [("a", lambda s: s.create("/k/a", b"1")), ("compact", lambda s: s.compact(1)),
         ("b", lambda s: s.create("/k/b", b"2"))],
        ["event /k/a", "event /k/b", "ack a", "ack compact", "ack b"]),
}


@pytest.mark.parametrize("case", sorted(ORDER_CASES))
async def test_wake_order(case: str) -> None:
    writes, expected = ORDER_CASES[case]
    store = MemoryStore()
    trace: list[str] = []
    events = store.watch("/k/", 0)

    async def watch() -> None:
        async for ev in events:
            trace.append(f"event {ev.kv.key}")

    async def write(name: str, op: Write) -> None:
        try:
            await op(store)
            trace.append(f"ack {name}")
        except StoreError as exc:
            trace.append(f"error {name} {type(exc).__name__}")

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0)  # the watch is registered
    await asyncio.gather(*(write(name, op) for name, op in writes))
    await asyncio.sleep(0)
    watcher.cancel()
    await store.close()
    assert trace == expected
