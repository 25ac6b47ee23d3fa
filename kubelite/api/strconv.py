"""Go's strconv integer parsing, for the numbers upstream keeps in strings users may write (annotations, labels).

Python's int() is laxer than strconv.ParseInt: it takes non-ASCII digits (`"²".isdigit()` is true, and int("²")
then raises), underscores ("1_0"), surrounding spaces and any size. Code that mirrors an upstream ParseInt goes
through `parse_int`, so the API server and the controllers accept exactly what upstream's do.
"""

from __future__ import annotations

import json
import re

_DECIMAL = re.compile(r"[+-]?[0-9]+")  # an explicit base 10 allows a sign and ASCII digits only, no "_"


def parse_int(text: str, bits: int = 64) -> int:
    """strconv.ParseInt(text, 10, bits); a ValueError carries Go's message (`strconv.ParseInt: parsing "x":
    invalid syntax` or `... value out of range`), which upstream's decode errors quote."""
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"strconv.ParseInt: parsing {_quote(text)}: invalid syntax")
    value = int(text)
    bound = 1 << (bits - 1)
    if not -bound <= value < bound:
        raise ValueError(f"strconv.ParseInt: parsing {_quote(text)}: value out of range")
    return value


def int_or_none(text: str, bits: int = 64) -> int | None:
    """parse_int, None where it fails (the upstream callers that treat an unparseable value as absent)."""
    try:
        return parse_int(text, bits)
    except ValueError:
        return None


def _quote(text: str) -> str:
    """Go's %q for the printable text users write."""
    return json.dumps(text, ensure_ascii=False)
