"""Steady-state churn: a cluster's objects updated over and over, the heap no longer growing.

Starts a real `kubelite server` (SQLite store, scheduler disabled), creates `--pods` pods, then for
`--seconds` has `--clients` clients merge-patch an annotation of pods taken in turn (each write replaces the
cached copy of a pod and is sent to `--watchers` watches), and prints updates/s, the server's CPU per update
and its RSS at the start and end of the churn. Run under `benchmarks/gc_share.py` to see the collector in a
process whose heap has stopped growing: its full collections then come from the 25 % rule alone.

    python benchmarks/churn.py [--pods 5000] [--seconds 120] [--clients 20] [--watchers 10]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.apiserver import create_pods, pct
from benchmarks.scheduler import cpu_seconds
from tests.conftest import start_server

MERGE = {"Content-Type": "application/merge-patch+json"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def watch(session: aiohttp.ClientSession) -> None:
    async with session.get("/api/v1/namespaces/default/pods?watch=true",
                           timeout=aiohttp.ClientTimeout(total=None)) as resp:
        async for _ in resp.content.iter_any():
            pass


async def churn(session: aiohttp.ClientSession, pods: int, seconds: float, clients: int, pid: int) -> str:
    names = itertools.cycle(range(pods))
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        for i in names:
            if time.perf_counter() > deadline:
                return
            body = orjson.dumps({"metadata": {"annotations": {"churn": str(time.perf_counter())}}})
            start = time.perf_counter()
            async with session.patch(f"/api/v1/namespaces/default/pods/p-{i}", data=body, headers=MERGE) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"patch failed: {resp.status}")
            latencies.append(time.perf_counter() - start)

    rss, cpu, start = rss_mib(pid), cpu_seconds(pid), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu
    return (f"churn: {pods} pods, {len(latencies):,} updates in {elapsed:.0f} s ({len(latencies) / elapsed:,.0f}/s), "
            f"p50 {pct(latencies, 0.5) * 1000:.1f} ms, p99 {pct(latencies, 0.99) * 1000:.1f} ms; "
            f"server CPU {cpu / len(latencies) * 1000:.2f} ms per update; RSS {rss:.0f} -> {rss_mib(pid):.0f} MiB")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--watchers", type=int, default=10)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "data", Path(tmp) / "home", insecure=True, extra=["--disable", "scheduler"])
        try:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{server.port}",
                                             connector=aiohttp.TCPConnector(limit=args.clients + args.watchers),
                                             headers={"Content-Type": "application/json"}) as session:
                await create_pods(session, "p", args.pods, args.clients)
                watchers = [asyncio.create_task(watch(session)) for _ in range(args.watchers)]
                print(await churn(session, args.pods, args.seconds, args.clients, server.proc.pid), flush=True)
                for task in watchers:
                    task.cancel()
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
