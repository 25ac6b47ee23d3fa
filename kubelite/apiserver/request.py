"""Request parsing: paths to resources, query parameters, bodies by media type.

Quirks handled here come from research/kubectl-compat.md: booleans as Go's
strconv.ParseBool (the Python client sends `True`), a missing Content-Type means JSON,
protobuf envelopes of any kind with an upstream message, YAML bodies.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import yaml
from aiohttp import web

from kubelite.api import errors
from kubelite.apiserver import goutf8, protobuf
from kubelite.apiserver.nesting import MAX_DEPTH, TooDeep, check_depth, headroom
from kubelite.apiserver.registry import SERVED
from kubelite.apiserver.registry.base import Resource

MAX_BODY = 3 * 1024 * 1024
# Paths whose parse is remembered, here and for the metrics' labels: ≈ 7 MiB for each cache when full. Only
# paths up to CACHED_PATH long are (every path a component sends): a client sending 8 KiB paths cannot make
# the caches hold 16,384 of them.
PATH_CACHE = 16_384
CACHED_PATH = 256
DECODE_INLINE = 64 * 1024  # bodies above this are decoded in a worker thread
YAML_EXPANSION = 10  # nodes a YAML document may have per byte once its aliases are expanded (plus 10,000)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # \ud800-\udfff in JSON (YAML refuses them, as go-yaml)
JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE_PATCH, STRATEGIC_PATCH, JSON_PATCH, APPLY_PATCH)
BODY_TYPES = (JSON, YAML, PROTOBUF)
_OPERATION_LEVELS = 2  # a JSON patch holds its values two levels down (the list, the operation)

_BY_GV_PLURAL = {(r.group_version, r.plural): r for r in SERVED}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


@dataclass(frozen=True, slots=True)
class Target:
    """What a resource request addresses."""

    resource: Resource | None  # None for the top-level `bindings` collection
    namespace: str
    name: str
    subresource: str
    group_version: str


def parse_target(path: str) -> Target | None:
    """Map `/api/v1/...` and `/apis/G/V/...` paths to a Target; None when it names no resource."""
    return _remembered_target(path) if len(path) <= CACHED_PATH else _parse_target(path)


def parse_target_in(path: str, served: Mapping[tuple[str, str], Resource]) -> Target | None:
    """`parse_target` for resources served at run time (custom resources), keyed by (group-version, plural): not
    remembered, as what is served changes."""
    return _parse_target(path, served)


def _parse_target(path: str, served: Mapping[tuple[str, str], Resource] = _BY_GV_PLURAL) -> Target | None:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        gv, rest = parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces":
        if len(rest) == 2 or (len(rest) == 3 and rest[2] in ("status", "finalize") and gv == "v1"):
            return _target(gv, "namespaces", "", rest[1], rest[2] if len(rest) == 3 else "", served)
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    if gv == "v1" and rest[0] == "bindings" and len(rest) == 1:
        return Target(None, namespace, "", "binding", gv)
    return _target(gv, rest[0], namespace, rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else "",
                   served)


# Pure, and asked of the same paths over and over (a node's Lease, its status).
_remembered_target = functools.lru_cache(maxsize=PATH_CACHE)(_parse_target)


def _target(gv: str, plural: str, namespace: str, name: str, sub: str,
            served: Mapping[tuple[str, str], Resource]) -> Target | None:
    resource = served.get((gv, plural))
    if resource is None:
        return None
    if sub and sub not in resource.subresources:
        return None
    if namespace and not resource.namespaced:
        return None
    return Target(resource, namespace, name, sub, gv)


def parse_bool(value: str | None, name: str) -> bool:
    if value is None or value == "":
        return False
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.bad_request(f'invalid boolean value for {name}: "{value}"')


def parse_int(value: str | None, name: str) -> int | None:
    """A query integer as Go's strconv.ParseInt(v, 10, 64): out of the int64 range is malformed, not huge."""
    if value is None or value == "":
        return None
    if len(value) <= 20:
        try:
            number = int(value)
        except ValueError:
            pass
        else:
            if INT64_MIN <= number <= INT64_MAX:
                return number
    raise errors.bad_request(f'invalid value for {name}: "{value[:64]}": must be an integer')


