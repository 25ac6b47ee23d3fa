"""The watch cache keeps the registry's own object for a write it sees come back from the store (`Caches.adopt`).

The in-memory store of a simulation hands the cache's watch the very bytes the registry wrote, so the cache keeps
the object those bytes encode instead of decoding them again. These tests drive every kind of write through the
in-process client against a real ApiServer, on the memory store (where objects are adopted) and on SQLite (where
they are decoded, as before), and check after each that the cache holds exactly what the store holds, decoded —
the same values and the same key order, so every later encoding is the same bytes — and that no adoption is left
behind by a write, whether it succeeded or failed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver import cache
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.store.interface import Store
from kubelite.store.memory import MemoryStore
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import running

PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
STRATEGIC = "application/strategic-merge-patch+json"


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": "a"}, "finalizers": ["example.com/hold"]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


async def _conflict(client: InProcessClient) -> None:
    with pytest.raises(ApiError) as err:
        await client.request("PUT", f"{LEASES}/l", {"metadata": {"name": "l", "resourceVersion": "1"}, "spec": {}})
    assert err.value.code == 409


async def _exists(client: InProcessClient) -> None:
    with pytest.raises(ApiError) as err:
        await client.create(LEASES, {"metadata": {"name": "l"}})
    assert err.value.code == 409


@dataclass(frozen=True)
class Write:
    name: str
    call: Callable[[InProcessClient], Awaitable[object]]


# In order: each write acts on what the ones before it made.
WRITES = [
    Write("create", lambda c: c.create(PODS, _pod("p"))),
    Write("create with generateName", lambda c: c.create(PODS, {**_pod(""), "metadata": {"generateName": "g-"}})),
    Write("create of a lease", lambda c: c.create(LEASES, {"metadata": {"name": "l"},
                                                           "spec": {"holderIdentity": "a"}})),
    Write("merge patch", lambda c: c.patch(f"{LEASES}/l", {"spec": {"leaseDurationSeconds": 40}})),
    Write("strategic merge patch of status", lambda c: c.patch(f"{PODS}/p/status", {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}, STRATEGIC)),
    Write("update", lambda c: c.request("PUT", f"{LEASES}/l", {"metadata": {"name": "l"}, "spec": {
        "holderIdentity": "b"}})),
    Write("no-op patch", lambda c: c.patch(f"{LEASES}/l", {"spec": {"holderIdentity": "b"}})),
    Write("update with a stale resourceVersion (refused)", _conflict),
    Write("create of an existing name (refused)", _exists),
    Write("graceful delete", lambda c: c.delete(f"{PODS}/p")),
    Write("finalizer removed: deleted", lambda c: c.patch(f"{PODS}/p", {"metadata": {"finalizers": None}})),
    Write("delete", lambda c: c.delete(f"{LEASES}/l")),
]


@pytest.fixture(params=["memory", "sqlite"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Store]]:
    store: Store = MemoryStore() if request.param == "memory" else await SQLiteStore.open(tmp_path / "state.db")
    async with running(store) as server:
        yield server, store


async def _cache_matches_store(server: ApiServer, store: Store) -> None:
    listed = await store.list("/registry/")
    held = {kv.key: cache.decode(kv) for kv in listed.items}
    cached = {r.key(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
              for r, c in server.caches.by_resource.items() for o in c.list()}
    assert cached.keys() == held.keys()
    for key, obj in cached.items():
        assert orjson.dumps(obj) == orjson.dumps(held[key]), key  # equal, and in the same key order


async def test_the_cache_holds_what_the_store_holds_after_every_write(served: tuple[ApiServer, Store]) -> None:
    server, store = served
    client = InProcessClient(server)
    for write in WRITES:
        await write.call(client)
        await _cache_matches_store(server, store)
        assert not server.caches._adopted, write.name  # every write's adoption ends with it


async def test_the_memory_store_s_writes_are_not_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    async with running(store) as server:
        decoded: list[str] = []
        real = cache.decode
        monkeypatch.setattr(cache, "decode", lambda kv: decoded.append(kv.key) or real(kv))
        client = InProcessClient(server)
        for write in WRITES[:7]:  # the writes that store an object (not the refused ones, nor deletions)
            await write.call(client)
        assert decoded == []
        await _cache_matches_store(server, store)


DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
_TEMPLATE = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}

# Updates of kinds whose strategies read the old object in their own ways (status kept or replaced, spec kept,
# allocated fields carried over): none may write into the object the watch cache held before.
UPDATES = [
    Write("namespace created", lambda c: c.create("/api/v1/namespaces", {"metadata": {"name": "ns"}})),
    Write("namespace labels patched (its spec is kept from the old one)", lambda c: c.patch(
        "/api/v1/namespaces/ns", {"metadata": {"labels": {"a": "b"}}})),
    Write("service created", lambda c: c.create("/api/v1/namespaces/default/services", {
        "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "d"}}})),
    Write("service updated (its cluster IP is carried over)", lambda c: c.patch(
        "/api/v1/namespaces/default/services/s", {"spec": {"ports": [{"port": 80, "targetPort": 81}]}}, STRATEGIC)),
    Write("deployment created", lambda c: c.create(DEPLOYMENTS, {"metadata": {"name": "d"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": _TEMPLATE}})),
    Write("deployment status patched", lambda c: c.patch(f"{DEPLOYMENTS}/d/status", {"status": {"replicas": 1}})),
    Write("deployment spec patched (its status is kept)", lambda c: c.patch(f"{DEPLOYMENTS}/d", {
        "spec": {"replicas": 2}})),
    Write("pod created", lambda c: c.create(PODS, _pod("q"))),
    Write("pod labels patched", lambda c: c.patch(f"{PODS}/q", {"metadata": {"labels": {"app": "b"}}})),
    Write("pod status patched", lambda c: c.patch(f"{PODS}/q/status", {"status": {"phase": "Running"}}, STRATEGIC)),
]


async def test_no_write_changes_the_objects_the_cache_held_before(served: tuple[ApiServer, Store]) -> None:
    server, _ = served
    client = InProcessClient(server)
    for write in UPDATES:
        held = [(o, orjson.dumps(o)) for c in server.caches.by_resource.values() for o in c.list()]
        await write.call(client)
        changed = [o["metadata"]["name"] for o, before in held if orjson.dumps(o) != before]
        assert changed == [], write.name
