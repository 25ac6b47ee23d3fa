"""The self-fencing agent on a fake clock: the NodeReporter's real heartbeat loop against a client that
can be cut, the fence gate tripping after D seconds without an accepted Lease renewal, and the
gated runtime (over the hollow runtime) killing and refusing containers."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.node import NodeReporter
from kubelite.agent.runtime.hollow import HollowProcess, HollowRuntime
from kubelite.agent.self_fence import ANNOTATION, FencedRuntime, FenceGate
from kubelite.api.errors import ApiError
from kubelite.clock import FakeClock

D = 8.0


class CuttableClient:
    """The API server as the agent sees it: answers, or (cut) fails every call as a lost link does."""

    def __init__(self, fenced: bool = False, fence_phase: str | None = None) -> None:
        self.cut = False
        self.fenced = fenced  # the node's kubelite.io/Fenced condition
        self.fence_phase = fence_phase  # the node's NodeFence (None: there is none)
        self.patches: list[tuple[str, Any]] = []

    def _check(self) -> None:
        if self.cut:
            raise ApiError(503, "ServiceUnavailable", "connection refused")

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        self._check()
        if "/nodefences/" in path:
            if self.fence_phase is None:
                raise ApiError(404, "NotFound", "nodefences not found")
            return {"status": {"phase": self.fence_phase}}
        conditions = [{"type": "Ready", "status": "True"}]
        if self.fenced:
            conditions.append({"type": "kubelite.io/Fenced", "status": "True"})
        return {"status": {"conditions": conditions}}

    async def patch(self, path: str, body: Any, content_type: str = "") -> dict[str, Any]:
        self._check()
        self.patches.append((path, body))
        return {}

    async def create(self, path: str, body: Any) -> dict[str, Any]:
        self._check()
        if path == "/api/v1/nodes":
            raise ApiError(409, "AlreadyExists", "node exists")
        return body  # type: ignore[no-any-return]


async def _node(clock: FakeClock, client: CuttableClient, tmp_path: Path
                ) -> tuple[FenceGate, HollowProcess, FencedRuntime, list[asyncio.Task[None]]]:
    """A node's fence gate and heartbeat, and one container started before any news (returned with them)."""
    gate = FenceGate(clock, D)
    hollow = HollowRuntime(clock)
    runtime = FencedRuntime(hollow, gate)
    reporter = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0, gate=gate)  # type: ignore[arg-type]
    container = await runtime.start(["hollow", "--run", "100000"], {}, None, tmp_path / "c" / "0.log")
    assert isinstance(container, HollowProcess)
    tasks = [asyncio.ensure_future(reporter.heartbeat()), asyncio.ensure_future(gate.run())]
    await clock.advance(0)
    return gate, container, runtime, tasks


async def _step(clock: FakeClock, seconds: float, step: float = 0.25) -> None:
    for _ in range(int(seconds / step)):
        await clock.advance(step)


@pytest.mark.parametrize("name,cut_for,alive_after", [
    ("a link cut for less than D kills nothing", D - 2 * (D / 4), True),
    ("a link cut for D plus the check interval kills every container", D + 1.0, False),
    ("a link cut for much longer than D kills every container", 5 * D, False),
])
async def test_containers_are_killed_only_after_d_seconds_without_a_renewal(
        tmp_path: Path, name: str, cut_for: float, alive_after: bool) -> None:
    clock = FakeClock()
    client = CuttableClient()
    gate, container, runtime, tasks = await _node(clock, client, tmp_path)
    await _step(clock, 3 * D)  # connected: renewals every D/4, never tripped
    assert not gate.self_fenced and container.alive
    await _step(clock, D / 4)  # just after a renewal
    client.cut = True
    await _step(clock, cut_for)
    assert container.alive is alive_after
    if not alive_after:
        assert container.signals == [signal.SIGKILL] * len(container.signals)
        with pytest.raises(OSError, match="self-fenced"):
            await runtime.start(["hollow", "--run", "1"], {}, None, tmp_path / "d" / "0.log")
    for t in tasks:
        t.cancel()


@pytest.mark.parametrize("name,fence_phase,fenced,opens", [
    ("back in contact with no NodeFence: starts allowed again", None, False, True),
    ("back in contact after a failed fence round: starts allowed again", "Failed", False, True),
    ("back in contact while a fence is running: still nothing starts", "Running", False, False),
    ("back in contact after a confirmed fence: still nothing starts", "Succeeded", True, False),
])
async def test_back_in_contact(tmp_path: Path, name: str, fence_phase: str | None, fenced: bool,
                               opens: bool) -> None:
    clock = FakeClock()
    client = CuttableClient()
    gate, container, runtime, tasks = await _node(clock, client, tmp_path)
    client.cut = True
    await _step(clock, 2 * D)
    assert gate.self_fenced and not container.alive
    client.fence_phase, client.fenced = fence_phase, fenced
    client.cut = False
    await _step(clock, D / 4)  # one heartbeat: the renewal is accepted, but no read has followed it yet
    assert gate.blocked() is not None
    await _step(clock, D / 2)
    assert (gate.blocked() is None) is opens
    if opens:
        await runtime.start(["hollow", "--run", "1"], {}, None, tmp_path / "d" / "0.log")
    for t in tasks:
        t.cancel()


