"""What the CronJob controller decides from a CronJob, its Jobs and the time: a port of pkg/controller/cronjob/utils.go.

Pure functions over wire dicts and Unix seconds, so upstream's tables (utils_test.go) test them directly:
when the most recent missed start was (`most_recent_schedule_time`, counting missed starts roughly, as
upstream, to tell "a few" from "too many" without walking decades of them), when to look again
(`next_schedule_time_duration`, 100 ms past the next start), and the Job a scheduled time makes.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, Final

from kubelite.api.cron_schedule import Schedule, load_location
from kubelite.api.errors import ApiError
from kubelite.clock import parse_rfc3339
from kubelite.controllers.ownership import controller_of, controller_ref

Obj = dict[str, Any]
NEXT_SCHEDULE_DELTA: Final = 0.1  # nextScheduleDelta: requeue a little after the start, against clock skew
SCHEDULED_TIMESTAMP: Final = "batch.kubernetes.io/cronjob-scheduled-timestamp"
TOO_MANY_MISSED: Final = 100


class Missed(enum.Enum):
    """missedSchedulesType."""
    NONE = "none"
    FEW = "few"
    MANY = "many"


def in_active_list(cj: Obj, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in (cj.get("status") or {}).get("active") or [])


def in_active_list_by_name(cj: Obj, namespace: str, name: str) -> bool:
    return any(ref.get("name") == name and ref.get("namespace") == namespace
               for ref in (cj.get("status") or {}).get("active") or [])


def delete_from_active_list(cj: Obj, uid: str) -> None:
    status = cj.setdefault("status", {})
    status["active"] = [ref for ref in status.get("active") or [] if ref.get("uid") != uid]


def finished_condition(job: Obj) -> str | None:
    """getFinishedStatus: "Complete" or "Failed" when that condition is True, else None."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None


def most_recent_schedule_time(cj: Obj, now: float, schedule: Schedule, include_starting_deadline: bool
                              ) -> tuple[float, float | None, Missed, str | None]:
    """mostRecentScheduleTime: the last schedule time (or creation time), the most recent start at or before `now`
    (None if there is none), how many were missed, and an error for a schedule that never fires twice (robfig
    accepts `59 23 31 2 *`)."""
    status = cj.get("status") or {}
    earliest = parse_rfc3339(status.get("lastScheduleTime") or cj["metadata"]["creationTimestamp"])
    deadline = (cj.get("spec") or {}).get("startingDeadlineSeconds")
    if include_starting_deadline and deadline is not None:
        earliest = max(earliest, now - deadline)  # the controller schedules nothing before this
    t1 = schedule.next(earliest)
    t2 = schedule.next(t1) if t1 is not None else None
    if t1 is not None and now < t1:
        return earliest, None, Missed.NONE, None
    if t1 is not None and t2 is not None and now < t2:
        return earliest, t1, Missed.NONE, None
    between = round(t2 - t1) if t1 is not None and t2 is not None else 0
    if between < 1 or t1 is None:
        return earliest, None, Missed.NONE, "time difference between two schedules is less than 1 second"
    # A rough count of the starts between t1 and now; the walk starts one interval before the estimate, so an
    # irregular schedule (`30 6-16/4 * * 1-5`) still lands on its true most recent start.
    missed = int(now - t1) // between + 1
    most_recent: float | None = None
    t = schedule.next(t1 + (missed - 2) * between)
    while t is not None and t <= now:
        most_recent = t
        t = schedule.next(t)
    kind = Missed.MANY if missed > TOO_MANY_MISSED else Missed.FEW if missed > 0 else Missed.NONE
    return earliest, most_recent, kind, None


def next_schedule_time_duration(cj: Obj, now: float, schedule: Schedule) -> float:
    """nextScheduleTimeDuration: seconds until 100 ms after the next start."""
    earliest, most_recent, missed, err = most_recent_schedule_time(cj, now, schedule, False)
    if err is not None:
        most_recent = now  # requeue at the next slot from now all the same
    elif most_recent is None:
        most_recent = earliest if missed is Missed.NONE else now
    following = schedule.next(most_recent)
    if following is None:  # robfig's zero time: a requeue in the past, i.e. at once
        return 0.0
    return following + NEXT_SCHEDULE_DELTA - now


def next_schedule_time(cj: Obj, now: float, schedule: Schedule) -> tuple[float | None, Missed, str | None]:
    """nextScheduleTime: the start to act on now (None if none is due), how many were missed (the caller records
    TooManyMissedTimes for MANY), and the schedule's error."""
    _, most_recent, missed, err = most_recent_schedule_time(cj, now, schedule, True)
    if most_recent is None or most_recent > now:
        return None, Missed.NONE, err
    return most_recent, missed, err


def is_namespace_terminating(exc: ApiError) -> bool:
    """errors.HasStatusCause(err, NamespaceTerminatingCause), or kubelite's message for it."""
    causes = (exc.details or {}).get("causes") or []
    return any(c.get("type") == "NamespaceTerminating" for c in causes) or (
        exc.code == 403 and "being terminated" in exc.message)


def controlled_by(job: Obj, cj: Obj) -> bool:
    """metav1.IsControlledBy: `job`'s controller reference carries `cj`'s uid."""
    ref = controller_of(job)
    return ref is not None and ref.get("uid") == cj["metadata"].get("uid")


def job_name(cj: Obj, scheduled: float) -> str:
    """getJobName: `<cronjob>-<scheduled time in minutes since the epoch>`, so one start makes one Job, even twice."""
    return f"{cj['metadata']['name']}-{int(scheduled) // 60}"


def _rfc3339_in(ts: float, zone: str) -> str:
    """time.Format(time.RFC3339) in `zone`: `Z` for a zero offset, else the offset."""
    text = datetime.fromtimestamp(int(ts), load_location(zone)).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def job_from_template(cj: Obj, scheduled: float) -> Obj:
    """getJobFromTemplate2: the template's labels and annotations, the scheduled time (in the CronJob's zone) as an
    annotation, and the CronJob as controller. CronError if the timeZone is unknown."""
    template = (cj.get("spec") or {}).get("jobTemplate") or {}
    meta = template.get("metadata") or {}
    annotations = {**(meta.get("annotations") or {}),
                   SCHEDULED_TIMESTAMP: _rfc3339_in(scheduled, cj["spec"].get("timeZone") or "")}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name(cj, scheduled), "namespace": cj["metadata"].get("namespace", ""),
                         "labels": dict(meta.get("labels") or {}), "annotations": annotations,
                         "ownerReferences": [controller_ref(cj, "batch/v1", "CronJob")]},
            "spec": template.get("spec") or {}}


def job_ref(job: Obj) -> Obj:
    """ref.GetReference for a Job, as status.active holds it."""
    meta = job["metadata"]
    return {"kind": "Job", "namespace": meta.get("namespace", ""), "name": meta["name"], "uid": meta.get("uid", ""),
            "apiVersion": "batch/v1", "resourceVersion": meta.get("resourceVersion", "")}


def by_job_start_time(job: Obj) -> tuple[int, float, str]:
    """byJobStartTime as a sort key: started Jobs first, oldest first, names breaking ties."""
    start = (job.get("status") or {}).get("startTime")
    return (0, parse_rfc3339(start), job["metadata"]["name"]) if start else (1, 0.0, job["metadata"]["name"])
