"""Controllers against a real API server on a real SQLite file, through the in-process client, on a FakeClock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock, RealClock
from kubelite.controllers.registry import Factory
from kubelite.store.sqlite import SQLiteStore


@dataclass
class Harness:
    client: InProcessClient
    clock: FakeClock

    async def until(self, check: Callable[[], Any], what: str, step: float = 0.005, rounds: int = 600) -> None:
        """Advance fake time in steps (letting the in-process watches deliver in real time) until `check()`."""
        for _ in range(rounds):
            await self.clock.advance(step)
            await asyncio.sleep(0.002)
            if await check():
                return
        raise AssertionError(f"timed out waiting for {what}")


@contextlib.asynccontextmanager
async def running(tmp_path: Path, *factories: Factory) -> AsyncIterator[Harness]:
    """An API server with the given controllers running against it; everything stopped afterwards."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    client = InProcessClient(server)
    clock = FakeClock()
    tasks = [asyncio.create_task(factory(client, clock).run()) for factory in factories]
    try:
        yield Harness(client, clock)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.stop()
        await store.close()
