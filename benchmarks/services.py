"""Services: ClusterIP data path (throughput, added latency) and endpoint update latency.

    python -m benchmarks.services [--seconds 3] [--mib 512] [--flips 200]

Data path. A TCP backend (its own process, uvloop) answers 64-byte requests and swallows bulk
uploads. The same client (this process, blocking sockets) reaches it three ways:
- direct: 127.0.0.1:PORT;
- ClusterIP: a ClusterIP:80 that the proxy's nftables rules (rules.render, the same ruleset the
  agent applies) DNAT to the backend — the mechanism kubelite uses;
- userspace: an asyncio relay process (uvloop) in front of the backend — the alternative design,
  measured to justify the choice.
For each: new-connection round trips (connect, 64-byte request, reply, close: p50/p99 µs),
round trips on one kept-alive connection, and bulk upload throughput (MiB/s).

Endpoint update latency. An in-process API server (SQLite), the EndpointSlice controller and the
proxier (real nftables when usable, else a recorder) on the real clock; each round flips one of 20
pods' Ready condition through pods/status and measures until (a) the controller's EndpointSlice
shows it and (b) the proxier has applied rules that include/exclude the pod (p50/p99/max).
Needs root (CAP_NET_ADMIN) and nft for the data path; without them that part is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kubelite.agent.proxy import nft, rules
from kubelite.agent.proxy.proxier import Proxier
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from kubelite.controllers.endpointslice import EndpointSliceController
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import free_port

Obj = dict[str, Any]
REQUEST = b"x" * 64
CHUNK = 1 << 20


# --- the backend and the userspace relay (child processes) ------------------------------------------

async def _backend(port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await reader.read(65536)
        if first.startswith(b"BULK"):  # swallow the upload, then say how much arrived
            total = len(first) - 4
            while chunk := await reader.read(1 << 18):
                total += len(chunk)
            writer.write(str(total).encode())
        else:
            data = first
            while data:
                writer.write(data)
                data = await reader.read(65536)
        with contextlib.suppress(OSError):
            await writer.drain()
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    await server.serve_forever()


async def _relay(port: int, target: int) -> None:
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(1 << 18):
                writer.write(data)
                await writer.drain()
            writer.write_eof()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    await server.serve_forever()


@contextlib.contextmanager
def child(*args: str) -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.services", *args])
    try:
        yield
    finally:
        proc.terminate()
        proc.wait()


def _wait_listening(port: int) -> None:
    for _ in range(200):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


# --- the client ------------------------------------------------------------------------------------

def new_connection_rtts(ip: str, port: int, seconds: float) -> list[float]:
    out = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        with socket.create_connection((ip, port)) as s:
            s.sendall(REQUEST)
            got = 0
            while got < len(REQUEST):
                got += len(s.recv(4096))
        out.append(time.perf_counter() - t)
    return out


def kept_alive_rtts(ip: str, port: int, seconds: float) -> list[float]:
    out = []
    with socket.create_connection((ip, port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            s.sendall(REQUEST)
            got = 0
            while got < len(REQUEST):
                got += len(s.recv(4096))
            out.append(time.perf_counter() - t)
    return out


def upload_mib_s(ip: str, port: int, mib: int) -> float:
    block = b"\0" * CHUNK
    with socket.create_connection((ip, port)) as s:
        t = time.perf_counter()
        s.sendall(b"BULK")
        for _ in range(mib):
            s.sendall(block)
        s.shutdown(socket.SHUT_WR)
        total = int(s.recv(64))
        took = time.perf_counter() - t
    assert total == mib * CHUNK, total
    return mib / took


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def data_path(seconds: float, mib: int) -> None:
    backend_port, relay_port = free_port(), free_port()
    cluster_ip = f"10.{random.randint(100, 111)}.{random.randint(0, 255)}.{random.randint(2, 254)}"
    table = nft.table_name("bench")
    ports = [rules.ServicePort("default", "bench", "", "tcp", cluster_ip, 80, 0,
                               (rules.Backend("127.0.0.1", backend_port),))]
    with child("--role", "backend", "--port", str(backend_port)), \
            child("--role", "relay", "--port", str(relay_port), "--target", str(backend_port)):
        _wait_listening(backend_port)
        _wait_listening(relay_port)
        asyncio.run(nft.apply(rules.render(table, ports)))
        try:
            print("\n| path | new connection p50 / p99 (µs) | kept-alive round trip p50 / p99 (µs) | upload MiB/s |")
            print("|---|---|---|---|")
            for name, (ip, port) in {"direct 127.0.0.1": ("127.0.0.1", backend_port),
                                     "ClusterIP (nftables DNAT)": (cluster_ip, 80),
                                     "userspace relay (asyncio, uvloop)": ("127.0.0.1", relay_port)}.items():
                fresh = new_connection_rtts(ip, port, seconds)
                kept = kept_alive_rtts(ip, port, seconds)
                rate = upload_mib_s(ip, port, mib)
                print(f"| {name} | {pct(fresh, 0.5) * 1e6:.0f} / {pct(fresh, 0.99) * 1e6:.0f} "
                      f"({len(fresh)} conns) | {pct(kept, 0.5) * 1e6:.0f} / {pct(kept, 0.99) * 1e6:.0f} | "
                      f"{rate:,.0f} |", flush=True)
        finally:
            asyncio.run(nft.delete_table(table))


# --- endpoint update latency -----------------------------------------------------------------------

class RecordingHost(nft.Nft):
    """Real nftables when usable; otherwise only records (the latency up to the apply call)."""

    def __init__(self, real: bool) -> None:
        self.real = real

    async def apply(self, script: str) -> None:
        if self.real:
            await super().apply(script)

    async def delete_table(self, name: str) -> None:
        if self.real:
            await super().delete_table(name)

    async def delete_orphans(self) -> list[str]:
        return await super().delete_orphans() if self.real else []


async def _until(check: Callable[[], bool], timeout: float = 10.0) -> float:
    end = time.perf_counter() + timeout
    while not check():
        if time.perf_counter() > end:
            raise TimeoutError
        await asyncio.sleep(0.0005)
    return time.perf_counter()


async def update_latency(flips: int, real_nft: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await SQLiteStore.open(Path(tmp) / "state.db")
        server = ApiServer(store, RealClock())
        await server.start()
        client = InProcessClient(server)
        controller = EndpointSliceController(client, RealClock())
        proxier = Proxier(client, RealClock(), table=nft.table_name("bench2"), host=RecordingHost(real_nft))
        tasks = [asyncio.create_task(controller.run()), asyncio.create_task(proxier.run())]
        try:
            await client.create("/api/v1/namespaces/default/services", {
                "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
            pods = []
            for i in range(20):
                pods.append(await client.create("/api/v1/namespaces/default/pods", {
                    "metadata": {"name": f"p{i}", "labels": {"app": "web"}},
                    "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "x"}]}}))
            ready = dict.fromkeys(range(20), False)
            to_slice, to_rules = [], []
            for n in range(flips):
                i = n % 20
                ready[i] = not ready[i]
                path = f"/api/v1/namespaces/default/pods/p{i}/status"
                pod = await client.get(path)
                pod["status"] = {"phase": "Running", "podIP": f"127.0.{i}.1",
                                 "conditions": [{"type": "Ready", "status": "True" if ready[i] else "False"}]}
                t0 = time.perf_counter()
                await client.request("PUT", path, pod)

                def sliced(i: int = i) -> bool:
                    return any(ep["targetRef"]["name"] == f"p{i}" and ep["conditions"]["ready"] == ready[i]
                               for es in controller.slices.store.values() for ep in es.get("endpoints") or [])

                def ruled(i: int = i) -> bool:
                    return (f"127.0.{i}.1 . 80" in proxier.applied) == ready[i]

                to_slice.append(await _until(sliced) - t0)
                to_rules.append(await _until(ruled) - t0)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await proxier.cleanup()
            await server.stop()
            await store.close()
    print(f"\nEndpoint update latency over {flips} readiness flips (20 pods; rules "
          f"{'applied with nft' if real_nft else 'rendered, nft not used'}):")
    print("| readiness written → | p50 | p99 | max |")
    print("|---|---|---|---|")
    for name, values in (("EndpointSlice updated", to_slice), ("proxy rules applied", to_rules)):
        print(f"| {name} | {statistics.median(values) * 1e3:.1f} ms | {pct(values, 0.99) * 1e3:.1f} ms | "
              f"{max(values) * 1e3:.1f} ms |")


def _nft_usable() -> bool:
    if not nft.available():
        return False
    return subprocess.run(["nft", "list", "tables"], capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0, help="per latency measurement and path")
    parser.add_argument("--mib", type=int, default=512, help="upload size per path")
    parser.add_argument("--flips", type=int, default=200)
    parser.add_argument("--role", choices=["backend", "relay"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--target", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role is not None:
        import uvloop

        uvloop.run(_backend(args.port) if args.role == "backend" else _relay(args.port, args.target))
        return
    usable = _nft_usable()
    if usable:
        data_path(args.seconds, args.mib)
    else:
        print("nft not usable here (not installed or no CAP_NET_ADMIN): data path skipped")
    asyncio.run(update_latency(args.flips, usable))


if __name__ == "__main__":
    main()
