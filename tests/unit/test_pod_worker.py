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
from kubelite.agent.hollow import HollowRuntime
from kubelite.agent.worker import PodWorker
from kubelite.clock import FakeClock, rfc3339

Obj = dict[str, Any]


class Harness:
    """Stands in for the Agent: records the worker's writes instead of calling the API."""

    def __init__(self, tmp: Path, max_restart: float = 300.0) -> None:
        self.clock = FakeClock()
        self.runtime = HollowRuntime(self.clock)
        self.config = NodeConfig(max_restart_period=max_restart)
        self.data_dir = tmp
        self.host_ip = "127.0.0.1"
        self.base_env: dict[str, str] = {}
        self.events: list[tuple[float, str, str]] = []
        self.statuses: list[tuple[float, Obj]] = []
        self.deleted_at: float | None = None
        self._bg: set[asyncio.Future[Any]] = set()

    def admit(self, pod: Obj) -> None:
        return None

    def event(self, pod: Obj, reason: str, message: str, kind: str = "Normal") -> None:
        self.events.append((self.clock.monotonic(), reason, message))

    def write_status(self, pod: Obj, status: Obj) -> None:
        self.statuses.append((self.clock.monotonic(), status))

    def delete_pod(self, pod: Obj) -> None:
        self.deleted_at = self.clock.monotonic()

    def watch(self, coro: Any) -> None:
        fut = asyncio.ensure_future(coro)
        self._bg.add(fut)

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


async def _start(h: Harness, pod: Obj) -> tuple[PodWorker, asyncio.Task[None]]:
    worker = PodWorker(h, pod)  # type: ignore[arg-type]
    task = asyncio.ensure_future(worker.run())
    await h.clock.advance(0)
    return worker, task


async def _delete(worker: PodWorker, h: Harness, grace: int | None = None) -> None:
    """Deliver the deleted pod object to the worker and let it react at this instant of fake time."""
    pod = {**worker.pod, "metadata": {**worker.pod["metadata"], "deletionTimestamp": rfc3339(h.clock.now())}}
    if grace is not None:
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
    worker.update(pod)
    await h.clock.advance(0)


async def test_restarts_follow_the_backoff(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _worker, task = await _start(h, _pod([_c("main", "--run", "1", "--exit", "1")]))
    for _ in range(60):
        await h.clock.advance(1)
    starts = [t for t, reason, _ in h.events if reason == "Started"]
    # exits after 1 s each time; restarts: at once, then after 10 s, 20 s (kubelet's backoff)
    assert starts[:4] == [0.0, 1.0, 12.0, 33.0]
    assert h.container("main")["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert h.phase() == "Running"
    backoffs = [t for t, reason, _ in h.events if reason == "BackOff"]
    assert backoffs[:2] == [2.0, 13.0]  # once per back-off period
    task.cancel()


async def test_node_maximum_caps_the_backoff(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_restart=2)
    _worker, task = await _start(h, _pod([_c("main", "--run", "1", "--exit", "1")]))
    for _ in range(12):
        await h.clock.advance(1)
    starts = [t for t, reason, _ in h.events if reason == "Started"]
    assert starts[:5] == [0.0, 1.0, 4.0, 7.0, 10.0]
    task.cancel()


async def test_init_containers_run_in_order_then_apps(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _worker, task = await _start(h, _pod([_c("app")], init=[_c("one", "--run", "2"), _c("two", "--run", "3")]))
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
    _worker, task = await _start(h, _pod([_c("app")], init=[_c("one", "--run", "1", "--exit", "3")], policy="Never"))
    await h.clock.advance(2)
    await task
    assert h.phase() == "Failed"
    assert not any(msg.endswith(" app") for _, reason, msg in h.events if reason == "Started")


@pytest.mark.parametrize("ignore,want_kill_at", [(False, None), (True, 30.0)])
async def test_grace_period_then_sigkill(tmp_path: Path, ignore: bool, want_kill_at: float | None) -> None:
    h = Harness(tmp_path)
    args = ["--ignore-term"] if ignore else []
    worker, task = await _start(h, _pod([_c("main", *args)]))
    await _delete(worker, h)
    for _ in range(40):
        await h.clock.advance(1)
    p = h.runtime.started[0]
    assert signal.SIGTERM in p.signals
    killed = signal.SIGKILL in p.signals
    assert killed == ignore
    assert h.deleted_at == (want_kill_at if want_kill_at is not None else 0.0)
    exceeded = [t for t, reason, _ in h.events if reason == "ExceededGracePeriod"]
    assert exceeded == ([want_kill_at] if want_kill_at is not None else [])
    assert h.statuses[-1][1]["phase"] == "Failed"  # 143 / 137: not a clean exit
    await task


async def test_pre_stop_overrun_gets_two_more_seconds(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    main = _c("main", "--ignore-term", lifecycle={"preStop": {"sleep": {"seconds": 100}}})
    worker, task = await _start(h, _pod([main], grace=5))
    await _delete(worker, h)
    for _ in range(10):
        await h.clock.advance(1)
    assert h.deleted_at == 7.0  # 5 s of grace spent in preStop, then the 2 s window, then SIGKILL
    assert any(reason == "FailedPreStopHook" for _, reason, _ in h.events)
    await task


async def test_sidecars_stop_after_apps_in_reverse_order(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    init = [_c("side-a", "--term-after", "1", restartPolicy="Always"),
            _c("side-b", "--term-after", "1", restartPolicy="Always")]
    worker, task = await _start(h, _pod([_c("app", "--term-after", "3")], init=init))
    await h.clock.advance(1)
    await _delete(worker, h)
    for _ in range(10):
        await h.clock.advance(1)
    killing = [(t, msg.split()[-1]) for t, reason, msg in h.events if reason == "Killing"]
    assert killing == [(1.0, "app"), (4.0, "side-b"), (5.0, "side-a")]
    await task


async def test_second_delete_shortens_grace(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    worker, task = await _start(h, _pod([_c("main", "--ignore-term")], grace=60))
    await _delete(worker, h)
    await h.clock.advance(5)
    await _delete(worker, h, grace=3)
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
    _worker, task = await _start(h, pod)
    for _ in range(10):
        await h.clock.advance(1)
    await task
    assert [t for t, reason, _ in h.events if reason == "DeadlineExceeded"] == [want_stop_signal_at]
    failed_at, status = next((t, st) for t, st in h.statuses if st["phase"] == "Failed")
    assert failed_at == want_failed_at
    assert (status["reason"], status["message"]) == ("DeadlineExceeded", "Pod was active on the node longer than "
                                                                         "the specified deadline")
    assert h.deleted_at is None  # the object stays, Failed
