"""Structural OpenAPI v3 schemas of custom resources: checking a schema, and validating, pruning and defaulting
objects with it.

Mirrors apiextensions-apiserver's pkg/apiserver/schema (structural validation, pruning, defaulting) and the
kube-openapi validator's messages as kube-apiserver reports them (`spec.replicas in body must be of type integer:
"string"`). Not ported: CEL rules (x-kubernetes-validations), list types/map keys, allOf/anyOf/oneOf/not
(accepted in a schema, not enforced), formats other than int32.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import re2

from kubelite.api.errors import Cause
from kubelite.api.validation import forbidden, go_value, invalid, not_supported, required
from kubelite.apiserver.nesting import TooDeep, check_depth, copy_obj

Obj = dict[str, Any]

TYPES = ("array", "boolean", "integer", "number", "object", "string")
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")  # kept at a resource's root (and an embedded resource's) always
_METADATA_ALLOWED = frozenset({"name", "generateName"})
_INT32 = (-(2**31), 2**31 - 1)
# Fields a structural schema may not use (structural/validation.go validateValueValidation / unsupported fields)
_FORBIDDEN = ("$ref", "patternProperties", "additionalItems", "dependencies", "definitions", "id", "$schema")
# How deeply an openAPIV3Schema may nest (JSON levels, the schema itself being 1; a level of `properties` takes two).
# Not an upstream rule: kubelite writes JSON with orjson, which stops at nesting.ORJSON_DEPTH (254), and a schema is
# written nested in other documents: a CRD list (7 levels above it: list, items, CRD, spec, versions, version,
# schema) and /openapi/v3 (3: document, components, schemas). 128 keeps all of those writable with room to spare.
MAX_DEPTH = 128
_MAX_JSON_INTEGER = 2**53 - 1  # swag.IsFloat64AJSONInteger's bounds (maxJSONFloat)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, reported in its 422, not the server's log


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# --- the schema itself ---------------------------------------------------------------------------------------


def structural_errors(schema: Any, path: str) -> list[Cause]:
    """Why `schema` (a version's openAPIV3Schema, at `path`) is not a valid structural schema, as upstream reports
    it (the main rules): first ValidateCustomResourceDefinitionOpenAPISchema's errors, and only when there are
    none, the structural ones (a `type` at every level but under preserve-unknown-fields and int-or-string,
    metadata restricted to name and generateName)."""
    if not isinstance(schema, dict):
        return [invalid(path, schema, "must be an object")]
    try:
        check_depth(schema, MAX_DEPTH)
    except TooDeep:
        return [forbidden(path, f"must not be nested more than {MAX_DEPTH} levels deep")]
    basic: list[Cause] = []
    structural: list[Cause] = []
    _check(schema, path, "root", basic, structural)
    return basic or structural or _default_errors(schema, path)


def _check(s: Obj, path: str, level: str, basic: list[Cause], structural: list[Cause]) -> None:
    """`level`: root, field (a property's schema) or item (array items or additionalProperties): where a missing
    `type` is, for its message (a node with x-kubernetes-preserve-unknown-fields or int-or-string needs none)."""
    typ = s.get("type", "")
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields")
    for name in _FORBIDDEN:
        if name in s:
            basic.append(forbidden(_child(path, name), "$ref is not supported" if name == "$ref" else
                                   f"{name} is forbidden in structural schemas"))
    if typ and typ not in TYPES:
        basic.append(not_supported(_child(path, "type"), typ, list(TYPES)))
    if preserve is False:
        basic.append(invalid(_child(path, "x-kubernetes-preserve-unknown-fields"), False, "must be true or undefined"))
    if s.get("uniqueItems") is True:
        basic.append(forbidden(_child(path, "uniqueItems"),
                               "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
    props = s.get("properties")
    additional = s.get("additionalProperties")
    if props and additional is not None and additional is not True:
        basic.append(forbidden(_child(path, "additionalProperties"),
                               "additionalProperties and properties are mutual exclusive"))
    pattern = s.get("pattern")
    if isinstance(pattern, str) and pattern and isinstance(reason := _compiled(pattern), str):
        basic.append(invalid(_child(path, "pattern"), pattern,
                             f"must be a valid regular expression, but isn't: {reason}"))
    if typ == "array" and "items" not in s:
        basic.append(required(_child(path, "items"), "must be specified"))
    if int_or_string and typ:
        structural.append(invalid(_child(path, "type"), typ, "must be empty if x-kubernetes-int-or-string is true"))
    if not typ and not int_or_string and preserve is not True:
        where = {"root": "at the root", "field": "for specified object fields", "item": "for specified array items"}
        structural.append(required(_child(path, "type"), f"must not be empty {where[level]}"))
    if "default" in s and level == "root":
        structural.append(forbidden(_child(path, "default"), "must not be set at the root"))
    if isinstance(props, dict):
        for name, sub in props.items():
            sub_path = f"{path}.properties[{name}]"
            if not isinstance(sub, dict):
                basic.append(invalid(sub_path, sub, "must be an object"))
                continue
            if level == "root" and name == "metadata":
                structural.extend(_metadata(sub, sub_path))
            _check(sub, sub_path, "field", basic, structural)
    if isinstance(additional, dict):
        _check(additional, _child(path, "additionalProperties"), "item", basic, structural)
    items = s.get("items")
    if isinstance(items, dict):
        _check(items, _child(path, "items"), "item", basic, structural)
    elif items is not None:
        basic.append(forbidden(_child(path, "items"), "items must be a schema object and not an array"))
    for junction in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(s.get(junction) or []):
            if isinstance(sub, dict) and "type" in sub and sub.get("type") != typ:
                structural.append(invalid(f"{path}.{junction}[{i}].type", sub["type"],
                                          "must be empty to be structural"))


def _default_errors(schema: Obj, path: str) -> list[Cause]:
    """defaulting.ValidateDefaults: every `default` below the root must be what its own schema admits once pruned
    by it (an unknown field in a default is refused, not silently dropped), else every object lacking the field
    would be refused for a value its client never sent."""
    causes: list[Cause] = []
    for s, at in _nodes(schema, path):
        if "default" not in s or at == path:
            continue
        value = copy_obj(s["default"])
        dropped: list[str] = []
        _prune(value, s, "", dropped)
        if dropped:
            causes.append(invalid(_child(at, "default"), s["default"], "must not have unknown fields"))
        else:
            _validate(value, s, _child(at, "default"), causes)
    return causes


def _nodes(s: Obj, path: str) -> list[tuple[Obj, str]]:
    """`s` and every schema below it (properties, additionalProperties, items), with their paths as _check's."""
    out = [(s, path)]
    for name, sub in (s.get("properties") or {}).items():
        out += _nodes(sub, f"{path}.properties[{name}]")
    for field in ("additionalProperties", "items"):
        if isinstance(s.get(field), dict):
            out += _nodes(s[field], _child(path, field))
    return out


def _metadata(s: Obj, path: str) -> list[Cause]:
    """At the root only name and generateName of metadata may be specified, as upstream (metadata is implicit)."""
    props = s.get("properties") or {}
    extra = [k for k in s if k not in ("type", "properties", "description")]
    if extra or any(k not in _METADATA_ALLOWED for k in props):
        return [forbidden(path, "must not specify anything other than name and generateName, but metadata is "
                                "implicitly specified")]
    return []


# --- objects: validation ------------------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_fits(value: Any, typ: str) -> bool:
    actual = _json_type(value)
    if typ == "number":
        return actual in ("integer", "number")
    if typ == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == typ


def _type_error(path: str, value: Any, typ: str) -> Cause:
    actual = _json_type(value)
    return Cause("FieldValueTypeInvalid",
                 f'Invalid value: "{actual}": {path} in body must be of type {typ}: "{actual}"', path)


def validate(obj: Obj, schema: Obj) -> list[Cause]:
    """The schema's complaints about `obj` (a whole custom resource), with upstream's paths and messages; the
    root's apiVersion, kind and metadata are checked elsewhere (ObjectMeta's validation)."""
    causes: list[Cause] = []
    for name, sub in (schema.get("properties") or {}).items():
        if name in _ROOT_FIELDS:
            continue
        if name in obj:
            _validate(obj[name], sub, name, causes)
    for name in schema.get("required") or []:
        if name not in obj and name not in _ROOT_FIELDS:
            causes.append(required(name))
    return causes


def _validate(value: Any, s: Obj, path: str, causes: list[Cause]) -> None:
    if value is None:
        if not s.get("nullable") and (s.get("type") or s.get("x-kubernetes-int-or-string")):
            causes.append(_type_error(path, value, s.get("type") or "string"))
        return
    if s.get("x-kubernetes-int-or-string"):
        if _json_type(value) not in ("integer", "string"):
            causes.append(_type_error(path, value, "integer/string"))
            return
    else:
        typ = s.get("type")
        if typ and not _type_fits(value, typ):
            causes.append(_type_error(path, value, typ))
            return
    if "enum" in s and value not in s["enum"]:
        causes.append(not_supported(path, value, [e if isinstance(e, str) else go_value(e) for e in s["enum"]]))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _numeric(value, s, path, causes)
    elif isinstance(value, str):
        _string(value, s, path, causes)
    elif isinstance(value, list):
        _array(value, s, path, causes)
    elif isinstance(value, dict):
        _object(value, s, path, causes)


def _numeric(value: float, s: Obj, path: str, causes: list[Cause]) -> None:
    if "minimum" in s:
        low = s["minimum"]
        if value < low or (s.get("exclusiveMinimum") and value == low):
            word = "greater than" if s.get("exclusiveMinimum") else "greater than or equal to"
            causes.append(invalid(path, value, f"{path} in body should be {word} {go_value(low)}"))
    if "maximum" in s:
        high = s["maximum"]
        if value > high or (s.get("exclusiveMaximum") and value == high):
            word = "less than" if s.get("exclusiveMaximum") else "less than or equal to"
            causes.append(invalid(path, value, f"{path} in body should be {word} {go_value(high)}"))
    if "multipleOf" in s and s["multipleOf"] and not _multiple_of(value, s["multipleOf"]):
        causes.append(invalid(path, value, f"{path} in body should be a multiple of {go_value(s['multipleOf'])}"))
    if s.get("format") == "int32" and isinstance(value, int) and not _INT32[0] <= value <= _INT32[1]:
        causes.append(invalid(path, value, f"{path} in body must be of type int32: {go_value(str(value))}"))


def _float(value: float) -> float:
    """`value` as Go's float64 would hold it: an integer too large for one is infinite (Python's float() raises)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _multiple_of(value: float, factor: float) -> bool:
    """go-openapi's validate.MultipleOf, in float64 as upstream: a factor below 1 is inverted first (1/0.1*0.3 is
    exactly 3, where 0.3/0.1 is not), and the quotient must be an integer a JSON number holds exactly."""
    data, by = _float(value), _float(factor)
    mult = 1 / by * data if by < 1 else data / by
    return math.isfinite(mult) and abs(mult) <= _MAX_JSON_INTEGER and mult.is_integer()


def _string(value: str, s: Obj, path: str, causes: list[Cause]) -> None:
    length = len(value)
    if "maxLength" in s and length > s["maxLength"]:
        causes.append(Cause("FieldValueTooLong", f"Too long: may not be more than {s['maxLength']} bytes", path))
    if "minLength" in s and length < s["minLength"]:
        causes.append(invalid(path, value, f"{path} in body should be at least {s['minLength']} chars long"))
    pattern = s.get("pattern")
    compiled = _compiled(pattern) if isinstance(pattern, str) else None
    if compiled is not None and not isinstance(compiled, str) and compiled.search(value) is None:
        causes.append(invalid(path, value, f"{path} in body should match '{pattern}'"))


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re2._Regexp[str] | str:
    """A schema's pattern compiled once (the cache is bounded: patterns come from clients), or why RE2 cannot
    compile it, as Go's regexp says it (a CRD with such a pattern is refused, so objects never meet one)."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as e:
        reason = e.args[0] if e.args else ""
        return f"error parsing regexp: {reason.decode(errors='replace') if isinstance(reason, bytes) else reason}"


def _array(value: list[Any], s: Obj, path: str, causes: list[Cause]) -> None:
    if "maxItems" in s and len(value) > s["maxItems"]:
        causes.append(Cause("FieldValueTooMany", f"Too many: {len(value)}: must have at most {s['maxItems']} items",
                            path))
    if "minItems" in s and len(value) < s["minItems"]:
        causes.append(invalid(path, len(value), f"{path} in body should have at least {s['minItems']} items"))
    items = s.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", causes)


def _object(value: Obj, s: Obj, path: str, causes: list[Cause]) -> None:
    props = s.get("properties") or {}
    for name, sub in props.items():
        if name in value:
            _validate(value[name], sub, f"{path}.{name}", causes)
    additional = s.get("additionalProperties")
    if isinstance(additional, dict):
        for name, item in value.items():
            if name not in props:
                _validate(item, additional, f"{path}.{name}", causes)
    for name in s.get("required") or []:
        if name not in value:
            causes.append(required(f"{path}.{name}"))
    if "maxProperties" in s and len(value) > s["maxProperties"]:
        causes.append(Cause("FieldValueTooMany", f"Too many: {len(value)}: must have at most "
                                                 f"{s['maxProperties']} items", path))
    if "minProperties" in s and len(value) < s["minProperties"]:
        causes.append(invalid(path, len(value), f"{path} in body should have at least {s['minProperties']} "
                                                "properties"))


# --- objects: pruning and defaulting -------------------------------------------------------------------------


def prune(obj: Obj, schema: Obj) -> list[str]:
    """Drop the fields `schema` does not specify, as structuralpruning.Prune of a resource root: apiVersion, kind
    and metadata stay at the root and in an x-kubernetes-embedded-resource; x-kubernetes-preserve-unknown-fields
    keeps a level's unknown fields; an object under no schema (or under additionalProperties: true) is emptied.
    Returns the dropped fields' paths, for fieldValidation's warnings and errors."""
    dropped: list[str] = []
    _prune(obj, schema, "", dropped, root=True)
    return dropped


def _additional(s: Obj) -> tuple[bool, Obj | None]:
    """Whether `s` has additionalProperties (a map), and their schema (None for a boolean)."""
    additional = s.get("additionalProperties")
    if additional is None:
        return False, None
    return True, additional if isinstance(additional, dict) else None


def _prune(value: Any, s: Obj | None, path: str, dropped: list[str], root: bool = False) -> None:
    if s is not None and s.get("x-kubernetes-preserve-unknown-fields") is True:
        _skip_prune(value, s, path, dropped)
        return
    if isinstance(value, dict):
        if s is None:
            dropped.extend(_child(path, k) for k in value)
            value.clear()
            return
        props = s.get("properties") or {}
        is_map, additional = _additional(s)
        embedded = s.get("x-kubernetes-embedded-resource") is True
        for name in list(value):
            if (embedded or root) and name in _ROOT_FIELDS:
                continue
            if name in props:
                _prune(value[name], props[name], _child(path, name), dropped)
            elif is_map:
                _prune(value[name], additional, _child(path, name), dropped)
            else:
                del value[name]
                dropped.append(_child(path, name))
    elif isinstance(value, list):
        items = s.get("items") if s is not None else None
        for i, item in enumerate(value):
            _prune(item, items if isinstance(items, dict) else None, f"{path}[{i}]", dropped)


def _skip_prune(value: Any, s: Obj, path: str, dropped: list[str]) -> None:
    """A preserve-unknown-fields level: its unknown fields stay, the specified ones are pruned by their schemas."""
    if isinstance(value, dict):
        props = s.get("properties") or {}
        is_map, additional = _additional(s)
        embedded = s.get("x-kubernetes-embedded-resource") is True
        for name, item in value.items():
            if embedded and name in _ROOT_FIELDS:
                continue
            if name in props:
                _prune(item, props[name], _child(path, name), dropped)
            elif is_map:
                _prune(item, additional, _child(path, name), dropped)
    elif isinstance(value, list):
        items = s.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _skip_prune(item, items, f"{path}[{i}]", dropped)


def default(obj: Obj, schema: Obj) -> None:
    """Set, in place, the `default:` of every absent field whose parent is present (structuraldefaulting.Default),
    and of a null one that is not nullable, recursively into the defaults set."""
    result = defaulted(obj, schema)
    if result is not obj:
        obj.clear()
        obj.update(result)


def defaulted(value: Any, s: Obj) -> Any:
    """`value` with its defaults set, without changing it or anything in it: `value` itself when nothing was
    missing, else a copy of the parts on the way to what was (a read defaults the watch cache's objects)."""
    if isinstance(value, dict):
        return _defaulted_object(value, s)
    if isinstance(value, list):
        items = s.get("items")
        if not isinstance(items, dict):
            return value
        out = value
        for i, item in enumerate(value):
            new = copy_obj(items["default"]) if item is None and "default" in items and not items.get("nullable") \
                else item
            new = defaulted(new, items)
            if new is not item:
                if out is value:
                    out = list(value)
                out[i] = new
        return out
    return value


def _defaulted_object(value: Obj, s: Obj) -> Obj:
    out = value
    props = s.get("properties") or {}
    additional = s.get("additionalProperties")
    for name, sub in props.items():
        if not isinstance(sub, dict):
            continue
        old = value.get(name)
        new = old
        if "default" in sub and (name not in value or (old is None and not sub.get("nullable"))):
            new = copy_obj(sub["default"])
        if name in value or new is not old:
            new = defaulted(new, sub)
        if new is not old:
            if out is value:
                out = dict(value)
            out[name] = new
    if isinstance(additional, dict):
        for name, old in value.items():
            if name in props:
                continue
            new = copy_obj(additional["default"]) if old is None and "default" in additional and \
                not additional.get("nullable") else old
            new = defaulted(new, additional)
            if new is not old:
                if out is value:
                    out = dict(value)
                out[name] = new
    return out
