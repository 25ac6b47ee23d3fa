"""Label/field selector tables, mirroring k8s.io/apimachinery/pkg/labels selector_test.go."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kubelite.api.errors import ApiError
from kubelite.api.selectors import (
    COMMON_FIELDS,
    compile_label_selector,
    parse_field_selector,
    parse_label_selector,
)


@dataclass(frozen=True)
class Case:
    name: str
    selector: str
    labels: dict[str, str]
    want: bool


# Mirrors TestSelectorMatches / TestEverything.
CASES = [
    Case("empty matches everything", "", {"x": "y"}, True),
    Case("equality", "x=y", {"x": "y"}, True),
    Case("double equality", "x==y", {"x": "y"}, True),
    Case("equality miss", "x=y", {"x": "z"}, False),
    Case("inequality", "x!=y", {"x": "z"}, True),
    Case("inequality absent key", "x!=y", {}, True),
    Case("conjunction", "x=y,z=w", {"x": "y", "z": "w"}, True),
    Case("conjunction miss", "x=y,z=w", {"x": "y"}, False),
    Case("in", "x in (a,b)", {"x": "b"}, True),
    Case("in miss", "x in (a,b)", {"x": "c"}, False),
    Case("notin", "x notin (a,b)", {"x": "c"}, True),
    Case("notin absent", "x notin (a,b)", {}, True),
    Case("exists", "x", {"x": ""}, True),
    Case("does not exist", "!x", {"y": "1"}, True),
    Case("does not exist miss", "!x", {"x": "1"}, False),
    Case("greater than", "x>1", {"x": "2"}, True),
    Case("less than", "x<1", {"x": "2"}, False),
    Case("set with equality", "x in (a),y=b", {"x": "a", "y": "b"}, True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_label_selector(case: Case) -> None:
    assert parse_label_selector(case.selector).matches(case.labels) == case.want


def test_label_selector_object() -> None:
    sel = compile_label_selector({"matchLabels": {"app": "web"},
                                  "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]})
    assert sel.matches({"app": "web", "tier": "fe"}) and not sel.matches({"app": "web", "tier": "db"})
    assert compile_label_selector({}).matches({"any": "thing"})
    assert not compile_label_selector(None).matches({"any": "thing"})


def test_field_selector() -> None:
    sel = parse_field_selector("metadata.name=a,metadata.namespace!=kube-system", COMMON_FIELDS, "pods")
    assert sel.matches({"metadata": {"name": "a", "namespace": "default"}})
    assert not sel.matches({"metadata": {"name": "a", "namespace": "kube-system"}})
    with pytest.raises(ApiError) as info:
        parse_field_selector("spec.bogus=1", COMMON_FIELDS, "pods")
    assert info.value.code == 400
