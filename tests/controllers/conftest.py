"""A real API server on real SQLite, reached through the in-process client, for controller tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import pytest

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock


@pytest.fixture
def server(inprocess_server: ApiServer) -> ApiServer:
    return inprocess_server


@pytest.fixture
def client(server: ApiServer) -> InProcessClient:
    return InProcessClient(server)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0,
                     clock: FakeClock | None = None, step: float = 0.05) -> None:
    """Poll `check` until true: the server's watches deliver on real time; the controllers' own waits
    (retries, re-checks) on `clock`, moved by `step` each round."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        if clock is not None:
            await clock.advance(step)
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def running(*runs: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run these (controllers' run(), helpers) for the block; cancelled and awaited after it."""
    tasks = [asyncio.create_task(r) for r in runs]
    try:
        yield
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
