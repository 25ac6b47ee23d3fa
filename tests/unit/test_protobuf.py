"""Protobuf bodies as kubectl 1.32 sends them (research/kubectl-compat.md §12)."""

from __future__ import annotations

import pytest

from kubelite.apiserver.protobuf import ProtobufError, UnsupportedKind, decode

# Captured from `kubectl drain --disable-eviction --grace-period=5`.
DRAIN_DELETE = bytes.fromhex("6b387300") + bytes.fromhex("0a13") + b"\x0a\x02v1\x12\x0dDeleteOptions" + \
    bytes.fromhex("12020805") + bytes.fromhex("1a00") + bytes.fromhex("2200")


def _uvarint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
    return out + bytes([n])


def _ld(num: int, payload: bytes) -> bytes:
    return _uvarint(num << 3 | 2) + _uvarint(len(payload)) + payload


def _vi(num: int, value: int) -> bytes:
    return _uvarint(num << 3) + _uvarint(value)


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + _ld(1, _ld(1, api_version.encode()) + _ld(2, kind.encode())) + _ld(2, raw)


def test_delete_options_from_drain() -> None:
    assert decode(DRAIN_DELETE) == {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 5}


def test_namespace() -> None:
    meta = _ld(1, b"foo")
    assert decode(_envelope("v1", "Namespace", _ld(1, meta))) == {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "foo"}}


def test_priority_class() -> None:
    raw = _ld(1, _ld(1, b"p1")) + bytes([2 << 3, 10]) + bytes([3 << 3, 0]) + _ld(4, b"hi")
    assert decode(_envelope("scheduling.k8s.io/v1", "PriorityClass", raw)) == {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p1"}, "value": 10,
        "globalDefault": False, "description": "hi"}


def test_pdb_with_percentage_and_selector() -> None:
    int_or_string = bytes([1 << 3, 1]) + _ld(3, b"50%")
    label_entry = _ld(1, b"app") + _ld(2, b"x")
    selector = _ld(1, label_entry)
    spec = _ld(1, int_or_string) + _ld(2, selector)
    raw = _ld(1, _ld(1, b"pd1") + _ld(3, b"demo")) + _ld(2, spec)
    assert decode(_envelope("policy/v1", "PodDisruptionBudget", raw)) == {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "pd1", "namespace": "demo"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "x"}}}}


def test_deployment_as_kubectl_create_deployment_sends_it() -> None:
    """`kubectl create deployment web --image=busybox --replicas=2 --port=80 -- sleep 3600`."""
    labels = _ld(11, _ld(1, b"app") + _ld(2, b"web"))
    port = bytes([3 << 3, 80])
    container = _ld(1, b"busybox") + _ld(2, b"busybox") + _ld(3, b"sleep") + _ld(3, b"3600") + _ld(6, port) + \
        _ld(8, b"")
    template = _ld(1, labels) + _ld(2, _ld(2, container))
    spec = bytes([1 << 3, 2]) + _ld(2, _ld(1, _ld(1, b"app") + _ld(2, b"web"))) + _ld(3, template) + _ld(4, b"")
    raw = _ld(1, _ld(1, b"web") + labels) + _ld(2, spec)
    assert decode(_envelope("apps/v1", "Deployment", raw)) == {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                     {"name": "busybox", "image": "busybox", "command": ["sleep", "3600"],
                      "ports": [{"containerPort": 80}], "resources": {}}]}}}}


def test_job_as_kubectl_create_job_sends_it() -> None:
    """`kubectl create job hello --image=busybox -- sh -c 'echo hi'`, with the empty strings, zeros and empty
    messages gogo-protobuf writes for every unset non-pointer field."""
    container = _ld(1, b"hello") + _ld(2, b"busybox") + _ld(3, b"sh") + _ld(3, b"-c") + _ld(3, b"echo hi") + \
        _ld(5, b"") + _ld(8, b"") + _ld(13, b"") + _ld(14, b"") + _vi(16, 0) + _ld(20, b"")
    pod_spec = _ld(2, container) + _ld(3, b"Never") + _ld(6, b"") + _ld(8, b"") + _vi(11, 0) + _ld(19, b"")
    raw = _ld(1, _ld(1, b"hello")) + _ld(2, _ld(6, _ld(1, b"") + _ld(2, pod_spec)))
    assert decode(_envelope("batch/v1", "Job", raw)) == {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "hello"},
        "spec": {"template": {"metadata": {}, "spec": {"restartPolicy": "Never", "containers": [
            {"name": "hello", "image": "busybox", "command": ["sh", "-c", "echo hi"], "resources": {}}]}}}}


