"""Decoding protobuf bodies as upstream does: kubectl 1.32's captured bodies, Go's JSON semantics, bad wire data.

Expected JSON is what an upstream server would make of the same bytes: gogo-protobuf Unmarshal into the Go struct,
then encoding/json (omitempty drops zero non-pointer scalars, pointers keep an explicit zero).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver import protobuf
from kubelite.apiserver.proto.codec import MAX_DEPTH, MAX_VALUES, decode_message
from kubelite.apiserver.request import PROTOBUF, decode_body
from kubelite.clock import format_duration, parse_duration

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


_LABELS = _ld(11, _ld(1, b"app") + _ld(2, b"web"))
_DEPLOYMENT_CONTAINER = _ld(1, b"busybox") + _ld(2, b"busybox") + _ld(3, b"sleep") + _ld(3, b"3600") + \
    _ld(6, _vi(3, 80)) + _ld(8, b"")
_JOB_CONTAINER = _ld(1, b"hello") + _ld(2, b"busybox") + _ld(3, b"sh") + _ld(3, b"-c") + _ld(3, b"echo hi") + \
    _ld(5, b"") + _ld(8, b"") + _ld(13, b"") + _ld(14, b"") + _vi(16, 0) + _ld(20, b"")
_JOB_POD_SPEC = _ld(2, _JOB_CONTAINER) + _ld(3, b"Never") + _ld(6, b"") + _ld(8, b"") + _vi(11, 0) + _ld(19, b"")

# (body as kubectl 1.32 sends it, the JSON an upstream server makes of it)
KUBECTL_BODIES = [
    pytest.param(DRAIN_DELETE, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 5},
                 id="drain DeleteOptions: empty propagationPolicy left out"),
    pytest.param(_envelope("v1", "Namespace", _ld(1, _ld(1, b"foo")) + _ld(2, b"") + _ld(3, b"")),
                 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "foo"}, "spec": {}, "status": {}},
                 id="create namespace: empty spec and status kept as Go's structs"),
    pytest.param(_envelope("scheduling.k8s.io/v1", "PriorityClass",
                           _ld(1, _ld(1, b"p1")) + _vi(2, 10) + _vi(3, 0) + _ld(4, b"hi")),
                 {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p1"},
                  "value": 10, "description": "hi"},
                 id="create priorityclass: globalDefault false is omitempty"),
    pytest.param(_envelope("scheduling.k8s.io/v1", "PriorityClass", _ld(1, _ld(1, b"p0"))),
                 {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p0"},
                  "value": 0},
                 id="priorityclass value absent: a non-omitempty int32 is 0, as Go's struct"),
    pytest.param(_envelope("policy/v1", "PodDisruptionBudget",
                           _ld(1, _ld(1, b"pd1") + _ld(3, b"demo")) +
                           _ld(2, _ld(1, _vi(1, 1) + _ld(3, b"50%")) + _ld(2, _ld(1, _ld(1, b"app") + _ld(2, b"x"))))),
                 {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": "pd1", "namespace": "demo"},
                  "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "x"}}}},
                 id="create pdb: IntOrString percentage, selector"),
    pytest.param(_envelope("apps/v1", "Deployment", _ld(1, _ld(1, b"web") + _LABELS) + _ld(2,
                           _vi(1, 2) + _ld(2, _ld(1, _ld(1, b"app") + _ld(2, b"web"))) +
                           _ld(3, _ld(1, _LABELS) + _ld(2, _ld(2, _DEPLOYMENT_CONTAINER))) + _ld(4, b"") +
                           _vi(5, 0) + _vi(6, 0) + _vi(7, 0))),
                 {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "labels": {"app": "web"}},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                               {"name": "busybox", "image": "busybox", "command": ["sleep", "3600"],
                                "ports": [{"containerPort": 80}], "resources": {}}]}},
                           "strategy": {}, "revisionHistoryLimit": 0}},
                 id="create deployment: pointer revisionHistoryLimit 0 kept, minReadySeconds 0, paused false omitted"),
    pytest.param(_envelope("batch/v1", "Job", _ld(1, _ld(1, b"hello")) + _ld(2, _ld(6, _ld(1, b"") +
                                                                                   _ld(2, _JOB_POD_SPEC)))),
                 {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "hello"},
                  "spec": {"template": {"metadata": {}, "spec": {"restartPolicy": "Never", "containers": [
                      {"name": "hello", "image": "busybox", "command": ["sh", "-c", "echo hi"], "resources": {}}]}}}},
                 id="create job: gogo's empty strings, zeros and empty messages"),
]


@pytest.mark.parametrize(("body", "want"), KUBECTL_BODIES)
def test_kubectl_bodies(body: bytes, want: dict[str, Any]) -> None:
    assert protobuf.decode(body) == want


def _pod(spec: bytes) -> bytes:
    return _envelope("v1", "Pod", _ld(1, _ld(1, b"p")) + _ld(2, spec))


def _spec(body: bytes) -> Any:
    return protobuf.decode(body)["spec"]


_QTY = _ld(1, b"cpu") + _ld(2, _ld(1, b"250m"))
# (PodSpec bytes, the decoded spec): the Go semantics the generic codec must reproduce
GO_SEMANTICS = [
    pytest.param(_ld(2, _ld(1, b"c") + _ld(7, _ld(1, b"A") + _ld(2, b"1")) + _ld(7, _ld(1, b"EMPTY") + _ld(2, b""))),
                 {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}, {"name": "EMPTY"}]}]},
                 id="repeated messages in order, an empty omitempty string left out"),
    pytest.param(_ld(2, _ld(1, b"c") + _ld(8, _ld(1, _QTY) + _ld(2, _QTY))),
                 {"containers": [{"name": "c", "resources": {"limits": {"cpu": "250m"}, "requests": {"cpu": "250m"}}}]},
                 id="map<string, Quantity>"),
    pytest.param(_vi(4, 0) + _vi(4, 30), {"terminationGracePeriodSeconds": 30}, id="the last occurrence wins"),
    pytest.param(_vi(4, 0), {"terminationGracePeriodSeconds": 0}, id="a pointer keeps its zero"),
    pytest.param(_vi(5, (1 << 64) - 1), {"activeDeadlineSeconds": -1}, id="negative int64 as ten-byte varint"),
    pytest.param(_ld(1, _ld(1, b"v") + _ld(2, _ld(2, _ld(1, b"Memory")))),
                 {"volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}]},
                 id="Volume: the embedded VolumeSource is inlined"),
    pytest.param(_ld(2, _ld(1, b"c") + _ld(10, _ld(1, _ld(2, _ld(2, _vi(1, 1) + _ld(3, b"http")))) + _vi(4, 5))),
                 {"containers": [{"name": "c", "livenessProbe": {"httpGet": {"port": "http"}, "periodSeconds": 5}}]},
                 id="Probe: the embedded ProbeHandler is inlined, a named port"),
    pytest.param(_ld(22, _ld(1, b"k") + _ld(2, b"Exists")) + _ld(22, _ld(4, b"NoSchedule") + _vi(5, 30)),
                 {"tolerations": [{"key": "k", "operator": "Exists"},
                                  {"effect": "NoSchedule", "tolerationSeconds": 30}]},
                 id="tolerations: pointer int64 kept"),
]


@pytest.mark.parametrize(("spec", "want"), GO_SEMANTICS)
def test_go_semantics(spec: bytes, want: dict[str, Any]) -> None:
    got = _spec(_pod(spec))
    if "containers" not in want:
        got.pop("containers", None)
    assert got == want


def test_special_types() -> None:
    meta = _ld(1, b"l") + _ld(8, _vi(1, 1700000000) + _vi(2, 5))
    spec = _ld(1, b"holder") + _ld(3, _vi(1, 1700000000) + _vi(2, 123456789))
    lease = protobuf.decode(_envelope("coordination.k8s.io/v1", "Lease", _ld(1, meta) + _ld(2, spec)))
    assert lease["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert lease["spec"] == {"holderIdentity": "holder", "acquireTime": "2023-11-14T22:13:20.123456Z"}
    secret = protobuf.decode(_envelope("v1", "Secret", _ld(1, _ld(1, b"s")) +
                                       _ld(2, _ld(1, b"k") + _ld(2, b"\x00\xff"))))
    assert secret["data"] == {"k": "AP8="}
    revision = protobuf.decode(_envelope("apps/v1", "ControllerRevision",
                                         _ld(1, _ld(1, b"r")) + _ld(2, _ld(1, b'{"spec": [1]}')) + _vi(3, 2)))
    assert revision["data"] == {"spec": [1]} and revision["revision"] == 2


def _nested_revision(depth: int) -> bytes:
    body = _envelope("apps/v1", "ControllerRevision", _ld(1, _ld(1, b"r")))
    for _ in range(depth):
        body = _envelope("apps/v1", "ControllerRevision", _ld(1, _ld(1, b"r")) + _ld(2, _ld(1, body)))
    return body


# (body, text in the 400's message)
BAD_WIRE_DATA = [
    pytest.param(b"\x0a\x02{}", "no k8s\\0 prefix", id="no magic"),
    pytest.param(b"k8s\x00\x0a\x02\x08\x01", "wrong wireType", id="TypeMeta field of the wrong wire type"),
    pytest.param(_envelope("v1", "Pod", _ld(2, b"\x20")), "unexpected EOF in a varint", id="truncated varint"),
    pytest.param(_envelope("v1", "Pod", b"\x0a\x7f\x01"), "unexpected EOF in a length-delimited field",
                 id="length beyond the end"),
    pytest.param(_envelope("v1", "Pod", b"\x0b"), "illegal wireType 3", id="group wire type"),
    pytest.param(_envelope("v1", "Pod", b"\x00\x00"), "illegal tag 0", id="tag 0"),
    pytest.param(_envelope("v1", "Pod", _ld(99, b"x")), "unknown field 99 in message Pod", id="unknown field"),
    pytest.param(_envelope("v1", "Pod", _vi(1, 5)), 'wrong wireType 0 for field "metadata"', id="varint for a message"),
    pytest.param(_envelope("v1", "Pod", _ld(1, _ld(1, b"\xff\xfe"))), "invalid UTF-8", id="invalid UTF-8"),
    pytest.param(_envelope("v1", "Pod", _ld(2, b"\x20" + b"\xff" * 11)), "overflow", id="varint of eleven bytes"),
    pytest.param(_envelope("apps/v1", "ControllerRevision", _ld(2, _ld(1, b"{nope"))), "invalid JSON",
                 id="raw extension not JSON"),
    pytest.param(_nested_revision(MAX_DEPTH + 5), "max depth", id="envelopes nested beyond the depth limit"),
    pytest.param(_envelope("apps/v1", "ControllerRevision", _ld(2, _ld(1, b"[" * 500 + b"]" * 500))), "max depth",
                 id="raw extension JSON nested beyond the depth limit"),
    pytest.param(_envelope("v1", "Pod", b"") + _ld(3, b"gzip"), "contentEncoding", id="content encoding"),
    pytest.param(_envelope("v1", "Pod", _ld(2, b"\x12\x00" * MAX_VALUES)), "fields in one body",
                 id="more fields than one body may decode to (a 300 KB body of empty containers)"),
]


@pytest.mark.parametrize(("body", "message"), BAD_WIRE_DATA)
def test_bad_wire_data_is_a_400(body: bytes, message: str) -> None:
    with pytest.raises(ApiError) as exc:
        decode_body(body, PROTOBUF)
    assert exc.value.code == 400, exc.value.status()
    assert message in exc.value.status()["message"]


def test_kind_without_a_message_is_a_415() -> None:
    with pytest.raises(ApiError) as exc:
        decode_body(_envelope("kubelite.io/v1alpha1", "SchedulingExplanation", b""), PROTOBUF)
    assert exc.value.code == 415 and "send JSON" in exc.value.status()["message"]


# (object, why protobuf cannot carry it): the response falls back to JSON
NOT_ENCODABLE = [
    pytest.param({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"bogus": 1}},
                 id="a field the message lacks"),
    pytest.param({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5}}, id="an int where a string belongs"),
    pytest.param({"apiVersion": "v1", "kind": "Pod", "spec": {"priority": 2**31}}, id="int32 out of range"),
    pytest.param({"apiVersion": "v1", "kind": "Secret", "data": {"k": "not base64!"}}, id="bytes not base64"),
    pytest.param({"apiVersion": "v1", "kind": "Pod", "metadata": {"creationTimestamp": "yesterday"}},
                 id="a time not RFC 3339"),
    pytest.param({"apiVersion": "kubelite.io/v1alpha1", "kind": "SchedulingExplanation"}, id="a kind with no message"),
    pytest.param({"apiVersion": "meta.k8s.io/v1", "kind": "Table", "rows": []}, id="a Table"),
    pytest.param({"apiVersion": "v1", "kind": "NamespaceList", "metadata": {},
                  "items": [{"metadata": {"name": f"n{i}"}} for i in range(protobuf.MAX_LIST_ITEMS + 1)]},
                 id="a list too long to encode cheaply"),
]


def test_a_list_at_the_limit_is_encoded() -> None:
    items = [{"metadata": {"name": f"n{i}"}} for i in range(protobuf.MAX_LIST_ITEMS)]
    body = protobuf.encode({"apiVersion": "v1", "kind": "NamespaceList", "metadata": {}, "items": items})
    assert body is not None and len(protobuf.decode(body)["items"]) == protobuf.MAX_LIST_ITEMS


@pytest.mark.parametrize("obj", NOT_ENCODABLE)
def test_objects_protobuf_cannot_carry_are_not_encoded(obj: dict[str, Any]) -> None:
    assert protobuf.encode(obj) is None


# (Accept header, whether protobuf is answered)
ACCEPT = [
    pytest.param("application/vnd.kubernetes.protobuf,application/json", True, id="client-go typed clients"),
    pytest.param("application/vnd.kubernetes.protobuf;stream=watch", True, id="typed watch"),
    pytest.param("application/json", False, id="json"),
    pytest.param("", False, id="none"),
    pytest.param("*/*", False, id="anything: JSON"),
    pytest.param("application/json, application/vnd.kubernetes.protobuf", False, id="json first"),
    pytest.param("application/json;q=0.5, application/vnd.kubernetes.protobuf", True, id="q ranks protobuf first"),
    pytest.param("application/vnd.kubernetes.protobuf;q=0", False, id="q=0 refuses"),
    pytest.param("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", False,
                 id="tables are JSON"),
]


@pytest.mark.parametrize(("accept", "want"), ACCEPT)
def test_accept_negotiation(accept: str, want: bool) -> None:
    assert protobuf.prefers_protobuf(accept) is want


# (Go's time.Duration.String(), nanoseconds)
DURATIONS = [("0s", 0), ("1ns", 1), ("1.5µs", 1500), ("1.5ms", 1_500_000), ("1s", 10**9), ("1m30s", 90 * 10**9),
             ("1h0m0s", 3600 * 10**9), ("2h3m4.5s", (2 * 3600 + 3 * 60 + 4) * 10**9 + 5 * 10**8),
             ("-1m0s", -60 * 10**9)]


@pytest.mark.parametrize(("text", "ns"), DURATIONS)
def test_durations_as_go_formats_them(text: str, ns: int) -> None:
    assert format_duration(ns) == text
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text", ["", "1", "1x", "h", "1h-1m", "--1s"])
def test_invalid_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_watch_frame_is_length_prefixed_watch_event() -> None:
    frame = protobuf.watch_frame("ADDED", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    assert frame is not None and int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decode_message("meta.v1.WatchEvent", frame[4:]) == {
        "type": "ADDED", "object": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}}
    assert orjson.dumps(protobuf.decode(frame[4:][frame[4:].index(b"k8s\x00"):]))


def test_watch_frames_leave_out_fields_the_message_lacks() -> None:
    """A watch cannot fall back to JSON midway: a field protobuf cannot carry is left out of the event (as a Go
    server would never have stored it), while a get or list answers JSON instead."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"nodeInfo": {"runningInUserNamespace": True, "kernelVersion": "6.1"}}}
    assert protobuf.encode(node) is None
    frame = protobuf.watch_frame("MODIFIED", node)
    assert frame is not None
    event = decode_message("meta.v1.WatchEvent", frame[4:])
    assert event["object"]["status"]["nodeInfo"]["kernelVersion"] == "6.1"
    assert "runningInUserNamespace" not in event["object"]["status"]["nodeInfo"]
    assert protobuf.encode(node) is None  # leniency does not leak into the next encoding
