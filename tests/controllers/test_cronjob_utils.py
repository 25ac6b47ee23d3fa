"""The CronJob controller's time arithmetic and Job making (kubelite/controllers/cronjob_utils.py), against
upstream's tables in pkg/controller/cronjob/utils_test.go."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelite.api.cron_schedule import parse_standard
from kubelite.clock import parse_rfc3339, rfc3339
from kubelite.controllers.cronjob_utils import (
    NEXT_SCHEDULE_DELTA,
    SCHEDULED_TIMESTAMP,
    Missed,
    by_job_start_time,
    job_from_template,
    most_recent_schedule_time,
    next_schedule_time,
    next_schedule_time_duration,
)

Obj = dict[str, Any]
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
TOP_OF_THE_HOUR = parse_rfc3339("2016-05-19T10:00:00Z")


def after_top(seconds: float) -> float:
    """deltaTimeAfterTopOfTheHour."""
    return TOP_OF_THE_HOUR + seconds


def cronjob(schedule: str, created: float, last: float | None = None, deadline: int | None = None) -> Obj:
    spec: Obj = {"schedule": schedule, "concurrencyPolicy": "Allow", "jobTemplate": {}}
    if deadline is not None:
        spec["startingDeadlineSeconds"] = deadline
    status = {"lastScheduleTime": rfc3339(last)} if last is not None else {}
    return {"metadata": {"name": "mycronjob", "namespace": "default", "uid": "1a2b3c",
                         "creationTimestamp": rfc3339(created)}, "spec": spec, "status": status}


@dataclass(frozen=True)
class RecentCase:
    name: str
    cj: Obj
    now: float
    earliest: float
    recent: float | None
    missed: Missed = Missed.NONE
    include_sds: bool = False
    want_err: bool = False


# Mirrors TestMostRecentScheduleTime, pkg/controller/cronjob/utils_test.go
RECENT = [
    RecentCase("now before next schedule", cronjob("0 * * * *", TOP_OF_THE_HOUR), after_top(30), TOP_OF_THE_HOUR,
               None),
    RecentCase("now just after next schedule", cronjob("0 * * * *", TOP_OF_THE_HOUR), after_top(61 * MINUTE),
               TOP_OF_THE_HOUR, after_top(60 * MINUTE)),
    RecentCase("missed 5 schedules", cronjob("0 * * * *", after_top(10)), after_top(301 * MINUTE), after_top(10),
               after_top(300 * MINUTE), Missed.FEW),
    RecentCase("complex schedule", cronjob("30 6-16/4 * * 1-5", TOP_OF_THE_HOUR, after_top(30 * MINUTE)),
               after_top(DAY + 31 * MINUTE), after_top(30 * MINUTE), after_top(DAY + 30 * MINUTE), Missed.FEW),
    RecentCase("another complex schedule", cronjob("30 10,11,12 * * 1-5", TOP_OF_THE_HOUR, after_top(30 * MINUTE)),
               after_top(30 * HOUR + 30 * MINUTE), after_top(30 * MINUTE), None, Missed.FEW),
    RecentCase("complex schedule with longer diff between executions",
               cronjob("30 6-16/4 * * 1-5", TOP_OF_THE_HOUR, after_top(30 * MINUTE)),
               after_top(96 * HOUR + 31 * MINUTE), after_top(30 * MINUTE), after_top(96 * HOUR + 30 * MINUTE),
               Missed.FEW),
    RecentCase("complex schedule with shorter diff between executions", cronjob("30 6-16/4 * * 1-5", TOP_OF_THE_HOUR),
               after_top(DAY + 31 * MINUTE), TOP_OF_THE_HOUR, after_top(DAY + 30 * MINUTE), Missed.FEW),
    RecentCase("@every schedule", cronjob("@every 1h", after_top(-59 * MINUTE), after_top(MINUTE), deadline=10),
               after_top(7 * DAY), after_top(MINUTE), after_top(6 * DAY + 23 * HOUR + MINUTE), Missed.MANY),
    RecentCase("rogue cronjob", cronjob("59 23 31 2 *", after_top(10)), after_top(HOUR), 0.0, None, want_err=True),
    RecentCase("earliestTime being CreationTimestamp and LastScheduleTime",
               cronjob("0 * * * *", TOP_OF_THE_HOUR, TOP_OF_THE_HOUR), after_top(30), TOP_OF_THE_HOUR, None),
    RecentCase("earliestTime being LastScheduleTime", cronjob("*/5 * * * *", TOP_OF_THE_HOUR, after_top(30 * MINUTE)),
               after_top(31 * MINUTE), after_top(30 * MINUTE), None),
    RecentCase("earliestTime being LastScheduleTime (within StartingDeadlineSeconds)",
               cronjob("*/5 * * * *", TOP_OF_THE_HOUR, after_top(30 * MINUTE), deadline=60),
               after_top(31 * MINUTE), after_top(30 * MINUTE), None),
    RecentCase("earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)",
               cronjob("*/5 * * * *", TOP_OF_THE_HOUR, after_top(30 * MINUTE), deadline=60),
               after_top(32 * MINUTE), after_top(31 * MINUTE), None, include_sds=True),
]


@pytest.mark.parametrize("case", RECENT, ids=lambda c: c.name)
def test_most_recent_schedule_time(case: RecentCase) -> None:
    schedule = parse_standard(case.cj["spec"]["schedule"])
    earliest, recent, missed, err = most_recent_schedule_time(case.cj, case.now, schedule, case.include_sds)
    if case.want_err:
        assert err is not None
        return
    assert (earliest, recent, missed, err) == (case.earliest, case.recent, case.missed, None)


# Mirrors TestNextScheduleTimeDuration
DURATIONS = [
    ("complex schedule skipping weekend", cronjob("30 6-16/4 * * 1-5", TOP_OF_THE_HOUR, after_top(30 * MINUTE)),
     after_top(DAY + 31 * MINUTE), 3 * HOUR + 59 * MINUTE),
    ("another complex schedule skipping weekend",
     cronjob("30 10,11,12 * * 1-5", TOP_OF_THE_HOUR, after_top(30 * MINUTE)), after_top(30 * HOUR + 30 * MINUTE),
     66 * HOUR),
    ("once a week cronjob, missed two runs", cronjob("0 12 * * 4", TOP_OF_THE_HOUR, after_top(2 * HOUR)),
     after_top(19 * DAY + HOUR + 30 * MINUTE), 48 * HOUR + 30 * MINUTE),
    ("no previous run of a cronjob", cronjob("0 12 * * 5", TOP_OF_THE_HOUR), after_top(6 * HOUR), 20 * HOUR),
]


@pytest.mark.parametrize(("name", "cj", "now", "expected"), DURATIONS, ids=[d[0] for d in DURATIONS])
def test_next_schedule_time_duration(name: str, cj: Obj, now: float, expected: float) -> None:
    got = next_schedule_time_duration(cj, now, parse_standard(cj["spec"]["schedule"]))
    assert got == pytest.approx(expected + NEXT_SCHEDULE_DELTA)


@dataclass(frozen=True)
class NextCase:
    name: str
    created: float
    last: float | None
    now: float
    expected: float | None
    deadline: int | None = None
    schedule: str = "0 * * * ?"
    want_err: bool = False


T1, T2 = TOP_OF_THE_HOUR, after_top(HOUR)
# Mirrors TestNextScheduleTime's numbered cases
NEXT = [
    NextCase("Case 1: no known start times, and none needed yet", T1 - 10 * MINUTE, None, T1 - 7 * MINUTE, None),
    NextCase("Case 2: no known start times, and one needed", T1 - 10 * MINUTE, None, T1 + 2, T1),
    NextCase("Case 3: known LastScheduleTime, no start needed", T1 - 10 * MINUTE, T1, T1 + 2 * MINUTE, None),
    NextCase("Case 4: known LastScheduleTime, a start needed", T1 - 10 * MINUTE, T1, T2 + 5 * MINUTE, T2),
    NextCase("Case 5: known LastScheduleTime, two starts needed", T1 - 2 * HOUR, T1 - HOUR, T2 + 5 * MINUTE, T2),
    NextCase("Case 6: now is way way ahead of last start time, and there is no deadline", T1 - 2 * HOUR, T1 - HOUR,
             T2 + 10 * DAY, T2 + 10 * DAY),
    NextCase("Case 7: now is way way ahead of last start time, but there is a short deadline", T1 - 2 * HOUR,
             T1 - HOUR, T2 + 10 * DAY, T2 + 10 * DAY, deadline=2 * 60 * 60),
    NextCase("Case 8: ensure the error from mostRecentScheduleTime gets populated up", T1 + 10, None, T2, None,
             schedule="59 23 31 2 *", want_err=True),
]


@pytest.mark.parametrize("case", NEXT, ids=lambda c: c.name)
def test_next_schedule_time(case: NextCase) -> None:
    cj = cronjob(case.schedule, case.created, case.last, case.deadline)
    scheduled, _, err = next_schedule_time(cj, case.now, parse_standard(case.schedule))
    assert scheduled == case.expected
    assert (err is not None) is case.want_err


def _job(name: str, start: str | None) -> Obj:
    return {"metadata": {"name": name}, "status": {"startTime": start} if start else {}}


NOW, LATER = "2018-01-01T02:03:04Z", "2019-01-01T02:03:04Z"
# Mirrors TestByJobStartTime
BY_START = [
    ("both have nil start times", [_job("b", None), _job("a", None)], ["a", "b"]),
    ("only the first has a nil start time", [_job("a", None), _job("b", NOW)], ["b", "a"]),
    ("only the second has a nil start time", [_job("a", NOW), _job("b", None)], ["a", "b"]),
    ("both have non-nil, equal start time", [_job("b", NOW), _job("a", NOW)], ["a", "b"]),
    ("both have non-nil, different start time", [_job("a", LATER), _job("b", NOW)], ["b", "a"]),
]


@pytest.mark.parametrize(("name", "jobs", "expected"), BY_START, ids=[b[0] for b in BY_START])
def test_by_job_start_time(name: str, jobs: list[Obj], expected: list[str]) -> None:
    assert [j["metadata"]["name"] for j in sorted(jobs, key=by_job_start_time)] == expected


@dataclass(frozen=True)
class TemplateCase:
    name: str
    time_zone: str | None
    annotations: dict[str, str] = field(default_factory=dict)
    scheduled_annotation: str = ""


# Mirrors TestGetJobFromTemplate2
TEMPLATES = [
    TemplateCase("UTC timezone and one annotation", "UTC", {"x": "y"}, "2016-05-19T10:00:00Z"),
    TemplateCase("nil timezone and one annotation", None, {"x": "y"}, "2016-05-19T10:00:00Z"),
    TemplateCase("correct timezone and multiple annotation", "Europe/Rome", {"x": "y", "z": "x"},
                 "2016-05-19T12:00:00+02:00"),
]


@pytest.mark.parametrize("case", TEMPLATES, ids=lambda c: c.name)
def test_job_from_template(case: TemplateCase) -> None:
    cj = cronjob("* * * * ?", TOP_OF_THE_HOUR)
    cj["spec"]["jobTemplate"] = {"metadata": {"labels": {"a": "b"}, "annotations": case.annotations},
                                 "spec": {"activeDeadlineSeconds": 1, "manualSelector": False,
                                          "template": {"metadata": {"labels": {"foo": "bar"}},
                                                       "spec": {"containers": [{"image": "foo/bar"}]}}}}
    if case.time_zone is not None:
        cj["spec"]["timeZone"] = case.time_zone
    job = job_from_template(cj, TOP_OF_THE_HOUR)
    meta = job["metadata"]
    assert meta["name"] == f"mycronjob-{int(TOP_OF_THE_HOUR) // 60}"
    assert meta["labels"] == {"a": "b"}
    assert meta["annotations"] == {**case.annotations, SCHEDULED_TIMESTAMP: case.scheduled_annotation}
    assert meta["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "mycronjob",
                                        "uid": "1a2b3c", "controller": True, "blockOwnerDeletion": True}]
    assert job["spec"] == cj["spec"]["jobTemplate"]["spec"]
