"""Field knowledge of the built-in kinds, taken from the official client's models.

One source serves pruning (`fieldValidation`), type checking and the OpenAPI v3 documents
`kubectl explain` reads: `kubernetes.client.models` (`openapi_types`, `attribute_map`, the
pydantic field descriptions and required flags), a maintained source that tracks upstream,
rather than a hand-written schema. Built-in kinds drop unknown fields on decode upstream
(they decode into Go structs); `Strict` turns each into an error and `Warn` into a
`Warning` header.

The client flattens two upstream types: `resource.Quantity` becomes `str` (upstream also
accepts a JSON number there) and `intstr.IntOrString` becomes `object`. IntOrString is
recovered from the model's annotation (`int | str`); Quantity fields are named in
`QUANTITY_FIELDS`. Every integer becomes `int` too: the int32 ones are named in `INT32_FIELDS`,
generated from upstream's OpenAPI document (`scripts/gen_int32_fields.py`); the rest are int64.
"""

from __future__ import annotations

import json
import re
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from kubernetes.client import models

from kubelite.apiserver import goutf8
from kubelite.apiserver.int32_fields import INT32_FIELDS

Kind = Literal["string", "integer", "int32", "boolean", "number", "time", "bytes", "quantity", "int-or-string",
               "any", "model", "list", "map"]

_LIST = re.compile(r"^(?:List|list)\[(.+)\]$")
_DICT = re.compile(r"^(?:Dict|dict)\((?:str), ?(.+)\)$|^(?:Dict|dict)\[str, ?(.+)\]$")
_MODEL_NAME = re.compile(r"^([A-Z][a-z]+)?(V\d+(?:alpha\d+|beta\d+)?)([A-Z].*)$")
_SCALARS: dict[str, Kind] = {"str": "string", "int": "integer", "bool": "boolean", "float": "number",
                             "datetime": "time", "date": "string", "bytes": "bytes", "bytearray": "bytes"}

# (model, JSON field) whose upstream type is resource.Quantity (k8s.io/api types.go), flattened to str by the
# client: a quantity, or a map of them.
QUANTITY_FIELDS = frozenset({
    ("V1ResourceRequirements", "limits"), ("V1ResourceRequirements", "requests"),
    ("V1VolumeResourceRequirements", "limits"), ("V1VolumeResourceRequirements", "requests"),
    ("V1PodSpec", "overhead"), ("V1EmptyDirVolumeSource", "sizeLimit"), ("V1ResourceFieldSelector", "divisor"),
    ("V1PodStatus", "allocatedResources"), ("V1ContainerStatus", "allocatedResources"),
    ("V1NodeStatus", "allocatable"), ("V1NodeStatus", "capacity"), ("V1PersistentVolumeSpec", "capacity"),
    ("V1PersistentVolumeClaimStatus", "allocatedResources"), ("V1PersistentVolumeClaimStatus", "capacity"),
})


@dataclass(frozen=True, slots=True)
class FieldType:
    kind: Kind
    item: FieldType | None = None  # list and map elements
    model: str = ""  # kind == "model": the client model's class name


@dataclass(frozen=True, slots=True)
class Field:
    type: FieldType
    description: str
    required: bool


def _parse(typ: str, quantity: bool, int_or_string: bool, int32: bool) -> FieldType:
    m = _LIST.match(typ)
    if m:
        return FieldType("list", _parse(m.group(1), quantity, int_or_string, int32))
    m = _DICT.match(typ)
    if m:
        return FieldType("map", _parse(m.group(1) or m.group(2), quantity, int_or_string, int32))
    if typ == "str" and quantity:
        return FieldType("quantity")
    if typ == "int" and int32:
        return FieldType("int32")
    if typ == "object":
        return FieldType("int-or-string" if int_or_string else "any")
    if typ in _SCALARS:
        return FieldType(_SCALARS[typ])
    return FieldType("model", model=typ)


def _is_int_or_string(annotation: Any) -> bool:
    bases: set[Any] = set()
    for arg in typing.get_args(annotation) or (annotation,):
        if arg is type(None):
            continue
        bases.add(typing.get_args(arg)[0] if typing.get_origin(arg) is typing.Annotated else arg)
    return bases == {int, str}


