"""The store contract: every backend must pass this suite unchanged.

Add a backend by adding a factory to BACKENDS. etcd runs as a real single member and as a real
3-member cluster on loopback (tests/etcd_cluster.py, one of each per session, emptied per test).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kubelite.apiserver.encryption import EncryptingStore, PrefixTransformer, parse_config
from kubelite.store.etcd import EtcdStore, parse_url
from kubelite.store.interface import (
    Compacted,
    EventType,
    KeyExists,
    KeyNotFound,
    RevisionMismatch,
    Store,
)
from kubelite.store.memory import MemoryStore
from kubelite.store.sqlite import SQLiteStore
from tests import etcd_cluster

BackendFactory = Callable[[Path], Awaitable[Store]]


async def _sqlite(tmp: Path) -> Store:
    return await SQLiteStore.open(tmp / "state.db")


async def _sqlite_encrypted(tmp: Path) -> Store:
    """Every key encrypted at rest (the API server encrypts only Secrets' keys; the contract must hold either way)."""
    return EncryptingStore(await SQLiteStore.open(tmp / "state.db"), {"/": _aesgcm()})


async def _memory(tmp: Path) -> Store:
    """The simulator's store: the SQLite store's semantics in Python dicts and lists."""
    return MemoryStore()


def _aesgcm() -> PrefixTransformer:
    providers = [{"aesgcm": {"keys": [{"name": "k", "secret": base64.b64encode(bytes(32)).decode()}]}}]
    config = {"kind": "EncryptionConfiguration", "resources": [{"resources": ["secrets"], "providers": providers}]}
    return next(iter(parse_config(config).values()))


def _etcd(members: int) -> BackendFactory:
    async def factory(tmp: Path) -> Store:
        cluster = etcd_cluster.shared(members)
        etcd_cluster.wipe(cluster)
        return await EtcdStore.open(parse_url(cluster.url))

    return factory


async def _etcd_encrypted(tmp: Path) -> Store:
    """Encryption at rest wraps any Store: over etcd unchanged."""
    return EncryptingStore(await _etcd(1)(tmp), {"/": _aesgcm()})


BACKENDS: dict[str, BackendFactory] = {"sqlite": _sqlite, "sqlite+aesgcm": _sqlite_encrypted, "memory": _memory,
                                       "etcd": _etcd(1), "etcd-3members": _etcd(3), "etcd+aesgcm": _etcd_encrypted}


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = await BACKENDS[request.param](tmp_path)
    yield s
    await s.close()


async def test_create_assigns_increasing_revisions(store: Store) -> None:
    a = await store.create("/r/pods/a", b"1")
    b = await store.create("/r/pods/b", b"2")
    assert b.mod_revision == a.mod_revision + 1
    assert a.create_revision == a.mod_revision
    assert store.revision == b.mod_revision


async def test_create_existing_key_fails(store: Store) -> None:
    await store.create("/r/pods/a", b"1")
    with pytest.raises(KeyExists):
        await store.create("/r/pods/a", b"2")
    got = await store.get("/r/pods/a")
    assert got is not None and got.value == b"1"


async def test_get_missing_returns_none(store: Store) -> None:
    assert await store.get("/r/pods/none") is None


async def test_update_compare_and_swap(store: Store) -> None:
    a = await store.create("/r/pods/a", b"1")
    b = await store.update("/r/pods/a", b"2", a.mod_revision)
    assert b.mod_revision > a.mod_revision and b.create_revision == a.create_revision
    with pytest.raises(RevisionMismatch) as info:
        await store.update("/r/pods/a", b"3", a.mod_revision)
    assert info.value.current is not None and info.value.current.value == b"2"
    got = await store.get("/r/pods/a")
    assert got is not None and got.value == b"2"


async def test_update_missing_key_fails(store: Store) -> None:
    with pytest.raises(KeyNotFound):
        await store.update("/r/pods/a", b"2", 1)


async def test_delete_guarded_and_unguarded(store: Store) -> None:
    a = await store.create("/r/pods/a", b"1")
    with pytest.raises(RevisionMismatch):
        await store.delete("/r/pods/a", a.mod_revision + 100)
    tomb = await store.delete("/r/pods/a", a.mod_revision)
    assert tomb.value == b"1" and tomb.mod_revision > a.mod_revision
    assert await store.get("/r/pods/a") is None
    with pytest.raises(KeyNotFound):
        await store.delete("/r/pods/a")


async def test_list_by_prefix_is_a_key_range(store: Store) -> None:
    for key in ("/r/pods/ns1/a", "/r/pods/ns1/b", "/r/pods/ns10/c", "/r/pods/ns2/d", "/r/podsx/e"):
        await store.create(key, b"x")
    got = await store.list("/r/pods/ns1/")
    assert [kv.key for kv in got.items] == ["/r/pods/ns1/a", "/r/pods/ns1/b"]
    assert got.revision == store.revision
    assert len((await store.list("/r/pods/")).items) == 4


async def test_list_at_older_revision(store: Store) -> None:
    a = await store.create("/r/pods/a", b"1")
    await store.update("/r/pods/a", b"2", a.mod_revision)
    await store.create("/r/pods/b", b"3")
    await store.delete("/r/pods/a")
    old = await store.list("/r/pods/", a.mod_revision)
    assert [(kv.key, kv.value) for kv in old.items] == [("/r/pods/a", b"1")]
    assert old.revision == a.mod_revision


async def test_list_at_compacted_revision_is_gone(store: Store) -> None:
    a = await store.create("/r/pods/a", b"1")
    b = await store.update("/r/pods/a", b"2", a.mod_revision)
    await store.update("/r/pods/a", b"3", b.mod_revision)
    await store.compact(b.mod_revision)
    with pytest.raises(Compacted):
        await store.list("/r/pods/", a.mod_revision)


async def _collect(it: AsyncIterator[object], n: int) -> list[object]:
    out = []
    async for ev in it:
        out.append(ev)
        if len(out) == n:
            break
    return out


async def test_watch_replays_history_then_live(store: Store) -> None:
    await store.create("/r/first", b"0")
    a = await store.create("/r/pods/a", b"1")
    await store.update("/r/pods/a", b"2", a.mod_revision)
    await store.create("/r/other/x", b"x")
    it = store.watch("/r/pods/", a.mod_revision - 1)
    task = asyncio.create_task(_collect(it, 4))
    await asyncio.sleep(0.01)
    await store.create("/r/pods/b", b"3")
    await store.delete("/r/pods/a")
    events = await asyncio.wait_for(task, 5)
    got = [(e.type, e.kv.key, e.kv.value) for e in events]  # type: ignore[attr-defined]
    assert got == [(EventType.PUT, "/r/pods/a", b"1"), (EventType.PUT, "/r/pods/a", b"2"),
                   (EventType.PUT, "/r/pods/b", b"3"), (EventType.DELETE, "/r/pods/a", b"2")]
    revs = [e.revision for e in events]  # type: ignore[attr-defined]
    assert revs == sorted(revs)
    assert events[1].prev.value == b"1"  # type: ignore[attr-defined]


async def test_watch_from_compacted_revision_is_gone(store: Store) -> None:
    a = await store.create("/r/pods/a", b"1")
    b = await store.update("/r/pods/a", b"2", a.mod_revision)
    await store.compact(b.mod_revision)
    assert store.compacted_revision == b.mod_revision
    with pytest.raises(Compacted):
        await _collect(store.watch("/r/pods/", a.mod_revision), 1)


async def test_concurrent_writers_get_unique_revisions(store: Store) -> None:
    kvs = await asyncio.gather(*(store.create(f"/r/pods/p{i}", b"x") for i in range(300)))
    revs = [kv.mod_revision for kv in kvs]
    assert len(set(revs)) == 300
    assert len((await store.list("/r/pods/")).items) == 300


async def test_concurrent_cas_exactly_one_wins(store: Store) -> None:
    a = await store.create("/r/pods/a", b"0")
    results = await asyncio.gather(*(store.update("/r/pods/a", str(i).encode(), a.mod_revision)
                                     for i in range(20)), return_exceptions=True)
    assert sum(1 for r in results if not isinstance(r, Exception)) == 1
    assert all(isinstance(r, RevisionMismatch) for r in results if isinstance(r, Exception))
