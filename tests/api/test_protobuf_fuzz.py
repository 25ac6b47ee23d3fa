"""The codec is total: corrupted protobuf is a ProtobufError (a 400), and any JSON either encodes or is refused
with an EncodeError (a JSON answer), never another exception (a 500)."""

from __future__ import annotations

import contextlib
from typing import Any

import kubernetes.client as k8s
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelite.apiserver.proto import codec
from tests.api.test_protobuf_roundtrip import sample
from tests.fuzz.strategies import json_values

FULL_POD = codec.encode_object({"apiVersion": "v1", "kind": "Pod", **sample("core.v1.Pod", k8s.V1Pod, "Pod")})


@settings(max_examples=300)
@given(st.integers(0, len(FULL_POD) - 1), st.integers(0, 255), st.integers(0, len(FULL_POD)))
def test_a_corrupted_pod_decodes_or_is_a_protobuf_error(at: int, byte: int, cut: int) -> None:
    """One byte of a Pod with every field set changed, and the body cut short: all errors are ProtobufErrors."""
    body = (FULL_POD[:at] + bytes([byte]) + FULL_POD[at + 1:])[:max(cut, 5)]
    with contextlib.suppress(codec.ProtobufError):
        assert isinstance(codec.decode_object(body), dict)


@given(st.sampled_from(["metadata", "spec", "status"]), json_values)
def test_any_json_encodes_or_is_refused(field: str, value: Any) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", field: value}
    try:
        body = codec.encode_object(obj)
    except codec.EncodeError:
        return
    codec.decode_object(body)
