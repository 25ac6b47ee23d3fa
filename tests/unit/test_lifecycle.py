"""Pod lifecycle decisions: phases (kubelet getPhase), restart rules (L3, L4), backoff (L5), $(VAR) expansion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kubelite.agent.config import NodeConfigError, duration, parse
from kubelite.agent.container import PAUSE, ConfigError, argv, environment, expand, is_pause
from kubelite.agent.lifecycle import Backoff, ContainerView, phase, should_restart


@dataclass(frozen=True)
class PhaseCase:
    name: str
    init_failed: bool
    initializing: bool
    apps: list[ContainerView]
    want: str


RUNNING, OK, FAIL = ContainerView(running=True), ContainerView(terminated_code=0), ContainerView(terminated_code=1)
RESTARTING = ContainerView(waiting_after_exit=True, will_restart=True)
WAITING = ContainerView()

# Mirrors TestGetPhase / TestGetPhaseWithInit, pkg/kubelet/kubelet_pods_test.go.
PHASE_CASES = [
    PhaseCase("waiting", False, False, [WAITING, WAITING], "Pending"),
    PhaseCase("all running", False, False, [RUNNING, RUNNING], "Running"),
    PhaseCase("all stopped with restart always", False, False, [RESTARTING, RESTARTING], "Running"),
    PhaseCase("all succeeded with restart never", False, False, [OK, OK], "Succeeded"),
    PhaseCase("all stopped with restart never, one failed", False, False, [OK, FAIL], "Failed"),
    PhaseCase("mixed state #1 with restart always", False, False, [RUNNING, WAITING], "Pending"),
    PhaseCase("mixed state #2 with restart never", False, False, [RUNNING, OK], "Running"),
    PhaseCase("init container running", False, True, [WAITING], "Pending"),
    PhaseCase("init container failed with restart never", True, False, [WAITING], "Failed"),
]


@pytest.mark.parametrize("case", PHASE_CASES, ids=lambda c: c.name)
def test_phase(case: PhaseCase) -> None:
    assert phase(case.init_failed, case.initializing, case.apps) == case.want


RULES = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]


@pytest.mark.parametrize("pod_policy,container,code,want", [
    ("Always", {}, 0, True), ("Always", {}, 1, True),
    ("OnFailure", {}, 0, False), ("OnFailure", {}, 1, True),
    ("Never", {}, 1, False), ("Never", {}, 0, False),
    ("Never", {"restartPolicy": "Never", "restartPolicyRules": RULES}, 42, True),
    ("Never", {"restartPolicy": "Never", "restartPolicyRules": RULES}, 1, False),
    ("Always", {"restartPolicy": "Never"}, 1, False),
    ("Never", {"restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}}]},
     3, True),
])
def test_should_restart(pod_policy: str, container: dict[str, Any], code: int, want: bool) -> None:
    assert should_restart(pod_policy, container, code) == want


def test_backoff_sequence_cap_and_reset() -> None:
    b = Backoff(maximum=300)
    waits = [b.next_restart(100.0, 1.0) - 100.0 for _ in range(8)]
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300]
    assert b.next_restart(100.0, 601.0) == 100.0  # ran 10 minutes: back to an immediate restart
    short = Backoff(maximum=2)
    assert [short.next_restart(0.0, 0.0) for _ in range(4)] == [0, 2, 2, 2]
    reduced = Backoff(maximum=60, initial=1)
    assert [reduced.next_restart(0.0, 0.0) for _ in range(4)] == [0, 1, 2, 4]


def test_expansion_and_environment() -> None:
    env = {"A": "1", "B": "two"}
    assert expand("$(A)-$(B)-$(C)-$$(A)", env) == "1-two-$(C)-$(A)"
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "web"}},
           "spec": {"nodeName": "n1", "serviceAccountName": "default", "containers": []}}
    container = {"name": "c", "resources": {"limits": {"memory": "64Mi"}}, "env": [
        {"name": "X", "value": "x-$(NAME)"},
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}
    got = environment(pod, container, "10.0.0.1", {}, {"memory": "1Gi"})
    assert got == {"HOSTNAME": "p", "X": "x-$(NAME)", "NAME": "p", "APP": "web", "MEM": "64", "IP": "10.0.0.1"}
    assert argv({"name": "c", "command": ["echo"], "args": ["$(NAME)"]}, got, {}) == ["echo", "p"]
    assert argv({"name": "c", "image": "registry.k8s.io/pause:3.10"}, {}, {}) == PAUSE
    assert is_pause("pause") and not is_pause("pauser:1")
    assert argv({"name": "c", "image": "busybox:1.36", "args": ["sh", "-c", "true"]}, {}, {}) == ["sh", "-c", "true"]
    assert argv({"name": "c", "image": "docker.io/library/alpine"}, {}, {}) == ["sh"]
    with pytest.raises(ConfigError):
        argv({"name": "c", "image": "nginx"}, {}, {})



@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("2m", 120.0, id="minutes"),
    pytest.param("1m30s", 90.0, id="minutes and seconds"),
    pytest.param("500ms", 0.5, id="milliseconds, as Go's time.ParseDuration reads them"),
    pytest.param("1h0m0.25s", 3600.25, id="hours with a fractional second"),
    pytest.param("0", 0.0, id="a bare zero"),
    pytest.param("1.5", None, id="a number without a unit is refused"),
    pytest.param("-10s", None, id="a negative duration is refused"),
    pytest.param("10 s", None, id="a space inside is refused"),
    pytest.param("", None, id="empty is refused"),
])
def test_node_config_duration(text: str, seconds: float | None) -> None:
    if seconds is None:
        with pytest.raises(NodeConfigError):
            duration(text)
    else:
        assert duration(text) == seconds


def test_node_config() -> None:
    cfg = parse({"kind": "KubeletConfiguration", "crashLoopBackOff": {"maxContainerRestartPeriod": "1m30s"},
                 "imageCatalog": {"nginx": ["nginx", "-g", "daemon off;"]}})
    assert cfg.max_restart_period == 90 and cfg.image_catalog["nginx"][0] == "nginx"
    reduced = parse({"kind": "KubeletConfiguration", "featureGates": {"ReduceDefaultCrashLoopBackOffDecay": True}})
    assert (reduced.initial_backoff, reduced.max_restart_period) == (1.0, 60.0)
    with pytest.raises(NodeConfigError):
        parse({"kind": "KubeletConfiguration", "crashLoopBackOff": {"maxContainerRestartPeriod": "10m"}})
