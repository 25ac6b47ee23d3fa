"""Lifecycle hook events as kuberuntime_container.go records them, from a real node agent (real processes, real
time, a real API server on a SQLite file): a failed hook's event has a fixed text — "do not record the message in
the event so that secrets won't leak from the server" — and a preStop hook that outlives the grace period is only
logged (executePreStopHook), no event."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.agent import Agent
from kubelite.agent.config import NodeConfig
from kubelite.agent.runtime.process import ProcessRuntime
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock

Obj = dict[str, Any]
NS = "/api/v1/namespaces/default"
LEAKY = {"exec": {"command": ["sh", "-c", "echo password=hunter2; exit 1"]}}


@pytest.mark.parametrize("lifecycle,delete,want", [
    pytest.param({"postStart": LEAKY}, False, ("FailedPostStartHook", "PostStartHook failed"),
                 id="failed postStart: the fixed text, not the hook's output"),
    pytest.param({"preStop": LEAKY}, True, ("FailedPreStopHook", "PreStopHook failed"),
                 id="failed preStop: the fixed text, not the hook's output"),
    pytest.param({"preStop": {"sleep": {"seconds": 30}}}, True, None,
                 id="preStop outliving the grace period: no event"),
])
async def test_hook_events_never_carry_the_hooks_output(inprocess_server: ApiServer, tmp_path: Path, lifecycle: Obj,
                                                        delete: bool, want: tuple[str, str] | None) -> None:
    client = InProcessClient(inprocess_server)
    clock = RealClock()
    (tmp_path / "node").mkdir()
    agent = Agent(client, clock, "n1", tmp_path / "node", NodeConfig(), ProcessRuntime(clock))
    running = asyncio.create_task(agent.run(http=False))

    async def hook_events() -> list[tuple[str, str]]:
        items = (await client.get(f"{NS}/events"))["items"]
        return [(e["reason"], e["message"]) for e in items if e["reason"].startswith("Failed")]

    try:
        await client.create(f"{NS}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "x", "command": ["sleep", "30"],
                                     "lifecycle": lifecycle}]}})
        for _ in range(200):
            pod = await client.get(f"{NS}/pods/p")
            if any("running" in (s.get("state") or {}) or "terminated" in (s.get("state") or {})
                   for s in (pod.get("status") or {}).get("containerStatuses") or []):
                break
            await asyncio.sleep(0.05)
        if delete:
            await client.delete(f"{NS}/pods/p")
            for _ in range(200):
                if agent.pods.get("default", "p") is None:
                    break
                await asyncio.sleep(0.05)
        for _ in range(100):  # the event, once posted
            if want is None or await hook_events():
                break
            await asyncio.sleep(0.05)
        events = await hook_events()
        assert events == ([want] if want else [])
        assert not any("hunter2" in message for _, message in events)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
