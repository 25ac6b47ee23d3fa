"""A real API server on real SQLite, reached through the in-process client, for controller tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    store = await SQLiteStore.open(tmp_path / "state.db")
    srv = ApiServer(store, RealClock())
    await srv.start()
    yield srv
    await srv.stop()
    await store.close()


@pytest.fixture
def client(server: ApiServer) -> InProcessClient:
    return InProcessClient(server)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Poll `check` on real time until true: for watches that a real server delivers asynchronously."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)
