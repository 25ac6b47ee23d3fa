"""Property tests for the request parsers: any input is a value or a 4xx, never another exception.

Issue 10: quantities, selectors, patches, protobuf and body decoding each answered 500 or blocked the server
for some inputs; these properties keep every parser total and cheap.
"""

from __future__ import annotations

import contextlib
import re
import time
from fractions import Fraction
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubelite.api import validation
from kubelite.api.errors import ApiError
from kubelite.api.quantity import QuantityError, parse_quantity
from kubelite.api.selectors import COMMON_FIELDS, parse_field_selector, parse_label_selector
from kubelite.apiserver import patch, protobuf, typecheck
from kubelite.apiserver.registry import RESOURCES
from kubelite.apiserver.request import JSON, PROTOBUF, YAML, decode_body
from kubelite.testing.builders import make_pod
from tests.fuzz.strategies import json_values, quantity_like

POD = make_pod("p").req(cpu="100m").obj()
SELECTOR_TEXT = st.text(alphabet="ab=!(),<>-_./ 1xinot", max_size=30)
PATHS = st.sampled_from(["/metadata/labels", "/metadata/labels/a", "/spec/containers/0", "/spec/containers/-",
                         "/spec", "", "/x/y", "/spec/containers/9", "/metadata/annotations"])
JSON_PATCH_OPS = st.lists(st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bogus"]), "path": PATHS},
    optional={"value": json_values, "from": PATHS}), max_size=6)


def _fast(started: float) -> None:
    assert time.perf_counter() - started < 0.5


@given(json_values | quantity_like)
def test_quantity_parser_is_total_and_cheap(value: Any) -> None:
    started = time.perf_counter()
    with contextlib.suppress(QuantityError):
        assert isinstance(parse_quantity(value), Fraction)
    _fast(started)


@given(SELECTOR_TEXT)
def test_label_selector_parser_is_total(text: str) -> None:
    try:
        selector = parse_label_selector(text)
        selector.matches({"a": "1", "b": "x"})
    except ApiError as exc:
        assert exc.code == 400


@given(SELECTOR_TEXT)
def test_field_selector_parser_is_total(text: str) -> None:
    try:
        parse_field_selector(text, COMMON_FIELDS, "pods").matches(POD)
    except ApiError as exc:
        assert exc.code == 400


@given(JSON_PATCH_OPS | json_values)
def test_json_patch_is_total(ops: Any) -> None:
    try:
        patch.json_patch(POD, ops)
    except ApiError as exc:
        assert 400 <= exc.code < 500


@given(json_values, st.sampled_from(["merge", "strategic"]))
def test_merge_patches_are_total(doc: Any, kind: str) -> None:
    try:
        patch.merge_patch(POD, doc) if kind == "merge" else patch.strategic_merge_patch(POD, doc, "V1Pod")
    except ApiError as exc:
        assert 400 <= exc.code < 500


@given(st.binary(max_size=64), st.sampled_from([b"k8s\x00", b"k8s\x00\x0a\x0e\x0a\x02v1\x12\x08Namespace\x12"]))
def test_protobuf_decoder_is_total(tail: bytes, head: bytes) -> None:
    with contextlib.suppress(protobuf.ProtobufError):
        assert isinstance(protobuf.decode(head + tail), dict)


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode), st.sampled_from([JSON, YAML, PROTOBUF]))
def test_body_decoder_is_total(body: bytes, ctype: str) -> None:
    try:
        decode_body(body, ctype)
    except ApiError as exc:
        assert 400 <= exc.code < 500


@given(st.dictionaries(st.sampled_from(["metadata", "spec", "status", "x"]), json_values, max_size=3),
       st.sampled_from([r.model for r in RESOURCES if r.model]))
def test_type_check_is_total(obj: dict[str, Any], model: str) -> None:
    mismatch = typecheck.check(obj, model)
    assert mismatch is None or mismatch.error


# Upstream's regular expressions, anchored as Go's MatchString of `^...$` is (Python's `$` also matches before a
# final newline, so fullmatch): kubelite checks them without backtracking and must agree on every string.
_UPSTREAM_NAME_RES = [
    (validation.is_dns1123_label, re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"), 63),
    (validation.is_dns1123_subdomain, re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"),
     253),
    (validation.is_label_value, re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"), 63),
]


@given(st.text(alphabet="aZ09-._/\n é", max_size=12))
def test_name_checks_agree_with_upstreams_regular_expressions(text: str) -> None:
    for check, upstream, max_len in _UPSTREAM_NAME_RES:
        assert (check(text) == []) == (bool(upstream.fullmatch(text)) and len(text) <= max_len), (check, text)
