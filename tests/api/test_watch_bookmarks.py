"""When a watch's bookmarks come, over HTTP and in process, and what an informer resumes from when a watch ends.

Upstream's cacher sends a bookmark every minute and one 2 s before the watch's deadline (cache_watcher.go
nextBookmarkTime). kubelite does so in process; over HTTP the periodic ones come every 20 s instead (silence is
how an HTTP/1.1 client tells a dead connection). Real API server, real SQLite, time on a FakeClock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.apiserver.watch import BOOKMARK_INTERVAL, LOOPBACK_BOOKMARK_INTERVAL, PRE_TIMEOUT_BOOKMARK
from kubelite.client.http import ApiClient
from kubelite.client.informer import Informer
from kubelite.client.interface import Client
from kubelite.clock import TIMER_GRANULARITY, FakeClock
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import serving_server

STEP = 0.5  # fake seconds per advance
START = 0.5  # the watch starts here, off a bucket boundary
LIFETIME = 150.0  # timeoutSeconds
QUIET_LIFETIME = 40.0  # shorter than a minute: the pre-timeout bookmark is the watch's only one after the first


@contextlib.asynccontextmanager
async def clients(tmp_path: Path, clock: FakeClock) -> AsyncIterator[dict[str, Client]]:
    async with serving_server(await SQLiteStore.open(tmp_path / "state.db"), clock=clock) as (server, http):
        over_http = ApiClient(str(http.make_url("")))
        try:
            yield {"http": over_http, "in process": InProcessClient(server)}
        finally:
            await over_http.close()


def expected_bookmarks(interval: float) -> list[float]:
    """Due times: the initial bookmark (a watch from resourceVersion ""), every `interval`, and the pre-timeout one."""
    due = [START]
    while due[-1] + interval < START + LIFETIME - PRE_TIMEOUT_BOOKMARK:
        due.append(due[-1] + interval)
    return [*due, START + LIFETIME - PRE_TIMEOUT_BOOKMARK]


CADENCE = [
    pytest.param("http", BOOKMARK_INTERVAL, id="over HTTP: every 20 s for liveness, and 2 s before the end"),
    pytest.param("in process", LOOPBACK_BOOKMARK_INTERVAL, id="in process: every minute as upstream, and 2 s before"),
]


@pytest.mark.parametrize(("transport", "interval"), CADENCE)
async def test_bookmark_cadence(tmp_path: Path, transport: str, interval: float) -> None:
    clock = FakeClock()
    async with clients(tmp_path, clock) as by_name:
        client = by_name[transport]
        await clock.advance(START)
        seen: list[float] = []
        ended: list[float] = []

        async def read() -> None:
            async for event in client.watch("/api/v1/namespaces/default/configmaps", {
                    "allowWatchBookmarks": "true", "timeoutSeconds": f"{LIFETIME:g}"}):
                assert event["type"] == "BOOKMARK"
                seen.append(clock.monotonic())
            ended.append(clock.monotonic())

        reader = asyncio.create_task(read())
        try:
            while not ended and clock.monotonic() < START + LIFETIME + 5:
                await clock.advance(STEP)
                await asyncio.sleep(0.002)  # real time for the HTTP stream's bytes to cross the socket
        finally:
            reader.cancel()
    due = expected_bookmarks(interval)
    assert len(seen) == len(due), (seen, due)
    for got, want in zip(seen, due, strict=True):
        assert want <= got <= want + TIMER_GRANULARITY + STEP, (seen, due)  # never early, at most a bucket late
    assert ended and START + LIFETIME <= ended[0] <= START + LIFETIME + TIMER_GRANULARITY + STEP


class CountingClient(InProcessClient):
    """Counts the lists and watches an informer makes."""

    def __init__(self, server: ApiServer) -> None:
        super().__init__(server)
        self.lists = 0
        self.watches: list[str] = []  # the resourceVersion each watch starts from

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                      params: Mapping[str, str] | None = None) -> Any:
        if method == "GET" and path.endswith("/configmaps"):
            self.lists += 1
        return await super().request(method, path, body, content_type, params)

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[dict[str, Any]]:
        self.watches.append(params["resourceVersion"])
        async for event in super().watch(path, params):
            yield event


async def test_an_informer_resumes_a_quiet_watch_from_the_pre_timeout_bookmark(tmp_path: Path) -> None:
    """An informer of a quiet namespace, with the cluster busy elsewhere: when its watch's lifetime ends it watches
    again from the revision the pre-timeout bookmark carried (seconds old), not the last minute's, and never
    lists again."""
    clock = FakeClock()
    async with serving_server(await SQLiteStore.open(tmp_path / "state.db"), clock=clock) as (server, _):
        client = CountingClient(server)
        for ns in ("quiet", "busy"):
            await client.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        informer = Informer(client, "/api/v1/namespaces/quiet/configmaps", clock,
                            params={"timeoutSeconds": f"{QUIET_LIFETIME:g}"})
        runner = asyncio.create_task(informer.run())
        revisions: dict[float, int] = {}  # the cluster's revision after each busy write, by fake time
        try:
            while clock.monotonic() < QUIET_LIFETIME + 5:
                created = await client.create("/api/v1/namespaces/busy/configmaps", {
                    "metadata": {"generateName": "cm-"}})
                revisions[clock.monotonic()] = int(created["metadata"]["resourceVersion"])
                await clock.advance(1.0)
        finally:
            runner.cancel()
    assert client.lists == 1 and len(client.watches) == 2, (client.lists, client.watches)
    resumed = int(client.watches[1])
    before_end = max(r for t, r in revisions.items() if t < QUIET_LIFETIME - PRE_TIMEOUT_BOOKMARK)
    assert resumed >= before_end, "resumed from an older revision than the pre-timeout bookmark's"
