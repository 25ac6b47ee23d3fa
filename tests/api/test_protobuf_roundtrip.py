"""Every served kind round-trips JSON → protobuf → JSON, with every field of the official schema set.

Samples are generated, not written per kind: the official `kubernetes` client's models (openapi_types and
attribute_map, built from upstream's OpenAPI) give every field of a kind, recursively; the generated table only
picks the JSON form of the special types (Time vs MicroTime, Quantity, IntOrString, bytes). A model field missing
from the table makes the encoder refuse the sample, so the table is checked against the official schema too.
Kinds the client has no model for (metrics.k8s.io) are filled from the table alone.
"""

from __future__ import annotations

import re
from typing import Any

import kubernetes.client as k8s
import pytest

from kubelite.apiserver.proto import codec
from kubelite.apiserver.proto.flags import INLINE, MAP, REPEATED
from kubelite.apiserver.proto.table import KINDS, LISTS
from kubelite.apiserver.registry import RESOURCES

_SPECIAL: dict[str, Any] = {
    "resource.Quantity": "250m",
    "meta.v1.Time": "2024-01-02T03:04:05Z",
    "meta.v1.MicroTime": "2024-01-02T03:04:05.123456Z",
    "meta.v1.Duration": "1m30s",
    "intstr.IntOrString": "25%",
    "runtime.RawExtension": {"apiVersion": "v1", "nested": [1, "two", {"three": True}]},
    "meta.v1.FieldsV1": {"f:metadata": {"f:labels": {".": {}}}},
}
# Fields the official client 37.0.2 has that the newest k8s.io/api available here (master of 2026-07-24, see the
# table's header) does not yet: protobuf cannot carry them, so an object holding one is answered as JSON.
NOT_UPSTREAM_YET = {"V1NodeSystemInfo.runningInUserNamespace"}
KIND_MESSAGES = set(KINDS.values())
# kubelite's own kinds have no message; nor CustomResourceDefinitions here (apiextensions-apiserver's messages are
# not in the k8s.io/api protos the codec's table is generated from): both are served as JSON
SERVED = [(r.group_version, r.kind) for r in RESOURCES
          if not r.group_version.startswith(("kubelite.io/", "apiextensions.k8s.io/"))]


def _field(key: str, name: str) -> codec.Field | None:
    """The table's field for a JSON name, looking through inlined (embedded) structs."""
    for f in codec.plan(key).fields:
        if f.flags & INLINE:
            found = _field(f.type, name)
            if found is not None:
                return found
        elif f.name == name:
            return f
    return None


def _leaf(f: codec.Field, path: str) -> Any:
    if f.type in _SPECIAL:
        return _SPECIAL[f.type]
    if f.type in LISTS:
        return ["a", "b"]
    return {"string": f"{path.rsplit('.', 1)[-1]}-v", "bytes": "aGk=", "bool": True, "int32": 3, "int64": 2**40,
            "double": 1.5}[f.type]


def _value(f: codec.Field, model_type: str | None, path: str) -> Any:
    """A non-zero value for field f: lists and maps of two entries, messages filled recursively."""
    inner = re.fullmatch(r"(?:List|Dict)\[(?:str, )?(.*)\]", model_type or "")
    element_type = inner.group(1) if inner else model_type
    if f.flags & MAP:
        return {"k1": _element(f, element_type, path), "k2": _element(f, element_type, path)}
    if f.flags & REPEATED:
        return [_element(f, element_type, path), _element(f, element_type, path)]
    return _element(f, element_type, path)


def _element(f: codec.Field, model_type: str | None, path: str) -> Any:
    if f.message and f.type not in _SPECIAL and f.type not in LISTS:
        model = getattr(k8s, model_type, None) if model_type else None
        return sample(f.type, model, path)
    return _leaf(f, path)


def sample(key: str, model: type | None, path: str = "") -> dict[str, Any]:
    """Every field of `model` (or of the table's message when the client has no model) set to a non-zero value."""
    out: dict[str, Any] = {}
    if model is not None:
        types: dict[str, str] = model.openapi_types  # type: ignore[attr-defined]
        names: dict[str, str] = model.attribute_map  # type: ignore[attr-defined]
        for attr, model_type in types.items():
            name = names[attr]
            if name in ("apiVersion", "kind") and key in KIND_MESSAGES:  # TypeMeta: the envelope's, not a field
                continue
            if f"{model.__name__}.{name}" in NOT_UPSTREAM_YET:
                continue
            f = _field(key, name)
            assert f is not None, f"{path}.{name} (official schema) is not in the protobuf table's {key}"
            out[name] = _value(f, model_type, f"{path}.{name}")
        return out
    for f in codec.plan(key).fields:
        if f.flags & INLINE:
            out.update(sample(f.type, None, path))
        else:
            out[f.name] = _value(f, None, f"{path}.{f.name}")
    return out


def _model(group_version: str, kind: str) -> type | None:
    version = group_version.rsplit("/", 1)[-1]
    return getattr(k8s, f"V{version[1:]}{kind}", None)


def test_every_served_kind_has_a_message() -> None:
    assert SERVED
    assert [gvk for gvk in SERVED if codec.message_for(*gvk) is None] == []


@pytest.mark.parametrize(("group_version", "kind"), SERVED, ids=[f"{gv}/{k}" for gv, k in SERVED])
def test_round_trip_with_every_field(group_version: str, kind: str) -> None:
    key = codec.message_for(group_version, kind)
    assert key is not None
    model = _model(group_version, kind)
    obj = {"apiVersion": group_version, "kind": kind, **sample(key, model, kind)}
    body = codec.encode_object(obj)
    assert codec.decode_object(body) == obj
    if codec.message_for(group_version, f"{kind}List") is None:
        return  # a create-only kind (SelfSubjectReview) has no List message
    items = [sample(key, model, kind) for _ in range(2)]
    listed = {"apiVersion": group_version, "kind": f"{kind}List",
              "metadata": {"resourceVersion": "7", "continue": "token", "remainingItemCount": 3}, "items": items}
    assert codec.decode_object(codec.encode_object(listed)) == listed


def test_samples_cover_deep_fields() -> None:
    """The generator really reaches the leaves (a guard against a sampler that silently stops early)."""
    pod = sample("core.v1.Pod", k8s.V1Pod)
    container = pod["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["port"] == "25%"
    assert pod["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 2**40
    assert pod["metadata"]["managedFields"][0]["fieldsV1"] == _SPECIAL["meta.v1.FieldsV1"]
    assert container["resources"]["limits"] == {"k1": "250m", "k2": "250m"}


@pytest.mark.parametrize("kind", ["NodeMetrics", "PodMetrics"])
def test_metrics_kinds_round_trip_from_the_table(kind: str) -> None:
    key = codec.message_for("metrics.k8s.io/v1beta1", kind)
    assert key is not None
    obj = {"apiVersion": "metrics.k8s.io/v1beta1", "kind": kind, **sample(key, None, kind)}
    assert codec.decode_object(codec.encode_object(obj)) == obj
