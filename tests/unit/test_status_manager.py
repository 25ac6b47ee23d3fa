"""The status manager on a fake clock: the only writer of pod status, retried until acknowledged.

kubelet's status_manager_test.go cases, ported where they apply: a failed write is retried with
back-off (TestSyncPodBackoff's intent), a stale version is never sent (TestStaleUpdates), the
object is deleted only after the terminal status was written (TestDoNotDeleteMirrorPods' inverse:
canBeDeleted), a vanished pod is forgotten (TestSyncPodNotFound / a uid conflict), and the
periodic resync re-sends a status the API does not show (TestReconcilePodStatus).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from kubelite.agent.status_manager import StatusManager
from kubelite.api.errors import ApiError, unavailable
from kubelite.apiserver.patch import strategic_merge_patch
from kubelite.clock import FakeClock

Obj = dict[str, Any]
POD: Obj = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}}


class FlakyClient:
    """Fails the first `failures` requests (with `error`), then answers; records every attempt."""

    def __init__(self, clock: FakeClock, failures: int, error: Exception | str | None = None) -> None:
        self.clock, self.failures = clock, failures
        self.error = error or unavailable("connection refused")  # "stall": never answers
        self.attempts: list[tuple[float, str, Any]] = []
        self.acked: list[tuple[float, str, Any]] = []

    async def _answer(self, kind: str, body: Any) -> Obj:
        self.attempts.append((self.clock.monotonic(), kind, body))
        if len(self.attempts) <= self.failures:
            if self.error == "stall":
                await self.clock.sleep(3600)
            assert isinstance(self.error, Exception)
            raise self.error
        self.acked.append((self.clock.monotonic(), kind, body))
        return {}

    async def patch(self, path: str, body: Any, content_type: str = "") -> Obj:
        return await self._answer("patch", body["status"])

    async def delete(self, path: str, options: Obj | None = None) -> Obj:
        return await self._answer("delete", options)


async def _run(manager: StatusManager, clock: FakeClock, seconds: int) -> None:
    task = asyncio.ensure_future(manager.run())
    await clock.advance(0)
    for _ in range(seconds):
        await clock.advance(1)
    task.cancel()


@pytest.mark.parametrize("failures,error,want_attempts", [
    pytest.param(3, None, [0.0, 1.0, 3.0, 7.0], id="retried with back-off (1 s doubling) until acknowledged"),
    pytest.param(5, None, [0.0, 1.0, 3.0, 7.0, 15.0, 25.0], id="the back-off stops at 10 s"),
    pytest.param(1, ApiError(500, "InternalError", "boom"), [0.0, 1.0], id="a server error is retried"),
    pytest.param(1, "stall", [0.0, 11.0], id="a stalled server: the attempt is given up after 10 s, then retried"),
])
async def test_failed_status_write_is_retried(failures: int, error: Exception | str | None,
                                              want_attempts: list[float]) -> None:
    clock = FakeClock()
    client = FlakyClient(clock, failures, error)
    manager = StatusManager(client, clock)  # type: ignore[arg-type]
    manager.set_status(POD, {"phase": "Running"})
    await _run(manager, clock, 40)
    assert [t for t, _, _ in client.attempts] == want_attempts
    assert [body for _, _, body in client.acked] == [{"phase": "Running"}]
    assert manager.synced("u1")


async def test_stale_updates_are_never_sent() -> None:
    """TestStaleUpdates: a newer status set while a write is failing replaces it; the older one is not sent."""
    clock = FakeClock()
    client = FlakyClient(clock, 1)
    manager = StatusManager(client, clock)  # type: ignore[arg-type]
    manager.set_status(POD, {"phase": "Pending"})
    task = asyncio.ensure_future(manager.run())
    await clock.advance(0)
    manager.set_status(POD, {"phase": "Running"})
    manager.set_status(POD, {"phase": "Running"})  # unchanged: no new version
    await clock.advance(0)
    for _ in range(5):
        await clock.advance(1)
    task.cancel()
    assert [body for _, _, body in client.attempts] == [{"phase": "Pending"}, {"phase": "Running"}]
    assert manager.pods["u1"].version == 2 and manager.pods["u1"].acked == 2


@pytest.mark.parametrize("failures,want", [
    pytest.param(0, [(0.0, "patch"), (0.0, "delete")], id="deleted right after the terminal status"),
    pytest.param(2, [(3.0, "patch"), (3.0, "delete")], id="the delete waits until the status is acknowledged"),
])
async def test_pod_deleted_only_after_final_status_is_acknowledged(failures: int,
                                                                  want: list[tuple[float, str]]) -> None:
    clock = FakeClock()
    client = FlakyClient(clock, failures)
    manager = StatusManager(client, clock)  # type: ignore[arg-type]
    manager.set_status(POD, {"phase": "Succeeded"})
    manager.delete_when_synced(POD)
    await _run(manager, clock, 10)
    assert [(t, kind) for t, kind, _ in client.acked] == want
    assert client.acked[-1][2] == {"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"}}


@pytest.mark.parametrize("code", [pytest.param(404, id="TestSyncPodNotFound"),
                                  pytest.param(409, id="another pod now holds the name (uid precondition)")])
async def test_gone_pod_is_not_retried(code: int) -> None:
    clock = FakeClock()
    client = FlakyClient(clock, 100, ApiError(code, "x", "gone"))
    manager = StatusManager(client, clock)  # type: ignore[arg-type]
    manager.set_status(POD, {"phase": "Running"})
    await _run(manager, clock, 30)
    assert len(client.attempts) == 1


async def test_reconcile_pod_status() -> None:
    """TestReconcilePodStatus: the periodic resync sends again a status the API object does not show."""
    clock = FakeClock()
    client = FlakyClient(clock, 0)
    api: dict[str, Obj] = {"p": {**POD, "status": {"phase": "Running"}}}
    manager = StatusManager(client, clock, lambda ns, name: api.get(name))  # type: ignore[arg-type]
    manager.set_status(POD, {"phase": "Running"})
    await _run(manager, clock, 15)
    assert client.acked == []  # the API shows it already: the diff is empty, nothing is sent (PatchPodStatus)
    assert manager.synced("u1")
    api["p"] = {**POD, "status": {"phase": "Pending"}}  # e.g. a server restored from before the write
    manager.object_changed("u1")  # as the agent's pod informer reports it
    task = asyncio.ensure_future(manager.run())
    await clock.advance(0)
    for _ in range(11):
        await clock.advance(1)
    task.cancel()
    assert [body for _, _, body in client.acked] == [{"phase": "Running"}]


async def test_resync_restores_the_agents_condition_the_node_lifecycle_controller_overwrote() -> None:
    """kubelet's isPodStatusByKubeletEqual compares the conditions kubelet owns: a pod the node lifecycle
    controller marked Ready=False while its node was unreachable gets the agent's Ready=True again at the next
    resync, though its phase and containers are as acknowledged; a condition the agent does not set
    (DisruptionTarget) is not the agent's to correct."""
    clock = FakeClock()
    client = FlakyClient(clock, 0)
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    api: dict[str, Obj] = {"p": {**POD, "status": ready}}
    manager = StatusManager(client, clock, lambda ns, name: api.get(name))  # type: ignore[arg-type]
    manager.set_status(POD, ready)
    api["p"] = {**POD, "status": {**ready, "conditions": [{"type": "Ready", "status": "True"},
                                                           {"type": "DisruptionTarget", "status": "True"}]}}
    await _run(manager, clock, 15)
    assert client.acked == [], "sent for a condition the agent does not own"
    api["p"] = {**POD, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"},
                                                                     {"type": "DisruptionTarget", "status": "True"}]}}
    manager.object_changed("u1")
    await _run(manager, clock, 11)
    assert [body for _, _, body in client.acked] == [{  # the agent's own condition, as a diff from the API's
        "conditions": [{"type": "Ready", "status": "True"}], "$setElementOrder/conditions": [{"type": "Ready"}]}]


