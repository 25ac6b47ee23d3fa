"""Events expire `--event-ttl` after their last write (kube-apiserver's events registry: `TTLFunc` on every create
and update, an etcd lease that deletes the key): real ApiServers on real SQLite files, on a fake clock.

An Event may live up to the lease-reuse window past its ttl (etcd3 leaseManager), so each case checks both
ends: still there one second before ttl after its last write, gone one window after it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.event_ttl import RETRY_DELAY, ExpiringKeys, parse_event_ttl, reuse_window
from kubelite.apiserver.registry.core import EVENTS
from kubelite.clock import FakeClock
from kubelite.store.etcd import EtcdStore, parse_url
from kubelite.store.interface import Compacted, Event, KeyValue, Store, StoreError, WrappedStore
from kubelite.store.sqlite import SQLiteStore
from tests import etcd_cluster
from tests.conftest import serving_server

Client = TestClient  # type: ignore[type-arg]
TTL = 100
WINDOW = reuse_window(TTL)  # 5 s
EVENTS_URL = "/api/v1/namespaces/default/events"
MERGE = "application/merge-patch+json"


# --- the flag's values, and upstream's lease-reuse table -----------------------------------------------------

@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("1h0m0s", 3600, id="upstream's default form"),
    pytest.param("30m", 1800, id="minutes"),
    pytest.param("90s", 90, id="seconds"),
    pytest.param("1h30m", 5400, id="hours and minutes"),
    pytest.param("0", 0, id="zero: no TTL, Events kept forever"),
    pytest.param("1.9s", 1, id="fractions truncated to whole seconds, as uint64(EventTTL.Seconds())"),
    pytest.param("500ms", 0, id="under a second is no TTL, as upstream's truncation"),
])
def test_event_ttl_parses_go_durations(text: str, seconds: int) -> None:
    assert parse_event_ttl(text) == seconds


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("1x", "invalid duration", id="unknown unit"),
    pytest.param("60", "invalid duration", id="a number without a unit"),
    pytest.param("", "invalid duration", id="empty"),
    pytest.param("-1h", "negative", id="negative"),
])
def test_event_ttl_refuses_bad_values(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_event_ttl(text)


@pytest.mark.parametrize(("ttl", "window"), [
    pytest.param(3600, 60, id="upstream TestGetReuseDurationSeconds: 3600 -> 60 (the cap)"),
    pytest.param(1000, 50, id="upstream TestGetReuseDurationSeconds: 1000 -> 50 (5 percent)"),
    pytest.param(10, 0, id="a short ttl has no window: swept at its deadline"),
])
def test_reuse_window_is_upstreams(ttl: int, window: int) -> None:
    assert reuse_window(ttl) == window


# --- a server on a fake clock --------------------------------------------------------------------------------

def serving(store: Store, clock: FakeClock,
            ttl: int = TTL) -> contextlib.AbstractAsyncContextManager[tuple[ApiServer, Client]]:
    """A started ApiServer with `ttl` on `store`, over HTTP; the store is closed after it."""
    return serving_server(store, clock=clock, event_ttl=ttl)


def event(name: str, message: str = "hello") -> dict[str, Any]:
    return {"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
            "reason": "Testing", "message": message, "type": "Normal"}


async def call(client: Client, method: str, path: str, body: Any = None, content_type: str = "application/json",
               expect: int = 200) -> dict[str, Any]:
    resp = await client.request(method, path, data=orjson.dumps(body) if body is not None else None,
                                headers={"Content-Type": content_type})
    out: dict[str, Any] = await resp.json()
    assert resp.status == expect, out
    return out


async def present(client: Client, path: str) -> bool:
    """Whether `path` exists once every delete the sweeper has started is done: a write after them (SQLite's one
    writer commits in order, the cache applies in revision order) is answered only when they are seen."""
    await call(client, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"generateName": "barrier-"}},
               expect=201)
    resp = await client.get(path)
    assert resp.status in (200, 404), await resp.text()
    return resp.status == 200


async def advance_to(clock: FakeClock, t: float) -> None:
    await clock.advance(t - clock.monotonic())


async def expect_expiry(clock: FakeClock, client: Client, path: str, written: float, ttl: int = TTL) -> None:
    """`path`, last written at `written`, is there just before ttl after it and gone within the window after."""
    await advance_to(clock, written + ttl - 1)
    assert await present(client, path), f"{path} expired before {ttl} s after its last write"
    await advance_to(clock, written + ttl + reuse_window(ttl))
    assert not await present(client, path), f"{path} still there {ttl} s + window after its last write"


# --- writes set the expiry -----------------------------------------------------------------------------------

async def no_second_write(client: Client) -> None:
    pass


async def update(client: Client) -> None:
    cur = await call(client, "GET", f"{EVENTS_URL}/e")
    cur["count"] = 2
    await call(client, "PUT", f"{EVENTS_URL}/e", cur)


async def patch(client: Client) -> None:
    await call(client, "PATCH", f"{EVENTS_URL}/e", {"count": 3, "message": "again"}, MERGE)


async def noop_update(client: Client) -> None:
    await call(client, "PATCH", f"{EVENTS_URL}/e", {"message": "hello"}, MERGE)


WRITE_CASES = [
    pytest.param(no_second_write, 0, id="an Event is gone ttl after its creation"),
    pytest.param(update, 40, id="an update pushes its expiry to ttl after the update"),
    pytest.param(patch, 40, id="a patch pushes its expiry to ttl after the patch"),
    # upstream's GuaranteedUpdate writes nothing (so renews no lease) when the object is unchanged; nor here
    pytest.param(noop_update, 0, id="a no-op patch writes nothing and leaves its expiry"),
]


@pytest.mark.parametrize(("second_write", "last_write"), WRITE_CASES)
async def test_event_expires_ttl_after_its_last_write(tmp_path: Path, second_write: Any, last_write: float) -> None:
    clock = FakeClock()
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), clock) as (_, client):
        await call(client, "POST", EVENTS_URL, event("e"), expect=201)
        await advance_to(clock, 40)
        await second_write(client)
        await expect_expiry(clock, client, f"{EVENTS_URL}/e", last_write)


async def test_watch_sees_the_expiry_as_deleted(tmp_path: Path) -> None:
    clock = FakeClock()
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), clock) as (_, client):
        created = await call(client, "POST", EVENTS_URL, event("e"), expect=201)
        resp = await client.get(f"{EVENTS_URL}?watch=1&resourceVersion={created['metadata']['resourceVersion']}")
        assert resp.status == 200
        await advance_to(clock, TTL + WINDOW)
        while True:
            frame = orjson.loads(await asyncio.wait_for(resp.content.readline(), 10))
            if frame["type"] != "BOOKMARK":
                break
        resp.close()
        assert (frame["type"], frame["object"]["metadata"]["name"]) == ("DELETED", "e")


async def test_other_objects_are_never_swept(tmp_path: Path) -> None:
    clock = FakeClock()
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), clock) as (_, client):
        await call(client, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "cm"}}, expect=201)
        await call(client, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                   {"metadata": {"name": "lease"}}, expect=201)
        await call(client, "POST", EVENTS_URL, event("e"), expect=201)
        await advance_to(clock, 3 * TTL)
        assert not await present(client, f"{EVENTS_URL}/e")
        assert await present(client, "/api/v1/namespaces/default/configmaps/cm")
        assert await present(client, "/apis/coordination.k8s.io/v1/namespaces/default/leases/lease")


async def test_zero_ttl_keeps_events_forever(tmp_path: Path) -> None:
    clock = FakeClock()
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), clock, ttl=0) as (server, client):
        await call(client, "POST", EVENTS_URL, event("e"), expect=201)
        await advance_to(clock, 10 * TTL)
        assert await present(client, f"{EVENTS_URL}/e")
        assert server.event_expiry is None


# --- restarts and several servers ----------------------------------------------------------------------------

@pytest.mark.parametrize(("first_ttl", "downtime"), [
    pytest.param(TTL, 30, id="events written before a restart expire ttl after it, their write time unknown"),
    pytest.param(0, 10 * TTL, id="events kept forever by a server without a TTL expire ttl after one with it starts"),
])
async def test_events_stored_before_start_up_expire_ttl_after_it(tmp_path: Path, first_ttl: int,
                                                                 downtime: float) -> None:
    first = FakeClock()
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), first, ttl=first_ttl) as (_, client):
        await call(client, "POST", EVENTS_URL, event("e"), expect=201)
        await advance_to(first, 30)
    second = FakeClock(first.now() + downtime)  # a new process: its monotonic clock starts again
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), second) as (server, client):
        assert server.event_expiry is not None and server.event_expiry.scheduled == 1
        await expect_expiry(second, client, f"{EVENTS_URL}/e", 0)


async def one_sqlite_file(tmp_path: Path) -> tuple[Store, Store]:
    store = await SQLiteStore.open(tmp_path / "state.db")
    return store, store


async def two_etcd_clients(tmp_path: Path) -> tuple[Store, Store]:
    """Two servers on one etcd, each its own client, as on two machines: each learns the other's writes by watch."""
    cluster = etcd_cluster.shared(1)
    etcd_cluster.wipe(cluster)
    return await EtcdStore.open(parse_url(cluster.url)), await EtcdStore.open(parse_url(cluster.url))


