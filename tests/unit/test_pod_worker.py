"""The pod worker's state machine on a fake clock with the hollow runtime: no sleeping, exact times.

Mirrors the kubelet behaviours of L3-L7 and L12-L14: restarts with backoff, init ordering, grace
periods, the 2 s minimum window, sidecars stopped last, terminal phase before the grace-0 delete.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.config import NodeConfig
from kubelite.agent.pod_sync import PodSync
from kubelite.agent.pod_workers import PodWorkers
from kubelite.agent.runtime.hollow import HollowRuntime
from kubelite.agent.runtime.interface import Runtime
from kubelite.agent.volumes.manager import VolumeManager
from kubelite.clock import Clock, FakeClock, rfc3339
from tests.unit.volume_fakes import ScriptedTokens, StaticObjects

Obj = dict[str, Any]
NODE_ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "ephemeral-storage": "100Gi", "pods": "110"}


class Harness:
    """The node services of pod sync, recording instead of calling the API (a NodeServices and a StatusWriter)."""

    def __init__(self, tmp: Path, max_restart: float = 300.0, clock: Clock | None = None,
                 runtime: Runtime | None = None) -> None:
        self.clock: Any = clock or FakeClock()
        self.runtime: Any = runtime or HollowRuntime(self.clock)
        self.config = NodeConfig(max_restart_period=max_restart)
        self.data_dir = tmp
        self.host_ip = "127.0.0.1"
        self.base_env: dict[str, str] = {}
        self.events: list[tuple[float, str, str]] = []
        self.event_paths: list[str] = []  # each event's involvedObject.fieldPath, in step with `events`
        self.statuses: list[tuple[float, Obj]] = []
        self.deleted_at: float | None = None
        self.status = self
        self.objects = StaticObjects()
        self.volumes = VolumeManager(self.objects, ScriptedTokens(), self.host_ip, NODE_ALLOCATABLE)
        self.pod_workers = PodWorkers(self.clock, lambda pod, wake: PodSync(self, pod, wake))
        self._bg: set[asyncio.Future[Any]] = set()

    def set_status(self, pod: Obj, status: Obj) -> None:
        if not self.statuses or self.statuses[-1][1] != status:
            self.statuses.append((self.clock.monotonic(), status))

    def delete_when_synced(self, pod: Obj) -> None:
        self.deleted_at = self.clock.monotonic()

    def event(self, pod: Obj, reason: str, message: str, kind: str = "Normal", field_path: str = "") -> None:
        self.events.append((self.clock.monotonic(), reason, message))
        self.event_paths.append(field_path)

    def spawn(self, coro: Any) -> None:
        fut = asyncio.ensure_future(coro)
        self._bg.add(fut)

    def process(self, uid: str = "u1") -> Any:
        """The current (or last) instance of the pod's first container, as its record holds it."""
        syncer = self.pod_workers.pods[uid].syncer
        assert isinstance(syncer, PodSync)
        return syncer.records[0].process

    def phase(self) -> str:
        return str(self.statuses[-1][1]["phase"]) if self.statuses else ""

    def container(self, name: str) -> Obj:
        st = self.statuses[-1][1]
        return next(c for c in st.get("containerStatuses", []) + st.get("initContainerStatuses", [])
                    if c["name"] == name)


def _pod(containers: list[Obj], init: list[Obj] | None = None, policy: str = "Always", grace: int = 30) -> Obj:
    spec: Obj = {"containers": containers, "restartPolicy": policy, "terminationGracePeriodSeconds": grace}
    if init:
        spec["initContainers"] = init
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": spec}


def _c(name: str, *args: str, **extra: Any) -> Obj:
    return {"name": name, "image": "hollow", "command": ["hollow", *args], **extra}


async def _start(h: Harness, pod: Obj) -> tuple[Obj, asyncio.Task[None]]:
    h.pod_workers.update_pod(pod)
    task = h.pod_workers.pods[pod["metadata"]["uid"]].task
    assert task is not None
    await h.clock.advance(0)
    return pod, task


async def _delete(pod: Obj, h: Harness, grace: int | None = None) -> None:
    """Deliver the deleted pod object to the pod workers and let them react at this instant of fake time."""
    deleted = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": rfc3339(h.clock.now())}}
    if grace is not None:
        deleted["metadata"]["deletionGracePeriodSeconds"] = grace
    h.pod_workers.update_pod(deleted)
    await h.clock.advance(0)


