"""The service proxy on this host's real nftables, against a real API server (in-process, SQLite).

Traffic is real: a TCP server stands in for a pod, connections go to the ClusterIP. Skipped where
nft cannot be used (not installed, or no CAP_NET_ADMIN)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.proxy import nft
from kubelite.agent.proxy.proxier import Proxier
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore


def _nft_usable() -> bool:
    if not nft.available():
        return False
    probe = f"{nft.PREFIX}probe"
    result = subprocess.run(["nft", "add", "table", "ip", probe], capture_output=True)
    subprocess.run(["nft", "delete", "table", "ip", probe], capture_output=True)
    return result.returncode == 0


pytestmark = pytest.mark.skipif(not _nft_usable(), reason="nft not installed or not permitted (CAP_NET_ADMIN)")
Obj = dict[str, Any]


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def answer(ip: str, port: int) -> str:
    """What the server behind ip:port says: "refused" when the connection is refused (the proxy's reject
    rule), "no answer" otherwise (this host's network may accept connections to any address, then reset)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), 2)
    except ConnectionRefusedError:
        return "refused"
    except (TimeoutError, OSError):
        return "no answer"
    try:
        data = await asyncio.wait_for(reader.read(100), 2)
    except (TimeoutError, OSError):
        return "no answer"
    finally:
        writer.close()
    return data.decode() or "no answer"


@contextlib.asynccontextmanager
async def backend(name: str) -> AsyncIterator[int]:
    async def hello(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(name.encode())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(hello, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


def endpoint_slice(port: int, ready: bool) -> Obj:
    return {"metadata": {"name": "web-abc", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": ready}}]}


async def test_cluster_ip_follows_endpoint_readiness_and_rules_go_away(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    client = InProcessClient(server)
    ip = f"10.{random.randint(100, 110)}.{random.randint(1, 250)}.{random.randint(2, 250)}"
    proxier = Proxier(client, RealClock(), table=nft.table_name("test"))
    task = asyncio.create_task(proxier.run())
    try:
        async with backend("pod-a") as port:
            await client.create("/api/v1/namespaces/default/services", {
                "metadata": {"name": "web"},
                "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80, "targetPort": port}]}})
            slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"

            async def refused() -> bool:
                return await answer(ip, 80) == "refused"
            await eventually(refused, "a Service without endpoints refuses connections")

            created = await client.create(slices, endpoint_slice(port, ready=True))

            async def reached() -> bool:
                return await answer(ip, 80) == "pod-a"
            await eventually(reached, "the ready endpoint reached through the ClusterIP")

            await client.request("PUT", f"{slices}/web-abc",
                                 {**endpoint_slice(port, ready=False), "metadata": created["metadata"]})
            await eventually(refused, "no traffic to an endpoint once it is not ready")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await proxier.cleanup()
        await server.stop()
        await store.close()
    assert proxier.table not in await nft.tables()
    assert await answer(ip, 80) != "pod-a"


async def test_orphaned_tables_of_dead_proxies_are_removed_at_start(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = f"{nft.PREFIX}{dead.pid}"
    await nft.apply(f"table ip {orphan} {{\n}}\n")
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    proxier = Proxier(InProcessClient(server), RealClock(), table=nft.table_name("test2"))
    task = asyncio.create_task(proxier.run())
    try:
        async def synced() -> bool:
            return proxier.syncs > 0
        await eventually(synced, "the first sync")
        assert orphan not in await nft.tables()
        assert proxier.table in await nft.tables()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await proxier.cleanup()
        await server.stop()
        await store.close()
    assert proxier.table not in await nft.tables()
