"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge needs per-field metadata (merge key, strategy) that upstream keeps in
Go struct tags; `PATCH_FIELDS` (generated from k8s.io/api types.go) holds it per Go type, so
a type met anywhere (a PodSpec in a Pod or in any template) merges alike. The walk follows
the object's model (`schema.fields`). A kind with no model (kubelite's own, like a custom
resource) refuses strategic merge with a 415, as kube-apiserver refuses it for custom resources.
Directives supported: `null`, `$patch: replace|delete|merge`, `$setElementOrder/<list>`,
`$retainKeys`, `$deleteFromPrimitiveList/<list>` (research/kubectl-compat.md §5.4).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

from kubelite.api.errors import ApiError, bad_request
from kubelite.apiserver import schema
from kubelite.apiserver.nesting import MAX_DEPTH, TooDeep, check_depth, copy_obj, dumps, headroom
from kubelite.apiserver.patch_fields import PATCH_FIELDS
from kubelite.apiserver.schema import FieldType

MAX_JSON_PATCH_OPERATIONS = 10_000
MAX_COPY_BYTES = 3 * 1024 * 1024

_FREE = FieldType("any")  # a value no model describes: its lists are replaced, its maps merged
_NO_TAGS = ("", "")


# --- JSON merge patch ----------------------------------------------------------------------------

_IMMUTABLE = frozenset({str, int, float, bool})  # a patch's values nobody can change: no copy (deepcopy's is ≈ 0.3 µs)

def merge_patch(target: Any, patch: Any) -> Any:
    with headroom():  # each walker here recurses once per level of the (at most MAX_DEPTH deep) documents
        return _merge(target, patch)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch if type(patch) in _IMMUTABLE else copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


# --- JSON patch ----------------------------------------------------------------------------------

class _ApplyFailed(Exception):
    """An operation of a JSON patch that cannot apply (evanphx/json-patch's Apply error); its text says why."""


# patch.go answers patchObj.Apply's errors with NewGenericServerResponse(422, ...), isUnexpectedResponse false:
# the message is the generic one and the error's own text is in no cause (kubelite chains it to the ApiError)
APPLY_FAILED = "the server rejected our request due to an error in our request"


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _ApplyFailed(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _is_decimal(token: str) -> bool:
    """An array index token: ASCII digits only ("²".isdigit() is true, and int() then raises)."""
    return token.isascii() and token.isdigit()


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and _is_decimal(p) and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise _ApplyFailed(f"jsonpatch: path {path!r} does not exist")
    return cur


def _index(container: list[Any], token: str, path: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not _is_decimal(token):
        raise _ApplyFailed(f"jsonpatch: invalid array index in {path!r}")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise _ApplyFailed(f"jsonpatch: array index out of bounds in {path!r}")
    return i


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, False)]
    raise _ApplyFailed(f"jsonpatch: path {path!r} does not exist")


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1] if parts else ""
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, path, False))
    raise _ApplyFailed(f"jsonpatch: unable to remove nonexistent key {last!r}: missing value")


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    try:
        check_depth(value, MAX_DEPTH - len(parts))
    except TooDeep:
        raise bad_request(f"the patched object could not be stored: exceeded max depth {MAX_DEPTH}") from None
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _ApplyFailed(f"jsonpatch: replace operation does not apply: doc is missing key: {path}")
        parent[last] = value
    elif isinstance(parent, list):
        i = _index(parent, last, path, not replace)
        if replace:
            parent[i] = value
        else:
            parent.insert(i, value)
    else:
        raise _ApplyFailed(f"jsonpatch: path {path!r} does not exist")
    return doc


