"""resource.Quantity values as the eviction manager prints and compares them.

Eviction messages quote quantities ("Threshold quantity: 100Mi, available: 50Mi"), so they
are formatted as Go's `Quantity.String()` does: binary quantities in the largest exact
power-of-1024 suffix (small values and non-integers fall back to decimal), decimal ones in
the largest exact power-of-1000 suffix. Values stay exact `Fraction`s for comparisons.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from kubelite.api.quantity import parse_quantity

BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


@dataclass(frozen=True)
class Quantity:
    amount: Fraction
    format: str = BINARY_SI

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """resource.ParseQuantity: the suffix decides how the value prints (Ki… binary, e… exponent)."""
        amount = parse_quantity(text)
        stripped = text.strip()
        if re.search(r"[KMGTPE]i$", stripped):
            fmt = BINARY_SI
        elif re.search(r"[eE][+-]?\d+$", stripped):
            fmt = DECIMAL_EXPONENT
        else:
            fmt = DECIMAL_SI
        return cls(amount, fmt)

    @classmethod
    def of(cls, value: int, fmt: str = BINARY_SI) -> Quantity:
        return cls(Fraction(value), fmt)

    def value(self) -> int:
        """Quantity.Value(): the integer value, rounded up."""
        return math.ceil(self.amount)

    def __str__(self) -> str:
        return format_quantity(self.amount, self.format)


def format_quantity(amount: Fraction, fmt: str) -> str:
    if amount == 0:
        return "0"
    if fmt == BINARY_SI and abs(amount) >= 1024 and amount.denominator == 1:
        n, exp = int(amount), 0
        while exp < len(_BINARY) - 1 and n % 1024 == 0:
            n, exp = n // 1024, exp + 1
        return f"{n}{_BINARY[exp]}"
    # decimal: the largest exponent (a multiple of 3, from n to E) that leaves an integer mantissa
    exp = 18
    while exp > -9 and (amount / Fraction(10) ** exp).denominator != 1:
        exp -= 3
    mantissa = amount / Fraction(10) ** exp
    number = str(math.ceil(mantissa))
    if fmt == DECIMAL_EXPONENT:
        return number if exp == 0 else f"{number}e{exp}"
    return f"{number}{_DECIMAL[exp]}"
