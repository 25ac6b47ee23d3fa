"""Cron schedules as Kubernetes reads them: a port of robfig/cron v3.0.1's standard parser (`cron.ParseStandard`).

The API server validates `spec.schedule` with it and the CronJob controller computes start times with it, so
both live here, below the server and the components. What ParseStandard accepts:

- five fields: minute, hour, day of month, month, day of week; each a comma list of `*` or `?`, `N`, `N-M`,
  with an optional `/step` (`N/step` means `N-max/step`); months `jan`-`dec` and weekdays `sun`-`sat` by name;
- the descriptors `@yearly` `@annually` `@monthly` `@weekly` `@daily` `@midnight` `@hourly`, and `@every <Go
  duration>` (a constant delay, rounded down to whole seconds, at least one second);
- a `TZ=<zone>` or `CRON_TZ=<zone>` prefix (the API server refuses it on new CronJobs: `spec.timeZone` says it).

When both day of month and day of week are restricted (neither has a `*`/`?`), either may match, as cron does.
`next()` is robfig's `SpecSchedule.Next`, field by field, including its handling of daylight-saving gaps, and it
gives up (None, robfig's zero time) when nothing matches within five years (`0 0 30 2 *`). Times are Unix seconds;
a schedule without a zone runs in UTC (robfig uses the caller's zone: kube-controller-manager's, usually UTC).
Error messages are robfig's, which upstream puts in its `Invalid value` causes and events.
"""

from __future__ import annotations

import math
import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final, Protocol

from kubelite.clock import parse_duration

STAR_BIT: Final = 1 << 63  # set when a field was `*` or `?`: then day of month and day of week must both match
_INT = re.compile(r"[+-]?[0-9]+")
_MAX_INT64 = 2**63 - 1


class CronError(ValueError):
    """A schedule robfig's parser refuses; the message is robfig's."""


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int]


_MINUTES = _Bounds(0, 59, {})
_HOURS = _Bounds(0, 23, {})
_DOM = _Bounds(1, 31, {})
_MONTHS = _Bounds(1, 12, {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))})
_DOW = _Bounds(0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))})


class Schedule(Protocol):
    def next(self, t: float) -> float | None:
        """The first activation strictly after `t` (whole seconds), or None if there is none within five years."""
        ...


def load_location(name: str) -> tzinfo:
    """time.LoadLocation: "" and "UTC" are UTC; anything else must be in the IANA database (`unknown time zone X`).
    "Local" is refused: a server-side schedule has no local zone of its own to mean."""
    if name in ("", "UTC"):
        return UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"unknown time zone {name}") from None


def _bits(low: int, high: int, step: int) -> int:
    return sum(1 << i for i in range(low, high + 1, step))


def _all(b: _Bounds) -> int:
    return _bits(b.low, b.high, 1) | STAR_BIT


def _atoi(expr: str) -> int:
    if not _INT.fullmatch(expr):
        raise CronError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    num = int(expr)
    if abs(num) > _MAX_INT64:
        raise CronError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": value out of range')
    if num < 0:
        raise CronError(f"negative number ({num}) not allowed: {expr}")
    return num


def _int_or_name(expr: str, b: _Bounds) -> int:
    named = b.names.get(expr.lower())
    return named if named is not None else _atoi(expr)


