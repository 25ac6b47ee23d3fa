"""Which etcd client for the store: the three candidates on the same etcd, same operations.

Run: `python -m benchmarks.etcd_clients` (starts its own single-member etcd on loopback).
Measures sequential put/get/txn latency (p50/p99), put throughput at 20 concurrent callers and
watch throughput (events/s delivered to one prefix watch while one writer puts). Candidates:
`aetcd` (asyncio over grpcio), grpcio's asyncio stubs directly (aetcd's generated ones), and
etcd's JSON grpc-gateway over aiohttp (what kubelite already depends on).
"""

from __future__ import annotations

import asyncio
import base64
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import orjson

from tests.etcd_cluster import EtcdCluster

N = 2000
CONC = 20


def b64(s: bytes) -> str:
    return base64.b64encode(s).decode()


async def timed(label: str, op: Callable[[int], Awaitable[object]]) -> None:
    lat = []
    for i in range(N):
        t = time.perf_counter()
        await op(i)
        lat.append(time.perf_counter() - t)
    lat.sort()
    print(f"  {label:6s} p50 {statistics.median(lat) * 1e3:6.2f} ms  p99 {lat[int(N * .99)] * 1e3:6.2f} ms")


async def concurrent(op: Callable[[int], Awaitable[object]]) -> None:
    t = time.perf_counter()
    async def worker(w: int) -> None:
        for i in range(N // CONC):
            await op(w * 100000 + i)
    await asyncio.gather(*(worker(w) for w in range(CONC)))
    print(f"  put x{CONC} {N / (time.perf_counter() - t):8.0f} ops/s")


VALUE = b"x" * 1000


async def gateway(url: str) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as s:
        async def call(path: str, body: dict[str, object]) -> dict[str, object]:
            async with s.post(url + path, data=orjson.dumps(body)) as r:
                out: dict[str, object] = orjson.loads(await r.read())
                return out
        await timed("put", lambda i: call("/v3/kv/put", {"key": b64(f"/g/{i}".encode()), "value": b64(VALUE)}))
        await timed("get", lambda i: call("/v3/kv/range", {"key": b64(f"/g/{i}".encode())}))
        await timed("txn", lambda i: call("/v3/kv/txn", {
            "compare": [{"key": b64(f"/gt/{i}".encode()), "target": "CREATE", "result": "EQUAL", "create_revision": 0}],
            "success": [{"request_put": {"key": b64(f"/gt/{i}".encode()), "value": b64(VALUE)}}]}))
        await concurrent(lambda i: call("/v3/kv/put", {"key": b64(f"/gc/{i}".encode()), "value": b64(VALUE)}))
        got = 0
        async def watch() -> None:
            nonlocal got
            body = {"create_request": {"key": b64(b"/gw/"), "range_end": b64(b"/gw0")}}
            async with s.post(url + "/v3/watch", data=orjson.dumps(body), timeout=aiohttp.ClientTimeout()) as r:
                buf = b""
                async for chunk in r.content.iter_any():
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        got += len(orjson.loads(line)["result"].get("events", []))
                        if got >= N:
                            return
        await watch_rate(watch, lambda i: call("/v3/kv/put", {"key": b64(f"/gw/{i}".encode()), "value": b64(VALUE)}),
                         lambda: got)


async def watch_rate(watch: Callable[[], Awaitable[None]], put: Callable[[int], Awaitable[object]],
                     count: Callable[[], int]) -> None:
    task = asyncio.create_task(watch())
    await asyncio.sleep(0.2)
    t = time.perf_counter()
    await asyncio.gather(*(put(i) for i in range(N)))
    await task
    print(f"  watch  {count() / (time.perf_counter() - t):8.0f} events/s (puts from {N} concurrent callers)")


async def with_aetcd(port: int) -> None:
    import aetcd  # type: ignore[import-not-found]
    async with aetcd.Client("127.0.0.1", port) as c:
        await timed("put", lambda i: c.put(f"/a/{i}".encode(), VALUE))
        await timed("get", lambda i: c.get(f"/a/{i}".encode()))
        async def txn(i: int) -> object:
            k = f"/at/{i}".encode()
            return await c.transaction(compare=[c.transactions.create(k) == 0],
                                       success=[c.transactions.put(k, VALUE)], failure=[])
        await timed("txn", txn)
        await concurrent(lambda i: c.put(f"/ac/{i}".encode(), VALUE))
        got = 0
        async def watch() -> None:
            nonlocal got
            it = await c.watch_prefix(b"/aw/")
            async for _ev in it:
                got += 1
                if got >= N:
                    await it.cancel()
                    return
        await watch_rate(watch, lambda i: c.put(f"/aw/{i}".encode(), VALUE), lambda: got)


async def with_grpc(port: int) -> None:
    import grpc  # type: ignore[import-not-found]
    from aetcd.rpc import rpc_pb2, rpc_pb2_grpc  # type: ignore[import-not-found]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        kv = rpc_pb2_grpc.KVStub(ch)
        await timed("put", lambda i: kv.Put(rpc_pb2.PutRequest(key=f"/r/{i}".encode(), value=VALUE)))
        await timed("get", lambda i: kv.Range(rpc_pb2.RangeRequest(key=f"/r/{i}".encode())))
        def txn(i: int) -> Awaitable[object]:
            k = f"/rt/{i}".encode()
            return kv.Txn(rpc_pb2.TxnRequest(
                compare=[rpc_pb2.Compare(key=k, target=rpc_pb2.Compare.CREATE, result=rpc_pb2.Compare.EQUAL,
                                         create_revision=0)],
                success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=k, value=VALUE))]))
        await timed("txn", txn)
        await concurrent(lambda i: kv.Put(rpc_pb2.PutRequest(key=f"/rc/{i}".encode(), value=VALUE)))


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = EtcdCluster(Path(tmp), 1)
        cluster.start()
        try:
            port = cluster.client_ports[0]
            for name, run in (("json gateway over aiohttp", lambda: gateway(f"http://127.0.0.1:{port}")),
                              ("aetcd 1.0.0 (grpcio aio)", lambda: with_aetcd(port)),
                              ("grpcio aio stubs directly", lambda: with_grpc(port))):
                print(name)
                await run()
        finally:
            cluster.stop()


if __name__ == "__main__":
    asyncio.run(main())