async def test_restarts_follow_the_backoff(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("main", "--run", "1", "--exit", "1")]))
    for _ in range(60):
        await h.clock.advance(1)
    starts = [t for t, reason, _ in h.events if reason == "Started"]
    # exits after 1 s each time; restarts: at once, then after 10 s, 20 s (kubelet's backoff)
    assert starts[:4] == [0.0, 1.0, 12.0, 33.0]
    assert h.container("main")["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert h.phase() == "Running"
    backoffs = [(t, message) for t, reason, message in h.events if reason == "BackOff"]
    assert [t for t, _ in backoffs[:2]] == [2.0, 13.0]  # once per back-off period
    # kuberuntime_manager.go doBackOff: the pod as format.Pod names it
    assert backoffs[0][1] == "Back-off restarting failed container main in pod p_default(u1)"
    assert h.container("main")["state"]["waiting"]["message"].endswith("container=main pod=p_default(u1)")
    task.cancel()


async def test_node_maximum_caps_the_backoff(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_restart=2)
    _, task = await _start(h, _pod([_c("main", "--run", "1", "--exit", "1")]))
    for _ in range(12):
        await h.clock.advance(1)
    starts = [t for t, reason, _ in h.events if reason == "Started"]
    assert starts[:5] == [0.0, 1.0, 4.0, 7.0, 10.0]
    task.cancel()


async def test_init_containers_run_in_order_then_apps(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("app")], init=[_c("one", "--run", "2"), _c("two", "--run", "3")]))
    await h.clock.advance(1)
    assert h.phase() == "Pending"
    for _ in range(5):
        await h.clock.advance(1)
    started = [(t, msg.split()[-1]) for t, reason, msg in h.events if reason == "Started"]
    assert started == [(0.0, "one"), (2.0, "two"), (5.0, "app")]
    assert h.phase() == "Running"
    task.cancel()


async def test_init_failure_with_never_fails_the_pod(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("app")], init=[_c("one", "--run", "1", "--exit", "3")], policy="Never"))
    await h.clock.advance(2)
    await task
    assert h.phase() == "Failed"
    assert not any(msg.endswith(" app") for _, reason, msg in h.events if reason == "Started")


@pytest.mark.parametrize("ignore,want_kill_at", [(False, None), (True, 30.0)])
async def test_grace_period_then_sigkill(tmp_path: Path, ignore: bool, want_kill_at: float | None) -> None:
    h = Harness(tmp_path)
    args = ["--ignore-term"] if ignore else []
    pod, task = await _start(h, _pod([_c("main", *args)]))
    await _delete(pod, h)
    for _ in range(40):
        await h.clock.advance(1)
    p = h.process()
    assert signal.SIGTERM in p.signals
    killed = signal.SIGKILL in p.signals
    assert killed == ignore
    assert h.deleted_at == (want_kill_at if want_kill_at is not None else 0.0)
    # killContainer SIGKILLs at the end of the window with no event: ExceededGracePeriod is only killPodNow's
    assert not [t for t, reason, _ in h.events if reason == "ExceededGracePeriod"]
    assert h.statuses[-1][1]["phase"] == "Failed"  # 143 / 137: not a clean exit
    await task


async def test_pre_stop_overrun_gets_two_more_seconds(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    main = _c("main", "--ignore-term", lifecycle={"preStop": {"sleep": {"seconds": 100}}})
    pod, task = await _start(h, _pod([main], grace=5))
    await _delete(pod, h)
    for _ in range(10):
        await h.clock.advance(1)
    assert h.deleted_at == 7.0  # 5 s of grace spent in preStop, then the 2 s window, then SIGKILL
    # executePreStopHook only logs a hook that outlives the grace period
    assert not any(reason == "FailedPreStopHook" for _, reason, _ in h.events)
    await task


async def test_sidecars_stop_after_apps_in_reverse_order(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    init = [_c("side-a", "--term-after", "1", restartPolicy="Always"),
            _c("side-b", "--term-after", "1", restartPolicy="Always")]
    pod, task = await _start(h, _pod([_c("app", "--term-after", "3")], init=init))
    await h.clock.advance(1)
    await _delete(pod, h)
    for _ in range(10):
        await h.clock.advance(1)
    killing = [(t, msg.split()[-1]) for t, reason, msg in h.events if reason == "Killing"]
    assert killing == [(1.0, "app"), (4.0, "side-b"), (5.0, "side-a")]
    await task


async def test_second_delete_shortens_grace(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    pod, task = await _start(h, _pod([_c("main", "--ignore-term")], grace=60))
    await _delete(pod, h)
    await h.clock.advance(5)
    await _delete(pod, h, grace=3)
    for _ in range(5):
        await h.clock.advance(1)
    assert h.deleted_at == 5.0  # started at 0 with 60 s; at 5 s a 3 s grace has already run out: killed now
    await task


@pytest.mark.parametrize("name,deadline,ignore_term,want_stop_signal_at,want_failed_at", [
    ("stops at the deadline and fails the pod", 5, False, 5.0, 5.0),
    ("the grace period still applies after the deadline", 5, True, 5.0, 8.0),
])
async def test_active_deadline_fails_the_pod(tmp_path: Path, name: str, deadline: int, ignore_term: bool,
                                             want_stop_signal_at: float, want_failed_at: float) -> None:
    h = Harness(tmp_path)
    pod = _pod([_c("main", *(["--ignore-term"] if ignore_term else []))], grace=3)
    pod["spec"]["activeDeadlineSeconds"] = deadline
    _, task = await _start(h, pod)
    for _ in range(10):
        await h.clock.advance(1)
    await task
    assert [t for t, reason, _ in h.events if reason == "DeadlineExceeded"] == [want_stop_signal_at]
    failed_at, status = next((t, st) for t, st in h.statuses if st["phase"] == "Failed")
    assert failed_at == want_failed_at
    assert (status["reason"], status["message"]) == ("DeadlineExceeded", "Pod was active on the node longer than "
                                                                         "the specified deadline")
    assert h.deleted_at is None  # the object stays, Failed


async def test_stop_pod_decision_stops_then_fails_with_reason(tmp_path: Path) -> None:
    """The eviction hook: stop now with grace G (shorter than the pod's), then Failed with reason R and message M."""
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("main", "--ignore-term")], grace=30))
    await h.clock.advance(1)
    assert h.pod_workers.stop_pod("u1", 3, "Evicted", "The node was low on resource: memory.")
    for _ in range(5):
        await h.clock.advance(1)
    await task
    assert h.process().signals == [signal.SIGTERM, signal.SIGKILL]
    failed_at, status = next((t, st) for t, st in h.statuses if st["phase"] == "Failed")
    assert failed_at == 4.0  # decided at 1 s, SIGKILL when the 3 s grace ran out
    assert (status["reason"], status["message"]) == ("Evicted", "The node was low on resource: memory.")
    assert [reason for _, reason, _ in h.events if reason == "Evicted"] == ["Evicted"]
    assert h.deleted_at is None and not h.pod_workers.stop_pod("u1", 0, "Evicted", "again")