def _range(expr: str, b: _Bounds) -> int:
    """getRange: `number | number "-" number [ "/" number ]`, or a star."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = b.low, b.high, STAR_BIT
    else:
        start = _int_or_name(low_and_high[0], b)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], b)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if len(low_and_high) == 1:  # "N/step" means "N-max/step"
            end = b.high
        if step > 1:
            extra = 0
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < b.low:
        raise CronError(f"beginning of range ({start}) below minimum ({b.low}): {expr}")
    if end > b.high:
        raise CronError(f"end of range ({end}) above maximum ({b.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return _bits(start, end, step) | extra


def _field(text: str, b: _Bounds) -> int:
    bits = 0
    for expr in (e for e in text.split(",") if e):  # strings.FieldsFunc drops empty parts
        bits |= _range(expr, b)
    return bits


@dataclass(frozen=True, slots=True)
class SpecSchedule:
    """A duty cycle as bit sets, one per field (seconds are always 0 in the standard form)."""

    minute: int
    hour: int
    dom: int
    month: int
    dow: int
    location: tzinfo = UTC

    def wall_at(self, ts: int) -> datetime:
        return datetime.fromtimestamp(ts, self.location)

    def go_date(self, year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
        """time.Date in the schedule's zone: out-of-range months and days roll over, and a wall time in a
        daylight-saving gap or overlap resolves as Go resolves it (the offset in force at the first guess, unless
        the instant it gives lies under another offset)."""
        year += (month - 1) // 12
        month = (month - 1) % 12 + 1
        wall = datetime(year, month, 1) + timedelta(days=day - 1, hours=hour, minutes=minute, seconds=second)
        as_utc = int(wall.replace(tzinfo=UTC).timestamp())
        guess = self.offset_at(as_utc)
        return as_utc - self.offset_at(as_utc - guess)

    def offset_at(self, ts: int) -> int:
        delta = self.wall_at(ts).utcoffset()
        return int(delta.total_seconds()) if delta is not None else 0

    def day_matches(self, w: datetime) -> bool:
        """dayMatches: with a star in either day field both must match, else either may."""
        dom = bool(1 << w.day & self.dom)
        dow = bool(1 << ((w.weekday() + 1) % 7) & self.dow)
        if self.dom & STAR_BIT or self.dow & STAR_BIT:
            return dom and dow
        return dom or dow

    def next(self, t: float) -> float | None:
        """SpecSchedule.Next: from the upcoming second, find the month, then the day, hour, minute and second
        (always 0); a field that rolls over (wraps) starts the search again from the month."""
        cursor = _Cursor(self, math.floor(t) + 1)
        year_limit = cursor.wall.year + 5
        while cursor.wall.year <= year_limit:
            if cursor.month() and cursor.day() and cursor.hour() and cursor.minute() and cursor.second():
                return float(cursor.ts)
        return None


class _Cursor:
    """The time robfig's Next moves forward, field by field. Each step returns False when it wrapped around (the
    caller starts again from the month); the first step that moves resets the smaller fields (`added`)."""

    def __init__(self, schedule: SpecSchedule, ts: int) -> None:
        self.s = schedule
        self.ts = ts
        self.wall = schedule.wall_at(ts)
        self.added = False

    def _move(self, ts: int) -> None:
        self.ts = ts
        self.wall = self.s.wall_at(ts)

    def _reset(self, ts: int) -> None:
        if not self.added:
            self.added = True
            self._move(ts)

    def month(self) -> bool:
        while not 1 << self.wall.month & self.s.month:
            w = self.wall
            self._reset(self.s.go_date(w.year, w.month, 1))
            w = self.wall
            self._move(self.s.go_date(w.year, w.month + 1, w.day, w.hour, w.minute, w.second))
            if self.wall.month == 1:
                return False
        return True

    def day(self) -> bool:
        while not self.s.day_matches(self.wall):
            w = self.wall
            self._reset(self.s.go_date(w.year, w.month, w.day))
            w = self.wall
            self._move(self.s.go_date(w.year, w.month, w.day + 1, w.hour, w.minute, w.second))
            hour = self.wall.hour
            if hour != 0:  # a day that starts at 1am or ends at 11pm (daylight saving): back to midnight
                self._move(self.ts + ((24 - hour) * 3600 if hour > 12 else -hour * 3600))
            if self.wall.day == 1:
                return False
        return True

    def hour(self) -> bool:
        while not 1 << self.wall.hour & self.s.hour:
            w = self.wall
            self._reset(self.s.go_date(w.year, w.month, w.day, w.hour))
            self._move(self.ts + 3600)
            if self.wall.hour == 0:
                return False
        return True

    def minute(self) -> bool:
        while not 1 << self.wall.minute & self.s.minute:
            self._reset(self.ts - self.ts % 60)
            self._move(self.ts + 60)
            if self.wall.minute == 0:
                return False
        return True

    def second(self) -> bool:
        """The seconds field is 0: a time between whole minutes moves on to the next one, and every field is
        checked again."""
        if self.wall.second == 0:
            return True
        self.added = True
        self._move(self.ts + 60 - self.wall.second)
        return False


@dataclass(frozen=True, slots=True)
class ConstantDelaySchedule:
    """`@every <duration>`: the next activation is `delay` after the given time's whole second."""

    delay: int  # seconds

    def next(self, t: float) -> float | None:
        return float(math.floor(t) + self.delay)


def _descriptor(spec: str, loc: tzinfo) -> Schedule:
    minutes0, hours0, dom1, month1, dow0 = 1 << 0, 1 << 0, 1 << 1, 1 << 1, 1 << 0
    table = {
        "@yearly": (minutes0, hours0, dom1, month1, _all(_DOW)),
        "@monthly": (minutes0, hours0, dom1, _all(_MONTHS), _all(_DOW)),
        "@weekly": (minutes0, hours0, _all(_DOM), _all(_MONTHS), dow0),
        "@daily": (minutes0, hours0, _all(_DOM), _all(_MONTHS), _all(_DOW)),
        "@hourly": (minutes0, _all(_HOURS), _all(_DOM), _all(_MONTHS), _all(_DOW)),
    }
    table["@annually"], table["@midnight"] = table["@yearly"], table["@daily"]
    if spec in table:
        return SpecSchedule(*table[spec], location=loc)
    every = "@every "
    if spec.startswith(every):
        try:
            nanos = parse_duration(spec[len(every):])
        except ValueError as exc:
            raise CronError(f"failed to parse duration {spec}: time: {exc}") from None
        nanos = max(nanos, 1_000_000_000)
        return ConstantDelaySchedule(nanos // 1_000_000_000)
    raise CronError(f"unrecognized descriptor: {spec}")


def parse_standard(spec: str) -> Schedule:
    """cron.ParseStandard (CronError with robfig's message when `spec` is not a schedule)."""
    if not spec:
        raise CronError("empty spec string")
    loc: tzinfo = UTC
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space, eq = spec.find(" "), spec.find("=")
        name = spec[eq + 1:space] if space >= 0 else spec[eq + 1:]
        try:
            loc = load_location(name)
        except CronError as exc:
            raise CronError(f"provided bad location {name}: {exc}") from None
        spec = spec[space:].strip() if space >= 0 else ""
    if spec.startswith("@"):
        return _descriptor(spec, loc)
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    return SpecSchedule(_field(fields[0], _MINUTES), _field(fields[1], _HOURS), _field(fields[2], _DOM),
                        _field(fields[3], _MONTHS), _field(fields[4], _DOW), loc)
