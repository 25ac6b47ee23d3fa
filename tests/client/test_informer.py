"""Informers: indexes kept in step with the cache, handlers that raise are skipped, the loop never dies."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubelite.api.errors import gone, unavailable
from kubelite.client.informer import (
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    OWNER_UID_INDEX,
    Handlers,
    Informer,
    by_node_name,
    by_owner_uid,
    key_of,
)
from kubelite.clock import FakeClock
from tests.client.scripted import ScriptedClient, WatchScript, listing, pod

Obj = dict[str, Any]


def ev(kind: str, obj: Obj) -> Obj:
    return {"type": kind, "object": obj}


def informer(client: ScriptedClient, clock: FakeClock | None = None, handlers: Handlers | None = None) -> Informer:
    inf = Informer(client, "/api/v1/pods", clock or FakeClock(), handlers or Handlers())
    inf.add_index(NODE_NAME_INDEX, by_node_name)
    inf.add_index(OWNER_UID_INDEX, by_owner_uid)
    return inf


async def run_until_exhausted(inf: Informer, client: ScriptedClient, clock: FakeClock) -> None:
    task = asyncio.create_task(inf.run())
    for _ in range(200):
        if client.exhausted.is_set():
            break
        await clock.advance(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.exhausted.is_set(), "the informer stopped before consuming its script"


INDEX_CASES = [
    pytest.param([ev("ADDED", pod("a", 2, node="n1"))], NODE_NAME_INDEX, "n1", ["a"], id="bound pod indexed by node"),
    pytest.param([ev("ADDED", pod("a", 2))], NODE_NAME_INDEX, "", [], id="unbound pod in no node bucket"),
    pytest.param([ev("ADDED", pod("a", 2)), ev("MODIFIED", pod("a", 3, node="n2"))], NODE_NAME_INDEX, "n2", ["a"],
                 id="binding moves the pod into its node's bucket"),
    pytest.param([ev("ADDED", pod("a", 2, node="n1")), ev("MODIFIED", pod("a", 3, node="n1"))], NODE_NAME_INDEX,
                 "n1", ["a"], id="an update on the same node keeps the pod in its bucket"),
    pytest.param([ev("ADDED", pod("a", 2, node="n1")), ev("ADDED", pod("b", 3, node="n1")),
                  ev("MODIFIED", pod("a", 4, node="n2"))], NODE_NAME_INDEX, "n1", ["b"],
                 id="moving to another node leaves the old bucket"),
    pytest.param([ev("ADDED", pod("a", 2, node="n1")), ev("DELETED", pod("a", 3, node="n1"))], NODE_NAME_INDEX,
                 "n1", [], id="delete empties the bucket"),
    pytest.param([ev("ADDED", pod("a", 2, ns="x")), ev("ADDED", pod("b", 3, ns="y"))], NAMESPACE_INDEX, "y", ["b"],
                 id="namespace index"),
    pytest.param([ev("ADDED", pod("a", 2, owner="rs1")), ev("ADDED", pod("b", 3, owner="rs2")),
                  ev("ADDED", pod("c", 4, owner="rs1"))], OWNER_UID_INDEX, "uid-rs1", ["a", "c"],
                 id="owner uid index"),
    pytest.param([ev("ADDED", pod("a", 2, owner="rs1")), ev("MODIFIED", pod("a", 3))], OWNER_UID_INDEX, "uid-rs1",
                 [], id="orphaned pod leaves its old owner's bucket"),
]


@pytest.mark.parametrize(("events", "index", "value", "names"), INDEX_CASES)
async def test_index_follows_watch_events(events: list[Obj], index: str, value: str, names: list[str]) -> None:
    clock = FakeClock()
    client = ScriptedClient([listing(1)], [events])
    inf = informer(client, clock)
    await run_until_exhausted(inf, client, clock)
    assert [o["metadata"]["name"] for o in inf.by_index(index, value)] == names


async def test_relist_after_gone_reindexes_what_changed_while_away() -> None:
    """A 410 during the watch: the relist drops the deleted pod from every index and indexes the new one."""
    clock = FakeClock()
    client = ScriptedClient([listing(1, pod("a", 1, node="n1")), listing(9, pod("b", 8, node="n1"))],
                            [[gone("too old")]])
    inf = informer(client, clock)
    await run_until_exhausted(inf, client, clock)
    assert [o["metadata"]["name"] for o in inf.by_index(NODE_NAME_INDEX, "n1")] == ["b"]
    assert list(inf.store) == [("default", "b")]


def test_add_index_indexes_objects_already_cached() -> None:
    inf = Informer(ScriptedClient([], []), "/api/v1/pods", FakeClock())
    inf.add(pod("a", 1, node="n1"))
    inf.add_index(NODE_NAME_INDEX, by_node_name)
    assert inf.by_index(NODE_NAME_INDEX, "n1") == [pod("a", 1, node="n1")]


def test_an_updated_object_moves_to_the_end_of_the_cache_order() -> None:
    """The cache iterates in the order of last change (components list from it: a scheduler's node order, a
    simulation's event log), however the indexes are kept."""
    inf = informer(ScriptedClient([], []))
    for obj in (pod("a", 1, node="n1"), pod("b", 2, node="n1"), pod("a", 3, node="n1")):
        inf.add(obj)
    assert list(inf.store) == [("default", "b"), ("default", "a")]
    assert [o["metadata"]["resourceVersion"] for o in inf.by_index(NODE_NAME_INDEX, "n1")] == ["3", "2"]


def test_index_errors() -> None:
    inf = Informer(ScriptedClient([], []), "/api/v1/pods", FakeClock())
    with pytest.raises(ValueError, match="indexer conflict"):
        inf.add_index(NAMESPACE_INDEX, by_node_name)
    with pytest.raises(KeyError):
        inf.by_index("nope", "x")


def test_index_function_that_raises_leaves_the_object_cached() -> None:
    inf = Informer(ScriptedClient([], []), "/api/v1/pods", FakeClock())
    inf.add_index("broken", lambda obj: [obj["spec"]["missing"]])
    inf.add(pod("a", 1))
    assert inf.get("default", "a") is not None and inf.by_index("broken", "x") == []


async def test_handler_that_raises_is_counted_and_skipped() -> None:
    """Issue 10: one object that breaks a handler must not stop delivery of every other object."""
    seen: list[str] = []

    def on_add(obj: Obj) -> None:
        if obj["metadata"]["name"] == "bad":
            raise KeyError("spec")
        seen.append(obj["metadata"]["name"])

    def on_update(old: Obj, new: Obj) -> None:
        raise RuntimeError("boom")

    clock = FakeClock()
    client = ScriptedClient([listing(1, pod("bad", 1), pod("a", 1))],
                            [[ev("ADDED", pod("b", 2)), ev("MODIFIED", pod("a", 3)), ev("ADDED", pod("c", 4))]])
    inf = informer(client, clock, Handlers(on_add=on_add, on_update=on_update))
    await run_until_exhausted(inf, client, clock)
    assert seen == ["a", "b", "c"]
    assert inf.handler_errors == 2
    assert inf.get("default", "a") == pod("a", 3)  # the cache is current even where a handler failed


FAILURES: list[tuple[str, list[Any], list[WatchScript], int]] = [
    ("list unavailable twice, then served", [unavailable("refused"), unavailable("refused"), listing(5)], [], 0),
    ("watch cut: resume from the last version seen, no relist", [listing(5)],
     [[ev("ADDED", pod("a", 6)), unavailable("reset")], []], 6),
    ("watch refused repeatedly: keeps retrying", [listing(5)],
     [[unavailable("refused")], [unavailable("refused")], [unavailable("refused")], []], 5),
    ("watch ends cleanly: resumes at once", [listing(5)], [[ev("ADDED", pod("a", 7))], []], 7),
]


@pytest.mark.parametrize(("lists", "watches", "resumed_from"),
                         [pytest.param(c[1], c[2], c[3], id=c[0]) for c in FAILURES])
async def test_loop_survives_transport_failures(lists: list[Any], watches: list[WatchScript],
                                                resumed_from: int) -> None:
    clock = FakeClock()
    client = ScriptedClient(lists, watches)
    inf = informer(client, clock)
    await run_until_exhausted(inf, client, clock)
    assert inf.synced.is_set()
    if resumed_from:
        assert client.watch_params[-1]["resourceVersion"] == str(resumed_from)


async def test_back_off_grows_while_the_server_stays_away() -> None:
    """Reflector back-off: successive failed lists wait longer (800 ms doubling, jittered up to 2x)."""
    clock = FakeClock()
    failures: list[Any] = [unavailable("refused")] * 4
    client = ScriptedClient([*failures, listing(1)], [])
    inf = informer(client, clock)
    task = asyncio.create_task(inf.run())
    while not inf.synced.is_set():
        await clock.advance(0.1)
    task.cancel()
    # sleeps of at least 0.8 + 1.6 + 3.2 + 6.4 and at most twice that
    assert 12.0 <= clock.monotonic() <= 24.0 + 0.5


def test_key_of_cluster_scoped() -> None:
    assert key_of({"metadata": {"name": "n1"}}) == ("", "n1")


async def test_retry_now_ends_a_grown_back_off_at_once() -> None:
    """After a long outage the back-off has grown (here 8 failures: 30 s and more); `retry_now` — the agent's
    heartbeat is through again — lists at once instead of waiting it out."""
    clock = FakeClock()
    client = ScriptedClient([*[unavailable("refused")] * 8, listing(1)], [])
    inf = informer(client, clock)
    task = asyncio.create_task(inf.run())
    while len(client.lists) > 1:  # all 8 failures consumed: now in the long back-off before the 9th list
        await clock.advance(0.5)
    failed_at = clock.monotonic()
    await clock.advance(1.0)
    assert not inf.synced.is_set()
    inf.retry_now()
    for _ in range(10):
        await clock.advance(0)
    task.cancel()
    assert inf.synced.is_set() and clock.monotonic() - failed_at < 2.0
