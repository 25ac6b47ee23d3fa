"""resource.Quantity parsing, exact as upstream (k8s.io/apimachinery/pkg/api/resource).

Values are returned as `Fraction`s so that `100m` + `900m` == `1` exactly; callers
convert to milli-units or bytes with `milli_value` / `value` (both round up, as upstream).
"""

from __future__ import annotations

import math
import re
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


_DECIMAL_SUFFIXES = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, ""))


def milli_quantity(milli: int) -> str:
    """resource.NewMilliQuantity(milli, DecimalSI).String(): the largest decimal suffix that keeps the number whole
    (`1500m` → "1500m", 2000000m → "2k"), milli-units when the value is not whole."""
    if milli == 0:
        return "0"
    sign, size = ("-" if milli < 0 else ""), abs(milli)
    if size % 1000:
        return f"{sign}{size}m"
    size //= 1000
    for exponent, suffix in _DECIMAL_SUFFIXES:
        if size % 10**exponent == 0:
            return f"{sign}{size // 10**exponent}{suffix}"
    return f"{sign}{size}"
