"""The watch cache's ring: what a resumed watch gets, when it is 410 Gone, and what it costs the collector.

The ring keeps events as bytes (`cache.Recorded`) so that CPython's full collections, which stop every thread,
do not walk it (issue 10: "0 stalls over 1 s"; RELIABILITY.md, "Fuzz suite"). These tests drive a real
`Caches` over a real SQLite store, and count the objects a full collection walks rather than time it: wall
time on a shared 2-core machine measures the machine's load, a count of objects does not.
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubelite.apiserver import gc_tuning
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.cache import RING_SIZE, CachedEvent, Caches, Recorded, Ring, Watcher
from kubelite.apiserver.registry import RESOURCES
from kubelite.apiserver.registry.base import Obj, Resource
from kubelite.clock import RealClock
from kubelite.store.interface import Event, EventType, KeyValue
from kubelite.store.sqlite import SQLiteStore

PODS = next(r for r in RESOURCES if r.plural == "pods")
CONFIGMAPS = next(r for r in RESOURCES if r.plural == "configmaps")


def pod(name: str, labels: dict[str, str], generation: int = 0) -> Obj:
    """A pod of the size a controller writes (~1 KB encoded: ~27 tracked containers once decoded)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels,
                     "annotations": {"generation": str(generation)},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                                          "uid": "rs", "controller": True}]},
        "spec": {"nodeName": "n1", "containers": [{
            "name": "c", "image": "busybox", "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            "ports": [{"containerPort": 80, "protocol": "TCP"}], "env": [{"name": "A", "value": "1"}],
            "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
            "volumes": [{"name": "v", "emptyDir": {}}], "tolerations": [{"key": "k", "operator": "Exists"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}],
                   "conditions": [{"type": t, "status": "True"} for t in ("Ready", "Initialized", "PodScheduled")],
                   "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0,
                                          "state": {"running": {"startedAt": "2026-11-27T00:00:00Z"}}}]}}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = await SQLiteStore.open(tmp_path / "state.db")
    yield s
    await s.close()


@pytest.fixture
async def caches(store: SQLiteStore) -> AsyncIterator[Caches]:
    c = Caches(store, RESOURCES)
    await c.start()
    yield c
    await c.stop()


def key(resource: Resource, name: str) -> str:
    return f"{resource.key_prefix}default/{name}"


async def write(store: SQLiteStore, caches: Caches, resource: Resource, obj: Obj) -> int:
    """Create or update through the store, then wait until the cache has the revision (as a write does)."""
    k = key(resource, obj["metadata"]["name"])
    current = await store.get(k)
    kv = (await store.create(k, orjson.dumps(obj)) if current is None
          else await store.update(k, orjson.dumps(obj), current.mod_revision))
    await caches.wait_for(kv.mod_revision)
    return kv.mod_revision


def seen(events: list[CachedEvent]) -> list[tuple[str, str, int, str | None]]:
    """What a watcher can observe of each event: type, object, revision and the previous object's labels."""
    return [(e.type, orjson.dumps(e.obj).decode(), e.revision,
             None if e.prev is None else orjson.dumps(e.prev["metadata"].get("labels")).decode()) for e in events]


@dataclass
class RingCase:
    name: str
    limits: tuple[int, int]  # events, bytes
    writes: int  # updates of one pod after its create
    resume_after: int  # the write (0 = the create) whose revision the watch resumes from; -1: before the create
    expired: bool


RING_CASES = [
    RingCase("a revision within an unbounded ring resumes with every later event", (100, 1 << 30), 5, 1, False),
    RingCase("the revision before the create resumes with the create", (100, 1 << 30), 5, -1, False),
    # 7 events (6 writes of the pod, 1 of a config map) in a ring of 3: the 4th write (index 3) is the last evicted
    RingCase("the last evicted revision still resumes: every later event is held", (3, 1 << 30), 5, 3, False),
    RingCase("a revision older than the last evicted one is expired (410)", (3, 1 << 30), 5, 2, True),
    # ~1 KB per pod, ~2 KB per update (object and previous object): 3,000 bytes hold the last update and the map
    RingCase("the byte bound evicts before the count bound does", (100, 3000), 5, 1, True),
    RingCase("the byte bound keeps what fits", (100, 3000), 5, 4, False),
]


@pytest.mark.parametrize("case", RING_CASES, ids=lambda c: c.name)
async def test_ring_resumes_from_what_it_holds_and_expires_the_rest(
        store: SQLiteStore, caches: Caches, case: RingCase) -> None:
    caches.ring.limits = case.limits
    before = caches.revision
    revisions = [await write(store, caches, PODS, pod("p", {"gen": str(i)}, i)) for i in range(case.writes + 1)]
    await write(store, caches, CONFIGMAPS, {"metadata": {"name": "other", "namespace": "default"}})
    resume = before if case.resume_after < 0 else revisions[case.resume_after]
    backlog = caches.events_since(PODS, resume)
    if case.expired:
        assert backlog is None
        return
    assert backlog is not None
    assert [e.revision for e in backlog] == [r for r in revisions if r > resume]
    assert [e.type for e in backlog] == ["ADDED" if r == revisions[0] else "MODIFIED" for r in revisions if r > resume]
    assert all(e.obj["metadata"]["resourceVersion"] == str(e.revision) for e in backlog)


