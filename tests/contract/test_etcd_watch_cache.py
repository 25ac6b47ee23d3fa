"""The watch cache on a real etcd: progress notifications reach it as bookmarks, and a compaction while its watch
is disconnected makes it relist instead of stopping (the bug: the Compacted raised on resume ended the cache's
task, which then served a frozen state forever).

The cache's store talks to etcd through a TCP proxy the test cuts; another store writes and compacts meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from kubelite.apiserver.cache import Caches, Watcher
from kubelite.apiserver.registry.pods import PODS
from kubelite.store.etcd import EtcdStore, parse_url
from tests.e2e.cuttable_proxy import CuttableProxy
from tests.etcd_cluster import EtcdCluster

PREFIX = f"{PODS.key_prefix}default/"


def pod(name: str) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}})


@dataclass
class Setup:
    caches: Caches
    writer: EtcdStore
    proxy: CuttableProxy

    def names(self) -> set[str]:
        return {p["metadata"]["name"] for p in self.caches[PODS].list()}

    async def until(self, check: object, what: str, timeout: float = 20) -> None:
        for _ in range(int(timeout / 0.05)):
            if check():  # type: ignore[operator]
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    cluster = EtcdCluster(tmp_path, 1)
    cluster.start()
    port = int(cluster.endpoints[0].rsplit(":", 1)[1])
    proxy = CuttableProxy(port)
    behind = await EtcdStore.open(parse_url(f"etcd://127.0.0.1:{proxy.port}"))
    writer = await EtcdStore.open(parse_url(cluster.url))
    caches = Caches(behind, (PODS,))
    try:
        await caches.start()
        yield Setup(caches, writer, proxy)
    finally:
        await caches.stop()
        await behind.close()
        await writer.close()
        proxy.close()
        cluster.stop()


async def test_progress_notification_reaches_the_cache_as_a_bookmark(setup: Setup) -> None:
    """A write outside /registry/ moves etcd's revision without an event for the cache; the next progress
    notification (every second in these clusters) says the cache is current up to it."""
    written = await setup.writer.create("/elsewhere/x", b"1")
    await asyncio.wait_for(setup.caches.wait_for(written.mod_revision), 10)
    assert setup.caches.revision >= written.mod_revision


async def test_compaction_during_reconnect_relists_instead_of_stopping(setup: Setup) -> None:
    caches, writer = setup.caches, setup.writer
    await writer.create(PREFIX + "a", pod("a"))
    await setup.until(lambda: setup.names() == {"a"}, "a in the cache")
    watcher = Watcher("", None)
    caches[PODS].add(watcher)

    setup.proxy.cut()  # the cache's watch breaks and keeps retrying
    await writer.create(PREFIX + "b", pod("b"))
    gone = await writer.get(PREFIX + "a")
    assert gone is not None
    deleted = await writer.delete(PREFIX + "a", gone.mod_revision)
    await writer.compact(deleted.mod_revision)
    await asyncio.sleep(0.3)
    setup.proxy.heal()  # it resumes from a compacted revision: Compacted, then a relist

    await setup.until(lambda: setup.names() == {"b"}, "the relisted state")
    assert watcher.closed  # its events in between are unknown: the client must watch again
    assert caches.events_since(PODS, gone.mod_revision) is None  # and resuming from before the relist is 410
    assert caches._task is not None and not caches._task.done()
    c = await writer.create(PREFIX + "c", pod("c"))
    await asyncio.wait_for(caches.wait_for(c.mod_revision), 10)  # still following etcd
    assert setup.names() == {"b", "c"}
