"""Upstream's TestValidateEphemeralContainers and TestValidatePodEphemeralContainersUpdate
(pkg/apis/core/validation/validation_test.go), ported case by case under their names.

Fields are rooted at the pod (`spec.ephemeralContainers[0].name`), as the server reports them; upstream's
TestValidateEphemeralContainers roots them at `ephemeralContainers`. As upstream, a failure case is compared by each
error's type and field, in order (cmpopts.IgnoreFields BadValue and Detail), under the pod restart policies Never,
Always and OnFailure. kubelite checks the enumerated values (imagePullPolicy, terminationMessagePolicy) of every
container from one table (`enums`), so a case's errors are those of validate_ephemeral_containers plus that table's.

Not ported: the two Windows hostProcess cases of TestValidatePodEphemeralContainersUpdate ("Ephemeral container with
potential conflict with regular containers, …"): kubelite does not serve Windows pods and keeps no hostProcess rules.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubelite.apiserver import enums
from kubelite.apiserver.registry.pods import (
    PODS,
    PodStrategy,
    ephemeral_containers_update,
    validate_ephemeral_containers,
)

Obj = dict[str, Any]
POLICIES = ("Never", "Always", "OnFailure")
CTR = {"name": "ctr", "image": "image", "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}
ICTR = {"name": "ictr", "image": "iimage", "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}


def ec(name: str, image: str = "image", **fields: Any) -> Obj:
    """An EphemeralContainer with upstream's test defaults (IfNotPresent, File)."""
    return {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File",
            **fields}


def errors_of(ephemeral: list[Obj], restart_policy: str) -> list[tuple[str, str]]:
    spec = {"containers": [dict(CTR)], "initContainers": [dict(ICTR)], "restartPolicy": restart_policy,
            "volumes": [{"name": "blk", "persistentVolumeClaim": {"claimName": "pvc"}},
                        {"name": "vol", "emptyDir": {}}],
            "ephemeralContainers": copy.deepcopy(ephemeral)}
    causes = enums.causes({"spec": spec}, "V1Pod") + validate_ephemeral_containers(spec)
    return [(c.reason, c.field) for c in causes]


SUCCESS: dict[str, list[Obj]] = {
    "Empty Ephemeral Containers": [],
    "Single Container": [ec("debug")],
    "Multiple Containers": [ec("debug1"), ec("debug2")],
    "Single Container with Target": [ec("debug", targetContainerName="ctr")],
    "All allowed fields": [ec(
        "debug", command=["bash"], args=["bash"], workingDir="/",
        envFrom=[{"configMapRef": {"name": "dummy", "optional": True}}], env=[{"name": "TEST", "value": "TRUE"}],
        volumeMounts=[{"name": "vol", "mountPath": "/vol"}],
        volumeDevices=[{"name": "blk", "devicePath": "/dev/block"}],
        terminationMessagePath="/dev/termination-log", securityContext={"capabilities": {"add": ["SYS_ADMIN"]}},
        stdin=True, stdinOnce=True, tty=True)],
}


@pytest.mark.parametrize("restart_policy", POLICIES)
@pytest.mark.parametrize("title", list(SUCCESS))
def test_validate_ephemeral_containers_success(title: str, restart_policy: str) -> None:
    assert errors_of(SUCCESS[title], restart_policy) == []


DUP, REQ, INV, NSUP, NF, FORB = ("FieldValueDuplicate", "FieldValueRequired", "FieldValueInvalid",
                                 "FieldValueNotSupported", "FieldValueNotFound", "FieldValueForbidden")
