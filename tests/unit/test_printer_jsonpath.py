"""The JSONPath of CRD printer columns (client-go's jsonpath, as the CR handler's tableconvertor uses it: the first
result). Cases from client-go's jsonpath_test.go where they apply to columns, named after what they show."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.apiserver.customresources.jsonpath import find, first

CERT = {"metadata": {"name": "web"},
        "spec": {"dnsNames": ["a.com", "b.com", "c.com"], "replicas": 3, "labels": {"tier": "web"}},
        "status": {"conditions": [{"type": "Issuing", "status": "False", "age": 5},
                                  {"type": "Ready", "status": "True", "age": 12}]}}


@pytest.mark.parametrize(("expr", "want"), [
    pytest.param(".spec.replicas", [3], id="a field"),
    pytest.param("{.spec.replicas}", [3], id="a template's braces"),
    pytest.param(".spec.dnsNames[0]", ["a.com"], id="an index"),
    pytest.param(".spec.dnsNames[-1]", ["c.com"], id="a negative index"),
    pytest.param(".spec.dnsNames[1:3]", ["b.com", "c.com"], id="a slice"),
    pytest.param(".spec.dnsNames[*]", ["a.com", "b.com", "c.com"], id="the wildcard over a list"),
    pytest.param(".spec.labels[*]", ["web"], id="the wildcard over a map"),
    pytest.param(".spec['replicas']", [3], id="a quoted field"),
    pytest.param('.status.conditions[?(@.type=="Ready")].status', ["True"], id="a filter on a string"),
    pytest.param(".status.conditions[?(@.type=='Issuing')].status", ["False"], id="a filter, single quotes"),
    pytest.param('.status.conditions[?(@.type!="Ready")].type', ["Issuing"], id="a filter with !="),
    pytest.param(".status.conditions[?(@.age>10)].type", ["Ready"], id="a numeric comparison"),
    pytest.param(".status.conditions[?(@.age)].type", ["Issuing", "Ready"], id="a presence filter"),
    pytest.param(".spec.dnsNames[7]", [], id="an index beyond the list finds nothing"),
    pytest.param(".status.missing", [], id="a missing field finds nothing"),
    pytest.param(".spec.replicas[0]", [], id="an index of a scalar finds nothing"),
    pytest.param(".spec[", [], id="an expression this reader does not understand finds nothing, never raises"),
    pytest.param(".spec..replicas", [], id="recursive descent is not read (a column of <none>)"),
])
def test_printer_column_jsonpath(expr: str, want: list[Any]) -> None:
    assert list(find(CERT, expr)) == want
    assert first(CERT, expr) == (want[0] if want else None)
