"""A real node agent (real processes, real time, a real API server on a SQLite file) publishes the pod
conditions kubectl v1.32 showed on a real cluster (the QA pass): Initialized=False while a regular init
container runs (kubectl: Init:0/1), PodScheduled=True on a pod bound by spec.nodeName, and a Ready condition
that keeps no ContainersNotReady reason or message once the readiness probe passes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
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
PODS = "/api/v1/namespaces/default/pods"


def _conditions(pod: Obj) -> dict[str, Obj]:
    return {c["type"]: {k: v for k, v in c.items() if k in ("status", "reason", "message")}
            for c in (pod.get("status") or {}).get("conditions") or []}


def _init_running(pod: Obj) -> bool:
    statuses = (pod.get("status") or {}).get("initContainerStatuses") or []
    return any("running" in (s.get("state") or {}) for s in statuses)


def _ready(pod: Obj) -> bool:
    return _conditions(pod).get("Ready", {}).get("status") == "True"


@pytest.mark.parametrize("when,want", [
    pytest.param(_init_running, {"Initialized": {"status": "False", "reason": "ContainersNotInitialized",
                                                 "message": "containers with incomplete status: [init]"},
                                 "PodScheduled": {"status": "True"}},
                 id="a running regular init container: not Initialized (kubectl Init:0/1); PodScheduled=True"),
    pytest.param(_ready, {"Initialized": {"status": "True"}, "Ready": {"status": "True"},
                          "ContainersReady": {"status": "True"}, "PodScheduled": {"status": "True"}},
                 id="readiness probe passing: Ready and ContainersReady keep no ContainersNotReady reason or message"),
])
async def test_agent_publishes_upstreams_pod_conditions(inprocess_server: ApiServer, tmp_path: Path,
                                                        when: Callable[[Obj], bool], want: dict[str, Obj]) -> None:
    client = InProcessClient(inprocess_server)
    clock = RealClock()
    (tmp_path / "node").mkdir()
    flag = tmp_path / "ready"
    agent = Agent(client, clock, "n1", tmp_path / "node", NodeConfig(), ProcessRuntime(clock))
    running = asyncio.create_task(agent.run(http=False))
    try:
        await client.create(PODS, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "initContainers": [{"name": "init", "image": "x", "command": ["sleep", "1"]}],
                     "containers": [{"name": "c", "image": "x",
                                     "command": ["sh", "-c", f"sleep 1; touch {flag}; sleep 30"],
                                     "readinessProbe": {"exec": {"command": ["test", "-e", str(flag)]},
                                                        "periodSeconds": 1}}]}})
        seen: list[Obj] = []
        for _ in range(200):  # the API object, as kubectl reads it
            pod = await client.get(f"{PODS}/p")
            seen.append(_conditions(pod))
            if when(pod):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"not reached: {seen[-1]}")
        assert {k: v for k, v in _conditions(pod).items() if k in want} == want
        if when is _ready:  # it was not ready first, with the reason the ready condition must not keep
            assert {"status": "False", "reason": "ContainersNotReady", "message": "containers with unready status: [c]"
                    } in [c.get("Ready") for c in seen]
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