ACKED: Obj = {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}],
              "containerStatuses": [{"name": "c", "restartCount": 0, "state": {"running": {}},
                                     "containerID": "kubelite://a"}]}


@pytest.mark.parametrize("overwrite", [
    pytest.param({"podIP": "10.9.9.9"}, id="podIP"),
    pytest.param({"podIPs": [{"ip": "10.9.9.9"}]}, id="podIPs"),
    pytest.param({"hostIP": "10.9.9.9"}, id="hostIP"),
    pytest.param({"containerStatuses": [{**ACKED["containerStatuses"][0], "containerID": "kubelite://b"}]},
                 id="a container's containerID"),
])
async def test_resync_restores_what_another_writer_overwrote(overwrite: Obj) -> None:
    """isPodStatusByKubeletEqual compares the whole status the agent writes: a pod IP or container ID overwritten
    through pods/status (which Services' endpoints follow) is written back at the next resync."""
    clock = FakeClock()
    client = FlakyClient(clock, 0)
    api: dict[str, Obj] = {"p": {**POD, "status": ACKED}}
    manager = StatusManager(client, clock, lambda ns, name: api.get(name))  # type: ignore[arg-type]
    manager.set_status(POD, ACKED)
    await _run(manager, clock, 15)
    assert client.acked == []
    api["p"] = {**POD, "status": {**ACKED, **overwrite}}
    manager.object_changed("u1")
    await _run(manager, clock, 11)
    assert len(client.acked) == 1, "the overwritten status was not written back"


