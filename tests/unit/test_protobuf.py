"""Protobuf bodies as kubectl 1.32 sends them (research/kubectl-compat.md §12)."""

from __future__ import annotations

import pytest

from kubelite.apiserver.protobuf import ProtobufError, UnsupportedKind, decode

# Captured from `kubectl drain --disable-eviction --grace-period=5`.
DRAIN_DELETE = bytes.fromhex("6b387300") + bytes.fromhex("0a13") + b"\x0a\x02v1\x12\x0dDeleteOptions" + \
    bytes.fromhex("12020805") + bytes.fromhex("1a00") + bytes.fromhex("2200")


def _ld(num: int, payload: bytes) -> bytes:
    return bytes([num << 3 | 2, len(payload)]) + payload


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


def test_deployment_with_fields_not_decoded_is_refused() -> None:
    """A container field the decoder does not know (here a liveness probe) is a 415, never dropped."""
    container = _ld(1, b"c") + _ld(10, _ld(1, b"x"))
    raw = _ld(1, _ld(1, b"web")) + _ld(2, _ld(3, _ld(2, _ld(2, container))))
    with pytest.raises(UnsupportedKind, match="Container field 10"):
        decode(_envelope("apps/v1", "Deployment", raw))


def test_unsupported_kind_and_garbage() -> None:
    with pytest.raises(UnsupportedKind, match="StatefulSet"):
        decode(_envelope("apps/v1", "StatefulSet", b""))
    with pytest.raises(ProtobufError):
        decode(b"not protobuf")
