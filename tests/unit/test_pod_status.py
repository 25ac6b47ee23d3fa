"""Pod conditions as kubelet's status generation makes them (pkg/kubelet/status/generate_test.go tables),
and the terminal-phase and init-failure cases of issue 9 on the pod-sync path (fake clock, hollow runtime)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.pod_status import (
    PodFacts,
    StatusBuilder,
    container_status,
    containers_ready_condition,
    pod_initialized_condition,
    pod_ready_condition,
)
from kubelite.agent.prober import ProbeState
from kubelite.agent.records import Record
from kubelite.agent.runtime.interface import Exit, Handle
from tests.unit.test_pod_worker import Harness, _c, _pod, _start

Obj = dict[str, Any]
SIDECAR = {"restartPolicy": "Always"}


def ready(name: str) -> Obj:
    return {"name": name, "ready": True, "started": True, "state": {"running": {}}}


def not_ready(name: str) -> Obj:
    return {"name": name, "ready": False, "started": False, "state": {"waiting": {}}}


def spec(containers: list[str], init: list[str] = (), sidecars: list[str] = (), gates: list[str] = ()) -> Obj:
    return {"containers": [{"name": n} for n in containers],
            "initContainers": [{"name": n} for n in init] + [{"name": n, **SIDECAR} for n in sidecars],
            "readinessGates": [{"conditionType": g} for g in gates]}


@pytest.mark.parametrize("pod_spec,statuses,phase,want", [
    pytest.param(spec([]), [], "Running", ("True", "", ""), id="no containers"),
    pytest.param(spec(["1234"]), [], "Running",
                 ("False", "ContainersNotReady", "containers with unknown status: [1234]"), id="unknown container"),
    pytest.param(spec(["1234", "5678"]), [ready("1234"), ready("5678")], "Running", ("True", "", ""), id="all ready"),
    pytest.param(spec(["1234", "5678"]), [ready("1234"), not_ready("5678")], "Running",
                 ("False", "ContainersNotReady", "containers with unready status: [5678]"), id="one unready"),
    pytest.param(spec(["1234"]), [not_ready("1234")], "Succeeded", ("False", "PodCompleted", ""), id="succeeded"),
    pytest.param(spec(["1234"]), [ready("1234")], "Failed", ("False", "PodFailed", ""), id="failed"),
    pytest.param(spec(["regular-1"], sidecars=["restartable-init-1"]), [ready("regular-1")], "Running",
                 ("False", "ContainersNotReady", "containers with unknown status: [restartable-init-1]"),
                 id="restartable init container unknown"),
    pytest.param(spec(["regular-1"], sidecars=["restartable-init-1", "restartable-init-2"]),
                 [ready("restartable-init-1"), not_ready("restartable-init-2"), ready("regular-1")], "Running",
                 ("False", "ContainersNotReady", "containers with unready status: [restartable-init-2]"),
                 id="restartable init container unready"),
])
def test_generate_containers_ready_condition(pod_spec: Obj, statuses: list[Obj], phase: str,
                                             want: tuple[str, str, str]) -> None:
    assert containers_ready_condition(pod_spec, statuses, phase) == want


@pytest.mark.parametrize("pod_spec,conditions,statuses,phase,want", [
    pytest.param(spec(["1234"]), [], [not_ready("1234")], "Succeeded", ("False", "PodCompleted", ""),
                 id="succeeded"),
    pytest.param(spec([], gates=["gate1"]), [], [], "Running",
                 ("False", "ReadinessGatesNotReady", 'corresponding condition of pod readiness gate "gate1" does not '
                                                     "exist."), id="gate missing"),
    pytest.param(spec([], gates=["gate1"]), [{"type": "gate1", "status": "False"}], [], "Running",
                 ("False", "ReadinessGatesNotReady", 'the status of pod readiness gate "gate1" is not "True", but '
                                                     "False"), id="gate false"),
    pytest.param(spec([], gates=["gate1"]), [{"type": "gate1", "status": "True"}], [], "Running", ("True", "", ""),
                 id="gate true"),
    pytest.param(spec(["1234"], gates=["gate1"]), [{"type": "gate1", "status": "True"}], [not_ready("1234")],
                 "Running", ("False", "ContainersNotReady", "containers with unready status: [1234]"),
                 id="gate true but container unready"),
])
def test_generate_pod_ready_condition(pod_spec: Obj, conditions: list[Obj], statuses: list[Obj], phase: str,
                                      want: tuple[str, str, str]) -> None:
    assert pod_ready_condition(pod_spec, conditions, statuses, phase) == want


@pytest.mark.parametrize("pod_spec,statuses,phase,want", [
    pytest.param(spec(["regular"]), [], "Running", ("True", "", ""), id="no init container"),
    pytest.param(spec(["regular"], init=["1234"]), [], "Running",
                 ("False", "ContainersNotInitialized", "containers with unknown status: [1234]"), id="one unknown"),
    pytest.param(spec(["regular"], init=["1234", "5678"]), [ready("1234"), ready("5678")], "Running",
                 ("True", "", ""), id="two done"),
    pytest.param(spec(["regular"], init=["1234", "5678"]), [ready("1234"), not_ready("5678")], "Running",
                 ("False", "ContainersNotInitialized", "containers with incomplete status: [5678]"),
                 id="one incomplete"),
    pytest.param(spec(["regular"], init=["1234"]), [ready("1234")], "Succeeded", ("True", "PodCompleted", ""),
                 id="succeeded"),
    pytest.param(spec(["regular"], sidecars=["1234"]), [not_ready("1234")], "Pending",
                 ("False", "ContainersNotInitialized", "containers with incomplete status: [1234]"),
                 id="restartable init container not started"),
    pytest.param(spec(["regular"], sidecars=["1234"]), [not_ready("1234"), ready("regular")], "Running",
                 ("True", "", ""), id="a regular container has started"),
])
def test_generate_pod_initialized_condition(pod_spec: Obj, statuses: list[Obj], phase: str,
                                            want: tuple[str, str, str]) -> None:
    assert pod_initialized_condition(pod_spec, statuses, phase) == want


class _Probes:
    def __init__(self, started: bool, ready: bool) -> None:
        self.state = ProbeState(started, ready)


@pytest.mark.parametrize("probes,running,want_ready", [
    pytest.param(None, True, True, id="unprobed_container"),
    pytest.param(_Probes(True, True), True, True, id="probed_container_ready"),
    pytest.param(_Probes(True, False), True, False, id="probed_container_pending"),
    pytest.param(_Probes(False, True), True, False, id="not_started_container_no_readiness"),
    pytest.param(_Probes(True, True), True, True, id="started_container_no_readiness"),
    pytest.param(_Probes(True, True), False, False, id="terminated_container"),
])
def test_update_pod_status(probes: _Probes | None, running: bool, want_ready: bool) -> None:
    """prober_manager_test TestUpdatePodStatus: until the startup probe succeeds a container is neither started
    nor ready, whatever its readiness (or the lack of a readiness probe) says."""
    process = Handle(1, 0.0)
    if not running:
        process.finish(Exit(0))
    r = Record({"name": "main", "image": "x"}, "app", process=process, started_at=0.0)
    r.prober = probes  # type: ignore[assignment]
    st = container_status(r)
    assert st["ready"] == want_ready
    assert st["started"] == (running and (probes is None or probes.state.started))


def _conditions(status: Obj) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in status["conditions"]}


@pytest.mark.parametrize("code,phase,want", [
    pytest.param(0, "Succeeded", {"Initialized": ("True", "PodCompleted"), "ContainersReady": ("False", "PodCompleted"),
                                  "Ready": ("False", "PodCompleted")}, id="succeeded pod: PodCompleted"),
    pytest.param(1, "Failed", {"Initialized": ("True", ""), "ContainersReady": ("False", "PodFailed"),
                               "Ready": ("False", "PodFailed")}, id="failed pod: PodFailed"),
])
async def test_terminal_pod_conditions(tmp_path: Path, code: int, phase: str, want: dict[str, tuple[str, str]]
                                       ) -> None:
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("main", "--run", "1", "--exit", str(code))], init=[_c("init", "--run", "1")],
                                   policy="Never"))
    for _ in range(3):
        await h.clock.advance(1)
    await task
    final = h.statuses[-1][1]
    assert final["phase"] == phase
    got = _conditions(final)
    assert {k: got[k] for k in want} == want


async def test_init_container_failure_under_never_keeps_initialized_false(tmp_path: Path) -> None:
    """e2e init_container.go: should not start app containers and fail the pod if init containers fail on a
    RestartNever pod — Initialized stays False (ContainersNotInitialized)."""
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("app")], init=[_c("one", "--run", "1", "--exit", "3")], policy="Never"))
    await h.clock.advance(2)
    await task
    final = h.statuses[-1][1]
    assert final["phase"] == "Failed"
    assert _conditions(final)["Initialized"] == ("False", "ContainersNotInitialized")
    assert not any(msg.endswith(" app") for _, reason, msg in h.events if reason == "Started")


@pytest.mark.parametrize("kind,running,code,want_ready", [
    pytest.param("init", True, None, False, id="running regular init container: not ready"),
    pytest.param("init", False, 0, True, id="regular init container terminated with exit code 0: ready"),
    pytest.param("init", False, 1, False, id="regular init container terminated with a failure: not ready"),
    pytest.param("sidecar", True, None, True, id="running sidecar without a readiness probe: ready"),
    pytest.param("sidecar", False, 0, False, id="sidecar terminated with exit code 0: not ready"),
])
def test_update_pod_status_with_init_containers(kind: str, running: bool, code: int | None, want_ready: bool) -> None:
    """prober_manager's UpdatePodStatus for init containers: a regular one is ready only once terminated with
    exit code 0; a sidecar (restartPolicy Always) is ready as an app container is."""
    process = Handle(1, 0.0)
    if not running:
        process.finish(Exit(code or 0))
    spec = {"name": "i", "image": "x", **(SIDECAR if kind == "sidecar" else {})}
    r = Record(spec, kind, process=process, started_at=0.0, exit=None if running else Exit(code or 0), waiting="")
    assert container_status(r)["ready"] == want_ready


async def test_pod_is_not_initialized_while_its_init_container_runs(tmp_path: Path) -> None:
    """kubectl's Init:0/1, not ContainerCreating: Initialized=False (ContainersNotInitialized, incomplete [init])
    while the regular init container runs, then True once it exited 0."""
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("app", "--run", "10")], init=[_c("init", "--run", "2")], policy="Never"))
    await h.clock.advance(1)
    during = h.statuses[-1][1]
    assert during["initContainerStatuses"][0]["state"].keys() == {"running"}
    assert during["initContainerStatuses"][0]["ready"] is False
    initialized = next(c for c in during["conditions"] if c["type"] == "Initialized")
    assert (initialized["status"], initialized.get("reason"), initialized.get("message")) == (
        "False", "ContainersNotInitialized", "containers with incomplete status: [init]")
    for _ in range(3):
        await h.clock.advance(1)
    after = h.statuses[-1][1]
    assert after["initContainerStatuses"][0]["ready"] is True
    assert _conditions(after)["Initialized"] == ("True", "")
    for _ in range(10):
        await h.clock.advance(1)
    await task


SCHEDULED_AT = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize("given,resumed,want_time", [
    pytest.param([], [], "1970-01-01T00:01:40Z",
                 id="pod bound with spec.nodeName, no scheduler: PodScheduled=True from the agent, transition now"),
    pytest.param([{"type": "PodScheduled", "status": "True", "lastTransitionTime": SCHEDULED_AT}], [], SCHEDULED_AT,
                 id="a scheduler's PodScheduled=True keeps its transition time"),
    pytest.param([], [{"type": "PodScheduled", "status": "True", "lastTransitionTime": SCHEDULED_AT}], SCHEDULED_AT,
                 id="a restarted agent keeps the transition time it had published"),
])
def test_pod_scheduled_condition_is_always_true(given: list[Obj], resumed: list[Obj], want_time: str) -> None:
    """generateAPIPodStatus always adds PodScheduled=True, after its other conditions (kubectl describe's order:
    PodReadyToStartContainers, Initialized, Ready, ContainersReady, PodScheduled)."""
    builder = StatusBuilder("10.0.0.1")
    builder.resume({"conditions": resumed})
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
           "status": {"conditions": given}}
    status = builder.build(pod, [Record({"name": "c", "image": "x"}, "app")], PodFacts(started_at=0.0), 100.0)
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert status["conditions"][-1] == {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                        "lastTransitionTime": want_time}
