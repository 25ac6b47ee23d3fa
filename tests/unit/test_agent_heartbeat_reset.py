"""A heartbeat that gets no answer closes every connection of the agent's client (kubelet's closeAllConns),
so a watch blinded by a half-open connection fails at once and its informer resumes, instead of waiting
out its read timeout; API errors (the server answered) leave the connections alone. Fake clock throughout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest

from kubelite.agent.node import NodeReporter
from kubelite.api.errors import ApiError, unavailable
from kubelite.client.informer import Handlers, Informer
from kubelite.clock import FakeClock
from tests.client.scripted import ScriptedClient, WatchScript, listing, pod

Obj = dict[str, Any]
NODE = "/api/v1/nodes/n1"
READY = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}


class HalfOpenLink(ScriptedClient):
    """A ScriptedClient whose connections went half-open while `half_open`: a call waits for an answer that
    never comes, and a watch, once its script is played, stays silent. close_connections fails every wait
    with Unavailable and opens fresh connections (the network itself is back)."""

    def __init__(self, clock: FakeClock, watches: list[WatchScript], half_open: bool = False,
                 refuse: ApiError | None = None) -> None:
        super().__init__([listing(1, pod("a", 1, node="n1"))], watches)
        self.clock = clock
        self.half_open = half_open
        self.refuse = refuse  # what the server answers every heartbeat write with, if anything
        self.closes: list[float] = []
        self.node = READY  # the Node the server shows (reporter() makes it the agent's own status)
        self.lease_writes: list[float] = []
        self._waiting: set[asyncio.Future[None]] = set()

    async def _silent(self) -> None:
        """Wait on a dead connection: only close_connections ends it."""
        waiting = asyncio.get_running_loop().create_future()
        self._waiting.add(waiting)
        try:
            await waiting
        finally:
            self._waiting.discard(waiting)

    async def close_connections(self) -> None:
        self.closes.append(self.clock.monotonic())
        self.half_open = False
        for waiting in self._waiting:
            waiting.set_exception(unavailable("connection closed by the client"))

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        if path != NODE:
            return await super().get(path, params)
        if self.half_open:
            await self._silent()
        return self.node

    async def patch(self, path: str, patch: Any, content_type: str = "") -> Obj:
        if self.half_open:
            await self._silent()
        if self.refuse is not None:
            raise self.refuse
        if "/leases/" in path:
            self.lease_writes.append(self.clock.monotonic())
        return {}

    async def watch(self, path: str, params: Mapping[str, str]) -> Any:
        async for event in super().watch(path, params):
            yield event
        await self._silent()  # the script is played: the connection goes quiet, as a half-open one does


def reporter(client: HalfOpenLink, closes: bool = True) -> NodeReporter:
    """The node's reporter; its status is what the server shows (registered and current)."""
    node = NodeReporter(client, client.clock, "n1", "127.0.0.1", {"pods": "110"},  # type: ignore[arg-type]
                        lambda: 0, close_connections=client.close_connections if closes else None)
    client.node = node.node_object()
    return node


async def run_for(clock: FakeClock, seconds: int, *loops: Callable[[], Awaitable[None]]) -> None:
    tasks = [asyncio.ensure_future(loop()) for loop in loops]
    await clock.advance(0)
    for _ in range(seconds):
        await clock.advance(1)
    for task in tasks:
        task.cancel()


@pytest.mark.parametrize("name,half_open,refuse,want_closes,want_lease_writes", [
    ("a heartbeat with no answer closes every connection, then renews the Lease on a fresh one",
     True, None, [10.0], [10.0, 20.0, 30.0]),
    ("a heartbeat the server refuses (it answered) keeps the connections",
     False, ApiError(409, "Conflict", "the object has been modified"), [], []),
    ("a heartbeat answered keeps the connections", False, None, [], [0.0, 10.0, 20.0, 30.0]),
])
async def test_heartbeat_closes_connections_when_unanswered(name: str, half_open: bool, refuse: ApiError | None,
                                                           want_closes: list[float],
                                                           want_lease_writes: list[float]) -> None:
    clock = FakeClock()
    client = HalfOpenLink(clock, [], half_open, refuse)
    await run_for(clock, 30, reporter(client).heartbeat)
    assert client.closes == want_closes
    assert client.lease_writes == want_lease_writes


async def test_failed_heartbeats_are_retried_sooner_than_the_renew_interval() -> None:
    clock = FakeClock()
    client = HalfOpenLink(clock, [], refuse=unavailable("connection refused"))
    attempts: list[float] = []
    node = reporter(client)
    renew_lease = node.renew_lease

    async def renew() -> None:
        attempts.append(clock.monotonic())
        await renew_lease()

    node.renew_lease = renew  # type: ignore[method-assign]
    await run_for(clock, 40, node.heartbeat)
    assert attempts == [0.0, 1.0, 3.0, 7.0, 15.0, 25.0, 35.0]  # 1 s doubling, capped at the 10 s interval


@pytest.mark.parametrize("name,closes,want_seen_by", [
    ("the heartbeat's reset ends the blind watch: the deletion is seen within seconds", True, 25.0),
    ("without it the watch stays blind (the read timeout is far away)", False, None),
])
async def test_a_half_open_link_does_not_blind_the_pod_informer(name: str, closes: bool,
                                                                want_seen_by: float | None) -> None:
    """The pod informer's watch went half-open at t=5 s (its link healed; nothing on it will ever arrive);
    the pod was deleted meanwhile, and the resumed watch reports it."""
    clock = FakeClock()
    client = HalfOpenLink(clock, [[], [{"type": "DELETED", "object": pod("a", 2, node="n1")}]])
    deleted: list[float] = []
    informer = Informer(client, "/api/v1/pods", clock,
                        Handlers(on_delete=lambda obj: deleted.append(clock.monotonic())))

    async def half_open_at_5() -> None:
        await clock.sleep(5)
        client.half_open = True

    await run_for(clock, 60, reporter(client, closes).heartbeat, informer.run, half_open_at_5)
    if want_seen_by is None:
        assert deleted == []
    else:
        assert client.closes == [20.0]  # the heartbeat at 10 s waited its 10 s deadline out
        assert len(deleted) == 1 and deleted[0] <= want_seen_by