E0 = "spec.ephemeralContainers[0]"
TCP80 = {"tcpSocket": {"port": 80}}
FAILURES: list[tuple[str, list[Obj], list[tuple[str, str]]]] = [
    ("Name Collision with Container.Containers", [ec("ctr"), ec("debug1")], [(DUP, f"{E0}.name")]),
    ("Name Collision with Container.InitContainers", [ec("ictr"), ec("debug1")], [(DUP, f"{E0}.name")]),
    ("Name Collision with EphemeralContainers", [ec("debug1"), ec("debug1")],
     [(DUP, "spec.ephemeralContainers[1].name")]),
    ("empty Container", [{}], [(REQ, f"{E0}.name"), (REQ, f"{E0}.image"), (REQ, f"{E0}.terminationMessagePolicy"),
                               (REQ, f"{E0}.imagePullPolicy")]),
    ("empty Container Name", [ec("")], [(REQ, f"{E0}.name")]),
    ("whitespace padded image name", [ec("debug", " image")], [(INV, f"{E0}.image")]),
    ("invalid image pull policy", [ec("debug", imagePullPolicy="PullThreeTimes")], [(NSUP, f"{E0}.imagePullPolicy")]),
    ("TargetContainerName doesn't exist", [ec("debug", targetContainerName="bogus")],
     [(NF, f"{E0}.targetContainerName")]),
    ("Targets an ephemeral container", [ec("debug"), ec("debugception", targetContainerName="debug")],
     [(NF, "spec.ephemeralContainers[1].targetContainerName")]),
    ("Container uses disallowed field: Lifecycle",
     [ec("debug", lifecycle={"preStop": {"exec": {"command": ["ls", "-l"]}}})],
     [(FORB, f"{E0}.lifecycle")]),
    ("Container uses disallowed field: LivenessProbe", [ec("debug", livenessProbe={**TCP80, "successThreshold": 1})],
     [(FORB, f"{E0}.livenessProbe")]),
    ("Container uses disallowed field: Ports", [ec("debug", ports=[{"protocol": "TCP", "containerPort": 80}])],
     [(FORB, f"{E0}.ports")]),
    ("Container uses disallowed field: ReadinessProbe", [ec("debug", readinessProbe=TCP80)],
     [(FORB, f"{E0}.readinessProbe")]),
    ("Container uses disallowed field: StartupProbe", [ec("debug", startupProbe={**TCP80, "successThreshold": 1})],
     [(FORB, f"{E0}.startupProbe")]),
    ("Container uses disallowed field: Resources", [ec("debug", resources={"limits": {"cpu": "10"}})],
     [(FORB, f"{E0}.resources")]),
    ("Container uses disallowed field: VolumeMount.SubPath",
     [ec("debug", volumeMounts=[{"name": "vol", "mountPath": "/vol"},
                                {"name": "vol", "mountPath": "/volsub", "subPath": "foo"}])],
     [(FORB, f"{E0}.volumeMounts[1].subPath")]),
    ("Container uses disallowed field: VolumeMount.SubPathExpr",
     [ec("debug", volumeMounts=[{"name": "vol", "mountPath": "/vol"},
                                {"name": "vol", "mountPath": "/volsub", "subPathExpr": "$(POD_NAME)"}])],
     [(FORB, f"{E0}.volumeMounts[1].subPathExpr")]),
    ("Disallowed field with other errors should only return a single Forbidden",
     [ec("debug", lifecycle={"preStop": {"exec": {"command": []}}})], [(FORB, f"{E0}.lifecycle")]),
    ("Container uses disallowed field: ResizePolicy",
     [ec("resources-resize-policy", resizePolicy=[{"resourceName": "cpu", "restartPolicy": "NotRequired"}])],
     [(FORB, f"{E0}.resizePolicy")]),
    ("Forbidden RestartPolicy: Always", [ec("foo", restartPolicy="Always")], [(FORB, f"{E0}.restartPolicy")]),
    ("Forbidden RestartPolicy: OnFailure", [ec("foo", restartPolicy="OnFailure")], [(FORB, f"{E0}.restartPolicy")]),
    ("Forbidden RestartPolicy: Never", [ec("foo", restartPolicy="Never")], [(FORB, f"{E0}.restartPolicy")]),
    ("Forbidden RestartPolicy: invalid", [ec("foo", restartPolicy="invalid")], [(FORB, f"{E0}.restartPolicy")]),
    ("Forbidden RestartPolicy: empty", [ec("foo", restartPolicy="")], [(FORB, f"{E0}.restartPolicy")]),
]


