"""resource.Quantity parsing, exact as upstream (k8s.io/apimachinery/pkg/api/resource).

Values are returned as `Fraction`s so that `100m` + `900m` == `1` exactly; callers
convert to milli-units or bytes with `milli_value` / `value` (both round up, as upstream).
`Quantity` keeps a value with the format it prints in (`Quantity.String()`): eviction messages
and quota usage quote quantities as upstream prints them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import NoReturn

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")


FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
MAX_DIGITS = 64  # characters of the numeric part; far beyond int64, far below Python's 4,300-digit guard
MAX_EXPONENT = 1000  # kubelite's bound; upstream keeps any int32 exponent as an inf.Dec scale


class QuantityError(ValueError):
    pass


def parse_quantity(text: object) -> Fraction:
    """A quantity from its string or JSON number; anything else, or one out of bounds, is a QuantityError."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise QuantityError(FORMAT)
    if isinstance(text, int):
        if abs(text) >= 10**MAX_DIGITS:
            _too_long()
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(FORMAT)
        return _parse(repr(text))
    return _parse(text)


def _too_long() -> NoReturn:
    raise QuantityError(f"unable to parse numeric part of quantity: more than {MAX_DIGITS} digits")


@lru_cache(maxsize=4096)
def _parse(text: str) -> Fraction:
    """Bounded before any arithmetic: at most MAX_DIGITS digits and a decimal exponent within ±MAX_EXPONENT, so
    `1e10000001` is refused at once instead of building a ten-million-digit number."""
    if len(text) > MAX_DIGITS + 16:  # before the regex, whose backtracking is quadratic in the length
        _too_long()
    m = _RE.match(text.strip())
    if not m:
        raise QuantityError(FORMAT)
    if len(m.group(1)) > MAX_DIGITS:
        _too_long()
    number = Fraction(m.group(1))
    if m.group(2):
        exponent = m.group(2)[1:]
        if len(exponent.lstrip("+-")) > 4 or abs(int(exponent)) > MAX_EXPONENT:
            raise QuantityError(f"unable to parse quantity's suffix: exponent {exponent[:16]} is out of range "
                                f"(at most {MAX_EXPONENT})")
        return number * Fraction(10) ** int(exponent)
    return number * _SUFFIX[m.group(3) or ""]


def milli_value(text: object) -> int:
    return math.ceil(parse_quantity(text) * 1000)


def value(text: object) -> int:
    return math.ceil(parse_quantity(text))




# --- formatting: Quantity.String() ---------------------------------------------------------------

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

    def milli_value(self) -> int:
        """Quantity.MilliValue(): the value in milli-units, rounded up (kubelite's quantities do not overflow)."""
        return math.ceil(self.amount * 1000)

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


def milli_quantity(milli: int) -> str:
    """resource.NewMilliQuantity(milli, DecimalSI).String(): `1500m` → "1500m", 2000000m → "2k"."""
    return format_quantity(Fraction(milli, 1000), DECIMAL_SI)