@pytest.mark.parametrize("stores", [one_sqlite_file, two_etcd_clients], ids=["sqlite", "etcd"])
async def test_two_servers_on_one_store_delete_once_without_errors(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        stores: Callable[[Path], Awaitable[tuple[Store, Store]]]) -> None:
    """Each server sweeps every Event (a store watch sees every server's writes); the guarded delete makes the
    second sweep a lost race, quietly, and watchers see one DELETE."""
    clock = FakeClock()
    mine, theirs = await stores(tmp_path)
    other = ApiServer(theirs, clock, server_address="10.0.0.2:6443", event_ttl=TTL)
    async with serving(mine, clock) as (server, client):
        await other.start()
        try:
            created = await call(client, "POST", EVENTS_URL, event("e"), expect=201)
            changes = mine.watch(EVENTS.key_prefix, int(created["metadata"]["resourceVersion"]))
            # Each sweeper schedules e as its store watch delivers it, at that moment's clock: the fake clock may
            # move only once both have (an etcd watch lagging under load had scheduled it after the first move).
            for sweeper in (server.event_expiry, other.event_expiry):
                assert sweeper is not None
                async with asyncio.timeout(10):
                    while sweeper.scheduled < 1:
                        await asyncio.sleep(0.01)
            with caplog.at_level(logging.DEBUG, logger="kubelite.apiserver"):
                await advance_to(clock, TTL - 1)
                await call(client, "POST", EVENTS_URL, event("before"), expect=201)  # e is still there
                seen = [await asyncio.wait_for(anext(changes), 10)]
                await advance_to(clock, TTL + WINDOW)
                seen.append(await asyncio.wait_for(anext(changes), 10))
                await call(client, "POST", EVENTS_URL, event("after"), expect=201)  # nothing else came between
                seen.append(await asyncio.wait_for(anext(changes), 10))
            assert [(ev.type, ev.kv.key.rsplit("/", 1)[1]) for ev in seen] == [
                ("PUT", "before"), ("DELETE", "e"), ("PUT", "after")]
            assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        finally:
            await other.stop()
            if theirs is not mine:
                await theirs.close()


