"""The resource quota controller on a fake clock, against a real API server through the in-process client:
the periodic full resync (upstream's 5 minutes) corrects a status nobody else touches, and releases the
compute of a pod whose deletion grace period ran out, which no event announces."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock, RealClock
from kubelite.controllers.resourcequota import RESYNC_PERIOD, ResourceQuotaController
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod
from tests.conftest import running

NS = "/api/v1/namespaces/default"
QUOTA = f"{NS}/resourcequotas/q"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[InProcessClient]:
    async with running(await SQLiteStore.open(tmp_path / "state.db"), clock=RealClock()) as server:
        yield InProcessClient(server)


async def until(clock: FakeClock, client: InProcessClient, check: Callable[[dict[str, Any]], bool],
                step: float = 0.005) -> dict[str, Any]:
    """Advance the controller's clock by `step` at a time until the quota passes `check`."""
    for _ in range(400):
        await clock.advance(step)
        await asyncio.sleep(0.002)  # lets the in-process watch deliver (real server time)
        rq = await client.get(QUOTA)
        if check(rq.get("status") or {}):
            return rq
    raise AssertionError(f"quota never passed the check: {rq.get('status')}")


async def test_periodic_resync_recalculates_every_quota(client: InProcessClient) -> None:
    clock = FakeClock()
    task = asyncio.create_task(ResourceQuotaController(client, clock).run())
    try:
        await client.create(f"{NS}/resourcequotas", {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "5"}}})
        rq = await until(clock, client, lambda s: s.get("used") == {"pods": "0"})
        await client.request("PUT", f"{QUOTA}/status", {**rq, "status": {"hard": {"pods": "5"}, "used": {"pods": "4"}}})
        await clock.advance(RESYNC_PERIOD / 2)
        await asyncio.sleep(0.05)
        assert (await client.get(QUOTA))["status"]["used"] == {"pods": "4"}  # no event: left alone until the resync
        await clock.advance(RESYNC_PERIOD / 2)
        await until(clock, client, lambda s: s.get("used") == {"pods": "0"})
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_pod_past_its_deletion_grace_period_is_released_at_the_resync(client: InProcessClient) -> None:
    """QuotaV1Pod: a pod stuck terminating (its node lost) stops counting once its grace period has passed."""
    clock = FakeClock(start=RealClock().now())  # the server stamps deletionTimestamp with the real time
    task = asyncio.create_task(ResourceQuotaController(client, clock).run())
    try:
        await client.create(f"{NS}/resourcequotas", {"metadata": {"name": "q"},
                                                     "spec": {"hard": {"pods": "5", "count/pods": "5"}}})
        await until(clock, client, lambda s: s.get("used") == {"count/pods": "0", "pods": "0"})
        await client.create(f"{NS}/pods", make_pod("stuck").node("gone").grace(30).obj())
        await client.delete(f"{NS}/pods/stuck")  # bound: stays, deleting, until its agent confirms
        await clock.advance(RESYNC_PERIOD)
        await until(clock, client, lambda s: s.get("used") == {"count/pods": "1", "pods": "0"})
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