def media_type(request: web.Request) -> str:
    ct = request.headers.get("Content-Type", "")
    return ct.split(";", 1)[0].strip().lower() or JSON


async def read_body(request: web.Request) -> bytes:
    """The whole body, up to MAX_BODY (413 beyond, as upstream's 3 MiB limit).

    `StreamReader.read(n)` returns what has arrived so far, so one call reads a body that
    spans TCP or TLS records short; read until the end of the stream.
    """
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise errors.too_large(MAX_BODY)
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.read(MAX_BODY + 1 - size):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY:
            raise errors.too_large(MAX_BODY)
    return b"".join(chunks)


async def decode_request_body(body: bytes, content_type: str, allowed: tuple[str, ...] = BODY_TYPES) -> Any:
    """`decode_body`, off the event loop for a large body: decoding 3 MiB of YAML takes seconds of Python
    (PyYAML resolves and constructs every node in Python even with libyaml), and no request may stall the
    others that long. Small bodies, nearly all of them, are decoded inline (a thread costs ~100 us)."""
    if len(body) <= DECODE_INLINE:
        return decode_body(body, content_type, allowed)
    return await asyncio.to_thread(decode_body, body, content_type, allowed)


def decode_body(body: bytes, content_type: str, allowed: tuple[str, ...] = BODY_TYPES) -> Any:
    """Decode by media type; malformed input is a 400, an unknown type a 415."""
    if content_type not in allowed:
        raise errors.unsupported_media_type(content_type, list(allowed))
    try:
        if content_type == PROTOBUF:
            doc = protobuf.decode(body)  # RawExtension fields carry JSON: bounded like any body
            check_depth(doc)
            return doc
        if content_type in (YAML, APPLY_PATCH):
            doc = _load_yaml(body)
            measure(doc, YAML_EXPANSION * len(body) + 10_000)
            return go_numbers(doc)
        doc = _load_json(body)
        limit = MAX_DEPTH + (_OPERATION_LEVELS if content_type == JSON_PATCH else 0)
        # Each level of a JSON document opens with a { or [ of its text: a body with no more of them than the limit
        # (strings' included) is within it, without the check's walk (a whole re-encoding of the document)
        if body.count(b"{") + body.count(b"[") > limit:
            check_depth(doc, limit)
        # (most bodies hold no escape at all: `in` finds that faster than the pattern's search)
        return _without_surrogates(doc) if b"\\u" in body and _SURROGATE_ESCAPE.search(body) else doc
    except protobuf.UnsupportedKind as exc:
        raise errors.ApiError(415, "UnsupportedMediaType", str(exc)) from None
    except protobuf.ProtobufError as exc:
        raise errors.bad_request(f"the body of the request could not be decoded as protobuf: {exc}") from None
    except (ValueError, yaml.YAMLError) as exc:  # JSON and UTF-8 errors are ValueErrors, as are 5,000-digit ints
        raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from None