@pytest.mark.parametrize(("written_again", "deleted"), [
    pytest.param(False, 1, id="the write it scheduled is deleted"),
    pytest.param(True, 0, id="a newer write it has not heard of yet is not deleted (the guarded delete)"),
])
async def test_sweep_deletes_only_the_write_it_scheduled(tmp_path: Path, written_again: bool, deleted: int) -> None:
    """On etcd a server's watch may lag another server's write: the delete is guarded by the revision it
    scheduled, so the newer write survives (and gets its own deadline when the watch delivers it)."""
    clock = FakeClock()
    store = await SQLiteStore.open(tmp_path / "state.db")
    try:
        kv = await store.create(EVENTS.key("default", "e"), orjson.dumps(event("e")))
        expiry = ExpiringKeys(store, clock, EVENTS.key_prefix, TTL)
        await expiry.start()  # scheduled from the list; not `run`: no watch delivers the next write
        if written_again:
            kv = await store.update(kv.key, orjson.dumps(event("e", "again")), kv.mod_revision)
        await clock.advance(TTL)
        assert await expiry.sweep() == deleted
        assert await store.get(kv.key) == (None if deleted else kv)
        assert expiry.scheduled == 0
    finally:
        await store.close()


# --- a sweeper never dies ------------------------------------------------------------------------------------

