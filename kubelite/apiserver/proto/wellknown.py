"""JSON forms of apimachinery's special messages: Time, MicroTime (RFC 3339) and Duration (Go's time.Duration)."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@functools.lru_cache(maxsize=4096)  # a list repeats the same few timestamps: strftime is the costly part
def format_time(seconds: int, nanos: int, micro: bool) -> str | None:
    """metav1.Time is RFC 3339 in whole seconds, MicroTime with 6 digits; the zero time is JSON null (None)."""
    if seconds == 0 and nanos == 0:
        return None
    try:
        dt = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"time out of range: {seconds}s") from None
    if micro:
        return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> tuple[int, int]:
    """RFC 3339 (with an offset or Z, optional fraction) → (seconds, nanos) since the epoch."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", text)
    if m is None:
        raise ValueError(f'invalid RFC 3339 time "{text[:64]}"')
    base, fraction, zone = m.groups()
    dt = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    return int((dt - _EPOCH).total_seconds()), int((fraction or "0").ljust(9, "0"))