@cache
def fields(model: str) -> dict[str, Field]:
    """JSON field name → its type, description and whether it is required."""
    cls = getattr(models, model)
    types: dict[str, str] = cls.openapi_types
    names: dict[str, str] = cls.attribute_map
    infos = {info.serialization_alias or info.alias or attr: info for attr, info in cls.model_fields.items()}
    out = {}
    for attr, typ in types.items():
        name = names[attr]
        info = infos[name]
        out[name] = Field(_parse(typ, (model, name) in QUANTITY_FIELDS, _is_int_or_string(info.annotation),
                                 (model, name) in INT32_FIELDS), info.description or "", info.is_required())
    return out


def description(model: str) -> str:
    """The model's own description: the first paragraph of the class docstring."""
    doc = (getattr(models, model).__doc__ or "").strip()
    return "" if doc.startswith("NOTE: This class is auto generated") else doc.split("\n\n")[0].strip()


@cache
def go_name(model: str) -> tuple[str, str]:
    """(Go package, Go type) of a client model: `V1PodSpec` → (`v1`, `PodSpec`), `CoreV1Event` → (`v1`, `Event`)."""
    m = _MODEL_NAME.match(model)
    return (m.group(2).lower(), m.group(3)) if m else ("v1", model)


def warm(model: str) -> None:
    """Resolve the field tables of `model` and every model it contains, ahead of the first request.

    The client's model classes are imported lazily and resolving a Pod's graph costs ~0.2 s;
    paid at start, not by the first pods of a burst.
    """
    if model and model not in _warmed:
        _warmed.add(model)
        for f in fields(model).values():
            t = innermost(f.type)
            if t is not None and t.kind == "model":
                warm(t.model)


_warmed: set[str] = set()


def prune_unknown(obj: Any, model: str) -> list[str]:
    """Remove fields the model does not know from `obj` (in place); return their paths.

    Types without a client model (kubelite's own kinds) keep every field.
    """
    unknown: list[str] = []
    if model:
        _walk(obj, FieldType("model", model=model), "", unknown)
    return unknown


def _walk(value: Any, typ: FieldType, path: str, unknown: list[str]) -> None:
    """Prune `value` (of type `typ`, at `path`) in place. Only values that can hold a model's fields are walked
    (`_prunable`): a map of strings (labels, annotations) or a list of them has nothing to prune, and walking
    every such entry was most of the cost of pruning a pod (every status PATCH prunes the whole pod)."""
    kind = typ.kind
    if kind == "model":
        if isinstance(value, dict):
            known = _prunable(typ.model)
            unknown_keys = []
            for key, child in value.items():
                if key not in known:
                    unknown.append(f"{path}.{key}" if path else key)
                    unknown_keys.append(key)
                    continue
                child_type = known[key]
                if child_type is not None and isinstance(child, (dict, list)):  # a scalar has no fields to prune
                    _walk(child, child_type, f"{path}.{key}" if path else key, unknown)
            for key in unknown_keys:
                del value[key]
    elif kind == "list":
        if isinstance(value, list):
            assert typ.item is not None
            for i, item in enumerate(value):
                if isinstance(item, (dict, list)):
                    _walk(item, typ.item, f"{path}[{i}]", unknown)
    elif kind == "map" and isinstance(value, dict):
        assert typ.item is not None
        for k, item in value.items():
            if isinstance(item, (dict, list)):
                _walk(item, typ.item, f"{path}[{k}]", unknown)


def innermost(t: FieldType | None) -> FieldType | None:
    """The element type of lists and maps (of lists and maps...) of `t`; `t` itself when it is neither."""
    while t is not None and t.kind in ("list", "map"):
        t = t.item
    return t


@cache
def _prunable(model: str) -> dict[str, FieldType | None]:
    """Each field of `model` → its type when its values can hold fields to prune (a model, or lists and maps of
    models), else None: the walk steps into those only."""
    out: dict[str, FieldType | None] = {}
    for name, f in fields(model).items():
        inner = innermost(f.type)
        out[name] = f.type if inner is not None and inner.kind == "model" else None
    return out


def duplicate_fields(body: bytes) -> list[str]:
    """Names that appear twice in one JSON object (only Strict validation pays for this scan)."""
    dups: list[str] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                dups.append(k)
            seen.add(k)
        return dict(pairs)

    json.loads(goutf8.decode(body), object_pairs_hook=hook)  # invalid UTF-8 in a string: U+FFFD, as the decoder
    return dups
