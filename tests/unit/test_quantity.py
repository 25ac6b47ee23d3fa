"""Quantity parsing, mirroring k8s.io/apimachinery/pkg/api/resource quantity_test.go."""

from __future__ import annotations

import pytest

from kubelite.api.quantity import Quantity, QuantityError, milli_value, value

CASES = [("100m", 100, 1), ("1", 1000, 1), ("1.5", 1500, 2), ("1Ki", 1024000, 1024), ("1Mi", 1048576000, 1048576),
         ("1G", 10**12, 10**9), ("1e3", 10**6, 1000), ("500Mi", 524288000000, 524288000), ("0.1", 100, 1),
         ("1n", 1, 1), ("32Gi", 34359738368000, 34359738368)]


@pytest.mark.parametrize("text,milli,whole", CASES, ids=[c[0] for c in CASES])
def test_parse(text: str, milli: int, whole: int) -> None:
    assert (milli_value(text), value(text)) == (milli, whole)
    assert (Quantity.parse(text).milli_value(), Quantity.parse(text).value()) == (milli, whole)


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "1Qi", "--1"])
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        milli_value(text)
