"""robfig/cron v3.0.1's parser and schedule tables (spec_test.go, parser_test.go), run against kubelite's port.

The standard parser has no seconds field: TestNext's six-field specs run here with their seconds field (always
`0` in the cases kept) dropped; the cases that need other seconds are left out. robfig's tests run in the test
machine's local zone; kubelite's schedules without a zone run in UTC, so zoneless times here are UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from kubelite.api.cron_schedule import CronError, parse_standard


def at(value: str) -> float:
    """getTime: "Mon Jul 9 15:00 2012" (UTC here), "2012-03-11T00:00:00-0500", or "TZ=zone <that>"."""
    zone = None
    if value.startswith("TZ="):
        name, value = value.split(" ", 1)
        zone = ZoneInfo(name[3:])
    for layout in ("%a %b %d %H:%M %Y", "%a %b %d %H:%M:%S %Y"):
        try:
            return datetime.strptime(value, layout).replace(tzinfo=zone or UTC).timestamp()
        except ValueError:
            pass
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z").timestamp()


# Mirrors TestActivation, robfig/cron spec_test.go: is `time` an activation of `spec`?
ACTIVATION = [
    ("Mon Jul 9 15:00 2012", "0/15 * * * *", True),
    ("Mon Jul 9 15:45 2012", "0/15 * * * *", True),
    ("Mon Jul 9 15:40 2012", "0/15 * * * *", False),
    ("Mon Jul 9 15:05 2012", "5/15 * * * *", True),
    ("Mon Jul 9 15:20 2012", "5/15 * * * *", True),
    ("Mon Jul 9 15:50 2012", "5/15 * * * *", True),
    ("Sun Jul 15 15:00 2012", "0/15 * * Jul *", True),
    ("Sun Jul 15 15:00 2012", "0/15 * * Jun *", False),
    ("Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", True),
    ("Sun Jul 15 08:30 2012", "30 08 15 Jul ?", True),
    ("Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", False),
    ("Mon Jul 16 08:30 2012", "30 08 15 Jul ?", False),
    ("Mon Jul 9 15:00 2012", "@hourly", True),
    ("Mon Jul 9 15:04 2012", "@hourly", False),
    ("Mon Jul 9 15:00 2012", "@daily", False),
    ("Mon Jul 9 00:00 2012", "@daily", True),
    ("Mon Jul 9 00:00 2012", "@weekly", False),
    ("Sun Jul 8 00:00 2012", "@weekly", True),
    ("Sun Jul 8 01:00 2012", "@weekly", False),
    ("Sun Jul 8 00:00 2012", "@monthly", False),
    ("Sun Jul 1 00:00 2012", "@monthly", True),
    ("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", True),
    ("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", True),
    ("Wed Aug 1 00:00 2012", "* * 1,15 * Sun", True),
    ("Sun Jul 15 00:00 2012", "* * */10 * Sun", True),
    ("Sun Jul 15 00:00 2012", "* * * * Mon", False),
    ("Mon Jul 9 00:00 2012", "* * 1,15 * *", False),
    ("Sun Jul 15 00:00 2012", "* * 1,15 * *", True),
    ("Sun Jul 15 00:00 2012", "* * */2 * Sun", True),
]


@pytest.mark.parametrize(("time", "spec", "expected"), ACTIVATION, ids=[f"{s} on {t}" for t, s, _ in ACTIVATION])
def test_activation(time: str, spec: str, expected: bool) -> None:
    assert (parse_standard(spec).next(at(time) - 1) == at(time)) is expected


# Mirrors TestNext, robfig/cron spec_test.go (six-field specs with their `0` seconds dropped).
NEXT = [
    ("Mon Jul 9 14:45 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 14:59 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 14:59:59 2012", "0/15 * * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 15:45 2012", "20-35/15 * * * *", "Mon Jul 9 16:20 2012"),
    ("Mon Jul 9 23:46 2012", "*/15 * * * *", "Tue Jul 10 00:00 2012"),
    ("Mon Jul 9 23:45 2012", "20-35/15 * * * *", "Tue Jul 10 00:20 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 */5 Apr,Aug,Oct Mon", "Tue Aug 1 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 */5 Oct Mon", "Mon Oct 1 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 * Feb Mon", "Mon Feb 4 00:00 2013"),
    ("Mon Jul 9 23:35 2012", "0 0 * Feb Mon/2", "Fri Feb 1 00:00 2013"),
    ("Mon Dec 31 23:59:45 2012", "* * * * *", "Tue Jan 1 00:00:00 2013"),
    ("Mon Jul 9 23:35 2012", "0 0 29 Feb ?", "Mon Feb 29 00:00 2016"),
    ("2012-03-11T00:00:00-0500", "TZ=America/New_York 30 2 11 Mar ?", "2013-03-11T02:30:00-0400"),
    ("2012-03-11T00:00:00-0500", "TZ=America/New_York 0 * * * ?", "2012-03-11T01:00:00-0500"),
    ("2012-03-11T01:00:00-0500", "TZ=America/New_York 0 * * * ?", "2012-03-11T03:00:00-0400"),
    ("2012-03-11T03:00:00-0400", "TZ=America/New_York 0 * * * ?", "2012-03-11T04:00:00-0400"),
    ("2012-03-11T04:00:00-0400", "TZ=America/New_York 0 * * * ?", "2012-03-11T05:00:00-0400"),
    ("2012-03-11T00:00:00-0500", "CRON_TZ=America/New_York 0 * * * ?", "2012-03-11T01:00:00-0500"),
    ("2012-03-11T01:00:00-0500", "CRON_TZ=America/New_York 0 * * * ?", "2012-03-11T03:00:00-0400"),
    ("2012-03-11T03:00:00-0400", "CRON_TZ=America/New_York 0 * * * ?", "2012-03-11T04:00:00-0400"),
    ("2012-03-11T04:00:00-0400", "CRON_TZ=America/New_York 0 * * * ?", "2012-03-11T05:00:00-0400"),
    ("2012-03-11T00:00:00-0500", "TZ=America/New_York 0 1 * * ?", "2012-03-11T01:00:00-0500"),
    ("2012-03-11T01:00:00-0500", "TZ=America/New_York 0 1 * * ?", "2012-03-12T01:00:00-0400"),
    ("2012-03-11T00:00:00-0500", "TZ=America/New_York 0 2 * * ?", "2012-03-12T02:00:00-0400"),
    ("2012-11-04T00:00:00-0400", "TZ=America/New_York 30 2 04 Nov ?", "2012-11-04T02:30:00-0500"),
    ("2012-11-04T01:45:00-0400", "TZ=America/New_York 30 1 04 Nov ?", "2012-11-04T01:30:00-0500"),
    ("2012-11-04T00:00:00-0400", "TZ=America/New_York 0 * * * ?", "2012-11-04T01:00:00-0400"),
    ("2012-11-04T01:00:00-0400", "TZ=America/New_York 0 * * * ?", "2012-11-04T01:00:00-0500"),
    ("2012-11-04T01:00:00-0500", "TZ=America/New_York 0 * * * ?", "2012-11-04T02:00:00-0500"),
    ("2012-11-04T00:00:00-0400", "TZ=America/New_York 0 1 * * ?", "2012-11-04T01:00:00-0400"),
    ("2012-11-04T01:00:00-0400", "TZ=America/New_York 0 1 * * ?", "2012-11-04T01:00:00-0500"),
    ("2012-11-04T01:00:00-0500", "TZ=America/New_York 0 1 * * ?", "2012-11-05T01:00:00-0500"),
    ("2012-11-04T00:00:00-0400", "TZ=America/New_York 0 2 * * ?", "2012-11-04T02:00:00-0500"),
    ("2012-11-04T02:00:00-0500", "TZ=America/New_York 0 2 * * ?", "2012-11-05T02:00:00-0500"),
    ("2012-11-04T00:00:00-0400", "TZ=America/New_York 0 3 * * ?", "2012-11-04T03:00:00-0500"),
    ("2012-11-04T03:00:00-0500", "TZ=America/New_York 0 3 * * ?", "2012-11-05T03:00:00-0500"),
    ("Mon Jul 9 23:35 2012", "0 0 30 Feb ?", ""),
    ("Mon Jul 9 23:35 2012", "0 0 31 Apr ?", ""),
    ("TZ=America/New_York 2012-11-04T00:00:00-0400", "TZ=America/New_York 0 3 3 * ?", "2012-12-03T03:00:00-0500"),
    ("2018-10-17T05:00:00-0400", "TZ=America/Sao_Paulo 0 9 10 * ?", "2018-11-10T06:00:00-0500"),
    ("2018-02-14T05:00:00-0500", "TZ=America/Sao_Paulo 0 9 22 * ?", "2018-02-22T07:00:00-0500"),
    # TestNextWithTz: a zoneless schedule (UTC here) from times given with an offset
    ("2016-01-03T13:09:03+0530", "14 14 * * *", "2016-01-03T14:14:00+0000"),
    ("2016-01-03T04:09:03+0530", "14 14 * * ?", "2016-01-03T14:14:00+0000"),
    # ConstantDelaySchedule (constantdelay_test.go): @every keeps whole seconds from the given time
    ("Mon Jul 9 14:45 2012", "@every 15m", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 14:45 2012", "@every 1h30m", "Mon Jul 9 16:15 2012"),
    ("Mon Jul 9 14:45 2012", "@every 500ms", "Mon Jul 9 14:45:01 2012"),
]


@pytest.mark.parametrize(("time", "spec", "expected"), NEXT, ids=[f"{s} after {t}" for t, s, _ in NEXT])
def test_next(time: str, spec: str, expected: str) -> None:
    got = parse_standard(spec).next(at(time))
    assert got == (at(expected) if expected else None)


# Mirrors TestErrors (spec_test.go) and TestParseScheduleErrors (parser_test.go), with robfig's messages.
ERRORS = [
    ("xyz", "expected exactly 5 fields, found 1: [xyz]"),
    ("60 0 * * *", "end of range (60) above maximum (59): 60"),
    ("0 60 * * *", "end of range (60) above maximum (23): 60"),
    ("0 0 * * XYZ", 'failed to parse int from XYZ: strconv.Atoi: parsing "XYZ": invalid syntax'),
    ("* 5 j * *", 'failed to parse int from j: strconv.Atoi: parsing "j": invalid syntax'),
    ("@every Xm", 'failed to parse duration @every Xm: time: invalid duration "Xm"'),
    ("@unrecognized", "unrecognized descriptor: @unrecognized"),
    ("* * 1,3 * 0-1/", 'failed to parse int from : strconv.Atoi: parsing "": invalid syntax'),
    ("* * * * 5-3", "beginning of range (5) beyond end of range (3): 5-3"),
    ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("1/2/3 * * * *", "too many slashes: 1/2/3"),
    ("", "empty spec string"),
    ("TZ=Nowhere/Land 0 * * * *", "provided bad location Nowhere/Land: unknown time zone Nowhere/Land"),
]


@pytest.mark.parametrize(("spec", "message"), ERRORS, ids=[s or "empty" for s, _ in ERRORS])
def test_errors(spec: str, message: str) -> None:
    with pytest.raises(CronError) as err:
        parse_standard(spec)
    assert str(err.value) == message
