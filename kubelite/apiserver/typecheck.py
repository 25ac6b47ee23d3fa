"""Type checking of built-in kinds as kube-apiserver's decoder does it (issue 10, defect 2).

Upstream decodes a body into Go structs, so a value of the wrong JSON type never reaches
storage: the first mismatch fails the request with Go's `json: cannot unmarshal number
into Go struct field PodSpec.spec.affinity of type v1.Affinity`. Types come from the
client's models (`schema`), so every field of every served kind is covered without a
hand-written schema. Nulls decode to nothing, as into a Go pointer, slice or map: a null
field is dropped (a time stays null, as a `metav1.Time` is written back), a null list
element of a struct type becomes an empty object and a null quantity in a map "0".

Integers are checked against their Go type's range (int32 or int64, from `schema`), as
Go's decoder refuses `2147483648` for an int32 with the same error as a string. Enum values
are validation's business (`enums`), as upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubelite.api.quantity import QuantityError, parse_quantity
from kubelite.apiserver import schema
from kubelite.apiserver.schema import FieldType

_RANGES = {"integer": (-(2**63), 2**63 - 1), "int32": (-(2**31), 2**31 - 1)}
_TAKE_STRINGS = frozenset({"string", "time", "bytes", "int-or-string", "any"})  # kinds any string fits (_scalar_fits)
# Kinds `_scalar_fits` decides alone: a value that fits one needs no path built and no call of `_value`.
_PLAIN = frozenset({"string", "time", "bytes", "integer", "int32", "boolean", "number", "int-or-string", "any"})
_SCALAR_GO = {"string": "string", "integer": "int64", "int32": "int32", "boolean": "bool", "number": "float64",
              "time": "v1.Time", "bytes": "[]uint8", "quantity": "resource.Quantity",
              "int-or-string": "intstr.IntOrString", "any": "interface {}"}


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first value of the wrong type: where (JSON path with indices, for causes) and Go's error text."""

    path: str
    error: str


class _Found(Exception):
    def __init__(self, mismatch: Mismatch) -> None:
        self.mismatch = mismatch


def check(obj: dict[str, Any], model: str, unknown: list[str] | None = None) -> Mismatch | None:
    """The first type mismatch in `obj` (a `model`), or None; drops nulls (in place) as the decoder would.

    With `unknown`, the same walk also prunes what `schema.prune_unknown` prunes and appends the same paths in
    the same order (one walk instead of two: the fields a type check steps into are those pruning steps into) —
    as far as the first mismatch: after one, pruning is left unfinished (`schema.prune_unknown` finishes it).
    """
    if not model:
        return None  # kubelite's own kinds have no model: kept as sent
    try:
        _struct(obj, model, "", "", unknown)
    except _Found as found:
        return found.mismatch
    return None


def go_type(t: FieldType) -> str:
    if t.kind == "list":
        assert t.item is not None
        return "[]" + go_type(t.item)
    if t.kind == "map":
        assert t.item is not None
        return "map[string]" + go_type(t.item)
    if t.kind == "model":
        package, name = schema.go_name(t.model)
        return f"{package}.{name}"
    return _SCALAR_GO[t.kind]


def json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "number"


def _struct(obj: dict[str, Any], model: str, path: str, go_path: str, unknown: list[str] | None) -> None:
    known = schema.fields(model)
    pruned: list[str] | None = None
    for key in list(obj):
        field = known.get(key)
        if field is None:  # unknown fields are fieldValidation's business: pruned here only if asked
            if unknown is not None:
                unknown.append(f"{path}.{key}" if path else key)
                pruned = [key] if pruned is None else [*pruned, key]
            continue
        value = obj[key]
        if value is None:
            if field.type.kind != "time":
                del obj[key]
            continue
        kind = field.type.kind
        if type(value) is str:  # most fields: no call, no path built
            if kind in _TAKE_STRINGS:
                continue
        elif kind in _PLAIN and _scalar_fits(value, kind):
            continue
        _value(value, field.type, f"{path}.{key}" if path else key, f"{go_path}.{key}" if go_path else key, model,
               unknown)
    for key in pruned or ():
        del obj[key]


def _value(value: Any, t: FieldType, path: str, go_path: str, model: str, unknown: list[str] | None) -> None:
    """Check `value` of type `t`; `model` is the struct whose field holds it (named in Go's messages)."""
    kind = t.kind
    if kind == "model":
        if isinstance(value, dict):
            _struct(value, t.model, path, go_path, unknown)
            return
    elif kind == "list":
        if isinstance(value, list):
            assert t.item is not None
            for i, item in enumerate(value):
                if item is None:
                    if t.item.kind == "model":
                        value[i] = {}
                    continue
                if _fits(item, t.item.kind):
                    continue
                _value(item, t.item, f"{path}[{i}]", go_path, model, unknown)
            return
    elif kind == "map":
        if isinstance(value, dict):
            assert t.item is not None
            for k, item in value.items():
                if item is not None:
                    if _fits(item, t.item.kind):  # labels, annotations: strings in a map of strings
                        continue
                    _value(item, t.item, f"{path}[{k}]", go_path, model, unknown)
                elif t.item.kind == "quantity":
                    value[k] = "0"  # a null decodes to the zero Quantity
            return
    elif kind == "quantity":
        try:  # resource.Quantity parses itself while decoding: a malformed or unbounded one fails the body
            parse_quantity(value)
            return
        except QuantityError as exc:
            raise _Found(Mismatch(path, str(exc))) from None
    elif _scalar_fits(value, kind):
        return
    elif kind == "int-or-string":
        shown = f"number {value}" if _is_number(value) else json_type(value)
        raise _Found(Mismatch(path, f"json: cannot unmarshal {shown} into Go value of type int32"))
    struct = schema.go_name(model)[1]
    if kind in _RANGES and _is_number(value):
        raise _Found(Mismatch(path, f"json: cannot unmarshal number {value} into Go struct field {struct}.{go_path} "
                                    f"of type {_SCALAR_GO[kind]}"))
    raise _Found(Mismatch(path, f"json: cannot unmarshal {json_type(value)} into Go struct field {struct}.{go_path} "
                                f"of type {go_type(t)}"))


def _fits(value: Any, kind: str) -> bool:
    """Whether `value` is a scalar of plain `kind` (as `_value` would find, without the paths it is given)."""
    if type(value) is str:
        return kind in _TAKE_STRINGS
    return kind in _PLAIN and _scalar_fits(value, kind)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int_in(value: Any, kind: str) -> bool:
    low, high = _RANGES[kind]
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _scalar_fits(value: Any, kind: str) -> bool:
    if kind in ("string", "time", "bytes"):
        return isinstance(value, str)
    if kind in _RANGES:
        return _is_int_in(value, kind)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "int-or-string":  # intstr.IntOrString holds an int32
        return isinstance(value, str) or _is_int_in(value, "int32")
    return kind == "any"
