"""The agent side of eviction (L21): an eviction asks the agent to stop the pod, waits until its containers
have stopped, then reclaims the pod's emptyDir volumes (kubelet's volume teardown for a terminated pod)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kubelite.agent.eviction.host_stats import PodPaths
from kubelite.agent.eviction.wiring import AgentPods
from kubelite.clock import FakeClock
from tests.unit.eviction_pods import Obj, empty_dir, pod


async def test_evict_waits_for_the_stop_then_removes_emptydirs(tmp_path: Path) -> None:
    clock = FakeClock()
    p = pod("filler", volumes=[empty_dir("scratch")])
    volume = tmp_path / "volumes" / "scratch"
    volume.mkdir(parents=True)
    (volume / "data.bin").write_bytes(b"x" * 4096)
    (tmp_path / "fill").mkdir()
    stops: list[tuple[str, int, str, str]] = []
    running = {"uid-filler": True}

    def stop(uid: str, grace: int, reason: str, message: str) -> bool:
        stops.append((uid, grace, reason, message))
        return True

    def locate(x: Obj) -> PodPaths:
        return PodPaths(volumes={"scratch": volume}, logs={"fill": tmp_path / "fill"})

    pods = AgentPods(clock, lambda: [p], stop, lambda uid: running[uid], locate)
    eviction = asyncio.create_task(pods.evict(p, 0, "Evicted", "The node was low on resource: ephemeral-storage. "))
    await clock.advance(1)
    assert stops == [("uid-filler", 0, "Evicted", "The node was low on resource: ephemeral-storage. ")]
    assert not eviction.done() and volume.exists(), "the volume stays while a container may still use it"
    assert not pods.cleaned_up(p)

    running["uid-filler"] = False
    await clock.advance(1)
    await asyncio.wait_for(eviction, 5)
    assert not volume.exists() and (tmp_path / "fill").exists(), "emptyDirs go, logs stay"
    assert pods.cleaned_up(p)


async def test_evicting_a_pod_the_agent_no_longer_runs_does_nothing(tmp_path: Path) -> None:
    volume = tmp_path / "scratch"
    volume.mkdir()
    p = pod("gone", volumes=[empty_dir("scratch")])
    pods = AgentPods(FakeClock(), lambda: [], lambda *a: False, lambda uid: False,
                     lambda x: PodPaths(volumes={"scratch": volume}))
    await pods.evict(p, 0, "Evicted", "m")
    assert volume.exists()
