"""The agent's heartbeats on a fake clock: the Lease every 10 s, the full node status every 5 minutes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.config import NodeConfigError
from kubelite.agent.config import parse as parse_node_config
from kubelite.agent.node import NodeReporter
from kubelite.api.errors import ApiError
from kubelite.clock import FakeClock

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


class RecordingClient:
    """Records the agent's writes; the first Lease renewal finds no Lease (404), as on a new node."""

    def __init__(self, clock: FakeClock, ready: str = "True") -> None:
        self.clock = clock
        self.writes: list[tuple[float, str, str]] = []
        self.ready = ready  # the node's Ready condition as the API shows it

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": "Ready", "status": self.ready}]}}

    async def patch(self, path: str, body: Any, content_type: str = "") -> dict[str, Any]:
        self.writes.append((self.clock.monotonic(), "patch", path))
        if path.startswith(LEASE) and not any(kind == "create" for _, kind, _ in self.writes):
            raise ApiError(404, "NotFound", "leases not found")
        return {}

    async def create(self, path: str, body: Any) -> dict[str, Any]:
        self.writes.append((self.clock.monotonic(), "create", path))
        return body  # type: ignore[no-any-return]


@pytest.mark.parametrize("name,lease_seconds,path,kinds,want_times", [
    ("the lease is created, then renewed every 10 s", 40, LEASE, ("create", "patch"),
     [0.0, 0.0, 10.0, 20.0, 30.0]),
    ("the node status is posted every 5 minutes", 40, "/api/v1/nodes/n1/status", ("patch",), [300.0, 600.0]),
    ("a 240 s lease (nodeLeaseDurationSeconds) is renewed every quarter of it", 240, LEASE, ("create", "patch"),
     [0.0, 0.0, 60.0, 120.0, 180.0]),
])
async def test_heartbeats(tmp_path: Path, name: str, lease_seconds: int, path: str, kinds: tuple[str, ...],
                          want_times: list[float]) -> None:
    clock = FakeClock()
    client = RecordingClient(clock)
    node = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0,  # type: ignore[arg-type]
                        lease_seconds=lease_seconds)
    task = asyncio.ensure_future(node.heartbeat())
    await clock.advance(0)
    for _ in range(60):
        await clock.advance(10)
    task.cancel()
    times = [t for t, kind, p in client.writes if p.startswith(path) and kind in kinds]
    assert times[:len(want_times)] == want_times


async def test_status_is_posted_at_once_when_the_node_is_shown_not_ready() -> None:
    """A node the node lifecycle controller marked Unknown (its agent was silent) posts its real status
    on the next heartbeat, not 5 minutes later, as kubelet posts when the stored status differs."""
    clock = FakeClock()
    client = RecordingClient(clock)
    node = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0)  # type: ignore[arg-type]
    task = asyncio.ensure_future(node.heartbeat())
    await clock.advance(0)
    await clock.advance(10)
    client.ready = "Unknown"
    await clock.advance(10)
    task.cancel()
    assert [t for t, _, p in client.writes if p == "/api/v1/nodes/n1/status"] == [20.0]


@pytest.mark.parametrize("value,want", [
    pytest.param(None, 40, id="absent: upstream's 40 s"),
    pytest.param(240, 240, id="a positive integer is taken"),
    pytest.param(0, "must be a positive integer", id="zero is refused"),
    pytest.param("40s", "must be a positive integer", id="a duration string is refused (the field is seconds)"),
    pytest.param(True, "must be a positive integer", id="a boolean is refused"),
])
def test_node_lease_duration_seconds_is_parsed(value: object, want: int | str) -> None:
    raw: dict[str, Any] = {"kind": "KubeletConfiguration"}
    if value is not None:
        raw["nodeLeaseDurationSeconds"] = value
    if isinstance(want, int):
        assert parse_node_config(raw).node_lease_duration == want
    else:
        with pytest.raises(NodeConfigError, match=want):
            parse_node_config(raw)


async def test_the_lease_carries_its_duration() -> None:
    clock = FakeClock()
    bodies: list[Any] = []

    class Capturing(RecordingClient):
        async def create(self, path: str, body: Any) -> dict[str, Any]:
            bodies.append(body)
            return await super().create(path, body)

    node = NodeReporter(Capturing(clock), clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0,  # type: ignore[arg-type]
                        lease_seconds=240)
    task = asyncio.ensure_future(node.heartbeat())
    await clock.advance(0)
    task.cancel()
    assert [b["spec"]["leaseDurationSeconds"] for b in bodies if b.get("kind") == "Lease"] == [240]


async def test_a_heartbeat_through_after_failures_tells_the_informers_to_retry_now() -> None:
    clock = FakeClock()
    client = RecordingClient(clock)
    told: list[float] = []
    failing = [True]

    async def renew(*_: Any) -> dict[str, Any]:
        if failing[0]:
            raise ApiError(503, "ServiceUnavailable", "cut")
        return {}
    client.patch = renew  # type: ignore[method-assign]
    node = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0,  # type: ignore[arg-type]
                        reconnected=lambda: told.append(clock.monotonic()))
    task = asyncio.ensure_future(node.heartbeat())
    for _ in range(30):
        await clock.advance(1)
    assert told == [], "told while the heartbeats still failed"
    failing[0] = False
    for _ in range(60):
        await clock.advance(1)
    task.cancel()
    assert len(told) == 1, told
