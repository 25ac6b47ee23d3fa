"""Pod sync decides from recorded exits, even when it runs before the exit's watcher task.

A container's process ends (the runtime's pidfd callback finishes its handle) and its watcher
task records the exit one event-loop turn later. A pod sync woken for another reason (another
container's exit, a pod update) can run in between: it must see that container as ended with
its exit, not as "never started" (which started it again into the same log file: the log line
appeared twice in the e2e run) nor as still carrying its previous exit (which restarted it
without its back-off).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.pod_sync import PodSync
from kubelite.agent.runtime.interface import Exit
from tests.unit.test_pod_worker import Harness

Obj = dict[str, Any]


@pytest.mark.parametrize("policy,exits_before,want_starts,want_restarts,want_waiting", [
    pytest.param("OnFailure", 0, 1, 0, "", id="container restartPolicy Never runs once (seed 000 OnFailure pod)"),
    pytest.param("Never", 0, 1, 0, "", id="a Never pod's container is not started again"),
    pytest.param("Always", 1, 2, 1, "CrashLoopBackOff", id="a restarted container waits out its back-off again"),
])
async def test_an_exit_not_yet_recorded_by_its_watcher(tmp_path: Path, policy: str, exits_before: int,
                                                       want_starts: int, want_restarts: int,
                                                       want_waiting: str) -> None:
    h = Harness(tmp_path)
    container: Obj = {"name": "main", "image": "hollow", "command": ["hollow"]}
    if policy == "OnFailure":
        container["restartPolicy"] = "Never"
    pod: Obj = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
                "spec": {"restartPolicy": policy, "containers": [container]}}
    sync = PodSync(h, pod, lambda: None)
    await sync.sync_pod(pod)
    for _ in range(exits_before):  # an earlier instance ended, was recorded, and its back-off passed
        ended = sync.records[0].process
        assert ended is not None
        ended.finish(Exit(1))
        sync.containers.record_exit(sync.records[0], ended.result)
        await h.clock.advance(60)
        await sync.sync_pod(pod)
    assert starts(h) == exits_before + 1
    latest = sync.records[0].process
    assert latest is not None
    latest.finish(Exit(1))  # as the pidfd callback does; the watcher has not run yet
    await sync.sync_pod(pod)
    record = sync.records[0]
    assert starts(h) == want_starts
    assert (record.restarts, record.exit, record.waiting) == (want_restarts, Exit(1), want_waiting)


def starts(h: Harness) -> int:
    """Instances started so far (a Started event each)."""
    return sum(1 for _, reason, _ in h.events if reason == "Started")


@pytest.mark.parametrize("seen_after", [
    pytest.param(0.0, id="an exit seen as it happens"),
    pytest.param(3.25, id="an exit seen late (the shim's record of it): the back-off still counts from the exit"),
])
async def test_the_back_off_counts_from_the_exit_and_its_message_shows_the_period(
        tmp_path: Path, seen_after: float) -> None:
    """kubelet's IsInBackOffSince(key, FinishedAt): the restart is due a back-off period after the exit, and the
    CrashLoopBackOff message names that period in Go's form ("back-off 10s"), however late the exit was seen."""
    h = Harness(tmp_path)
    pod: Obj = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
                "spec": {"restartPolicy": "Always", "containers": [{"name": "main", "image": "hollow",
                                                                    "command": ["hollow"]}]}}
    sync = PodSync(h, pod, lambda: None)
    await sync.sync_pod(pod)
    first = sync.records[0].process
    assert first is not None
    first.finish(Exit(1))  # the first exit restarts at once (seed 000's gaps: 0, 10, 20, …)
    sync.containers.record_exit(sync.records[0], first.result)
    await sync.sync_pod(pod)
    ended = sync.records[0].process
    assert ended is not None and ended is not first
    await h.clock.advance(1)
    exited_at = h.clock.now()
    await h.clock.advance(seen_after)
    ended.finish(Exit(1, finished_at=exited_at))
    sync.containers.record_exit(sync.records[0], ended.result)
    await sync.sync_pod(pod)
    record = sync.records[0]
    assert record.not_before == exited_at + 10
    assert record.waiting_message.startswith("back-off 10s restarting failed container=main pod=p_default(u1)")