def _size(value: Any) -> int:
    return len(dumps(value))


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 with kube-apiserver's bounds: at most 10,000 operations (413), and `copy` may add at most
    3 MiB in all (json-patch's AccumulatedCopySizeLimit), so a few doubling copies cannot build a huge object.
    No operation may nest the document beyond MAX_DEPTH: copying a deep subtree into its own leaves doubles the
    depth per operation, which the size bound alone does not stop."""
    with headroom():
        return _json_patch(doc, ops)


def _json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise ApiError(413, "RequestEntityTooLarge", f"The allowed maximum operations in a JSON patch is "
                                                     f"{MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}")
    for op in ops:  # DecodePatch: each operation is a JSON object
        if not isinstance(op, dict):
            raise bad_request(f"invalid json patch operation: {str(op)[:200]}")
    try:
        return _apply_json_patch(copy.deepcopy(doc), ops)
    except _ApplyFailed as exc:
        raise ApiError(422, "Invalid", APPLY_FAILED) from exc


def _apply_json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """Apply `ops` to `doc` (the caller's copy); an operation that cannot apply raises _ApplyFailed."""
    copied = 0
    for op in ops:
        if not isinstance(op.get("op"), str):
            raise _ApplyFailed("Unexpected kind: unknown")
        if not isinstance(op.get("path"), str) or not isinstance(op.get("from", ""), str):
            raise _ApplyFailed(f"invalid json patch operation: {str(op)[:200]}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind in ("move", "copy"):
            source = op.get("from", "")
            if kind == "copy":
                copied += _size(_get(doc, source))
                if copied > MAX_COPY_BYTES:
                    raise _ApplyFailed(f"Unable to complete the copy, the accumulated size increase of copy is "
                                       f"{copied}, exceeding the limit {MAX_COPY_BYTES}")
            value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise _ApplyFailed(f"testing value {path} failed: test failed")
        else:
            raise _ApplyFailed(f"Unexpected kind: {kind}")
    return doc


# --- strategic merge patch -----------------------------------------------------------------------

def strategic_merge_patch(original: dict[str, Any], patch: Any, model: str) -> dict[str, Any]:
    """Strategic merge of `patch` into (a copy of) `original`, an object of client model `model` ("": none, whose
    lists are all replaced: server-side apply's upsert of kubelite's own kinds)."""
    if not isinstance(patch, dict):
        raise bad_request("strategic merge patch must be a JSON object")
    with headroom():
        result = _smp_map(copy_obj(original), patch, FieldType("model", model=model) if model else _FREE)
    return result if isinstance(result, dict) else {}


@cache
def _model_fields(model: str) -> dict[str, tuple[FieldType, str, str]]:
    """A model's fields with their types and (strategy, merge key) tags: one lookup per key of a patch."""
    return {name: (f.type, *PATCH_FIELDS.get((model, name), _NO_TAGS)) for name, f in schema.fields(model).items()}


_UNTAGGED = (_FREE, "", "")  # an unknown field (pruned after the patch, or refused by Strict validation), free values


def _field(of: FieldType, key: str) -> tuple[FieldType, str, str]:
    """The type of `key` in a map of type `of`, with its (strategy, merge key) tags."""
    if of.kind == "model":
        return _model_fields(of.model).get(key, _UNTAGGED)
    if of.kind == "map" and of.item is not None:
        return of.item, "", ""
    return _UNTAGGED


def _smp_map(original: dict[str, Any], patch: dict[str, Any], of: FieldType) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if "$retainKeys" in patch:
        keep = {_hashed(k) for k in _directive_list(patch, "$retainKeys")}
        original = {k: v for k, v in original.items() if k in keep}
    orders = [k.split("/", 1)[1] for k in patch if k.startswith("$setElementOrder/")]
    removals = [k.split("/", 1)[1] for k in patch if k.startswith("$deleteFromPrimitiveList/")]
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        sub, strategy, merge_key = _field(of, key)
        if value is None:
            original.pop(key, None)
        elif strategy == "replace":
            original[key] = value
        elif isinstance(value, dict):
            merged = _smp_map(original[key] if isinstance(original.get(key), dict) else {}, value, sub)
            if merged is None:
                original.pop(key, None)
            else:
                original[key] = merged
        elif isinstance(value, list) and "merge" in strategy.split(","):
            original[key] = _smp_list(original.get(key) or [], value, sub.item or _FREE, merge_key)
        else:
            original[key] = value
    for key in orders:
        if isinstance(original.get(key), list):
            order = _directive_list(patch, f"$setElementOrder/{key}")
            original[key] = _apply_order(original[key], order, _field(of, key)[2])
    for key in removals:
        if isinstance(original.get(key), list):
            gone = {_hashed(v) for v in _directive_list(patch, f"$deleteFromPrimitiveList/{key}")}
            original[key] = [v for v in original[key] if _hashed(v) not in gone]
    return original


def _directive_list(patch: dict[str, Any], directive: str) -> list[Any]:
    values = patch[directive]
    if values is not None and not isinstance(values, list):
        raise bad_request(f"invalid patch: {directive} must be a list, not {type(values).__name__}")
    return values or []


def _hashed(value: Any) -> Any:
    """A value to compare list elements by in a set or dict: itself when hashable, else its canonical JSON.

    List merges compare every patch element with every element of the list; by hash they cost the sum of the
    lengths, not their product (20,000 owner references against 20,000 took a minute)."""
    if isinstance(value, (dict, list)):
        with headroom():
            return ("json", json.dumps(value, sort_keys=True))
    return value


def _smp_list(original: list[Any], patch: list[Any], element: FieldType, merge_key: str) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [p for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if not merge_key:  # a set of primitives, e.g. finalizers
        present = {_hashed(o) for o in original}
        return list(original) + [p for p in patch if _hashed(p) not in present]
    result: list[Any] = list(original)
    where: dict[Any, list[int]] = {}  # merge key value → indices in `result` of the elements holding it, in order
    for i, o in enumerate(result):
        if isinstance(o, dict):
            where.setdefault(_hashed(o.get(merge_key)), []).append(i)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"map: {str(item)[:200]} does not contain declared merge key: {merge_key}")
        holders = where.setdefault(_hashed(item[merge_key]), [])
        if item.get("$patch") == "delete":
            if holders:
                result[holders.pop(0)] = _DELETED
            continue
        if holders:
            result[holders[0]] = _smp_map(result[holders[0]], item, element)
        else:
            holders.append(len(result))
            result.append(_smp_map({}, item, element))
    return [x for x in result if x is not _DELETED]


_DELETED = object()


def _apply_order(items: list[Any], order: list[Any], merge_key: str) -> list[Any]:
    def ident(x: Any) -> Any:
        return x.get(merge_key) if merge_key and isinstance(x, dict) else x

    rank = {_hashed(ident(o)): i for i, o in enumerate(order)}
    indexed = list(enumerate(items))
    indexed.sort(key=lambda p: (rank.get(_hashed(ident(p[1])), len(rank)), p[0]))
    return [x for _, x in indexed]
