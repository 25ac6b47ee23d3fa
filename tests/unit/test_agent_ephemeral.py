"""Ephemeral containers on the pod-sync path (fake clock, hollow runtime): kuberuntime's EphemeralContainersToStart
(each one once, never restarted, even during initialization), getTargetID (no start until the target runs), and
their status beside the others' (ephemeralContainerStatuses; neither phase nor readiness affected)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.unit.test_pod_worker import Harness, _c, _delete, _pod, _start

Obj = dict[str, Any]


def with_ephemeral(pod: Obj, *containers: Obj) -> Obj:
    """The pod object after a pods/ephemeralcontainers update (a new object, as the informer delivers it)."""
    new = copy.deepcopy(pod)
    new["spec"].setdefault("ephemeralContainers", []).extend(containers)
    return new


def ephemeral(h: Harness, name: str) -> Obj:
    return next(c for c in h.statuses[-1][1].get("ephemeralContainerStatuses", []) if c["name"] == name)


def started(h: Harness, name: str) -> list[float]:
    return [t for t, reason, message in h.events if reason == "Started" and message == f"Started container {name}"]


async def test_started_once_never_restarted_and_apart_from_phase_and_readiness(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    pod, task = await _start(h, _pod([_c("app")], init=[_c("init", "--run", "3")], policy="Always"))
    await h.clock.advance(1)
    h.pod_workers.update_pod(with_ephemeral(pod, _c("debugger", "--run", "1", "--exit", "3")))
    await h.clock.advance(0)
    assert started(h, "debugger") == [1.0]  # while the init container still runs, as kubelet
    assert h.phase() == "Pending" and "debugger" not in {c["name"] for c in h.statuses[-1][1]["initContainerStatuses"]}
    for _ in range(30):  # an app container of this pod would be restarted at once, then after 10 s, 20 s
        await h.clock.advance(1)
    assert started(h, "debugger") == [1.0]
    status = ephemeral(h, "debugger")
    assert status["state"]["terminated"]["exitCode"] == 3 and status["restartCount"] == 0
    assert (status["ready"], "started" in status, status["lastState"]) == (False, False, {})
    final = h.statuses[-1][1]
    conditions = {c["type"]: c["status"] for c in final["conditions"]}
    assert (final["phase"], conditions["Ready"], conditions["ContainersReady"]) == ("Running", "True", "True")
    task.cancel()


async def test_a_target_not_running_holds_the_start(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    pod, task = await _start(h, _pod([_c("app")], init=[_c("init", "--run", "3")]))
    h.pod_workers.update_pod(with_ephemeral(pod, _c("debugger", targetContainerName="app")))
    await h.clock.advance(0)
    assert ephemeral(h, "debugger")["state"]["waiting"] == {
        "reason": "CreateContainerConfigError", "message": "unable to find target container app"}
    assert [m for _, reason, m in h.events if reason == "Failed"] == ["Error: unable to find target container app"]
    for _ in range(4):  # the init container ends at 3 s, the app starts, and the waiting debugger with it
        await h.clock.advance(1)
    assert started(h, "app") == [3.0] and started(h, "debugger") == [3.0]
    assert "running" in ephemeral(h, "debugger")["state"]
    task.cancel()


async def test_stopped_with_the_pod(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    pod, task = await _start(h, _pod([_c("app")], grace=5))
    pod = with_ephemeral(pod, _c("debugger"))
    h.pod_workers.update_pod(pod)
    await h.clock.advance(0)
    running = ephemeral(h, "debugger")
    assert ("running" in running["state"], running["ready"], "started" in running) == (True, False, False)
    await _delete(pod, h)
    await h.clock.advance(1)
    await task
    assert [m for _, reason, m in h.events if reason == "Killing"] == ["Stopping container app",
                                                                         "Stopping container debugger"]
    assert "terminated" in ephemeral(h, "debugger")["state"]
