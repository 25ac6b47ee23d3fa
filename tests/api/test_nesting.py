"""Nesting depth (issue 10, defect 3): documents up to 400 levels are served, deeper ones are a 400, never a 500.

Every way a document enters the server is a row: bodies as JSON and YAML (flow and block style), the three
patch types and server-side apply (a strategic merge only refused: kubelite's own kinds have no struct tags to
merge by, and refuse it with a 415 before reading the body, as custom resources do; apply merges them). Deep
objects are stored as SchedulingExplanations (kubelite's own kind
keeps every field as sent), so reading, listing and watching them proves the writers too; a built-in kind
(Pod) drops the deep unknown field but must decode it first. The depth counts the object itself as level 1.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from kubelite.apiserver.nesting import MAX_DEPTH
from kubelite.testing.builders import make_pod
from tests.api.test_rest import PODS, call

Client = TestClient  # type: ignore[type-arg]
SX = "/apis/kubelite.io/v1alpha1/namespaces/default/schedulingexplanations"
YAML = "application/yaml"


def _chain(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _lists(levels: int) -> bytes:
    """`levels` nested lists as JSON text (json.dumps itself recurses, so 10,000 levels are written by hand)."""
    return b"[" * levels + b"]" * levels


def _json(depth: int) -> bytes:
    return b'{"metadata": {"name": "deep"}, "spec": ' + _lists(depth - 1) + b"}"


def _yaml_flow(depth: int) -> bytes:
    return b"metadata: {name: deep}\nspec: " + _lists(depth - 1) + b"\n"


def _yaml_block(depth: int) -> bytes:
    """`spec:` then depth - 1 nested block mappings, one space of indentation per level."""
    lines = ["metadata: {name: deep}", "spec:"] + [" " * i + "a:" for i in range(1, depth)]
    return ("\n".join(lines) + " 1\n").encode()


def _body(kind: str, depth: int) -> tuple[str, bytes]:
    if kind == "json":
        return "application/json", _json(depth)
    if kind == "yaml flow":
        return YAML, _yaml_flow(depth)
    return YAML, _yaml_block(depth)


def _expect(depth: int) -> int:
    return 400 if depth > MAX_DEPTH else 0


DEPTHS = [399, 400, 401, 10_000]
BODIES = [pytest.param(kind, depth, id=f"{kind} body {depth} deep") for kind in ("json", "yaml flow", "yaml block")
          for depth in DEPTHS if not (kind == "yaml block" and depth > 1000)]  # 10,000 levels of indent > 3 MiB


@pytest.mark.parametrize(("kind", "depth"), BODIES)
async def test_create_body_nesting(api: Client, kind: str, depth: int) -> None:
    ctype, body = _body(kind, depth)
    out = await call(api, "POST", SX, body, ctype, expect=_expect(depth) or 201)
    if depth > MAX_DEPTH:
        assert f"exceeded max depth {MAX_DEPTH}" in out["message"] or "could not be decoded" in out["message"], out
        return
    got = await call(api, "GET", f"{SX}/deep", expect=200)
    assert got["spec"] == out["spec"] and _depth(got) == depth
    listed = await call(api, "GET", SX, expect=200)
    assert [_depth(o) for o in listed["items"]] == [depth]


def _depth(value: Any) -> int:
    stack, deepest = [(value, 1)], 0
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v if isinstance(v, list) else ())
                     if isinstance(c, (dict, list)))
    return deepest


def _patch(kind: str, depth: int) -> tuple[str, str, bytes]:
    """A patch whose result is `depth` levels deep."""
    spec = b'{"spec": ' + _lists(depth - 1) + b"}"
    if kind == "merge":
        return "application/merge-patch+json", "", spec
    if kind == "strategic merge":
        return "application/strategic-merge-patch+json", "", spec
    if kind == "apply":
        return "application/apply-patch+yaml", "?fieldManager=t", _yaml_flow(depth)
    return "application/json-patch+json", "", b'[{"op": "add", "path": "/spec", "value": ' + _lists(depth - 1) + b"}]"


PATCHES = [pytest.param(kind, depth, id=f"{kind} patch {depth} deep") for kind in
           ("merge", "strategic merge", "json", "apply") for depth in DEPTHS]


@pytest.mark.parametrize(("kind", "depth"), PATCHES)
async def test_patch_nesting(api: Client, kind: str, depth: int) -> None:
    await call(api, "POST", SX, {"metadata": {"name": "deep"}, "spec": {}}, expect=201)
    ctype, query, body = _patch(kind, depth)
    if kind == "strategic merge":
        await call(api, "PATCH", f"{SX}/deep{query}", body, ctype, expect=415)
        return
    out = await call(api, "PATCH", f"{SX}/deep{query}", body, ctype, expect=_expect(depth) or 200)
    if depth <= MAX_DEPTH:
        assert _depth(out) == depth
        assert _depth(await call(api, "GET", f"{SX}/deep", expect=200)) == depth


async def test_json_patch_copies_cannot_double_the_depth(api: Client) -> None:
    """Copying a 300-deep subtree into its own deepest leaf would make it 600 deep (and ten such copies 300,000
    deep within the copy size limit): refused at the first copy that crosses the bound."""
    await call(api, "POST", SX, {"metadata": {"name": "deep"}, "spec": {}}, expect=201)
    leaf = "/spec" + "/0" * 298
    ops = [{"op": "add", "path": "/spec", "value": _chain(300)}] + \
        [{"op": "copy", "from": "/spec", "path": leaf + "/-"} for _ in range(10)]
    out = await call(api, "PATCH", f"{SX}/deep", json.dumps(ops).encode(), "application/json-patch+json",
                     expect=400)
    assert f"exceeded max depth {MAX_DEPTH}" in out["message"]


async def test_deep_object_is_watched(api: Client) -> None:
    await call(api, "POST", SX, _json(MAX_DEPTH), expect=201)
    resp = await api.get(f"{SX}?watch=1&resourceVersion=0&timeoutSeconds=1")
    events = [orjson.loads(line) for line in (await resp.read()).splitlines() if line]
    assert [(e["type"], _depth(e["object"])) for e in events] == [("ADDED", MAX_DEPTH)]


@pytest.mark.parametrize("depth", DEPTHS, ids=[f"pod body {d} deep" for d in DEPTHS])
async def test_built_in_kind_decodes_then_prunes_deep_unknown_fields(api: Client, depth: int) -> None:
    body = make_pod("deep").obj()
    body["spec"]["x"] = "X"  # the pod is level 1, spec level 2
    text = orjson.dumps(body).replace(b'"X"', _lists(depth - 2))
    out = await call(api, "POST", PODS, text, expect=_expect(depth) or 201)
    if depth <= MAX_DEPTH:
        assert "x" not in out["spec"]