@pytest.mark.parametrize("change,resent,looked_up", [
    pytest.param("nothing", False, 0, id="neither side changed since they matched: not looked at again, not sent"),
    pytest.param("api object replaced, same status", False, 1, id="a new API object that shows the status: not sent"),
    pytest.param("api object replaced, other status", True, 2,  # compared, then the diff's base
                 id="a new API object that does not show it: sent again, as a diff from what it shows"),
    pytest.param("newer status acknowledged, api object unchanged", True, 2,
                 id="a newer acknowledged status the unchanged API object does not show: sent again"),
    pytest.param("other pod's object changed", False, 0, id="a change to another pod's object: not looked at"),
])
async def test_resync_compares_again_only_what_changed(change: str, resent: bool, looked_up: int) -> None:
    """A running pod whose status and object stay as they were costs the periodic resync nothing
    (BENCHMARKS.md, Running pod cost); any change of either side is compared at the next resync."""
    clock = FakeClock()
    client = FlakyClient(clock, 0)
    api: dict[str, Obj] = {"p": {**POD, "status": {"phase": "Running"}}}
    lookups: list[str] = []

    def lookup(ns: str, name: str) -> Obj | None:
        lookups.append(name)
        return api.get(name)

    manager = StatusManager(client, clock, lookup)  # type: ignore[arg-type]
    manager.set_status(POD, {"phase": "Running"})
    await _run(manager, clock, 11)  # written (the patch is a diff from the API object), then the first resync
    assert lookups == ["p", "p"]   # finds the API showing it
    sent = len(client.acked)
    if change.startswith("api object replaced"):
        api["p"] = {**POD, "status": {"phase": "Running" if change.endswith("same status") else "Pending"}}
        manager.object_changed("u1")
    elif change.startswith("newer status"):
        manager.set_status(POD, {"phase": "Succeeded"})
    elif change.startswith("other pod"):
        manager.object_changed("u2")
    await _run(manager, clock, 11)
    newer = 1 if change.startswith("newer status") else 0
    assert len(client.acked) - sent - newer == (1 if resent else 0)
    assert len(lookups) - 2 == looked_up


