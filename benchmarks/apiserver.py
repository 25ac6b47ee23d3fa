"""API server benchmark: pod-create throughput and latency, and watch fan-out.

Starts a real `kubelite server` (SQLite store, synchronous=FULL) in its own process and
drives it over HTTP from this process, so server and client each get a core.

    python -m benchmarks.apiserver [--pods 5000] [--clients 20] [--watchers 100] [--tls] [--custom 5000]

`--custom N` also creates N custom resources of a CRD (schema-validated, pruned and defaulted) the same way.

Prints figures only; it never passes or fails on time (see BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import store as store_option
from tests.conftest import start_server

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "", "namespace": "default", "labels": {"app": "bench"}},
       "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


def _session(base: str, token: str | None, ca: Path | None, limit: int) -> aiohttp.ClientSession:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else None
    return aiohttp.ClientSession(base, headers=headers, connector=aiohttp.TCPConnector(limit=limit, ssl=ctx or False))


async def create_objects(session: aiohttp.ClientSession, path: str, template: dict[str, Any], prefix: str,
                         count: int, clients: int) -> list[float]:
    """POST `count` copies of `template` named prefix-N over `clients` connections; each create's latency."""
    latencies: list[float] = []
    counter = iter(range(count))

    async def worker() -> None:
        for i in counter:
            body = dict(template, metadata={**template["metadata"], "name": f"{prefix}-{i}"})
            start = time.perf_counter()
            async with session.post(path, data=orjson.dumps(body)) as resp:
                await resp.read()
                if resp.status != 201:
                    raise RuntimeError(f"create failed: {resp.status}")
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(worker() for _ in range(clients)))
    return latencies


async def create_pods(session: aiohttp.ClientSession, prefix: str, count: int, clients: int) -> list[float]:
    return await create_objects(session, "/api/v1/namespaces/default/pods", POD, prefix, count, clients)


CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "benches.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "benches", "kind": "Bench"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "properties": {
                        "image": {"type": "string", "pattern": "^[a-z0-9./:-]+$"},
                        "replicas": {"type": "integer", "minimum": 0, "default": 1},
                        "resources": {"type": "object", "additionalProperties": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}}]}}
BENCH = {"apiVersion": "example.com/v1", "kind": "Bench", "metadata": {"name": "", "labels": {"app": "bench"}},
         "spec": {"image": "registry.k8s.io/pause:3.10", "resources": {"cpu": "100m", "memory": "500Mi"},
                  "labels": {"tier": "web"}}}


async def create_custom(session: aiohttp.ClientSession, prefix: str, count: int, clients: int) -> list[float]:
    return await create_objects(session, "/apis/example.com/v1/namespaces/default/benches", BENCH, prefix, count,
                                clients)


async def bench_custom_creates(session: aiohttp.ClientSession, count: int, clients: int, server_pid: int) -> None:
    async with session.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", data=orjson.dumps(CRD)):
        pass
    for _ in range(100):  # until the CRD is Established and its resource served
        async with session.get("/apis/example.com/v1/namespaces/default/benches") as resp:
            if resp.status == 200:
                break
        await asyncio.sleep(0.05)
    await timed_creates(f"custom resource creates: {count}",
                        lambda prefix, n: create_custom(session, prefix, n, clients), count, clients, server_pid)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process: its CPU cost, which a busy shared machine disturbs far less than wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def timed_creates(what: str, create: Callable[[str, int], Awaitable[list[float]]], count: int, clients: int,
                        server_pid: int) -> None:
    """Warm up, then `count` creates: their rate, latency and the server's CPU per create, printed after `what`."""
    await create("warm", min(500, count))
    start, cpu = time.perf_counter(), cpu_seconds(server_pid)
    lat = await create("c", count)
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(server_pid) - cpu
    print(f"{what}, {clients} concurrent clients: {count / elapsed:,.0f} creates/s, "
          f"p50 {pct(lat, 0.50) * 1000:.1f} ms, p99 {pct(lat, 0.99) * 1000:.1f} ms, "
          f"mean {statistics.mean(lat) * 1000:.1f} ms; server CPU {cpu / count * 1000:.3f} ms per create")


async def bench_creates(session: aiohttp.ClientSession, pods: int, clients: int, server_pid: int) -> None:
    await timed_creates(f"pod creates: {pods} pods", lambda prefix, n: create_pods(session, prefix, n, clients), pods,
                        clients, server_pid)


async def bench_watch(session: aiohttp.ClientSession, watchers: int, events: int, clients: int) -> None:
    rv = (await (await session.get("/api/v1/namespaces/default/pods?limit=1")).json())["metadata"]["resourceVersion"]
    counts = [0] * watchers
    done = asyncio.Event()
    last_seen: list[float] = [0.0] * watchers

    async def watcher(i: int) -> None:
        async with session.get(f"/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}",
                               timeout=aiohttp.ClientTimeout(total=None)) as resp:
            async for chunk in resp.content.iter_any():
                counts[i] += chunk.count(b"\n")
                if counts[i] >= events:
                    last_seen[i] = time.perf_counter()
                    if all(c >= events for c in counts):
                        done.set()
                    return

    tasks = [asyncio.create_task(watcher(i)) for i in range(watchers)]
    await asyncio.sleep(1.0)
    start = time.perf_counter()
    await create_pods(session, "w", events, clients)
    write_done = time.perf_counter()
    await asyncio.wait_for(done.wait(), 300)
    elapsed = max(last_seen) - start
    for t in tasks:
        t.cancel()
    print(f"watch fan-out: {watchers} watchers x {events} events: writes {events / (write_done - start):,.0f}/s, "
          f"each watcher received {events / elapsed:,.0f} events/s "
          f"({watchers * events / elapsed:,.0f} events/s delivered in total)")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--watchers", type=int, default=100)
    p.add_argument("--watch-events", type=int, default=5000)
    p.add_argument("--tls", action="store_true", help="HTTPS with a bearer token instead of --insecure")
    p.add_argument("--custom", type=int, default=0, help="custom resources to create too (0: none)")
    store_option.add_argument(p)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, store_option.server_args(args.store, Path(tmp)) as extra:
        server = start_server(Path(tmp) / "data", Path(tmp) / "home", insecure=not args.tls, extra=extra)
        try:
            token = ca = None
            scheme = "http"
            if args.tls:
                cfg = yaml.safe_load(server.kubeconfig.read_text())
                token, ca, scheme = cfg["users"][0]["user"]["token"], Path(tmp) / "data/pki/ca.crt", "https"
            base = f"{scheme}://127.0.0.1:{server.port}"
            async with _session(base, token, ca, args.clients) as session:
                await bench_creates(session, args.pods, args.clients, server.proc.pid)
                if args.custom:
                    await bench_custom_creates(session, args.custom, args.clients, server.proc.pid)
            async with _session(base, token, ca, args.watchers + args.clients) as session:
                await bench_watch(session, args.watchers, args.watch_events, args.clients)
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