def _with_template(kind: str, pod_spec: bytes) -> bytes:
    """A Deployment (template = spec field 3) or a Job (spec field 6) around `pod_spec`."""
    template = _ld(2, pod_spec)
    spec = _ld(3, template) if kind == "Deployment" else _ld(6, template)
    return _envelope("apps/v1" if kind == "Deployment" else "batch/v1", kind, _ld(1, _ld(1, b"w")) + _ld(2, spec))


QUANTITY_ENTRY = _ld(1, b"cpu") + _ld(2, _ld(1, b"250m"))
POD_TEMPLATE_CASES = [
    pytest.param(_ld(2, _ld(1, b"c") + _ld(7, _ld(1, b"A") + _ld(2, b"1")) + _ld(7, _ld(1, b"EMPTY") + _ld(2, b""))),
                 {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}, {"name": "EMPTY"}]}]},
                 id="env, an empty value left out"),
    pytest.param(_ld(2, _ld(1, b"c") + _ld(6, _ld(1, b"http") + _vi(2, 0) + _vi(3, 80) + _ld(4, b"TCP") +
                                         _ld(5, b""))),
                 {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}]}]},
                 id="ports, empty hostIP and zero hostPort left out"),
    pytest.param(_ld(2, _ld(1, b"c") + _ld(8, _ld(1, QUANTITY_ENTRY) + _ld(2, QUANTITY_ENTRY))),
                 {"containers": [{"name": "c", "resources": {"limits": {"cpu": "250m"}, "requests": {"cpu": "250m"}}}]},
                 id="resources"),
    pytest.param(_ld(20, _ld(1, b"init")) + _ld(2, _ld(1, b"c")) + _vi(4, 0) + _ld(8, b"robot") +
                 _ld(3, b"OnFailure"),
                 {"initContainers": [{"name": "init"}], "containers": [{"name": "c"}],
                  "terminationGracePeriodSeconds": 0, "serviceAccountName": "robot", "restartPolicy": "OnFailure"},
                 id="initContainers, a zero terminationGracePeriodSeconds, serviceAccountName, restartPolicy"),
]


@pytest.mark.parametrize("kind", ["Deployment", "Job"])
@pytest.mark.parametrize(("pod_spec", "want"), POD_TEMPLATE_CASES)
def test_pod_template_fields_for_deployment_and_job(kind: str, pod_spec: bytes, want: dict[str, object]) -> None:
    obj = decode(_with_template(kind, pod_spec))
    assert obj["spec"]["template"]["spec"] == want


REFUSED_CASES = [
    pytest.param(_ld(2, _ld(1, b"c") + _ld(10, _ld(1, b"x"))), "Container field 10", id="liveness probe"),
    pytest.param(_ld(2, _ld(1, b"c") + _ld(7, _ld(1, b"A") + _ld(3, _ld(1, b"x")))), "EnvVar field 3",
                 id="env valueFrom"),
    pytest.param(_ld(2, _ld(1, b"c") + _ld(8, _ld(3, _ld(1, b"gpu")))), "ResourceRequirements field 3",
                 id="resource claims"),
    pytest.param(_ld(2, _ld(1, b"c")) + _ld(7, _ld(1, b"disk") + _ld(2, b"ssd")), "PodSpec field 7",
                 id="nodeSelector"),
]


@pytest.mark.parametrize("kind", ["Deployment", "Job"])
@pytest.mark.parametrize(("pod_spec", "message"), REFUSED_CASES)
def test_fields_not_decoded_are_refused_never_dropped(kind: str, pod_spec: bytes, message: str) -> None:
    with pytest.raises(UnsupportedKind, match=message):
        decode(_with_template(kind, pod_spec))


def test_job_spec_field_not_decoded_is_refused() -> None:
    """podFailurePolicy (JobSpec field 11) must not be silently dropped from a Job."""
    raw = _ld(1, _ld(1, b"j")) + _ld(2, _ld(11, _ld(1, b"rule")))
    with pytest.raises(UnsupportedKind, match="JobSpec field 11"):
        decode(_envelope("batch/v1", "Job", raw))


def test_unsupported_kind_and_garbage() -> None:
    with pytest.raises(UnsupportedKind, match="StatefulSet"):
        decode(_envelope("apps/v1", "StatefulSet", b""))
    with pytest.raises(ProtobufError):
        decode(b"not protobuf")
