"""How the agent plugs the eviction manager in, through a handful of its own entry points.

The agent hands over callables rather than itself: the pods it runs, its "stop this pod with
grace G and leave it Failed with reason R / message M" decision, whether a pod still has
running containers, and where a pod's files and processes are. `AgentPods` turns them into
the manager's PodKiller: an eviction waits until the pod's containers have stopped, then
removes the pod's emptyDir volumes, as kubelet tears down a terminated pod's volumes, so the
disk an evicted pod used is actually reclaimed (its logs stay readable).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubelite.agent.eviction.host_stats import HostStatsProvider, Locate
from kubelite.agent.eviction.manager import EvictionManager
from kubelite.agent.eviction.node_pressure import NodePressure
from kubelite.agent.eviction.node_status import PressureState
from kubelite.agent.eviction.thresholds import EvictionConfig
from kubelite.client.interface import Client
from kubelite.clock import Clock

Obj = dict[str, Any]
STOP_POLL = 0.2


class AgentPods:
    def __init__(self, clock: Clock, active: Callable[[], list[Obj]], stop: Callable[[str, int, str, str], bool],
                 running: Callable[[str], bool], locate: Locate) -> None:
        self.clock = clock
        self.active = active
        self.stop = stop
        self.running = running
        self.locate = locate

    def active_pods(self) -> list[Obj]:
        return self.active()

    async def evict(self, pod: Obj, grace_seconds: int, reason: str, message: str) -> None:
        uid = pod["metadata"]["uid"]
        if not self.stop(uid, grace_seconds, reason, message):
            return
        while self.running(uid):
            await self.clock.sleep(STOP_POLL)
        await asyncio.to_thread(_remove, list(self.locate(pod).volumes.values()))

    def cleaned_up(self, pod: Obj) -> bool:
        return not self.running(pod["metadata"]["uid"]) and not any(v.exists()
                                                                    for v in self.locate(pod).volumes.values())


def _remove(directories: list[Path]) -> None:
    for d in directories:
        shutil.rmtree(d, ignore_errors=True)


@dataclass
class Eviction:
    """What the agent holds: the manager (its loop, its admission) and the Node reporter (its conditions)."""
    manager: EvictionManager
    reporter: NodePressure

    def admit(self, pod: Obj) -> tuple[str, str] | None:
        return self.manager.admit(pod)

    def pressure(self) -> PressureState:
        return self.reporter.state

    async def run(self) -> None:
        await self.manager.run()


def build(config: EvictionConfig, client: Client, clock: Clock, node_name: str, data_dir: Path,
          post_event: Callable[[Obj], None], pods: AgentPods) -> Eviction:
    reporter = NodePressure(client, clock, node_name, post_event)
    stats = HostStatsProvider(clock, data_dir, pods.locate)
    return Eviction(EvictionManager(config, clock, stats, pods, reporter), reporter)