async def test_a_node_with_the_fenced_condition_starts_nothing_though_in_contact(tmp_path: Path) -> None:
    clock = FakeClock()
    client = CuttableClient(fenced=True)
    gate, _container, runtime, tasks = await _node(clock, client, tmp_path)
    await _step(clock, D)
    assert not gate.self_fenced
    with pytest.raises(OSError, match="fenced"):
        await runtime.start(["hollow", "--run", "1"], {}, None, tmp_path / "d" / "0.log")
    for t in tasks:
        t.cancel()


async def test_an_agent_frozen_past_d_kills_its_containers_before_it_renews(tmp_path: Path) -> None:
    """A SIGSTOPped agent's timers do not fire; on waking, the overdue promise is kept before the renewal."""
    clock = FakeClock()
    gate = FenceGate(clock, D)
    hollow = HollowRuntime(clock)
    runtime = FencedRuntime(hollow, gate)
    container = await runtime.start(["hollow", "--run", "100000"], {}, None, tmp_path / "c" / "0.log")
    reporter = NodeReporter(CuttableClient(), clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0,  # type: ignore[arg-type]
                            gate=gate)
    await clock.advance(2 * D)  # frozen: no loop of the agent ran meanwhile (none is started here)
    await reporter.renew_lease()
    assert not container.alive
    assert gate.blocked() is not None  # renewed, but starts wait for a read of the fence state after it


@pytest.mark.parametrize("name,after,want", [
    ("a self-fencing agent advertises D", 8.0, "8"),
    ("a fractional D is advertised as given", 2.5, "2.5"),
    ("an agent without self-fencing removes an old promise", None, None),
])
async def test_the_node_advertises_the_promise(name: str, after: float | None, want: str | None) -> None:
    clock = FakeClock()
    client = CuttableClient()
    reporter = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0,  # type: ignore[arg-type]
                            gate=FenceGate(clock, after))
    assert reporter.node_object()["metadata"]["annotations"].get(ANNOTATION) == want
    await reporter.register()  # the Node exists: its annotations are patched
    [body] = [b for p, b in client.patches if p == "/api/v1/nodes/n1"]
    assert body["metadata"]["annotations"] == {ANNOTATION: want}


@pytest.mark.parametrize("name,raw,want", [
    ("no selfFenceAfter: no self-fencing", {}, 0.0),
    ("a Go duration", {"selfFenceAfter": "10s"}, 10.0),
    ("minutes", {"selfFenceAfter": "1m30s"}, 90.0),
    ("the minimum", {"selfFenceAfter": "2s"}, 2.0),
])
def test_self_fence_after_in_the_node_config(name: str, raw: dict[str, Any], want: float) -> None:
    from kubelite.agent.config import parse

    assert parse({"kind": "KubeletConfiguration", **raw}).self_fence_after == want


@pytest.mark.parametrize("name,raw,want", [
    ("milliseconds meant as seconds", {"selfFenceAfter": "10ms"}, "0.01s is below the 2s minimum"),
    ("just below the minimum", {"selfFenceAfter": "1999ms"}, "1.999s is below the 2s minimum"),
])
def test_a_self_fence_below_the_minimum_is_refused(name: str, raw: dict[str, Any], want: str) -> None:
    from kubelite.agent.config import NodeConfigError, parse

    with pytest.raises(NodeConfigError, match=want):
        parse({"kind": "KubeletConfiguration", **raw})


def test_a_negative_self_fence_on_the_command_line_is_refused(tmp_path: Path) -> None:
    """`kubelite agent --self-fence-after` is checked as the file's field is, a negative value too."""
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig", str(tmp_path / "none"),
                          "--node-name", "n1", "--data-dir", str(tmp_path / "agent"), "--self-fence-after", "-1"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res
    assert "selfFenceAfter: -1s must not be negative" in res.stderr


def _read(uid: str | None, version: str | None, fenced: bool) -> dict[str, Any]:
    """A Node as read: (uid, resourceVersion) and whether it carries kubelite.io/Fenced = True."""
    meta = {k: v for k, v in (("uid", uid), ("resourceVersion", version)) if v is not None}
    return {"metadata": meta, "status": {"conditions": [
        {"type": "Ready", "status": "True"}, {"type": "kubelite.io/Fenced", "status": "True" if fenced else "False"}]}}


@pytest.mark.parametrize("name,reads,want", [
    ("the Fenced condition set by a write is seen", [("u", "1", False), ("u", "2", True)], [False, True]),
    ("the Fenced condition cleared by a write is seen", [("u", "1", True), ("u", "2", False)], [True, False]),
    ("a Node created again (another uid) is read, whatever its resourceVersion",
     [("u", "1", False), ("v", "1", True)], [False, True]),
    ("a Node with no resourceVersion is always read", [(None, None, False), (None, None, True)], [False, True]),
    # A uid and resourceVersion name one content of the Node: its conditions are not looked through again
    # (the second read says otherwise only to show that they are not).
    ("the same Node read again is not looked through again", [("u", "1", True), ("u", "1", False)], [True, True]),
])
def test_the_gate_reads_the_fenced_condition_of_each_new_node(
        name: str, reads: list[tuple[str | None, str | None, bool]], want: list[bool]) -> None:
    gate = FenceGate(FakeClock(), None)
    seen = []
    for uid, version, fenced in reads:
        gate.node_seen(_read(uid, version, fenced), None, 0.0)
        seen.append(gate.node_fenced)
    assert seen == want
