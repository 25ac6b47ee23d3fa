"""JSON forms of apimachinery's special messages: Time, MicroTime (RFC 3339) and Duration (Go's time.Duration)."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9,
          "h": 3600 * 10**9}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


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


def format_duration(ns: int) -> str:
    """Go's time.Duration.String(): "1h2m3.5s", "1.5ms", "0s"."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if ns >= size:
                return sign + _decimal(ns, size) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = _decimal(rest, 10**9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    return f"{sign}{minutes}m{text}" if minutes else sign + text


def _decimal(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    digits = len(str(unit)) - 1
    return f"{whole}.{fraction:0{digits}d}".rstrip("0").rstrip(".") if fraction else str(whole)


def parse_duration(text: str) -> int:
    """Go's time.ParseDuration → nanoseconds."""
    sign, body = (-1, text[1:]) if text.startswith("-") else (1, text.removeprefix("+"))
    if body == "0":
        return 0
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(body) or not body:
        raise ValueError(f'invalid duration "{text[:64]}"')
    return sign * round(total)
