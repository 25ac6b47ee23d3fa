"""Pod registry strategy tables: CheckGracefulDelete, priority admission, QoS, validation, update rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelite.apiserver.registry.pods import (
    PODS,
    PodStrategy,
    admit_priority,
    default_pod_spec,
    qos_class,
    validate_pod_spec,
    validate_pod_spec_update,
)
from kubelite.testing.builders import make_pod

Obj = dict[str, Any]


@dataclass(frozen=True)
class GraceCase:
    name: str
    pod: Obj
    requested: int | None
    want: int


# Mirrors TestCheckGracefulDelete, pkg/registry/core/pod/strategy_test.go (plus the options-value cases).
GRACE_CASES = [
    GraceCase("in pending phase with has node name", make_pod("p").node("something").phase("Pending").obj(),
              None, 30),
    GraceCase("in failed phase with has node name", make_pod("p").node("something").phase("Failed").obj(), None, 0),
    GraceCase("in failed phase", make_pod("p").phase("Pending").obj(), None, 0),
    GraceCase("in succeeded phase", make_pod("p").phase("Succeeded").obj(), None, 0),
    GraceCase("no phase", make_pod("p").obj(), None, 0),
    GraceCase("has negative grace period", make_pod("p").node("something").grace(-1).obj(), None, 1),
    GraceCase("options value wins over spec", make_pod("p").node("n").grace(30).phase("Running").obj(), 5, 5),
    GraceCase("options zero deletes at once", make_pod("p").node("n").phase("Running").obj(), 0, 0),
    GraceCase("unscheduled pod ignores options", make_pod("p").phase("Pending").obj(), 10, 0),
]


@pytest.mark.parametrize("case", GRACE_CASES, ids=lambda c: c.name)
def test_check_graceful_delete(case: GraceCase) -> None:
    pod = case.pod
    if "terminationGracePeriodSeconds" not in pod["spec"]:
        pod["spec"]["terminationGracePeriodSeconds"] = 30
    assert PodStrategy(PODS).graceful_period(pod, case.requested) == case.want


class Classes:
    """A Lookup over a fixed set of PriorityClasses."""

    def __init__(self, *classes: Obj) -> None:
        self.classes = {c["metadata"]["name"]: c for c in classes}

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self.classes.get(name)

    def list(self, resource: str, namespace: str = "") -> list[Obj]:
        return list(self.classes.values())


def _pc(name: str, value: int, default: bool = False, policy: str | None = None) -> Obj:
    out: Obj = {"metadata": {"name": name}, "value": value, "globalDefault": default}
    if policy:
        out["preemptionPolicy"] = policy
    return out


DEFAULT_CLASS = _pc("default1", 1000, default=True)
NON_DEFAULT = _pc("nondefault1", 2000)
SYSTEM = _pc("system-cluster-critical", 2000000000)
NEVER = _pc("nopreemption1", 2000, policy="Never")


@dataclass(frozen=True)
class PriorityCase:
    name: str
    classes: tuple[Obj, ...]
    spec: Obj
    want_priority: int | None
    want_policy: str | None = "PreemptLowerPriority"
    want_error: str = ""
    want_class: str = field(default="")


# Mirrors TestPodAdmission, plugin/pkg/admission/priority/admission_test.go.
PRIORITY_CASES = [
    PriorityCase("Pod with no priority class and no global default", (), {}, 0),
    PriorityCase("pod with priority class", (DEFAULT_CLASS, NON_DEFAULT), {"priorityClassName": "nondefault1"},
                 2000, want_class="nondefault1"),
    PriorityCase("pod without priority class and with default", (DEFAULT_CLASS, NON_DEFAULT), {}, 1000,
                 want_class="default1"),
    PriorityCase("pod with a system priority class", (SYSTEM,), {"priorityClassName": "system-cluster-critical"},
                 2000000000, want_class="system-cluster-critical"),
    PriorityCase("pod with a non-existing priority class", (), {"priorityClassName": "foo"}, None, None,
                 "no PriorityClass with name foo was found"),
    PriorityCase("pod with priority that does not match the class", (NON_DEFAULT,),
                 {"priorityClassName": "nondefault1", "priority": 1}, None, None,
                 "must not be provided in pod spec"),
    PriorityCase("pod with preemption policy Never from its class", (NEVER,), {"priorityClassName": "nopreemption1"},
                 2000, "Never", want_class="nopreemption1"),
    PriorityCase("pod with conflicting preemption policy", (NEVER,),
                 {"priorityClassName": "nopreemption1", "preemptionPolicy": "PreemptLowerPriority"}, None, None,
                 "must not be provided in pod spec"),
]


@pytest.mark.parametrize("case", PRIORITY_CASES, ids=lambda c: c.name)
def test_priority_admission(case: PriorityCase) -> None:
    spec = dict(case.spec)
    causes = admit_priority(spec, Classes(*case.classes))
    if case.want_error:
        assert len(causes) == 1 and case.want_error in causes[0]
        return
    assert causes == []
    assert (spec["priority"], spec["preemptionPolicy"]) == (case.want_priority, case.want_policy)
    assert spec.get("priorityClassName", "") == case.want_class


@dataclass(frozen=True)
class QosCase:
    name: str
    pod: Obj
    want: str


# Mirrors TestGetPodQOS, pkg/apis/core/helper/qos/qos_test.go.
QOS_CASES = [
    QosCase("best-effort", make_pod("p").obj(), "BestEffort"),
    QosCase("guaranteed", make_pod("p").req(cpu="100m", memory="100Mi").lim(cpu="100m", memory="100Mi").obj(),
            "Guaranteed"),
    QosCase("guaranteed-from-limits-only", make_pod("p").lim(cpu="1", memory="1Gi").obj(), "Guaranteed"),
    QosCase("burstable-requests-only", make_pod("p").req(cpu="100m").obj(), "Burstable"),
    QosCase("burstable-requests-below-limits", make_pod("p").req(cpu="100m", memory="1Gi").lim(cpu="200m",
                                                                                              memory="1Gi").obj(),
            "Burstable"),
    QosCase("burstable-one-container-best-effort",
            make_pod("p").req(cpu="1", memory="1Gi").lim(cpu="1", memory="1Gi").container("b").obj(), "Burstable"),
]


@pytest.mark.parametrize("case", QOS_CASES, ids=lambda c: c.name)
def test_qos_class(case: QosCase) -> None:
    spec = case.pod["spec"]
    default_pod_spec(spec)
    assert qos_class(spec) == case.want


@dataclass(frozen=True)
class ValidationCase:
    name: str
    spec: Obj
    want_fields: tuple[str, ...]


def _spec(**fields: Any) -> Obj:
    spec = make_pod("p").obj()["spec"]
    spec.update(fields)
    default_pod_spec(spec)
    return spec


# Mirrors TestValidatePodSpec, pkg/apis/core/validation/validation_test.go (the fields kubelite uses).
VALIDATION_CASES = [
    ValidationCase("valid", _spec(), ()),
    ValidationCase("missing containers", _spec(containers=[]), ("spec.containers",)),
    ValidationCase("missing image", _spec(containers=[{"name": "c"}]), ("spec.containers[0].image",)),
    ValidationCase("bad container name", _spec(containers=[{"name": "Bad_Name", "image": "i"}]),
                   ("spec.containers[0].name",)),
    ValidationCase("duplicate container names", _spec(containers=[{"name": "c", "image": "i"},
                                                                  {"name": "c", "image": "i"}]),
                   ("spec.containers[1].name",)),
    # restartPolicy, dnsPolicy and the other enumerated fields: tests/api/test_type_checks.py (ENUM_CASES)
    ValidationCase("zero active deadline", _spec(activeDeadlineSeconds=0), ("spec.activeDeadlineSeconds",)),
    ValidationCase("port out of range", _spec(containers=[{"name": "c", "image": "i",
                                                           "ports": [{"containerPort": 70000}]}]),
                   ("spec.containers[0].ports[0].containerPort",)),
    ValidationCase("requests above limits", _spec(containers=[{"name": "c", "image": "i", "resources": {
        "requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]), ("spec.containers[0].resources.requests",)),
    ValidationCase("bad quantity", _spec(containers=[{"name": "c", "image": "i", "resources": {
        "requests": {"cpu": "lots"}}}]), ("spec.containers[0].resources.requests[cpu]",)),
    ValidationCase("toleration Exists with value", _spec(tolerations=[{"key": "k", "operator": "Exists",
                                                                      "value": "v"}]),
                   ("spec.tolerations[0].operator",)),
    ValidationCase("topology spread zero skew", _spec(topologySpreadConstraints=[{
        "maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
                   ("spec.topologySpreadConstraints[0].maxSkew",)),
    ValidationCase("sidecar with Always is valid", _spec(initContainers=[{"name": "s", "image": "i",
                                                                         "restartPolicy": "Always"}]), ()),
    ValidationCase("init container with its own Never or OnFailure is valid (ContainerRestartRules)",
                   _spec(initContainers=[{"name": "a", "image": "i", "restartPolicy": "Never"},
                                         {"name": "b", "image": "i", "restartPolicy": "OnFailure"}]), ()),
    ValidationCase("init container with an unknown restartPolicy", _spec(initContainers=[
        {"name": "s", "image": "i", "restartPolicy": "Sometimes"}]), ("spec.initContainers[0].restartPolicy",)),
]


@pytest.mark.parametrize("case", VALIDATION_CASES, ids=lambda c: c.name)
def test_validate_pod_spec(case: ValidationCase) -> None:
    assert tuple(c.field for c in validate_pod_spec(case.spec)) == case.want_fields


@dataclass(frozen=True)
class UpdateCase:
    name: str
    old: Obj
    new: Obj
    valid: bool


def _with(spec: Obj, **changes: Any) -> Obj:
    out = {**spec, **changes}
    return out


BASE = _spec(activeDeadlineSeconds=100, tolerations=[{"key": "a", "operator": "Exists"}],
             schedulingGates=[{"name": "g1"}, {"name": "g2"}])

# Mirrors TestValidatePodUpdate, pkg/apis/core/validation/validation_test.go.
UPDATE_CASES = [
    UpdateCase("image change", BASE, _with(BASE, containers=[{**BASE["containers"][0], "image": "other"}]), True),
    UpdateCase("activeDeadlineSeconds decrease", BASE, _with(BASE, activeDeadlineSeconds=50), True),
    UpdateCase("activeDeadlineSeconds increase", BASE, _with(BASE, activeDeadlineSeconds=500), False),
    UpdateCase("toleration added", BASE, _with(BASE, tolerations=[*BASE["tolerations"], {"key": "b",
                                                                                         "operator": "Exists"}]),
               True),
    UpdateCase("toleration removed", BASE, _with(BASE, tolerations=[]), False),
    UpdateCase("scheduling gate removed", BASE, _with(BASE, schedulingGates=[{"name": "g2"}]), True),
    UpdateCase("all scheduling gates removed", BASE, _with(BASE, schedulingGates=[]), True),
    UpdateCase("scheduling gate added", BASE, _with(BASE, schedulingGates=[*BASE["schedulingGates"],
                                                                          {"name": "g3"}]), False),
    UpdateCase("restartPolicy change", BASE, _with(BASE, restartPolicy="Never"), False),
    UpdateCase("container added", BASE, _with(BASE, containers=[*BASE["containers"], {"name": "x", "image": "i"}]),
               False),
    UpdateCase("nodeName change", BASE, _with(BASE, nodeName="n2"), False),
]


@pytest.mark.parametrize("case", UPDATE_CASES, ids=lambda c: c.name)
def test_validate_pod_update(case: UpdateCase) -> None:
    assert (validate_pod_spec_update(case.new, case.old) == []) == case.valid
