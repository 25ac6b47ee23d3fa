"""The proxier's sync loop on a fake clock, with a recording stand-in for nftables: it applies only changes, and
a failing apply is retried with back-off instead of ending the loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from kubelite.agent.proxy import nft
from kubelite.agent.proxy.proxier import Proxier
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock, RealClock
from kubelite.store.sqlite import SQLiteStore


class FlakyNft(nft.Nft):
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.applied: list[str] = []
        self.deleted: list[str] = []

    async def apply(self, script: str) -> None:
        if self.failures:
            self.failures -= 1
            raise nft.NftError("Error: Could not process rule: Operation not permitted")
        self.applied.append(script)

    async def delete_table(self, name: str) -> None:
        self.deleted.append(name)

    async def delete_orphans(self) -> list[str]:
        return []


@contextlib.asynccontextmanager
async def proxier(tmp_path: Path, host: FlakyNft, clock: FakeClock) -> AsyncIterator[tuple[Proxier, InProcessClient]]:
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    client = InProcessClient(server)
    p = Proxier(client, clock, table="t", host=host)
    task = asyncio.create_task(p.run())
    try:
        yield p, client
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await p.cleanup()
        await server.stop()
        await store.close()


async def settle(clock: FakeClock, seconds: float = 0.0) -> None:
    for _ in range(30):
        await asyncio.sleep(0.005)
        await clock.advance(seconds / 30)


async def test_failed_applies_are_retried_with_back_off(tmp_path: Path) -> None:
    clock, host = FakeClock(), FlakyNft(failures=2)
    async with proxier(tmp_path, host, clock) as (p, _):
        await settle(clock)
        assert host.applied == [] and p.syncs == 0  # failed once, waiting 1 s
        await settle(clock, 1.2)
        assert host.applied == []  # failed again, waiting 2 s
        await settle(clock, 2.5)
        assert len(host.applied) == 1 and p.syncs == 1
        assert "10.96.0.1 . tcp . 443" in host.applied[0]  # the kubernetes Service
    assert host.deleted == ["t"]  # a clean stop removes the table


async def test_only_changes_are_applied(tmp_path: Path) -> None:
    clock, host = FakeClock(), FlakyNft(failures=0)
    async with proxier(tmp_path, host, clock) as (p, client):
        await settle(clock)
        assert p.syncs == 1
        await client.create("/api/v1/namespaces/default/services", {
            "metadata": {"name": "web"}, "spec": {"clusterIP": "10.96.0.50", "ports": [{"port": 80}]}})
        await settle(clock)
        assert p.syncs == 2 and "10.96.0.50 . tcp . 80 : goto reject-chain" in host.applied[-1]
        await client.patch("/api/v1/namespaces/default/services/web", {"metadata": {"labels": {"x": "y"}}},
                           "application/merge-patch+json")  # a change the rules do not depend on
        await settle(clock)
        assert p.syncs == 2