async def test_cancelled_worker_never_kills_containers(tmp_path: Path) -> None:
    """Agent shutdown cancels the pod workers: the sequencing stops, the containers do not."""
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("main")]))
    await h.pod_workers.stop()
    await h.clock.advance(60)
    assert task.cancelled()
    assert h.process().alive and h.process().signals == []


@pytest.mark.parametrize("rule", [
    pytest.param({"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}},
                 id="should restart container on rule match"),
    pytest.param({"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}},
                 id="should restart container on rule match (operator NotIn)"),
])
async def test_restart_rule_under_pod_never(tmp_path: Path, rule: Obj) -> None:
    """exit 42 → restarted at once (no back-off before the first restart); the restarted run exits 0 → not
    restarted, the container stays Terminated (not waiting in CrashLoopBackOff) and the pod is Succeeded."""
    h = Harness(tmp_path)
    main = _c("main", "--run", "1", "--exits", "42,0", restartPolicy="Never", restartPolicyRules=[rule])
    _, task = await _start(h, _pod([main], policy="Never"))
    for _ in range(5):
        await h.clock.advance(1)
    await task
    assert [t for t, reason, _ in h.events if reason == "Started"] == [0.0, 1.0]
    final = h.statuses[-1][1]
    st = final["containerStatuses"][0]
    assert final["phase"] == "Succeeded"
    assert (st["restartCount"], st["state"]["terminated"]["exitCode"]) == (1, 0)
    assert not any("waiting" in s["containerStatuses"][0]["state"] for _, s in h.statuses if s["phase"] == "Succeeded")


@pytest.mark.parametrize("policy", [
    pytest.param("Never", id="should terminate sidecars in reverse order after all main containers have exited"),
    pytest.param("OnFailure", id="the same under restartPolicy OnFailure"),
])
async def test_sidecars_stopped_before_terminal_phase(tmp_path: Path, policy: str) -> None:
    """The app containers are done for good: the sidecars are stopped (reverse order, the pod's grace) and only
    then is the terminal phase reported; no Succeeded status ever shows a sidecar running."""
    h = Harness(tmp_path)
    init = [_c("side-a", "--term-after", "1", restartPolicy="Always"),
            _c("side-b", "--term-after", "1", restartPolicy="Always")]
    _, task = await _start(h, _pod([_c("app", "--run", "2")], init=init, policy=policy))
    for _ in range(6):
        await h.clock.advance(1)
    await task
    killing = [(t, msg.split()[-1]) for t, reason, msg in h.events if reason == "Killing"]
    assert killing == [(2.0, "side-b"), (3.0, "side-a")]
    succeeded = [(t, s) for t, s in h.statuses if s["phase"] == "Succeeded"]
    assert succeeded and succeeded[0][0] == 4.0
    assert all("running" not in c["state"] for _, s in succeeded for c in s["initContainerStatuses"])


async def test_created_event_recorded_before_started(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("a"), _c("b")], init=[_c("init", "--run", "1")]))
    await h.clock.advance(2)
    task.cancel()
    order = [(reason, msg.split()[-1]) for _, reason, msg in h.events if reason in ("Created", "Started")]
    assert order == [("Created", "init"), ("Started", "init"), ("Created", "a"), ("Started", "a"),
                     ("Created", "b"), ("Started", "b")]