def test_a_cleared_ring_counts_no_bytes() -> None:
    """A relist empties the ring (`ring.clear()`): what it held must not count against what comes next."""
    ring = Ring(10, 100)
    for revision in (1, 2):
        assert ring.record(Recorded(revision, "ADDED", PODS.key_prefix, b"x" * 60, revision, None, 0)) == \
            (None if revision == 1 else 1)
    ring.clear()
    assert ring.record(Recorded(3, "ADDED", PODS.key_prefix, b"x" * 90, 3, None, 0)) is None
    assert (len(ring), ring.bytes) == (1, 90)


async def test_a_resumed_watch_sees_what_a_live_one_saw(store: SQLiteStore, caches: Caches) -> None:
    """Selector transitions depend on the previous object: replayed from bytes, they are the live ones."""
    def selected(obj: Obj) -> bool:
        return bool(obj["metadata"].get("labels", {}).get("x") == "1")

    live = Watcher("default", selected)
    caches[PODS].add(live)
    start = caches.revision
    for labels in ({"x": "1"}, {"x": "2"}, {"x": "1"}, {"x": "1", "y": "1"}):
        await write(store, caches, PODS, pod("p", labels))
    current = await store.get(key(PODS, "p"))
    assert current is not None
    await store.delete(key(PODS, "p"), current.mod_revision)
    await caches.wait_for(store.revision)
    resumed = Watcher("default", selected)
    backlog = caches.events_since(PODS, start)
    assert backlog is not None
    for ev in backlog:
        resumed.offer(ev)
    assert [e.type for e in live.pending] == ["ADDED", "DELETED", "ADDED", "MODIFIED", "DELETED"]
    assert seen(resumed.pending) == seen(live.pending)


def test_a_previous_object_the_store_did_not_send_is_encoded_from_the_cache() -> None:
    """etcd sends no previous value once it is compacted: the ring encodes the cache's copy instead."""
    caches = Caches(None, RESOURCES)  # type: ignore[arg-type]  # apply() never reads the store
    k = key(PODS, "p")
    first = KeyValue(k, orjson.dumps(pod("p", {"x": "1"})), 1, 1)
    caches.apply(Event(EventType.PUT, first, None, 1))
    caches.apply(Event(EventType.PUT, KeyValue(k, orjson.dumps(pod("p", {"x": "2"})), 1, 2), None, 2))
    backlog = caches.events_since(PODS, 0)
    assert backlog is not None and [e.type for e in backlog] == ["ADDED", "MODIFIED"]
    expected = pod("p", {"x": "1"})
    expected["metadata"]["resourceVersion"] = "1"
    assert backlog[1].prev == expected


@pytest.fixture
def walked() -> Iterator[list[int]]:
    """The number of objects each full collection walks, counted at its start (the collector's own gc callback)."""
    counts: list[int] = []

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            counts.append(len(gc.get_objects()))

    gc.collect()
    gc.freeze()  # this test process's own objects (pytest, earlier tests) are not what is measured
    gc.callbacks.append(callback)
    yield counts
    gc.callbacks.remove(callback)
    gc.unfreeze()


def test_a_full_ring_adds_one_object_per_event_to_a_full_collection(walked: list[int]) -> None:
    """50,000 pod events over 500 pods: decoded, the ring held 1.35 million containers and a full collection took
    1.1 s of CPU (several seconds of wall time under load); as bytes, one tuple per event."""
    caches = Caches(None, RESOURCES)  # type: ignore[arg-type]  # apply() never reads the store
    events, pods = RING_SIZE, 500
    caches.ring.limits = (events, 1 << 40)  # bytes unbounded: the count is what is measured
    encoded = [orjson.dumps(pod(f"p{i}", {"app": "web"}, i)) for i in range(pods)]
    prev: dict[str, KeyValue] = {}
    for revision in range(1, events + 1):
        k = key(PODS, f"p{revision % pods}")
        kv = KeyValue(k, encoded[revision % pods], 1, revision)
        caches.apply(Event(EventType.PUT, kv, prev.get(k), revision))
        prev[k] = kv
    cpu = time.process_time()
    gc.collect()
    cpu = time.process_time() - cpu
    assert len(caches.ring) == events
    current = 30 * pods  # the cache's decoded copy of each pod, plus the test's own key-values
    assert walked[-1] < events + current, (walked[-1], f"{cpu * 1000:.0f} ms CPU")


async def test_after_start_up_a_full_collection_walks_none_of_the_start_up_objects(
        tmp_path: Path, walked: list[int]) -> None:
    """A started API server holds ~105,000 tracked objects (schemas, models, modules) that never become garbage;
    `gc_tuning.after_start_up` takes them out of every later full collection."""
    gc.unfreeze()  # the fixture's freeze would hide what start-up allocates
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    try:
        gc.collect()
        before = walked[-1]
        gc_tuning.after_start_up()
        gc.collect()
        assert walked[-1] < 5_000 < before, (before, walked[-1])
    finally:
        await server.stop()
        await store.close()


def test_a_resume_decodes_its_backlog_without_full_collections(walked: list[int]) -> None:
    """Every object a resume decodes stays alive until written: collections meanwhile would only walk them again
    and again (30,000 pod events: 18-29 s of a loaded machine instead of 1.8 s)."""
    caches = Caches(None, RESOURCES)  # type: ignore[arg-type]  # apply() never reads the store
    encoded = orjson.dumps(pod("p", {"app": "web"}))
    for revision in range(1, 5_001):
        caches.apply(Event(EventType.PUT, KeyValue(key(PODS, "p"), encoded, 1, revision), None, revision))
    collections = len(walked)
    backlog = caches.events_since(PODS, 0)
    assert backlog is not None and len(backlog) == 5_000
    assert len(walked) == collections
    assert gc.isenabled()
