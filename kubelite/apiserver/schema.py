"""Field knowledge for `fieldValidation` and pruning, taken from the official client's models.

Built-in kinds drop unknown fields on decode upstream (they decode into Go structs);
`Strict` turns each into an error and `Warn` into a `Warning` header. The field names
and types come from `kubernetes.client.models` (`openapi_types`, `attribute_map`), a
maintained source that tracks upstream, rather than a hand-written schema.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from kubernetes.client import models

_LIST = re.compile(r"^(?:List|list)\[(.+)\]$")
_DICT = re.compile(r"^(?:Dict|dict)\((?:str), ?(.+)\)$|^(?:Dict|dict)\[str, ?(.+)\]$")
_SCALARS = {"str", "int", "bool", "float", "datetime", "date", "object", "bytearray"}


@cache
def _fields(model: str) -> dict[str, str]:
    cls = getattr(models, model)
    types: dict[str, str] = cls.openapi_types
    names: dict[str, str] = cls.attribute_map
    return {names[attr]: typ for attr, typ in types.items()}


def warm(model: str) -> None:
    """Resolve the field tables of `model` and every model it contains, ahead of the first request.

    The client's model classes are imported lazily and resolving a Pod's graph costs ~0.2 s;
    paid at start, not by the first pods of a burst.
    """
    m = _LIST.match(model) or _DICT.match(model)
    if m:
        warm(next(g for g in m.groups() if g))
    elif model and model not in _SCALARS and model not in _warmed:
        _warmed.add(model)
        for typ in _fields(model).values():
            warm(typ)


_warmed: set[str] = set()


def prune_unknown(obj: Any, model: str) -> list[str]:
    """Remove fields the model does not know from `obj` (in place); return their paths.

    Types without a client model (kubelite's own kinds) keep every field.
    """
    unknown: list[str] = []
    if not model:
        return unknown
    _walk(obj, model, "", unknown)
    return unknown


def _walk(value: Any, typ: str, path: str, unknown: list[str]) -> None:
    if value is None or typ in _SCALARS:
        return
    m = _LIST.match(typ)
    if m:
        if isinstance(value, list):
            for i, item in enumerate(value):
                _walk(item, m.group(1), f"{path}[{i}]", unknown)
        return
    m = _DICT.match(typ)
    if m:
        if isinstance(value, dict):
            inner = m.group(1) or m.group(2)
            for k, item in value.items():
                _walk(item, inner, f"{path}[{k}]", unknown)
        return
    if not isinstance(value, dict):
        return
    fields = _fields(typ)
    for key in list(value):
        sub = f"{path}.{key}" if path else key
        if key not in fields:
            unknown.append(sub)
            del value[key]
        else:
            _walk(value[key], fields[key], sub, unknown)


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

    json.loads(body, object_pairs_hook=hook)
    return dups
