"""What delivering a watch event or a bookmark to an in-process informer costs, per informer.

    python benchmarks/watch_delivery.py [--informers 200] [--n 300] [--rounds 5]

`--informers` real `Informer`s of Leases through `InProcessClient` against a real ApiServer on the simulator's
store (`MemoryStore`), with a simulation's garbage collector settings. Two figures, CPU µs per informer, the
best of `--rounds` rounds of `--n`:
- an event: a Lease's MODIFIED event offered to every watch as the watch cache offers it after a write
  (`Watcher.offer`; the write itself is not measured), read by every informer;
- a bookmark: every watch's bookmark marked due and woken, as its ticker does (`watch.Ticker._fire`), read by
  every informer.
Each minus the same loop turns with nothing to deliver; every informer's update handler counts the events it is
given, and the run checks that each informer was given each event and took each bookmark. A simulation's agents
have two watches each, most of which get a bookmark a minute and nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

# Appended, not inserted first: kubelite itself comes from PYTHONPATH when set (an A/B against another tree's code)
sys.path.append(str(Path(__file__).resolve().parent.parent))
from benchmarks.inprocess import LEASES, NS, lease
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.cache import CachedEvent
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.client.informer import Handlers, Informer
from kubelite.clock import RealClock
from kubelite.sim.runner import GC_THRESHOLDS
from kubelite.store.memory import MemoryStore

TURNS = 3  # loop turns per delivery: the watch cache's, then the informers' (one is enough; the rest is margin)


async def _turns() -> None:
    for _ in range(TURNS):
        await asyncio.sleep(0)


async def main(informers: int, n: int, rounds: int) -> None:
    store = MemoryStore()
    server = ApiServer(store, RealClock())
    await server.start()
    client = InProcessClient(server)
    for i in range(10):
        await client.create(LEASES, lease(f"lease-{i}"))
    updates = [0]  # events every informer's handler was given

    def updated(old: object, new: object) -> None:
        updates[0] += 1

    running = [Informer(client, LEASES, RealClock(), Handlers(on_update=updated)) for _ in range(informers)]
    tasks = [asyncio.create_task(inf.run()) for inf in running]
    try:
        for inf in running:
            await inf.synced.wait()
        await asyncio.sleep(0.05)  # every informer watching
        gc.collect()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        cache = next(c for r, c in server.caches.by_resource.items() if r.plural == "leases")
        watchers = list(cache.watchers)
        leased = cache.get(NS, "lease-0")
        assert leased is not None
        assert len(watchers) == informers
        event = bookmark = idle = float("inf")
        for _ in range(rounds):
            started = time.process_time()
            for _ in range(n):
                ev = CachedEvent("MODIFIED", leased, leased, server.caches.revision, cache.resource)
                for w in watchers:
                    w.offer(ev)
                await _turns()
            event = min(event, time.process_time() - started)
            started = time.process_time()
            for _ in range(n):
                for w in watchers:
                    w.bookmark_due = True
                    w.wake()
                await _turns()
            bookmark = min(bookmark, time.process_time() - started)
            assert not any(w.bookmark_due for w in watchers), "every informer took its bookmark"
            started = time.process_time()
            for _ in range(n):
                await _turns()
            idle = min(idle, time.process_time() - started)
        assert updates[0] == rounds * n * informers, "every informer's handler was given every event"
        per = 1e6 / n / informers
        print(f"watch event, per informer    {(event - idle) * per:6.2f} µs")
        print(f"bookmark, per informer       {(bookmark - idle) * per:6.2f} µs")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.stop()
        await store.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--informers", type=int, default=200)
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    asyncio.run(main(args.informers, args.n, args.rounds))
