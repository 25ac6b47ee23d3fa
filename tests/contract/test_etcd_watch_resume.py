"""An etcd watch outlives its member: it resumes after the last revision it delivered, none lost or repeated.

The one member is SIGKILLed under an open watch and started again on its data directory; the
store keeps retrying the broken stream (a write made meanwhile waits for the member too) and
carries on from where it was.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from kubelite.store.etcd import EtcdStore, parse_url
from kubelite.store.interface import Event
from tests.etcd_cluster import EtcdCluster


async def test_watch_resumes_after_its_member_restarts(tmp_path: Path) -> None:
    cluster = EtcdCluster(tmp_path, 1)
    cluster.start()
    store = await EtcdStore.open(parse_url(cluster.url))
    try:
        start = (await store.create("/registry/pods/default/before", b"0")).mod_revision
        got: list[Event] = []
        seen_two = asyncio.Event()

        async def watch() -> None:
            async for ev in store.watch("/registry/pods/", start):
                got.append(ev)
                if len(got) == 2:
                    seen_two.set()

        task = asyncio.create_task(watch())
        await store.create("/registry/pods/default/a", b"1")
        await store.create("/registry/pods/default/b", b"2")
        await asyncio.wait_for(seen_two.wait(), 10)
        cluster.kill(0)
        await asyncio.sleep(0.5)  # the stream breaks and the watch starts retrying
        await asyncio.get_running_loop().run_in_executor(None, cluster.restart, 0)
        await store.create("/registry/pods/default/c", b"3")
        await store.delete("/registry/pods/default/a")
        for _ in range(100):
            if len(got) >= 4:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)  # nothing repeated behind them
        task.cancel()
        assert [(e.type.value, e.kv.key.rsplit("/", 1)[1]) for e in got] == [
            ("PUT", "a"), ("PUT", "b"), ("PUT", "c"), ("DELETE", "a")]
        assert [e.revision for e in got] == sorted({e.revision for e in got})
    finally:
        await store.close()
        cluster.stop()
