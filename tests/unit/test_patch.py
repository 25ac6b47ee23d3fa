"""Patch tables: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge with directives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver.patch import json_patch, merge_patch, strategic_merge_patch


@dataclass(frozen=True)
class Case:
    name: str
    original: Any
    patch: Any
    want: Any


# Mirrors the RFC 7386 appendix A examples.
MERGE_CASES = [
    Case("replace value", {"a": "b"}, {"a": "c"}, {"a": "c"}),
    Case("add key", {"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    Case("null removes", {"a": "b"}, {"a": None}, {}),
    Case("null removes one of two", {"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    Case("array replaced", {"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    Case("nested null", {"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    Case("arrays are atomic", {"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    Case("nested null in new object", {}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize("case", MERGE_CASES, ids=lambda c: c.name)
def test_merge_patch(case: Case) -> None:
    assert merge_patch(case.original, case.patch) == case.want


# Mirrors RFC 6902 appendix A.
JSON_PATCH_CASES = [
    Case("add object member", {"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
         {"foo": "bar", "baz": "qux"}),
    Case("add array element", {"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
         {"foo": ["bar", "qux", "baz"]}),
    Case("append with dash", {"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": "x"}], {"foo": ["bar", "x"]}),
    Case("remove object member", {"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    Case("replace value", {"baz": "qux"}, [{"op": "replace", "path": "/baz", "value": "boo"}], {"baz": "boo"}),
    Case("move value", {"foo": {"bar": "baz"}}, [{"op": "move", "from": "/foo/bar", "path": "/qux"}],
         {"foo": {}, "qux": "baz"}),
    Case("copy value", {"a": 1}, [{"op": "copy", "from": "/a", "path": "/b"}], {"a": 1, "b": 1}),
    Case("escaped pointer", {"metadata": {"labels": {}}},
         [{"op": "add", "path": "/metadata/labels/app.io~1name", "value": "x"}],
         {"metadata": {"labels": {"app.io/name": "x"}}}),
    Case("test passes", {"a": 1}, [{"op": "test", "path": "/a", "value": 1}], {"a": 1}),
]


@pytest.mark.parametrize("case", JSON_PATCH_CASES, ids=lambda c: c.name)
def test_json_patch(case: Case) -> None:
    assert json_patch(case.original, case.patch) == case.want


JSON_PATCH_ERRORS = [
    Case("test fails", {"a": 1}, [{"op": "test", "path": "/a", "value": 2}], 422),
    Case("remove missing", {"a": 1}, [{"op": "remove", "path": "/b"}], 422),
    Case("replace missing", {"a": 1}, [{"op": "replace", "path": "/b", "value": 1}], 422),
    Case("not a list", {"a": 1}, {"op": "add"}, 400),
    Case("unknown op", {"a": 1}, [{"op": "frob", "path": "/a"}], 422),  # patchObj.Apply fails: 422, as upstream
    # "²".isdigit() is true and int("²") raises: such an index was a 500
    Case("a non-ASCII digit as the last index", {"a": [1]}, [{"op": "replace", "path": "/a/²", "value": 2}], 422),
    Case("a non-ASCII digit on the way", {"a": [{}]}, [{"op": "add", "path": "/a/²/b", "value": 2}], 422),
]


@pytest.mark.parametrize("case", JSON_PATCH_ERRORS, ids=lambda c: c.name)
def test_json_patch_errors(case: Case) -> None:
    with pytest.raises(ApiError) as info:
        json_patch(case.original, case.patch)
    assert info.value.code == case.want


POD = {"metadata": {"labels": {"a": "1", "tier": "x"}, "finalizers": ["f1"]},
       "spec": {"containers": [{"name": "main", "image": "busybox:1", "env": [{"name": "A", "value": "1"},
                                                                                {"name": "B", "value": "2"}]},
                               {"name": "side", "image": "side:1"}],
                "tolerations": [{"key": "a", "operator": "Exists"}]},
       "status": {"conditions": [{"type": "Ready", "status": "False"}]}}

# Mirrors the strategic merge cases kubectl sends (research/kubectl-compat.md §5.4) and
# apimachinery's strategicpatch tests for the directives.
SMP_CASES = [
    Case("merge containers by name", POD, {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}},
         {"spec.containers": [("main", "busybox:2"), ("side", "side:1")]}),
    Case("add container", POD, {"spec": {"containers": [{"name": "new", "image": "n"}]}},
         {"spec.containers": [("main", "busybox:1"), ("side", "side:1"), ("new", "n")]}),
    Case("delete container directive", POD, {"spec": {"containers": [{"$patch": "delete", "name": "side"}]}},
         {"spec.containers": [("main", "busybox:1")]}),
    Case("set element order", POD, {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
                                             "containers": [{"name": "main", "image": "busybox:3"}]}},
         {"spec.containers": [("side", "side:1"), ("main", "busybox:3")]}),
    Case("replace list directive", POD, {"spec": {"containers": [{"name": "only", "image": "o"},
                                                                 {"$patch": "replace"}]}},
         {"spec.containers": [("only", "o")]}),
    Case("tolerations are atomic", POD, {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}},
         {"spec.tolerations": [{"key": "b", "operator": "Exists"}]}),
    Case("null deletes label", POD, {"metadata": {"labels": {"tier": None}}}, {"metadata.labels": {"a": "1"}}),
    Case("conditions merge by type", POD, {"status": {"conditions": [{"type": "Ready", "status": "True"},
                                                                     {"type": "Initialized", "status": "True"}]}},
         {"status.conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]}),
    Case("finalizers merge as a set", POD, {"metadata": {"finalizers": ["f1", "f2"]}},
         {"metadata.finalizers": ["f1", "f2"]}),
    Case("delete from primitive list", POD, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}},
         {"metadata.finalizers": []}),
    Case("env merges by name with delete", POD, {"spec": {"containers": [{"name": "main", "env": [
        {"$patch": "delete", "name": "A"}, {"name": "C", "value": "3"}]}]}},
         {"spec.containers[0].env": [{"name": "B", "value": "2"}, {"name": "C", "value": "3"}]}),
    Case("retainKeys drops others", {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"a": 1}}}},
         {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
         {"spec.strategy": {"type": "Recreate"}}),
]


def _dig(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.replace("[", ".").replace("]", "").split("."):
        cur = cur[int(part)] if part.isdigit() else cur[part]
    return cur


@pytest.mark.parametrize("case", SMP_CASES, ids=lambda c: c.name)
def test_strategic_merge_patch(case: Case) -> None:
    model = "V1Deployment" if "strategy" in str(case.patch) else "V1Pod"
    result = strategic_merge_patch(case.original, case.patch, model)
    for path, want in case.want.items():
        got = _dig(result, path)
        if path == "spec.containers":
            got = [(c["name"], c["image"]) for c in got]
        assert got == want, path
    assert case.original is not result and POD["spec"]["containers"][0]["image"] == "busybox:1"