class NamingClient(FlakyClient):
    """Also records which pod each status write was for."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock, 0)
        self.pods: list[str] = []

    async def patch(self, path: str, body: Any, content_type: str = "") -> Obj:
        self.pods.append(path.split("/")[-2])
        return await super().patch(path, body, content_type)


async def test_due_statuses_are_written_in_the_order_the_pods_were_first_seen() -> None:
    """Whatever order they became due in (a simulation's event log depends on the order of writes)."""
    clock = FakeClock()
    client = NamingClient(clock)
    manager = StatusManager(client, clock)  # type: ignore[arg-type]
    pods = [{"metadata": {"name": n, "namespace": "default", "uid": n}} for n in ("a", "b", "c")]
    for pod in pods:
        manager.set_status(pod, {"phase": "Pending"})
    await _run(manager, clock, 1)
    for pod in reversed(pods):
        manager.set_status(pod, {"phase": "Running"})
    await _run(manager, clock, 1)
    assert [body["phase"] for _, _, body in client.acked] == ["Pending"] * 3 + ["Running"] * 3
    assert client.pods == ["a", "b", "c", "a", "b", "c"]


class CountingManager(StatusManager):
    """Counts the sender's wake-ups (each pass of its loop sends what is due, once) and records its resyncs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.passes: list[float] = []
        self.resyncs: list[float] = []

    def send_due(self, now: float) -> list[float]:
        self.passes.append(now)
        return super().send_due(now)

    def resync(self) -> None:
        self.resyncs.append(self.clock.monotonic())
        super().resync()


class ServerClient(FlakyClient):
    """Acknowledges every write, and the API object shows it from then on (as the informer would deliver it)."""

    def __init__(self, clock: FakeClock, api: dict[str, Obj]) -> None:
        super().__init__(clock, 0)
        self.api = api

    async def patch(self, path: str, body: Any, content_type: str = "") -> Obj:
        name = path.split("/")[-2]
        held = (self.api.get(name) or {}).get("status") or {}
        self.api[name] = {**POD, "status": strategic_merge_patch(held, body["status"], "V1PodStatus")}
        return await super().patch(path, body, content_type)


@pytest.mark.parametrize("change_at,change,want_sent,want_resyncs,want_passes", [
    pytest.param(None, "", [0.0], [10.0], [0.0, 0.0, 10.0],
                 id="idle once the API shows every status: no resync and no wake-up at the next 10 s instants"),
    pytest.param(23.0, "api object replaced, other status", [0.0, 30.0], [10.0, 30.0, 40.0],
                 [0.0, 0.0, 10.0, 30.0, 30.0, 40.0],
                 id="a changed API object is compared at the next 10 s instant (30 s, not 33 s), and re-sent"),
    pytest.param(23.0, "api object replaced, same status", [0.0], [10.0, 30.0], [0.0, 0.0, 10.0, 30.0],
                 id="a changed API object that shows the status: compared at 30 s, nothing sent"),
    pytest.param(47.0, "api object replaced, other status", [0.0, 50.0], [10.0, 50.0, 60.0],
                 [0.0, 0.0, 10.0, 50.0, 50.0, 60.0],
                 id="an API object replaced after idle instants passed unseen: compared at the grid's next, 50 s"),
    pytest.param(30.0, "api object replaced, other status", [0.0, 40.0], [10.0, 40.0, 50.0],
                 [0.0, 0.0, 10.0, 40.0, 40.0, 50.0],
                 id="an API object replaced at an idle instant itself: that instant has passed, compared at 40 s"),
    pytest.param(23.0, "api object replaced, then forgotten", [0.0], [10.0], [0.0, 0.0, 10.0],
                 id="a pod forgotten before its compare: nothing to compare at 30 s, no wake-up, nothing sent"),
    pytest.param(25.0, "newer status", [0.0, 25.0], [10.0, 30.0], [0.0, 0.0, 10.0, 25.0, 25.0, 30.0],
                 id="a new status is written at once, and compared with its API object at the next 10 s instant"),
])
async def test_idle_sender_wakes_only_for_work_and_keeps_the_resync_instants(
        change_at: float | None, change: str, want_sent: list[float], want_resyncs: list[float],
        want_passes: list[float]) -> None:
    """An idle node's status manager costs nothing every 10 s (BENCHMARKS.md, Idle agent, second pass), and its
    resyncs stay on the grid they had: 10 s after the sender started, every 10 s."""
    clock = FakeClock()
    api: dict[str, Obj] = {}
    client = ServerClient(clock, api)
    manager = CountingManager(client, clock, lambda ns, name: api.get(name))  # type: ignore[arg-type]
    manager.set_status(POD, {"phase": "Running"})
    task = asyncio.ensure_future(manager.run())
    await clock.advance(0)
    for second in range(1, 61):
        await clock.advance(1)
        if second == change_at and change.startswith("api object replaced"):
            api["p"] = {**POD, "status": {"phase": "Running" if change.endswith("same status") else "Pending"}}
            manager.object_changed("u1")
            if change.endswith("forgotten"):
                manager.forget("u1")
        elif second == change_at:
            manager.set_status(POD, {"phase": "Succeeded"})
        await clock.advance(0)  # what the change sets off, at its instant
    task.cancel()
    assert [t for t, _, _ in client.acked] == want_sent
    assert manager.resyncs == want_resyncs
    assert manager.passes == want_passes


@pytest.mark.parametrize("origin,now,want", [
    pytest.param(0.0, 0.0, 10.0, id="at the start: the first instant is one period on"),
    pytest.param(0.0, 9.999, 10.0, id="just before an instant: that instant"),
    pytest.param(0.0, 10.0, 20.0, id="at an instant: the next one"),
    pytest.param(0.1, 3600.05, 3600.1, id="an origin off the whole seconds: the grid keeps it"),
    pytest.param(1_000.3, 87_000.0, 1_000.3 + 8_600 * 10.0, id="a day on: origin + k·period, no drift"),
])
def test_resync_instants_are_a_fixed_grid_from_the_senders_start(origin: float, now: float, want: float) -> None:
    """kubelet's syncTicker: every resync instant is origin + k·10 s, computed from the origin (never by adding
    to the last instant, whose roundings would add up), so an idle sender that saw none of them for an hour
    resyncs exactly where one that saw each would."""
    manager = StatusManager(None, FakeClock())  # type: ignore[arg-type]
    manager._origin = origin
    assert manager._instant_after(now) == want


def test_every_resync_instant_is_the_first_after_the_one_before() -> None:
    """The grid is the same whichever instant it is asked from: from each instant the next, and from just
    before each that instant itself — for a day of instants from an origin that is no whole second."""
    manager = StatusManager(None, FakeClock())  # type: ignore[arg-type]
    manager._origin = 12.345
    grid = [12.345 + k * 10.0 for k in range(1, 8_641)]
    for before, at in zip([12.345, *grid], grid, strict=False):
        assert manager._instant_after(before) == at
        assert manager._instant_after(math.nextafter(at, 0.0)) == at


@pytest.mark.parametrize("api_conditions,written,want", [
    pytest.param([{"type": "PodScheduled", "status": "True"}, {"type": "DisruptionTarget", "status": "True"}], None,
                 [{"type": "PodScheduled", "status": "True"}, {"type": "DisruptionTarget", "status": "True"}],
                 id="a refusal's status without conditions keeps the others' conditions (nothing acknowledged yet)"),
    pytest.param([{"type": "PodScheduled", "status": "True"}, {"type": "DisruptionTarget", "status": "True"}],
                 {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]},
                 [{"type": "PodScheduled", "status": "True"}, {"type": "DisruptionTarget", "status": "True"}],
                 id="a status without conditions after one with the agent's: only the agent's are deleted"),
])
async def test_a_status_without_conditions_never_deletes_other_components_conditions(
        api_conditions: list[Obj], written: Obj | None, want: list[Obj]) -> None:
    """An admission refusal's status (phase Failed, reason, message) has no conditions: the two-way patch must
    not send `conditions: null`, which would delete the scheduler's PodScheduled and a DisruptionTarget too."""
    clock = FakeClock()
    client = FlakyClient(clock, 0)
    api: dict[str, Obj] = {"p": {**POD, "status": {"phase": "Pending", "conditions": api_conditions}}}
    manager = StatusManager(client, clock, lambda ns, name: api.get(name))  # type: ignore[arg-type]
    if written is not None:  # acknowledged first, and merged into the API's object
        manager.set_status(POD, written)
        await _run(manager, clock, 3)
        for _, _, body in client.acked:
            api["p"] = strategic_merge_patch(api["p"], {"status": body}, "V1Pod")
    manager.set_status(POD, {"phase": "Failed", "reason": "OutOfcpu", "message": "Node didn't have enough resource"})
    await _run(manager, clock, 3)
    for _, _, body in client.acked[-1:]:
        api["p"] = strategic_merge_patch(api["p"], {"status": body}, "V1Pod")
    assert api["p"]["status"]["phase"] == "Failed"
    assert api["p"]["status"]["conditions"] == want
