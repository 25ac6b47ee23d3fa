"""Label and field selectors, compiled once and matched many times.

Grammar and semantics follow k8s.io/apimachinery/pkg/labels and pkg/fields:
`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, `a>1`, `a<1`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubelite.api.errors import ApiError, bad_request
from kubelite.api.validation import is_label_value, is_qualified_name


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt (upstream spelling)
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            if self.key not in labels:
                return False
            try:
                have, want = int(labels[self.key]), int(next(iter(self.values)))
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False  # a nil metav1.LabelSelector selects nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        lbl = labels or {}
        return all(r.matches(lbl) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements and not self.nothing


NOTHING = LabelSelector(nothing=True)

_OPS = (("!=", "NotIn"), ("==", "In"), ("=", "In"), (">", "Gt"), ("<", "Lt"))
_SET_RE = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\((.*)\)\s*$")


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the `labelSelector` query parameter; bad syntax is a 400."""
    reqs: list[Requirement] = []
    for part in _split_top_level(text or ""):
        m = _SET_RE.match(part)
        if m:
            values = [v.strip() for v in m.group(3).split(",") if v.strip()]
            reqs.append(_requirement(m.group(1), "In" if m.group(2) == "in" else "NotIn", values))
            continue
        if part.startswith("!"):
            reqs.append(_requirement(part[1:].strip(), "DoesNotExist", []))
            continue
        for token, op in _OPS:
            if token in part:
                key, _, value = part.partition(token)
                reqs.append(_requirement(key.strip(), op, [value.strip()]))
                break
        else:
            reqs.append(_requirement(part, "Exists", []))
    return LabelSelector(tuple(reqs))


def _requirement(key: str, op: str, values: list[str]) -> Requirement:
    """labels.NewRequirement: a qualified key, valid label values, the number of values the operator takes."""
    problems = [f'key: Invalid value: "{key}": {e}' for e in is_qualified_name(key)]
    if op in ("In", "NotIn") and not values:
        problems.append("values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")
    if op in ("Gt", "Lt") and not all(v.lstrip("-").isdigit() for v in values):
        problems.append(f"values[0]: Invalid value: \"{values[0]}\": for 'Gt', 'Lt' operators, the value must be "
                        "an integer")
    for i, value in enumerate(values):
        problems += [f'values[{i}][{key}]: Invalid value: "{value}": {e}' for e in is_label_value(value)]
    if problems:
        raise bad_request(f"unable to parse requirement: {problems[0]}")
    return Requirement(key, op, frozenset(values))


def compile_label_selector(selector: Mapping[str, Any] | None) -> LabelSelector:
    """Compile a metav1.LabelSelector object (matchLabels + matchExpressions)."""
    if selector is None:
        return NOTHING
    reqs = [Requirement(k, "In", frozenset([str(v)])) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator", "")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise bad_request(f"{op!r} is not a valid label selector operator")
        reqs.append(Requirement(expr.get("key", ""), op, frozenset(expr.get("values") or [])))
    return LabelSelector(tuple(reqs))


# --- field selectors -----------------------------------------------------------------------------

FieldGetter = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str
    getter: FieldGetter

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (self.getter(obj) == self.value) == self.equal


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)


def path_getter(*path: str) -> FieldGetter:
    def get(obj: Mapping[str, Any]) -> str:
        cur: Any = obj
        for p in path:
            if not isinstance(cur, Mapping):
                return ""
            cur = cur.get(p)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


COMMON_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": path_getter("metadata", "name"),
    "metadata.namespace": path_getter("metadata", "namespace"),
}


def parse_field_selector(text: str, fields: Mapping[str, FieldGetter], resource: str) -> FieldSelector:
    """Parse `fieldSelector`; a field the resource does not index is a 400, as upstream."""
    reqs: list[FieldRequirement] = []
    for part in _split_top_level(text or ""):
        for token, equal in (("!=", False), ("==", True), ("=", True)):
            if token in part:
                name, _, value = part.partition(token)
                name = name.strip()
                getter = fields.get(name)
                if getter is None:
                    raise ApiError(400, "BadRequest",
                                   f'field label not supported: {name}' if resource == ""
                                   else f'"{name}" is not a known field selector: only '
                                        + ", ".join(f'"{f}"' for f in sorted(fields)))
                reqs.append(FieldRequirement(name, equal, value.strip(), getter))
                break
        else:
            raise bad_request(f"invalid selector: '{part}'; can't understand '{part}'")
    return FieldSelector(tuple(reqs))


def format_selector(selector: Mapping[str, Any] | None) -> str:
    """metav1.FormatLabelSelector, but "" for no selector (a Scale's status.selector; a table shows "<none>")."""
    if not selector:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), sorted(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
