"""The type check's walk can prune unknown fields too (`typecheck.check(..., unknown)`), in place of a walk of its own.

Writes under fieldValidation Warn or Ignore prune and type-check their object in one walk (handlers.py). The walk must
leave the object exactly as `schema.prune_unknown` then `typecheck.check` leave it — same fields dropped, same nulls
dropped, same key order — report the same unknown paths in the same order and the same first mismatch; after a
mismatch `schema.prune_unknown` finishes the pruning, and the object is then as the two walks left it (a patch's
422 shows it). Each case runs both ways on copies of one document.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from kubelite.apiserver import schema, typecheck
from kubelite.testing.builders import make_pod

POD = "V1Pod"


def _pod(**extra: Any) -> dict[str, Any]:
    body = make_pod("p").obj()
    for path, value in extra.items():
        target = body
        *parents, last = path.split("__")
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
        target[last] = value
    return body


CASES = [
    pytest.param(POD, _pod(), id="a clean pod: nothing pruned, nothing wrong"),
    pytest.param(POD, _pod(bogus=1, spec__bogusField="x"), id="unknown fields at two levels, in walk order"),
    pytest.param(POD, _pod(spec__containers__0__bogus={"deep": [1]}, spec__hostname=None, metadata__zz=2),
                 id="unknown in a list's item, a null dropped, unknown in metadata"),
    pytest.param(POD, _pod(spec__affinity=7), id="a mismatch, no unknown field"),
    pytest.param(POD, _pod(aaa=1, spec__affinity=7, spec__zzz=3, status__bogus=4),
                 id="unknown fields before and after a mismatch: pruned all the same"),
    pytest.param(POD, _pod(spec__containers__0__ports=[{"containerPort": "x", "bogus": 1}], spec__later=1),
                 id="a mismatch inside a list item whose unknown field is not yet pruned"),
    pytest.param(POD, _pod(spec__containers__0__resources={"requests": {"cpu": None, "memory": "1Gi"}}, zz=1),
                 id="a null quantity in a map becomes 0"),
    pytest.param(POD, _pod(spec__volumes=[None, {"name": "v", "emptyDir": {}, "odd": 1}]),
                 id="a null list item of a struct becomes an empty object"),
    pytest.param("V1Node", {"metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {"taints": [
        {"key": "k", "effect": "NoSchedule", "bogus": None}]}, "status": {"capacity": {"cpu": "4"}, "x": {}}},
        id="a node: unknown fields in a taint and in the status"),
    pytest.param("", {"anything": {"goes": None}}, id="no model: nothing checked, nothing pruned"),
]


@pytest.mark.parametrize(("model", "doc"), CASES)
def test_one_walk_prunes_and_checks_as_two(model: str, doc: dict[str, Any]) -> None:
    two = copy.deepcopy(doc)
    pruned = schema.prune_unknown(two, model)
    mismatch = typecheck.check(two, model)

    one = copy.deepcopy(doc)
    unknown: list[str] = []
    found = typecheck.check(one, model, unknown)

    assert found == mismatch
    if found is None:
        assert unknown == pruned
    else:  # the walk stopped there: pruning is finished after, as Registry.check_types does before its message
        assert pruned[:len(unknown)] == unknown
        schema.prune_unknown(one, model)
    assert orjson.dumps(one) == orjson.dumps(two)  # the same fields, in the same order
