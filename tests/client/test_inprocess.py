"""The in-process transport as components use it: errors as ApiError, informers, no shared objects."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient, Reply, _Collector
from kubelite.client.informer import NODE_NAME_INDEX, Informer, by_node_name
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod

PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[InProcessClient]:
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    yield InProcessClient(server)
    await server.stop()
    await store.close()


@pytest.mark.parametrize(("method", "path", "body", "code", "reason"), [
    pytest.param("GET", f"{PODS}/missing", None, 404, "NotFound", id="get of a missing pod"),
    pytest.param("POST", PODS, {"metadata": {"name": "x"}, "spec": {}}, 422, "Invalid", id="invalid pod"),
    pytest.param("GET", "/api/v1/widgets", None, 404, "NotFound", id="unknown resource"),
    pytest.param("PUT", "/api/v1/namespaces/default/pods", {}, 405, "MethodNotAllowed", id="verb not allowed"),
    pytest.param("GET", PODS, None, 400, "BadRequest", id="bad query parameter"),
])
async def test_errors_arrive_as_api_errors(client: InProcessClient, method: str, path: str, body: object,
                                           code: int, reason: str) -> None:
    params = {"limit": "many"} if reason == "BadRequest" else None
    with pytest.raises(ApiError) as info:
        await client.request(method, path, body, params=params)
    assert (info.value.code, info.value.reason) == (code, reason)


async def test_caller_never_holds_the_servers_objects(client: InProcessClient) -> None:
    created = await client.create(PODS, make_pod("p").obj())
    created["metadata"]["labels"] = {"mutated": "yes"}
    got = await client.get(f"{PODS}/p")
    got["spec"]["containers"].clear()
    again = await client.get(f"{PODS}/p")
    assert "labels" not in again["metadata"] and again["spec"]["containers"]


async def test_watch_too_old_resource_version_raises_gone(tmp_path: Path) -> None:
    """After a restart the watch cache starts at the stored revision: an older version is 410 Expired."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    first = ApiServer(store, RealClock())
    await first.start()
    await first.stop()
    second = ApiServer(store, RealClock())
    await second.start()
    try:
        with pytest.raises(ApiError) as info:
            async for _ in InProcessClient(second).watch(PODS, {"resourceVersion": "1"}):
                pass
    finally:
        await second.stop()
        await store.close()
    assert (info.value.code, info.value.reason) == (410, "Expired")


async def test_informer_over_in_process_transport(client: InProcessClient) -> None:
    informer = Informer(client, "/api/v1/pods", RealClock())
    informer.add_index(NODE_NAME_INDEX, by_node_name)
    await client.create(PODS, make_pod("before").node("n1").obj())
    runner = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 5)
    await client.create(PODS, make_pod("after").node("n1").obj())
    await client.delete(f"{PODS}/before", {"gracePeriodSeconds": 0})
    for _ in range(200):
        if [o["metadata"]["name"] for o in informer.by_index(NODE_NAME_INDEX, "n1")] == ["after"]:
            break
        await asyncio.sleep(0.01)
    runner.cancel()
    assert [o["metadata"]["name"] for o in informer.by_index(NODE_NAME_INDEX, "n1")] == ["after"]


async def test_in_process_caller_authenticates_as_the_loopback_client(tmp_path: Path) -> None:
    """A server with tokens (kubelite server without --insecure): components in process are let in, others not."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock(), frozenset({"admin-token"}))
    await server.start()
    try:
        client = InProcessClient(server)
        created = await client.create(PODS, make_pod("p").obj())
        assert created["metadata"]["name"] == "p"
        forged = await client.exchange("GET", PODS, headers={"Authorization": "Bearer guessed"})
        assert forged.status == 401
    finally:
        await server.stop()
        await store.close()


async def _reply(chunks: list[bytes]) -> Reply:
    collector = _Collector()
    for chunk in chunks:
        collector.chunks.put_nowait(chunk)
    collector.chunks.put_nowait(None)
    return Reply(collector, asyncio.ensure_future(asyncio.sleep(0)))


@pytest.mark.parametrize(("chunks", "lines"), [
    pytest.param([b'{"a":1}\n{"b":2}\n'], [b'{"a":1}\n', b'{"b":2}\n'], id="whole lines in one chunk"),
    pytest.param([b'{"a"', b':1}\n{"b":', b"2}\n"], [b'{"a":1}\n', b'{"b":2}\n'], id="lines cut across chunks"),
    pytest.param([b"x\n", b"", b"tail"], [b"x\n", b"tail"], id="a last line without newline"),
    pytest.param([], [], id="empty body"),
])
async def test_reply_readline_returns_lines_as_http_does(chunks: list[bytes], lines: list[bytes]) -> None:
    reply = await _reply(chunks)
    got = []
    while line := await reply.readline():
        got.append(line)
    assert got == lines


async def test_reply_splits_a_backlog_chunk_once_not_once_per_line() -> None:
    """Regression: a watch backlog arrives as one chunk; readline re-scanned and re-copied the rest of it for
    every line (quadratic: 16,000 events blocked the server's loop for a minute). Now the chunk is split on
    arrival and each readline takes the next ready line without touching the others."""
    n = 1000
    reply = await _reply([b"".join(b'{"i":%d}\n' % i for i in range(n))])
    assert await reply.readline() == b'{"i":0}\n'
    assert len(reply._lines) == n - 1  # split once, on arrival
    rest = [await reply.readline() for _ in range(n - 1)]
    assert rest[-1] == b'{"i":%d}\n' % (n - 1)
    assert reply._collector.chunks.qsize() == 1  # the end of the body not fetched: every line was ready


async def test_reply_read_after_readline_returns_the_rest() -> None:
    reply = await _reply([b"a\nb\n", b"c"])
    assert await reply.readline() == b"a\n"
    assert await reply.read() == b"b\nc"
