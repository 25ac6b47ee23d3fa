"""A watch's timeoutSeconds, over HTTP and in process: upstream ends the watch when it says (a timer of exactly
that duration, endpoints/handlers/watch.go), and takes 0 as no timeout at all (endpoints/handlers/get.go: `if
timeout == 0 && minRequestTimeout > 0`, the random 30-60 min of --min-request-timeout). Real API server, real
SQLite, time on a FakeClock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubelite.clock import FakeClock
from tests.api.test_watch_bookmarks import clients

STEP = 0.1  # fake seconds per advance
START = 0.5  # off a one-second bucket boundary: a coarse timer would end the watch up to 1 s late


@pytest.mark.parametrize("transport", ["http", "in process"])
@pytest.mark.parametrize(("params", "ends_after"), [
    pytest.param({"timeoutSeconds": "1"}, 1.0, id="timeoutSeconds=1 ends after 1 s, not rounded up to 2"),
    pytest.param({"timeoutSeconds": "7", "allowWatchBookmarks": "true"}, 7.0,
                 id="timeoutSeconds with bookmarks ends on time"),
    pytest.param({"timeoutSeconds": "0"}, None, id="timeoutSeconds=0 is no timeout: still open 10 s later"),
    pytest.param({}, None, id="no timeoutSeconds: still open 10 s later"),
])
async def test_watch_timeout(tmp_path: Path, transport: str, params: dict[str, str], ends_after: float | None) -> None:
    clock = FakeClock()
    async with clients(tmp_path, clock) as by_name:
        await clock.advance(START)
        ended: list[float] = []

        async def read() -> None:
            async for _ in by_name[transport].watch("/api/v1/namespaces/default/configmaps", params):
                pass
            ended.append(clock.monotonic())

        reader = asyncio.create_task(read())
        try:
            limit = START + (ends_after or 10.0) + 2.0
            while not ended and clock.monotonic() < limit:
                await clock.advance(STEP)
                await asyncio.sleep(0.002)  # real time for the HTTP stream's bytes to cross the socket
        finally:
            reader.cancel()
    if ends_after is None:
        assert not ended
    else:
        assert ended and START + ends_after <= ended[0] <= START + ends_after + 3 * STEP, ended
