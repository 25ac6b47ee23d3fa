"""PodWorkers alone, with a recording syncer (kubelet's pod_workers_test.go style: fakes that record, not mocks).

Sequencing only: the latest update wins, the work types follow sync → terminating → terminated and
never go back, the effective grace only shrinks, the first stop reason stays, a failing sync is
retried with back-off, and cancellation ends the sequencing only.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubelite.agent.pod_workers import PodWorkers, SyncResult
from kubelite.agent.termination import Termination
from kubelite.clock import FakeClock, rfc3339

Obj = dict[str, Any]


class RecordingSyncer:
    """Records (time, work type, pod version seen); `sync_pod` blocks until released when `hold` is set."""

    def __init__(self, clock: FakeClock, results: list[SyncResult | Exception] | None = None) -> None:
        self.clock = clock
        self.calls: list[tuple[float, str, str]] = []
        self.results = list(results or [])
        self.hold: asyncio.Event | None = None
        self.terminations: list[Termination] = []

    async def sync_pod(self, pod: Obj) -> SyncResult:
        self.calls.append((self.clock.monotonic(), "sync", pod["metadata"]["resourceVersion"]))
        if self.hold is not None:
            await self.hold.wait()
        result = self.results.pop(0) if self.results else SyncResult()
        if isinstance(result, Exception):
            raise result
        return result

    async def sync_terminating_pod(self, pod: Obj, termination: Termination) -> None:
        self.calls.append((self.clock.monotonic(), "terminating", pod["metadata"]["resourceVersion"]))
        self.terminations.append(termination)

    async def sync_terminated_pod(self, pod: Obj, termination: Termination) -> None:
        self.calls.append((self.clock.monotonic(), "terminated", pod["metadata"]["resourceVersion"]))


def pod(rv: str, deleted: bool = False, grace: int | None = None) -> Obj:
    meta: Obj = {"name": "p", "namespace": "default", "uid": "u1", "resourceVersion": rv}
    if deleted:
        meta["deletionTimestamp"] = rfc3339(0)
    if grace is not None:
        meta["deletionGracePeriodSeconds"] = grace
    return {"metadata": meta, "spec": {"terminationGracePeriodSeconds": 30}}


def workers(syncer: RecordingSyncer, clock: FakeClock) -> tuple[PodWorkers, list[str]]:
    finished: list[str] = []
    return PodWorkers(clock, lambda p, wake: syncer, finished.append), finished


async def test_latest_update_wins() -> None:
    """Updates that arrive during a sync replace each other; the next sync sees only the newest."""
    clock = FakeClock()
    syncer = RecordingSyncer(clock)
    syncer.hold = asyncio.Event()
    w, _ = workers(syncer, clock)
    w.update_pod(pod("1"))
    await clock.advance(0)
    for rv in ("2", "3", "4"):
        w.update_pod(pod(rv))
    syncer.hold.set()
    await clock.advance(0)
    assert [rv for _, kind, rv in syncer.calls] == ["1", "4"]


@pytest.mark.parametrize("name,steps,want_deadline,want_reason", [
    pytest.param("a shorter second delete shortens the grace", [("delete", 30), ("delete", 5)], 5.0, "",
                 id="grace only shrinks: shorter"),
    pytest.param("a longer stop decision does not lengthen it", [("delete", 5), ("stop", 20)], 5.0, "",
                 id="grace only shrinks: longer ignored"),
    pytest.param("eviction then a delete: the eviction's reason stays", [("stop", 10), ("delete", 2)], 2.0,
                 "Evicted", id="first stop reason stays"),
])
async def test_effective_grace_only_shrinks(name: str, steps: list[tuple[str, int]], want_deadline: float,
                                            want_reason: str) -> None:
    clock = FakeClock()
    syncer = RecordingSyncer(clock)
    syncer.hold = asyncio.Event()  # the first sync is still running while the stop decisions arrive
    w, finished = workers(syncer, clock)
    w.update_pod(pod("1"))
    await clock.advance(0)
    start = clock.now()
    for i, (kind, grace) in enumerate(steps):
        if kind == "delete":
            w.update_pod(pod(str(i + 2), deleted=True, grace=grace))
        else:
            assert w.stop_pod("u1", grace, "Evicted", "The node was low on resource: memory.")
    assert w.is_terminating("u1") and w.could_have_running_containers("u1")
    syncer.hold.set()
    await clock.advance(0)
    [termination] = syncer.terminations
    assert (termination.deadline - start, termination.reason) == (want_deadline, want_reason)
    assert [kind for _, kind, _ in syncer.calls] == ["sync", "terminating", "terminated"]
    assert finished == ["u1"] and not w.could_have_running_containers("u1")


@pytest.mark.parametrize("result,want_reason", [
    pytest.param(SyncResult(terminal=True), "", id="terminal pod"),
    pytest.param(SyncResult(stop=("DeadlineExceeded", "too long")), "DeadlineExceeded", id="stop decision"),
])
async def test_sync_result_moves_to_terminating(result: SyncResult, want_reason: str) -> None:
    clock = FakeClock()
    syncer = RecordingSyncer(clock, [SyncResult(), result])
    w, finished = workers(syncer, clock)
    w.update_pod(pod("1"))
    await clock.advance(0)
    w.update_pod(pod("2"))
    await clock.advance(0)
    w.update_pod(pod("3"))  # after terminated: finished processing, the update is ignored
    await clock.advance(0)
    assert [(kind, rv) for _, kind, rv in syncer.calls] == [("sync", "1"), ("sync", "2"), ("terminating", "2"),
                                                            ("terminated", "2")]
    assert w.is_finished("u1") and not w.stop_pod("u1", 0, "Evicted", "too late")
    w.forget("u1")
    assert "u1" not in w.pods
    assert syncer.terminations[0].reason == want_reason and finished[0] == "u1"


async def test_failed_sync_is_retried_with_back_off() -> None:
    clock = FakeClock()
    syncer = RecordingSyncer(clock, [RuntimeError("boom"), RuntimeError("boom"), SyncResult()])
    w, _ = workers(syncer, clock)
    w.update_pod(pod("1"))
    await clock.advance(0)
    for _ in range(5):
        await clock.advance(1)
    assert [t for t, _, _ in syncer.calls] == [0.0, 1.0, 3.0]


async def test_resync_at_wakes_the_worker() -> None:
    clock = FakeClock()
    syncer = RecordingSyncer(clock, [SyncResult(resync_at=clock.now() + 7)])
    w, _ = workers(syncer, clock)
    w.update_pod(pod("1"))
    await clock.advance(0)
    for _ in range(10):
        await clock.advance(1)
    assert [t for t, _, _ in syncer.calls] == [0.0, 7.0]
