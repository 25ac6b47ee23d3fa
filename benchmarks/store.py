"""`--store` for the benchmarks: the same harness on SQLite or on a real etcd started here.

Run alone (`python -m benchmarks.store`) it measures the Store protocol itself on each backend.

    --store sqlite   the default: the server's own SQLite file
    --store etcd     a single etcd member on loopback (its data directory in the run's temp dir)
    --store etcd3    a 3-member etcd cluster on loopback (one machine: raft's cost, none of the spread)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kubelite.store import StoreSpec
from kubelite.store.interface import Store
from tests.etcd_cluster import EtcdCluster

CHOICES = ("sqlite", "etcd", "etcd3")


def add_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", choices=CHOICES, default="sqlite", help="the server's store (etcd: started here)")


@contextlib.contextmanager
def server_args(kind: str, tmp: Path) -> Iterator[list[str]]:
    """Extra `kubelite server` arguments for this store, with its etcd running until the block ends."""
    if kind == "sqlite":
        yield []
        return
    (tmp / "etcd").mkdir()
    cluster = EtcdCluster(tmp / "etcd", 3 if kind == "etcd3" else 1)
    cluster.start()
    try:
        yield ["--store", cluster.url]
    finally:
        cluster.stop()


async def _bench(label: str, store: Store, n: int, clients: int) -> None:
    """Creates at `clients` concurrency, then updates, a full list and one watch draining every event."""
    value = b"x" * 1000
    cpu, wall = time.process_time(), time.perf_counter()
    lat: list[float] = []

    async def creator(w: int) -> None:
        for i in range(n // clients):
            t = time.perf_counter()
            await store.create(f"/registry/pods/default/p{w}-{i}", value)
            lat.append(time.perf_counter() - t)

    watch_from = (await store.create("/registry/marker", b"")).mod_revision  # 0 would mean "from now"
    await asyncio.gather(*(creator(w) for w in range(clients)))
    elapsed, used = time.perf_counter() - wall, time.process_time() - cpu
    lat.sort()
    t = time.perf_counter()
    listed = await store.list("/registry/pods/")
    list_s = time.perf_counter() - t
    t = time.perf_counter()
    got = 0
    async for _ev in store.watch("/registry/pods/", watch_from):
        got += 1
        if got == len(listed.items):
            break
    watch_s = time.perf_counter() - t
    print(f"{label:8s} creates x{clients}: {n / elapsed:7,.0f}/s, p50 {lat[len(lat) // 2] * 1e3:5.1f} ms, "
          f"p99 {lat[int(len(lat) * .99)] * 1e3:6.1f} ms, {used / n * 1e6:4.0f} µs CPU/create in this process; "
          f"list {len(listed.items)} in {list_s * 1e3:.0f} ms; watch replay {got / watch_s:,.0f} events/s")


async def _main() -> None:
    p = argparse.ArgumentParser(description="store-level benchmark: the Store protocol alone, per backend")
    p.add_argument("--creates", type=int, default=5000)
    p.add_argument("--clients", type=int, default=20)
    args = p.parse_args()
    for kind in CHOICES:
        with tempfile.TemporaryDirectory() as tmp, server_args(kind, Path(tmp)) as extra:
            spec = StoreSpec(extra[1]) if extra else StoreSpec()
            store = await spec.open(Path(tmp))
            try:
                await _bench(kind, store, args.creates, args.clients)
            finally:
                await store.close()


if __name__ == "__main__":
    asyncio.run(_main())
