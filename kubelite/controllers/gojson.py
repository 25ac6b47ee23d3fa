"""Go's view of zero values, on the plain dicts the controllers handle.

Upstream's controllers hold typed Go structs, and two of Go's rules shape what they write and what
they call equal:
- a field tagged `omitempty` that holds its zero value (0, "", false, a nil or empty slice or map) is
  left out of the JSON written — `unavailableReplicas: 0` never reaches the API;
- `apiequality.Semantic.DeepEqual` compares decoded structs, in which `null` and an absent field are
  the same zero value, and a nil and an empty slice or map are equal (the forked reflect.DeepEqual).
A dict tells all of these apart; `omit_empty` and `semantic` bring them together where a controller
writes or compares what upstream could not tell apart.

Partial, without Go's types: `semantic` keeps a zero scalar ("", 0, false) apart from an absent field (Go's
value fields cannot tell them apart; its pointer fields can), an empty `{}` apart from an absent field except
under the keys known to be maps or value structs, and compares quantities as written (Semantic.DeepEqual
compares `1000m` and `1` by value). Each errs towards "different": for a Deployment, a new ReplicaSet, as
before this module.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

Obj = dict[str, Any]

# Dict-valued keys of a pod template that are Go maps or struct values (never pointers), so `{}` decodes
# to what an absent field does. Any other `{}` is kept: it may be a pointer to an empty struct
# (`securityContext: {}`, `emptyDir: {}`), which Go tells apart from nil.
_EMPTY_IS_ABSENT = frozenset({"metadata", "labels", "annotations", "nodeSelector", "limits", "requests",
                              "overhead", "matchLabels"})


def omit_empty(obj: Obj, fields: Collection[str]) -> Obj:
    """`obj` without those of `fields` that hold their zero value: `fields` are the ones upstream's type
    tags `omitempty` and holds by value (an `int32`, not an `*int32`, whose 0 is written)."""
    return {k: v for k, v in obj.items() if k not in fields or v}


def semantic(value: Any) -> Any:
    """`value` as Semantic.DeepEqual sees it, so that `==` on the results is that comparison: nulls and
    empty lists dropped everywhere (no API slice is a pointer), empty maps and value structs dropped where
    the key says which they are (`_EMPTY_IS_ABSENT`), after their own contents were (`metadata` holding
    only `creationTimestamp: null` is no metadata)."""
    if isinstance(value, dict):
        out: Obj = {}
        for key, item in value.items():
            item = semantic(item)
            if item is None or item == [] or (item == {} and key in _EMPTY_IS_ABSENT):
                continue
            out[key] = item
        return out
    if isinstance(value, list):
        return [semantic(item) for item in value]
    return value
