"""The JSONPath of printer columns: client-go's jsonpath as CRDs' additionalPrinterColumns use it.

Fields (`.status.phase`), indexes (`.spec.hosts[0]`, `[-1]`), slices (`[1:3]`), the wildcard (`[*]`) and filters
(`[?(@.type=="Ready")]`, `!=`, `<`, `>`, a bare `[?(@.field)]` for presence) — what operators' columns use, e.g.
cert-manager's and the Gateway API's `.status.conditions[?(@.type=="Ready")].status`. A column shows the first
result (the CR handler's tableconvertor), none when there is none. An expression this reader does not understand
finds nothing (a column of <none>), never an error: a CRD's columns are validated when it is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

Step = Callable[[Any], Iterator[Any]]

_TOKEN = re.compile(r"""\.(?P<field>[^.\[\]]+)|\[(?P<bracket>(?:[^\]"']|"[^"]*"|'[^']*')*)\]""")
_FILTER = re.compile(r"""\?\(@((?:\.[^.\s=!<>]+)+)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*\)""")
_SLICE = re.compile(r"(-?\d*):(-?\d*)")


def first(obj: Any, expr: str) -> Any:
    """The first value `expr` finds in `obj`, or None."""
    return next(find(obj, expr), None)


def find(obj: Any, expr: str) -> Iterator[Any]:
    values: Iterator[Any] = iter((obj,))
    for step in _compile(expr):
        values = _through(step, values)
    return values


def _through(step: Step, values: Iterator[Any]) -> Iterator[Any]:
    for value in values:
        yield from step(value)


@lru_cache(maxsize=256)
def _compile(expr: str) -> tuple[Step, ...]:
    text = expr.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            return (_nothing,)
        step = _field(m.group("field")) if m.group("field") is not None else _bracket(m.group("bracket"))
        if step is None:
            return (_nothing,)
        steps.append(step)
        pos = m.end()
    return tuple(steps)


def _nothing(value: Any) -> Iterator[Any]:
    return iter(())


def _field(name: str) -> Step:
    def step(value: Any) -> Iterator[Any]:
        if isinstance(value, dict) and name in value:
            yield value[name]
    return step


def _bracket(inner: str) -> Step | None:
    inner = inner.strip()
    if inner == "*":
        return lambda value: iter(value if isinstance(value, list) else value.values() if isinstance(value, dict)
                                  else ())
    if re.fullmatch(r"-?\d+", inner):
        index = int(inner)
        return lambda value: iter([value[index]] if isinstance(value, list) and -len(value) <= index < len(value)
                                  else [])
    if (m := _SLICE.fullmatch(inner)) is not None:
        start, end = (int(g) if g else None for g in m.groups())
        return lambda value: iter(value[start:end] if isinstance(value, list) else ())
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return _field(inner[1:-1])
    if (m := _FILTER.fullmatch(inner)) is not None:
        return _filter(tuple(p for p in m.group(1).split(".") if p), m.group(2), m.group(3))
    return None


def _literal(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return float(text)
    except ValueError:
        return {"true": True, "false": False, "nil": None, "null": None}.get(text, text)


def _filter(path: tuple[str, ...], op: str | None, literal: str | None) -> Step:
    wanted = _literal(literal) if literal is not None else None

    def matches(item: Any) -> bool:
        for part in path:
            if not isinstance(item, dict) or part not in item:
                return False
            item = item[part]
        if op is None:
            return True
        if isinstance(item, bool) or isinstance(wanted, bool) or not isinstance(item, (int, float)) \
                or not isinstance(wanted, (int, float)):
            if op == "==":
                return bool(item == wanted)
            if op == "!=":
                return bool(item != wanted)
            return False
        return {"==": item == wanted, "!=": item != wanted, "<": item < wanted, ">": item > wanted,
                "<=": item <= wanted, ">=": item >= wanted}[op]

    def step(value: Any) -> Iterator[Any]:
        items = value if isinstance(value, list) else value.values() if isinstance(value, dict) else ()
        return (item for item in items if matches(item))
    return step
