"""Eviction through the agent's own pod workers and pod sync (hollow runtime, FakeClock): the manager's
decision reaches PodWorkers.stop_pod, the pod's containers stop with the eviction's grace, and the pod ends
Failed with reason Evicted and the manager's message, the Evicted event recorded once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.eviction.host_stats import PodPaths
from kubelite.agent.eviction.manager import EvictionManager
from kubelite.agent.eviction.quantity import Quantity
from kubelite.agent.eviction.stats import ContainerStats, NodeStats, PodStats, Summary
from kubelite.agent.eviction.thresholds import MEMORY_AVAILABLE, EvictionConfig, Threshold, ThresholdValue
from kubelite.agent.eviction.wiring import AgentPods
from tests.unit.test_pod_worker import Harness

Obj = dict[str, Any]
MIB = 2**20


class Stats:
    def __init__(self) -> None:
        self.available = 2048 * MIB

    async def summary(self, pods: Sequence[Obj]) -> Summary:
        return Summary(NodeStats(memory_available=self.available, memory_working_set=MIB),
                       [PodStats("u1", 500 * MIB, (ContainerStats("main", 500 * MIB),))])


class Node:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def set_pressure(self, conditions: frozenset[str]) -> None:
        pass

    def pod_event(self, pod: Obj, reason: str, message: str) -> None:
        self.events.append((reason, message))

    def node_event(self, reason: str, message: str, kind: str) -> None:
        pass


@pytest.mark.parametrize(("command", "soft", "stopped_after"), [
    pytest.param(["hollow"], False, 0.0, id="hard threshold: stopped at once"),
    pytest.param(["hollow", "--ignore-term"], False, 2.0, id="hard threshold: SIGKILL after the 2 s minimum"),
    pytest.param(["hollow", "--ignore-term"], True, 20.0, id="soft threshold: SIGKILL after evictionMaxPodGracePeriod"),
])
async def test_evicted_pod_is_stopped_by_its_worker_and_failed_evicted(tmp_path: Path, command: list[str],
                                                                       soft: bool, stopped_after: float) -> None:
    h = Harness(tmp_path)
    pod: Obj = {"metadata": {"name": "hog", "namespace": "default", "uid": "u1"},
                "spec": {"terminationGracePeriodSeconds": 60,
                         "containers": [{"name": "main", "image": "x", "command": command,
                                         "resources": {"requests": {"memory": "100Mi"}}}]}}
    h.pod_workers.update_pod(pod)
    await h.clock.advance(1)
    assert h.phase() == "Running"

    workers = h.pod_workers
    pods = AgentPods(h.clock, lambda: [pod] if workers.could_have_running_containers("u1")
                     and not workers.is_terminating("u1") else [],
                     workers.stop_pod, workers.could_have_running_containers, lambda p: PodPaths())
    stats, node = Stats(), Node()
    threshold = Threshold(MEMORY_AVAILABLE, ThresholdValue(quantity=Quantity.parse("1Gi")), 30.0 if soft else 0.0)
    manager = EvictionManager(EvictionConfig([threshold], 300.0, 20), h.clock, stats, pods, node)
    assert await manager.synchronize() is None  # no pressure yet
    stats.available = 512 * MIB
    if soft:
        assert await manager.synchronize() is None  # met, not yet for its grace period
        await h.clock.advance(30)
    sync = asyncio.create_task(manager.synchronize())
    await h.clock.advance(0)
    started = h.clock.monotonic()
    for _ in range(400):
        if sync.done():
            break
        await h.clock.advance(0.1)
    assert await sync is pod
    assert h.clock.monotonic() - started == pytest.approx(stopped_after, abs=0.35)

    message = ("The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. "
               "Container main was using 500Mi, request is 100Mi, has larger consumption of memory. ")
    status = h.statuses[-1][1]
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "Evicted", message)
    assert "terminated" in status["containerStatuses"][0]["state"]
    assert [(reason, text) for _, reason, text in h.events if reason == "Evicted"] == [("Evicted", message)]
    assert node.events == [], "stopped in time: no ExceededGracePeriod"
    assert pods.active_pods() == [], "an evicted pod is no longer active"