@pytest.mark.parametrize("restart_policy", POLICIES)
@pytest.mark.parametrize(("title", "ephemeral", "expected"), FAILURES, ids=[f[0] for f in FAILURES])
def test_validate_ephemeral_containers_failure(title: str, ephemeral: list[Obj], expected: list[tuple[str, str]],
                                               restart_policy: str) -> None:
    assert errors_of(ephemeral, restart_policy) == expected


# --- TestValidatePodEphemeralContainersUpdate --------------------------------------------------------------------

def make_pod(ephemeral: list[Obj] | None, static: bool = False) -> Obj:
    """upstream's makePod: pod `pod` in `ns`, resourceVersion 1, restartPolicy OnFailure, podtest's one container
    and grace period; `static`: the case's mirror pod on node `some-name`."""
    pod: Obj = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "pod", "namespace": "ns", "resourceVersion": "1"},
                "spec": {"containers": [dict(CTR)], "restartPolicy": "OnFailure", "dnsPolicy": "ClusterFirst",
                         "terminationGracePeriodSeconds": 30}}
    if ephemeral is not None:
        pod["spec"]["ephemeralContainers"] = copy.deepcopy(ephemeral)
    if static:
        pod["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "foo"}
        pod["spec"]["nodeName"] = "some-name"
    return pod


def bb(name: str, image: str = "busybox") -> Obj:
    return ec(name, image)


UPDATES: list[tuple[str, Obj, Obj, str]] = [
    ("no ephemeral containers", make_pod([]), make_pod([]), ""),
    ("No change in Ephemeral Containers", make_pod([bb("debugger"), bb("debugger2")]),
     make_pod([bb("debugger"), bb("debugger2")]), ""),
    ("Ephemeral Container list order changes", make_pod([bb("debugger"), bb("debugger2")]),
     make_pod([bb("debugger2"), bb("debugger")]), ""),
    ("Add an Ephemeral Container", make_pod([bb("debugger")]), make_pod([]), ""),
    ("Add two Ephemeral Containers", make_pod([bb("debugger1"), bb("debugger2")]), make_pod([]), ""),
    ("Add to an existing Ephemeral Containers", make_pod([bb("debugger"), bb("debugger2")]),
     make_pod([bb("debugger")]), ""),
    ("Add to an existing Ephemeral Containers, list order changes",
     make_pod([bb("debugger3"), bb("debugger2"), bb("debugger")]), make_pod([bb("debugger"), bb("debugger2")]), ""),
    ("Remove an Ephemeral Container", make_pod([]), make_pod([bb("debugger")]), "may not be removed"),
    ("Replace an Ephemeral Container", make_pod([bb("firstone")]), make_pod([bb("thentheother")]),
     "may not be removed"),
    ("Change an Ephemeral Containers", make_pod([bb("debugger1"), bb("debugger2")]),
     make_pod([bb("debugger1", "debian"), bb("debugger2")]), "may not be changed"),
    ("Add ephemeral container to static pod", make_pod([bb("debugger1", "debian")], static=True),
     make_pod(None, static=True), "Forbidden: static pods do not support ephemeral containers"),
]


@pytest.mark.parametrize(("name", "new", "old", "err"), UPDATES, ids=[u[0] for u in UPDATES])
def test_validate_pod_ephemeral_containers_update(name: str, new: Obj, old: Obj, err: str) -> None:
    """Through PodStrategy's update validation as the subresource's handler runs it, with the errors printed as
    field.ErrorList's aggregate (`field: detail`)."""
    with ephemeral_containers_update():
        causes = PodStrategy(PODS).validate_update(copy.deepcopy(new), old)
    printed = ", ".join(f"{c.field}: {c.message}" for c in causes)
    if not err:
        assert causes == []
    else:
        assert causes and err in printed, printed


def test_outside_the_subresource_a_pod_update_cannot_add_one() -> None:
    """ValidatePodUpdate: the same change through the pod itself is refused (the subresource's rules are its own)."""
    causes = PodStrategy(PODS).validate_update(make_pod([bb("debugger")]), make_pod([]))
    assert [(c.field, c.message.split(" other than")[0]) for c in causes] == [
        ("spec", "Forbidden: pod updates may not change fields")]
