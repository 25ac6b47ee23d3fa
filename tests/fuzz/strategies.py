"""Hypothesis strategies shared by the fuzz suite: any JSON value, and objects shaped by the served schemas."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

Obj = dict[str, Any]

scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=20)
quantity_like = st.from_regex(r"[+-]?[0-9.]{0,70}([eE][+-]?[0-9]{0,10}|Ki|Mi|Gi|m|k|M|n|u|E|Ei)?", fullmatch=True)
names = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)


def _ref_name(schema: Obj) -> str | None:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for sub in schema.get("allOf") or []:
        if "$ref" in sub:
            return str(sub["$ref"]).rsplit("/", 1)[-1]
    return None


def from_schema(schemas: Obj, schema: Obj, depth: int, confuse: float = 0.1) -> st.SearchStrategy[Any]:
    """Values that mostly fit `schema`; with probability `confuse` a field gets any JSON value instead."""
    right = _fitting(schemas, schema, depth, confuse)
    if not confuse:
        return right
    return st.floats(0, 1).flatmap(lambda roll: json_values if roll < confuse else right)


def _fitting(schemas: Obj, schema: Obj, depth: int, confuse: float) -> st.SearchStrategy[Any]:
    ref = _ref_name(schema)
    if ref is not None:
        schema = schemas.get(ref, {})
    if "oneOf" in schema:  # Quantity, IntOrString
        return st.integers(0, 10**6) | quantity_like
    kind = schema.get("type")
    if kind == "array":
        if depth <= 0:
            return st.just([])
        return st.lists(from_schema(schemas, schema["items"], depth - 1, confuse), max_size=2)
    if kind == "object" and "additionalProperties" in schema:
        return st.dictionaries(names, from_schema(schemas, schema["additionalProperties"], depth - 1, confuse),
                               max_size=2)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if depth <= 0 or not props:
            return st.just({})
        required = set(schema.get("required") or [])
        fields = {k: from_schema(schemas, v, depth - 1, confuse) if k != "name" else names | st.text(max_size=8)
                  for k, v in sorted(props.items())}
        return st.fixed_dictionaries({k: v for k, v in fields.items() if k in required},
                                     optional={k: v for k, v in fields.items() if k not in required})
    if kind == "integer" and schema.get("format") == "int32":
        return st.integers(-(2**31), 2**31 - 1) | st.integers(-(2**40), 2**40)
    if kind == "integer":
        return st.integers(-(2**40), 2**40)
    if kind == "boolean":
        return st.booleans()
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "string":
        return st.text(max_size=12) | names
    return json_values
