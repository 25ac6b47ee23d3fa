"""How deeply nested a document may be, and room on the stack to walk one that deep (issue 10, defect 3).

Request documents (bodies in every media type, patch documents and patched objects) may nest up to
MAX_DEPTH levels; deeper is a 400 BadRequest. The bound is checked without recursion, before any
recursive walker (YAML composition, patches, deep copies, the JSON writer) sees the document, and
those walkers run with `headroom()`: a document MAX_DEPTH deep takes two to three Python frames per
level in them (800-1,200 frames), close to or beyond Python's default limit of 1,000 once the
server's own stack is counted, so a depth the bound admits would otherwise end in RecursionError
depending on how deep the caller happened to be.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TypeVar

import orjson

_T = TypeVar("_T")
MAX_DEPTH = 400
ORJSON_DEPTH = 254  # the deepest document orjson writes (containers counted from 1, as check_depth counts)
_FRAMES_PER_LEVEL = 4  # the deepest walkers (copy.deepcopy, PyYAML's Python composer) take two: room to spare
_RECURSION_LIMIT = 1000 + _FRAMES_PER_LEVEL * MAX_DEPTH


class TooDeep(ValueError):
    """A document nested deeper than the bound: the message is the client's."""


def check_depth(doc: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse documents nested deeper than `limit` (iteratively: the check itself must not recurse).

    orjson refuses to write a document deeper than ORJSON_DEPTH levels, so one it writes is within any limit
    at least as large: that C walk costs a tenth of this Python one (every body and patched object passes here).
    """
    if limit >= ORJSON_DEPTH:
        try:
            orjson.dumps(doc)
            return
        except orjson.JSONEncodeError:
            pass  # deeper, or holding what orjson cannot write (a YAML date, a huge integer): walk it
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    raise TooDeep(f"exceeded max depth {limit}")
                stack.append((child, depth + 1))


class _Headroom:
    """The context manager `headroom()` returns: entering raises the recursion limit if it is lower than needed.

    One shared instance with plain methods, not a generator-based context manager: every merge and strategic
    merge patch enters it, and `contextlib`'s generator machinery cost 1-2 µs per use to do nothing on exit.
    """

    __slots__ = ()

    def __enter__(self) -> None:
        if sys.getrecursionlimit() < _RECURSION_LIMIT:
            sys.setrecursionlimit(_RECURSION_LIMIT)

    def __exit__(self, *exc: object) -> None:
        return None


_HEADROOM = _Headroom()


def headroom() -> _Headroom:
    """Make sure the recursion limit allows walking a document of MAX_DEPTH levels, for the block's duration.

    The limit is raised once for the process and never lowered again: it is shared by every thread (large
    bodies are decoded in worker threads), and restoring it under another thread's walk would fail that
    walk. Python 3.11 runs Python-to-Python calls without growing the C stack, so the higher limit costs
    frame memory only, a few hundred KiB at worst.
    """
    return _HEADROOM


def dumps(value: Any) -> bytes:
    """JSON as orjson writes it; what orjson refuses (deeper than its 254 levels, integers beyond 64 bits)
    is written by the standard library instead, so an object the server accepted can always be stored,
    listed and watched."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        with headroom():
            return json.dumps(value, separators=(",", ":")).encode()


def dumps_kept(value: Any) -> bytes:
    """`dumps` for bytes that are kept: the stored form, which the store, its change log and the watch cache's
    ring hold. orjson (3.13) writes each result into a buffer of at least 4 KiB and shrinks it in place, which
    leaves the rest of the 4 KiB unusable for the next one — 100,000 results of 64 bytes held 393 MiB of
    memory — so what is kept is copied to its exact size (12 MiB for the same): a few hundred nanoseconds."""
    return bytes(memoryview(dumps(value)))


def copy_obj(obj: _T) -> _T:
    """A deep copy of a decoded JSON document at orjson speed: about ten times copy.deepcopy's for a pod or a node
    (a simulation's status patches spent a third of their time in deepcopy). For what came from JSON: a float NaN,
    which JSON cannot hold, would come back as null."""
    out: _T = orjson.loads(dumps(obj))
    return out