def _load_json(body: bytes) -> Any:
    """orjson (which refuses beyond 1,024 levels itself); what orjson refuses and Go's decoder takes: invalid
    UTF-8 in a string (each bad byte becomes U+FFFD, `goutf8`) and, through the standard library, a lone UTF-16
    surrogate escape. Both only on orjson's failure: a valid body pays nothing."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        surrogates = _SURROGATE_ESCAPE.search(body) is not None
        if not surrogates and _is_utf8(body):
            raise
    text = goutf8.decode(body)
    if not surrogates:
        return orjson.loads(text)
    try:
        with headroom():
            return go_numbers(json.loads(text))
    except RecursionError:
        raise TooDeep(f"exceeded max depth {MAX_DEPTH}") from None


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


def _without_surrogates(doc: Any) -> Any:
    """Lone UTF-16 surrogates (`"\\ud800"`) become U+FFFD, as Go's decoder makes them: they cannot be encoded."""
    def clean(text: str) -> str:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

    if isinstance(doc, str):
        return clean(doc)
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for k in list(value):
                v = value.pop(k)
                value[clean(k)] = clean(v) if isinstance(v, str) else v
                stack.append(v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, str):
                    value[i] = clean(v)
                stack.append(v)
    return doc


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it: 4x faster
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _load_yaml(body: bytes) -> Any:
    """The first YAML document of `body` as plain data (safe loader), refused past MAX_DEPTH before it is composed.

    Only the first: upstream's YAML decoding (sigs.k8s.io/yaml's YAMLToJSON, yaml.Unmarshal of go-yaml v2)
    decodes the first document and never reads the others, for an object's body and an apply patch alike.
    Composition recurses once per level (in C with libyaml, where no recursion limit applies: a million
    levels crash the process), so the depth is first counted over the parser's events, which need no
    recursion, stopping at the first level too many (or at the first document's end).
    """
    depth = 0
    for event in yaml.parse(body, Loader=_LOADER):
        if isinstance(event, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                raise TooDeep(f"exceeded max depth {MAX_DEPTH}")
        elif isinstance(event, _CLOSE):
            depth -= 1
        elif isinstance(event, yaml.DocumentEndEvent):
            break
    loader = _LOADER(body)  # yaml.load_all's steps, stopped after the first document
    try:
        with headroom():  # the pure-Python composer, when libyaml is missing, recurses in Python frames
            return loader.get_data() if loader.check_data() else None
    finally:
        loader.dispose()


_INT_MIN, _UINT_MAX = -(1 << 63), (1 << 64) - 1


def go_numbers(doc: Any) -> Any:
    """The numbers of a document as Go's decoder (and orjson, the JSON path's) reads them: an integer beyond 64 bits
    is a float64, one beyond float64 (and a YAML infinity or NaN, which JSON cannot hold) is refused. Python's
    YAML and json readers keep integers of any size, which no store encoding reads back (a 401-digit integer in
    a custom resource once stopped the watch cache). Containers are walked once each (a YAML alias is a DAG)."""
    seen: set[int] = set()
    stack = [doc]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, (dict, list)):
                stack.append(value)
            elif isinstance(value, int) and not isinstance(value, bool) and not _INT_MIN <= value <= _UINT_MAX:
                try:
                    node[key] = float(value)
                except OverflowError:
                    raise ValueError(f"json: cannot unmarshal number {value} into Go value of type float64") \
                        from None
            elif isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"json: unsupported value: {'NaN' if value != value else f'{value:+}'.title()}")
    return doc


def measure(doc: Any, limit: int) -> None:
    """Refuse a decoded YAML document whose expansion exceeds `limit` nodes or MAX_DEPTH levels.

    Aliases make a document a DAG (or a cycle): a small one can expand hugely (an alias bomb, refused
    as go-yaml does) or nest far deeper than its text. Sizes and heights are memoized per node, so the
    walk costs the DAG, not its expansion, and it is iterative, so no depth can exhaust the stack.
    """
    sizes: dict[int, int] = {}
    heights: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        value, finished = stack.pop()
        if not isinstance(value, (dict, list)):
            continue
        key = id(value)
        children = [c for c in (value.values() if isinstance(value, dict) else value) if isinstance(c, (dict, list))]
        if finished:
            on_path.discard(key)
            scalars = len(value) - len(children)
            sizes[key] = size = 1 + scalars + sum(sizes[id(c)] for c in children)
            heights[key] = height = 1 + max((heights[id(c)] for c in children), default=0)
            if size > limit:
                raise ValueError("yaml: document contains excessive aliasing")
            if height > MAX_DEPTH:
                raise TooDeep(f"exceeded max depth {MAX_DEPTH}")
        elif key in on_path:
            raise ValueError("yaml: document contains a recursive alias")
        elif key not in sizes:
            on_path.add(key)
            stack.append((value, True))
            stack.extend((c, False) for c in children)


def wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")
