"""resource.Quantity parsing, exact as upstream (k8s.io/apimachinery/pkg/api/resource).

Values are returned as `Fraction`s so that `100m` + `900m` == `1` exactly; callers
convert to milli-units or bytes with `milli_value` / `value` (both round up, as upstream).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")


class QuantityError(ValueError):
    pass


@lru_cache(maxsize=4096)
def parse_quantity(text: str | int | float) -> Fraction:
    if isinstance(text, bool):
        raise QuantityError(f"quantities must match the regular expression: {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    m = _RE.match(text.strip())
    if not m:
        raise QuantityError("quantities must match the regular expression "
                            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    number = Fraction(m.group(1))
    if m.group(2):
        return number * Fraction(10) ** int(m.group(2)[1:])
    return number * _SUFFIX[m.group(3) or ""]


def milli_value(text: str | int | float) -> int:
    return math.ceil(parse_quantity(text) * 1000)


def value(text: str | int | float) -> int:
    return math.ceil(parse_quantity(text))