class FlakyStore(WrappedStore):
    """A real store whose Event deletes and watches fail as many times as asked (an etcd that is away)."""

    def __init__(self, inner: Store, failed_deletes: int = 0, failed_watches: int = 0,
                 ended_watches: int = 0, compacted_watches: int = 0) -> None:
        super().__init__(inner)
        self.failed_deletes, self.failed_watches, self.ended_watches = failed_deletes, failed_watches, ended_watches
        self.compacted_watches = compacted_watches  # watches that fail with Compacted at their second event

    async def delete(self, key: str, expected_mod_revision: int = 0) -> KeyValue:
        if key.startswith(EVENTS.key_prefix) and self.failed_deletes:
            self.failed_deletes -= 1
            raise StoreError("etcdserver: request timed out")
        return await self.inner.delete(key, expected_mod_revision)

    async def watch(self, prefix: str, from_revision: int, progress: bool = False) -> AsyncIterator[Event]:
        if prefix == EVENTS.key_prefix and self.failed_watches:
            self.failed_watches -= 1
            raise StoreError("etcdserver: no leader")
        if prefix == EVENTS.key_prefix and self.ended_watches:
            self.ended_watches -= 1
            return
        seen = 0
        async for ev in self.inner.watch(prefix, from_revision, progress):
            if prefix == EVENTS.key_prefix and self.compacted_watches and seen == 1:
                self.compacted_watches -= 1
                raise Compacted(from_revision, ev.revision)
            seen += 1
            yield ev


@pytest.mark.parametrize(("faults", "expires", "logged"), [
    pytest.param({"failed_deletes": 1}, TTL + WINDOW + RETRY_DELAY, "sweeping",
                 id="a failed delete is logged and retried after the retry delay"),
    pytest.param({"failed_deletes": 30}, TTL + WINDOW + 30 * RETRY_DELAY, "sweeping",
                 id="a store failing for many sweeps does not stop the sweeper"),
    pytest.param({"failed_watches": 1}, RETRY_DELAY + TTL + WINDOW, "watching",
                 id="a failed watch is logged and relisted: a write while it was down still expires"),
    pytest.param({"ended_watches": 1}, RETRY_DELAY + TTL + WINDOW, "ended",
                 id="an ended watch is relisted"),
])
async def test_sweeper_survives_store_errors(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                             faults: dict[str, int], expires: float, logged: str) -> None:
    clock = FakeClock()
    store = FlakyStore(await SQLiteStore.open(tmp_path / "state.db"), **faults)
    with caplog.at_level(logging.WARNING, logger="kubelite.apiserver"):
        async with serving(store, clock) as (_, client):
            await call(client, "POST", EVENTS_URL, event("e"), expect=201)
            await advance_to(clock, TTL - 1)
            assert await present(client, f"{EVENTS_URL}/e")
            await advance_to(clock, expires)
            assert not await present(client, f"{EVENTS_URL}/e")
            await call(client, "POST", EVENTS_URL, event("later"), expect=201)  # the sweeper still works after
            await expect_expiry(clock, client, f"{EVENTS_URL}/later", expires)
    assert any(logged in r.getMessage() for r in caplog.records), caplog.text


async def test_a_relist_keeps_the_deadlines_of_writes_already_seen(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """A watch broken by compaction is relisted at once (a reflector's 410, no retry delay): an Event whose write
    was seen keeps its deadline, one written meanwhile gets ttl from the relist — not every Event ttl from then."""
    clock = FakeClock()
    store = FlakyStore(await SQLiteStore.open(tmp_path / "state.db"), compacted_watches=1)
    with caplog.at_level(logging.INFO, logger="kubelite.apiserver"):
        async with serving(store, clock) as (server, client):
            await call(client, "POST", EVENTS_URL, event("first"), expect=201)
            await advance_to(clock, 50)
            await call(client, "POST", EVENTS_URL, event("second"), expect=201)  # the watch fails at its event
            assert server.event_expiry is not None
            for _ in range(100):  # the relist, at once, at 50
                if store.compacted_watches == 0 and server.event_expiry.scheduled == 2:
                    break
                await asyncio.sleep(0)
            await expect_expiry(clock, client, f"{EVENTS_URL}/first", 0)
            await expect_expiry(clock, client, f"{EVENTS_URL}/second", 50)
    assert any("compacted" in r.getMessage() for r in caplog.records), caplog.text
