"""A real API server on SQLite whose clock is the test's FakeClock, for the node controllers' tests.

Sharing the clock makes creationTimestamps, heartbeats and the controllers' grace periods one
timeline, as upstream's tests share `fakeNow`. Controllers' informers are refreshed by
`sync()` (a relist, as upstream's tests replace the informer stores) so a test steps the
controller pass by pass instead of racing its loops.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.client.informer import Informer
from kubelite.clock import FakeClock, rfc3339
from kubelite.store.sqlite import SQLiteStore

Obj = dict[str, Any]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@dataclass
class Cluster:
    client: InProcessClient
    clock: FakeClock

    async def node(self, name: str, ready: str | None = "True", labels: dict[str, str] | None = None,
                   taints: list[Obj] | None = None) -> Obj:
        """A node as its agent registers it: Ready `ready` with a heartbeat now (None: no status posted)."""
        node: Obj = {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}
        if ready is not None:
            stamp = rfc3339(self.clock.now())
            node["status"] = {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady",
                                              "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}
        return await self.client.create("/api/v1/nodes", node)

    async def post_status(self, name: str, ready: str) -> Obj:
        """The agent posting its Ready condition with a fresh heartbeat."""
        node = await self.client.get(f"/api/v1/nodes/{name}")
        stamp = rfc3339(self.clock.now())
        old = next((c for c in node.get("status", {}).get("conditions", []) if c["type"] == "Ready"), {})
        since = old.get("lastTransitionTime", stamp) if old.get("status") == ready else stamp
        node.setdefault("status", {})["conditions"] = [
            {"type": "Ready", "status": ready, "reason": "KubeletReady", "lastHeartbeatTime": stamp,
             "lastTransitionTime": since}]
        return await self.client.request("PUT", f"/api/v1/nodes/{name}/status", node)

    async def renew_lease(self, name: str) -> None:
        stamp = rfc3339(self.clock.now()).replace("Z", ".000000Z")
        spec = {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": stamp}
        try:
            await self.client.patch(f"{LEASES}/{name}", {"spec": spec})
        except Exception:
            await self.client.create(LEASES, {"metadata": {"name": name}, "spec": spec})

    async def get(self, path: str) -> Obj:
        return await self.client.get(path)

    async def events(self, reason: str) -> list[Obj]:
        items: list[Obj] = (await self.client.get("/api/v1/events"))["items"]
        return [e for e in items if e["reason"] == reason]


async def settle(clock: FakeClock, seconds: float = 0.0, rounds: int = 20) -> None:
    """Advance fake time by `seconds`, then let the controllers' API round trips (real SQLite I/O) finish."""
    await clock.advance(seconds)
    for _ in range(rounds):
        await asyncio.sleep(0.005)
        await clock.advance(0)


async def sync(*informers: Informer) -> None:
    for informer in informers:
        await informer.relist()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    clock = FakeClock()
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, clock)
    await server.start()
    yield Cluster(InProcessClient(server), clock)
    await server.stop()
    await store.close()
