"""The CronJob controller: upstream's sync table against recording fakes of its API seams, then the real
controller against a real API server on a fake clock."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.client.informer import Key
from kubelite.clock import FakeClock, RealClock, parse_rfc3339, rfc3339
from kubelite.controllers.cronjob import CronJobController, CronJobSyncer
from kubelite.controllers.cronjob_utils import NEXT_SCHEDULE_DELTA, SCHEDULED_TIMESTAMP, job_from_template, job_ref
from kubelite.store.sqlite import SQLiteStore

Obj = dict[str, Any]
MINUTE, HOUR = 60.0, 3600.0
SHORT_DEAD, MEDIUM_DEAD, LONG_DEAD = 10, 2 * 60 * 60, 1000000
ERROR_SCHEDULE, ON_THE_HOUR, EVERY_HOUR = "obvious error schedule", "0 * * * ?", "@every 1h"
NEW_YORK = "America/New_York"


def at(text: str) -> float:
    return parse_rfc3339(text)


JUST_AFTER_THE_PRIOR_HOUR = at("2016-05-19T09:01:00Z")
JUST_BEFORE_THE_PRIOR_HOUR = at("2016-05-19T08:59:00Z")
TOP_OF_THE_HOUR = at("2016-05-19T10:00:00Z")
JUST_AFTER_THE_HOUR = at("2016-05-19T10:01:00Z")
JUST_BEFORE_THE_HOUR = at("2016-05-19T09:59:00Z")
JUST_BEFORE_THE_NEXT_HOUR = at("2016-05-19T10:59:00Z")
WEEK_AFTER_THE_HOUR = at("2016-05-26T10:00:00Z")


def api_error(code: int, reason: str, message: str = "", causes: list[Obj] | None = None) -> ApiError:
    return ApiError(code, reason, message, {"causes": causes} if causes else {})


class FakeJobControl:
    """fakeJobControl: `get_job` answers `job` (or `err`), creations and deletions are recorded."""

    def __init__(self, job: Obj | None = None, create_err: ApiError | None = None,
                 err: ApiError | None = None) -> None:
        self.job, self.create_err, self.err = job, create_err, err
        self.created: list[Obj] = []
        self.deleted: list[str] = []

    async def get_job(self, namespace: str, name: str) -> Obj:
        if self.err is not None:
            raise self.err
        if self.job is None:
            raise api_error(404, "NotFound", f'jobs.batch "{name}" not found')
        return copy.deepcopy(self.job)

    async def create_job(self, namespace: str, job: Obj) -> Obj:
        if self.create_err is not None:
            raise self.create_err
        out = copy.deepcopy(job)
        out["metadata"].update(uid="test-uid", resourceVersion="1")
        self.created.append(out)
        return out

    async def delete_job(self, namespace: str, name: str) -> None:
        if self.err is not None:
            raise self.err
        self.deleted.append(name)


class FakeCronJobControl:
    def __init__(self, cronjob: Obj | None = None) -> None:
        self.cronjob = cronjob
        self.updates: list[Obj] = []

    async def get_cronjob(self, namespace: str, name: str) -> Obj:
        if self.cronjob is None:
            raise api_error(404, "NotFound")
        return copy.deepcopy(self.cronjob)

    async def update_status(self, cj: Obj) -> Obj:
        self.updates.append(copy.deepcopy(cj))
        return cj


@dataclass
class Recorder:
    events: list[tuple[str, str, str]] = field(default_factory=list)

    def __call__(self, cj: Obj, event_type: str, reason: str, message: str) -> None:
        self.events.append((event_type, reason, message))


def cronjob() -> Obj:
    """cronJob() in cronjob_controllerv2_test.go."""
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "mycronjob", "namespace": "snazzycats", "uid": "1a2b3c",
                         "creationTimestamp": rfc3339(JUST_BEFORE_THE_HOUR)},
            "spec": {"schedule": "* * * * ?", "concurrencyPolicy": "Allow",
                     "jobTemplate": {"metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}},
                                     "spec": {"parallelism": 1, "completions": 1,
                                              "template": {"metadata": {"labels": {"foo": "bar"}},
                                                           "spec": {"containers": [{"image": "foo/bar"}]}}}}},
            "status": {}}


@dataclass(frozen=True)
class Case:
    name: str
    concurrency_policy: str = "Allow"
    suspend: bool = False
    schedule: str = ON_THE_HOUR
    time_zone: str | None = None
    deadline: int | None = None
    ran_previously: bool = False
    still_active: bool = False
    cronjob_creation_time: float | None = None
    job_creation_time: float = JUST_AFTER_THE_PRIOR_HOUR
    last_schedule_time: float | None = None
    now: float = JUST_BEFORE_THE_HOUR
    job_create_error: ApiError | None = None
    job_get_err: ApiError | None = None
    expect_create: bool = False
    expect_delete: bool = False
    expect_active: int = 0
    expected_warnings: int = 0
    expect_err: bool = False
    expected_requeue: float | None = None  # seconds, without nextScheduleDelta
    expect_update_status: bool = False
    job_still_not_found_in_lister: bool = False
    job_present_in_cj_active_status: bool = True


def _variants(base: str, policies: str = "AFR", **kw: Any) -> list[Case]:
    """The `, A` / `, F` / `, R` triplets of the table: one case per concurrency policy (upstream spells two of
    its Forbid cases `, f`)."""
    names = {"A": "Allow", "F": "Forbid", "R": "Replace"}
    return [Case(f"{base}, {p}", concurrency_policy=names[p.upper()], **kw) for p in policies]


ALREADY_EXISTS = api_error(409, "AlreadyExists", 'jobs.batch "" already exists')
TERMINATING = api_error(403, "Forbidden", "namespace default is being terminated",
                        [{"type": "NamespaceTerminating", "message": "namespace default is being terminated",
                          "field": "metadata.namespace"}])
NOT_TIME = MINUTE
IS_TIME = HOUR - MINUTE
RAN, ACTIVE = {"ran_previously": True}, {"ran_previously": True, "still_active": True}
CREATED = {"expect_create": True, "expect_active": 1, "expect_update_status": True}
IS = {"now": JUST_AFTER_THE_HOUR}
LONG_OVERDUE = {**RAN, "now": WEEK_AFTER_THE_HOUR, "expected_requeue": HOUR, **CREATED}
STARTED_MISSING = {**ACTIVE, "deadline": LONG_DEAD, "job_creation_time": TOP_OF_THE_HOUR + 0.1,
                   "now": JUST_AFTER_THE_HOUR + 0.1, "expect_active": 1, "expected_requeue": HOUR - MINUTE - 0.1}
EVERY = {"schedule": EVERY_HOUR, "cronjob_creation_time": JUST_BEFORE_THE_PRIOR_HOUR,
         "job_creation_time": JUST_BEFORE_THE_PRIOR_HOUR}

# Mirrors TestControllerV2SyncCronJob, pkg/controller/cronjob/cronjob_controllerv2_test.go. Upstream checks
# expectActive only through status updates its syncCronJob never makes; here the Active count is checked on the
# CronJob the sync leaves, so the cases whose upstream value is stale say what the sync does (marked `# here`).
CASES = [
    Case("never ran, not valid schedule, A", schedule=ERROR_SCHEDULE, expected_warnings=1),
    Case("never ran, not valid schedule, F", "Forbid", schedule=ERROR_SCHEDULE, expected_warnings=1),
    Case("never ran, not valid schedule, R", "Forbid", schedule=ERROR_SCHEDULE, expected_warnings=1),
    Case("never ran, not valid time zone", time_zone="bad timezone", expected_warnings=1),
    *_variants("never ran, not time", expected_requeue=NOT_TIME),
    Case("never ran, not time in zone", time_zone=NEW_YORK, expected_requeue=NOT_TIME),
    *_variants("never ran, is time", **IS, expected_requeue=IS_TIME, **CREATED),
    Case("never ran, is time in zone, but time zone disabled", time_zone=NEW_YORK, **IS, expected_requeue=IS_TIME,
         **CREATED),
    Case("never ran, is time in zone", time_zone=NEW_YORK, **IS, expected_requeue=IS_TIME, **CREATED),
    Case("never ran, is time in zone, but TZ is also set in schedule", schedule="TZ=UTC " + ON_THE_HOUR,
         time_zone=NEW_YORK, **IS, expected_warnings=1, expected_requeue=IS_TIME, **CREATED),
    Case("never ran, is time, suspended", suspend=True, **IS),
    Case("never ran, is time, past deadline", deadline=SHORT_DEAD, now=JUST_AFTER_THE_HOUR + MINUTE * (SHORT_DEAD + 1),
         expected_requeue=HOUR - MINUTE - MINUTE * (SHORT_DEAD + 1)),
    Case("never ran, is time, not past deadline", deadline=LONG_DEAD, **IS, expected_requeue=IS_TIME, **CREATED),
    *_variants("prev ran but done, not time", **RAN, expected_requeue=NOT_TIME, expect_update_status=True),
    Case("prev ran but done, is time, A", **RAN, **IS, expected_requeue=IS_TIME, **CREATED),
    Case("prev ran but done, is time, create job failed, A", **RAN, **IS, job_create_error=ALREADY_EXISTS,
         expect_update_status=True, expect_active=1),  # here: the existing Job is listed
    Case("prev ran but done, is time, job not present in CJ active status, create job failed, A", **RAN, **IS,
         job_create_error=ALREADY_EXISTS, expect_update_status=True, expect_active=1,  # here
         job_present_in_cj_active_status=False),
    *_variants("prev ran but done, is time", "FR", **RAN, **IS, expected_requeue=IS_TIME, **CREATED),
    Case("prev ran but done, is time, suspended", suspend=True, **RAN, **IS, expect_update_status=True),
    Case("prev ran but done, is time, past deadline", deadline=SHORT_DEAD, **RAN, **IS, expected_requeue=IS_TIME,
         expect_update_status=True),
    Case("prev ran but done, is time, not past deadline", deadline=LONG_DEAD, **RAN, **IS, expected_requeue=IS_TIME,
         **CREATED),
    *_variants("still active, not time", **ACTIVE, expect_active=1, expected_requeue=NOT_TIME),
    Case("still active, is time, A", **ACTIVE, **IS, expected_requeue=IS_TIME,
         **{**CREATED, "expect_active": 2}),
    Case("still active, is time, F", "Forbid", **ACTIVE, **IS, expect_active=1, expected_requeue=IS_TIME),
    Case("still active, is time, R", "Replace", **ACTIVE, **IS, expect_delete=True, expected_requeue=IS_TIME,
         **CREATED),
    Case("still active, is time, get job failed, R", "Replace", **ACTIVE, **IS,
         job_get_err=api_error(400, "BadRequest", "request is invalid"), expect_active=1, expected_warnings=1,
         expect_err=True),
    Case("still active, is time, suspended", suspend=True, **ACTIVE, **IS, expect_active=1),
    Case("still active, is time, past deadline", deadline=SHORT_DEAD, **ACTIVE, **IS, expect_active=1,
         expected_requeue=IS_TIME),
    Case("still active, is time, not past deadline", deadline=LONG_DEAD, **ACTIVE, **IS, expected_requeue=IS_TIME,
         **{**CREATED, "expect_active": 2}),
    *_variants("prev ran but done, long overdue, not past deadline", "ARF", deadline=LONG_DEAD, expected_warnings=1,
               **LONG_OVERDUE),
    *_variants("prev ran but done, long overdue, no deadline", "ARF", expected_warnings=1, **LONG_OVERDUE),
    *_variants("prev ran but done, long overdue, past medium deadline", "ARF", deadline=MEDIUM_DEAD, **LONG_OVERDUE),
    *_variants("prev ran but done, long overdue, past short deadline", "ARF", deadline=SHORT_DEAD, **LONG_OVERDUE),
    Case("this ran but done, time drifted back, F", "Forbid", **RAN, job_creation_time=JUST_AFTER_THE_HOUR,
         job_create_error=ALREADY_EXISTS, expected_requeue=NOT_TIME, expect_update_status=True,
         job_present_in_cj_active_status=False),
    *_variants("this started but went missing, not past deadline", "AfR", **STARTED_MISSING,
               job_still_not_found_in_lister=True),
    *_variants("this started but is not present in cronjob active list, not past deadline", "AfR", **STARTED_MISSING,
               job_present_in_cj_active_status=False),
    Case("with @every schedule, never ran, not time", schedule=EVERY_HOUR, cronjob_creation_time=JUST_BEFORE_THE_HOUR,
         job_creation_time=JUST_BEFORE_THE_HOUR, now=TOP_OF_THE_HOUR, expected_requeue=IS_TIME),
    Case("with @every schedule, never ran, is time", **EVERY, expected_requeue=HOUR, **CREATED),
    Case("with @every schedule, never ran, is time, past deadline", **EVERY, deadline=SHORT_DEAD,
         now=JUST_BEFORE_THE_HOUR + SHORT_DEAD + 1, expected_requeue=HOUR - (SHORT_DEAD + 1)),
    Case("with @every schedule, never ran, is time, not past deadline", **EVERY, deadline=LONG_DEAD,
         now=JUST_BEFORE_THE_HOUR + SHORT_DEAD - 1, expected_requeue=HOUR - (SHORT_DEAD - 1), **CREATED),
    Case("with @every schedule, prev ran but done, not time", **EVERY, **RAN, last_schedule_time=JUST_BEFORE_THE_HOUR,
         now=TOP_OF_THE_HOUR, expected_requeue=IS_TIME, expect_update_status=True),
    Case("with @every schedule, prev ran but done, is time", **EVERY, **RAN, last_schedule_time=JUST_BEFORE_THE_HOUR,
         now=TOP_OF_THE_HOUR + HOUR, expected_requeue=IS_TIME, **CREATED),
    Case("with @every schedule, prev ran but done, is time, past deadline", **EVERY, **RAN, deadline=SHORT_DEAD,
         last_schedule_time=JUST_BEFORE_THE_HOUR, now=JUST_BEFORE_THE_NEXT_HOUR + SHORT_DEAD + 1,
         expected_requeue=HOUR - (SHORT_DEAD + 1), expect_update_status=True),
    Case("with @every schedule, still active, not time", schedule=EVERY_HOUR, **ACTIVE,
         cronjob_creation_time=JUST_BEFORE_THE_PRIOR_HOUR, job_creation_time=JUST_BEFORE_THE_HOUR,
         last_schedule_time=JUST_BEFORE_THE_HOUR, now=TOP_OF_THE_HOUR, expect_active=1, expected_requeue=IS_TIME),
    Case("with @every schedule, still active, is time", **EVERY, **ACTIVE,
         last_schedule_time=JUST_BEFORE_THE_PRIOR_HOUR, now=JUST_AFTER_THE_HOUR, expected_requeue=HOUR - 2 * MINUTE,
         **{**CREATED, "expect_active": 2}),
    Case("with @every schedule, still active, is time, past deadline", schedule=EVERY_HOUR, **ACTIVE,
         deadline=SHORT_DEAD, cronjob_creation_time=JUST_BEFORE_THE_PRIOR_HOUR, job_creation_time=JUST_BEFORE_THE_HOUR,
         last_schedule_time=JUST_BEFORE_THE_HOUR, now=JUST_BEFORE_THE_NEXT_HOUR + SHORT_DEAD + 1, expect_active=1,
         expected_requeue=HOUR - (SHORT_DEAD + 1)),
    Case("with @every schedule, still active, is time, not past deadline", schedule=EVERY_HOUR, **ACTIVE,
         deadline=LONG_DEAD, cronjob_creation_time=JUST_BEFORE_THE_PRIOR_HOUR, job_creation_time=JUST_BEFORE_THE_HOUR,
         last_schedule_time=JUST_BEFORE_THE_HOUR, now=JUST_BEFORE_THE_NEXT_HOUR + SHORT_DEAD - 1,
         expected_requeue=HOUR - (SHORT_DEAD - 1), **{**CREATED, "expect_active": 2}),
    Case("with @every schedule, prev ran but done, long overdue, no deadline", schedule=EVERY_HOUR, **RAN,
         cronjob_creation_time=JUST_AFTER_THE_PRIOR_HOUR, last_schedule_time=JUST_AFTER_THE_HOUR,
         now=WEEK_AFTER_THE_HOUR, expected_warnings=1, expected_requeue=MINUTE, **CREATED),
    Case("with @every schedule, prev ran but done, long overdue, past deadline", schedule=EVERY_HOUR, **RAN,
         deadline=SHORT_DEAD, cronjob_creation_time=JUST_AFTER_THE_PRIOR_HOUR, last_schedule_time=JUST_AFTER_THE_HOUR,
         now=WEEK_AFTER_THE_HOUR + MINUTE + SHORT_DEAD + 1, expected_requeue=HOUR - (SHORT_DEAD + 1),
         expect_update_status=True),
    Case("do nothing if the namespace is terminating", **ACTIVE, **IS, job_create_error=TERMINATING,
         expect_active=1, expect_err=True, job_present_in_cj_active_status=False),  # here: the fresh copy lists it
]


def _setup(case: Case) -> tuple[Obj, Obj, Obj | None, list[Obj]]:
    """The CronJob the sync gets, the one the API answers (realCJ), the Job, and the Jobs the cache shows."""
    cj = cronjob()
    cj["spec"].update(concurrencyPolicy=case.concurrency_policy, suspend=case.suspend, schedule=case.schedule)
    if case.time_zone is not None:
        cj["spec"]["timeZone"] = case.time_zone
    if case.deadline is not None:
        cj["spec"]["startingDeadlineSeconds"] = case.deadline
    real = copy.deepcopy(cj)
    jobs: list[Obj] = []
    if not case.ran_previously:
        cj["metadata"]["creationTimestamp"] = rfc3339(case.cronjob_creation_time or JUST_BEFORE_THE_HOUR)
        return cj, real, None, jobs
    cj["metadata"]["creationTimestamp"] = rfc3339(case.cronjob_creation_time or JUST_BEFORE_THE_PRIOR_HOUR)
    cj["status"]["lastScheduleTime"] = rfc3339(case.last_schedule_time or JUST_AFTER_THE_PRIOR_HOUR)
    job = job_from_template(cj, case.job_creation_time)
    job["metadata"].update(uid="1234", creationTimestamp=rfc3339(case.job_creation_time))
    if case.still_active:
        if case.job_present_in_cj_active_status:
            cj["status"]["active"] = [job_ref(job)]
        real["status"]["active"] = [job_ref(job)]
    else:
        job["status"] = {"completionTime": rfc3339(case.job_creation_time + 10),
                         "conditions": [{"type": "Complete", "status": "True"}]}
    if not case.job_still_not_found_in_lister:
        jobs.append(job)
    return cj, real, job, jobs


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_sync_cronjob(case: Case) -> None:
    cj, real, job, jobs = _setup(case)
    job_control = FakeJobControl(job, case.job_create_error, case.job_get_err)
    record = Recorder()
    syncer = CronJobSyncer(job_control, FakeCronJobControl(real), record, lambda: case.now)
    result = await syncer.sync_cronjob(copy.deepcopy(cj), jobs)

    assert (result.error is not None) is case.expect_err, result.error
    if case.expected_requeue is not None:
        assert result.requeue_after == pytest.approx(case.expected_requeue + NEXT_SCHEDULE_DELTA)
    assert result.update_status is case.expect_update_status
    if case.ran_previously and not case.still_active:
        assert result.cronjob["status"]["lastSuccessfulTime"] == rfc3339(case.job_creation_time + 10)
    assert len(job_control.created) == (1 if case.expect_create else 0)
    for created in job_control.created:
        assert [r for r in created["metadata"]["ownerReferences"] if r.get("controller")] == [
            {"apiVersion": "batch/v1", "kind": "CronJob", "name": "mycronjob", "uid": "1a2b3c", "controller": True,
             "blockOwnerDeletion": True}]
    assert len(job_control.deleted) == (1 if case.expect_delete else 0)
    expected_events = case.expect_create + case.expect_delete + case.expected_warnings
    expected_events += case.name == "still active, is time, F"  # the only case that reports not scheduling
    assert len(record.events) == expected_events, record.events
    assert sum(1 for e in record.events if e[0] == "Warning") == case.expected_warnings
    assert len(result.cronjob["status"].get("active") or []) == case.expect_active


# Mirrors TestControllerV2CleanupFinishedJobs
def _finished(name: str, start: float) -> Obj:
    return {"metadata": {"namespace": "foo-ns", "name": name, "uid": name,
                         "ownerReferences": [{"name": "fooer", "controller": True}]},
            "status": {"startTime": rfc3339(start), "conditions": [{"type": "Complete", "status": "True"}]}}


@pytest.mark.parametrize(("name", "now", "limit", "create_error", "deleted"), [
    ("jobs are still deleted when a cronjob can't create jobs due to jobs quota being reached (avoiding a deadlock)",
     JUST_AFTER_THE_HOUR, 1, api_error(500, "InternalError", "quota for # of jobs reached"),
     ["finished-job-started-hour-ago"]),
    ("jobs are not deleted if history limit not reached", JUST_BEFORE_THE_HOUR, 2, None, []),
])
async def test_cleanup_finished_jobs(name: str, now: float, limit: int, create_error: ApiError | None,
                                     deleted: list[str]) -> None:
    cj = {"metadata": {"namespace": "foo-ns", "name": "fooer", "uid": "u",
                       "creationTimestamp": rfc3339(JUST_BEFORE_THE_PRIOR_HOUR)},
          "spec": {"schedule": ON_THE_HOUR, "successfulJobsHistoryLimit": limit,
                   "jobTemplate": {"metadata": {"labels": {"key": "value"}}}},
          "status": {"lastScheduleTime": rfc3339(JUST_AFTER_THE_PRIOR_HOUR)}}
    jobs = [_finished("finished-job-started-hour-ago", JUST_BEFORE_THE_PRIOR_HOUR)]
    if limit == 1:
        jobs.append(_finished("finished-job-started-minute-ago", JUST_BEFORE_THE_HOUR))
    job_control = FakeJobControl(create_err=create_error)
    syncer = CronJobSyncer(job_control, FakeCronJobControl(cj), Recorder(), lambda: now)
    await syncer.cleanup_finished_jobs(cj, jobs)
    result = await syncer.sync_cronjob(cj, jobs)
    assert sorted(job_control.deleted) == deleted
    assert (result.error is not None) is (create_error is not None)


# Mirrors TestControllerV2JobAlreadyExistsButNotInActiveStatus and ...ButDifferentOwner: a Job made before a
# crash that kept it out of the status is listed on the next sync; one the CronJob does not own is left alone.
@pytest.mark.parametrize(("name", "owned", "listed"), [
    ("job already exists but not in active status", True, 1),
    ("job already exists but different owner", False, 0),
])
async def test_job_already_exists(name: str, owned: bool, listed: int) -> None:
    cj = cronjob()
    cj["spec"].update(concurrencyPolicy="Forbid", schedule=EVERY_HOUR)
    cj["status"] = {"lastScheduleTime": rfc3339(JUST_BEFORE_THE_PRIOR_HOUR), "active": []}
    job = job_from_template(cj, JUST_AFTER_THE_PRIOR_HOUR)
    job["metadata"]["uid"] = "1234"
    if not owned:
        job["metadata"]["ownerReferences"] = []
    syncer = CronJobSyncer(FakeJobControl(job, ALREADY_EXISTS), FakeCronJobControl(cj), Recorder(),
                           lambda: JUST_BEFORE_THE_HOUR)
    result = await syncer.sync_cronjob(copy.deepcopy(cj), [])
    assert result.update_status is bool(listed)
    assert result.cronjob["status"]["active"] == [job_ref(job)] * listed


# --- the real controller, a real API server, fake time ---------------------------------------------------------

CRONJOBS = "/apis/batch/v1/namespaces/default/cronjobs"
JOBS = "/apis/batch/v1/namespaces/default/jobs"


@dataclass
class Live:
    client: InProcessClient
    clock: FakeClock

    async def until(self, check: Callable[[], Awaitable[bool]], what: str, step: float = 1.0,
                    rounds: int = 400) -> None:
        """Move fake time by `step` a round (none: only let the server's watches deliver, on real time) until
        `check`."""
        for _ in range(rounds):
            if await check():
                return
            await self.clock.advance(step)
            await asyncio.sleep(0.005)
        raise AssertionError(f"timed out waiting for {what}")

    async def jobs(self) -> list[Obj]:
        return sorted((await self.client.get(JOBS))["items"], key=lambda j: str(j["metadata"]["name"]))

    async def cronjob(self) -> Obj:
        return await self.client.get(f"{CRONJOBS}/every")

    async def finish(self, job: Obj) -> None:
        """What the Job controller writes when a Job completes."""
        now = rfc3339(self.clock.now())
        status = {"startTime": job["metadata"]["creationTimestamp"], "completionTime": now, "succeeded": 1,
                  "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": now}]}
        await self.client.patch(f"{JOBS}/{job['metadata']['name']}/status", {"status": status},
                                "application/merge-patch+json")

    async def reasons(self) -> list[str]:
        events = (await self.client.get("/api/v1/namespaces/default/events"))["items"]
        return [e["reason"] for e in events if e["involvedObject"]["kind"] == "CronJob"]


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    """Fake time from the real present: the server stamps creationTimestamp on its own (real) clock."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    client = InProcessClient(server)
    clock = FakeClock(start=RealClock().now())
    task = asyncio.create_task(CronJobController(client, clock).run())
    try:
        yield Live(client, clock)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await server.stop()
        await store.close()


async def test_runs_each_minute_forbids_overlap_and_keeps_history(live: Live) -> None:
    template = {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                                               "containers": [{"name": "c", "image": "busybox"}]}}}}
    await live.client.create(CRONJOBS, {"metadata": {"name": "every"}, "spec": {
        "schedule": "*/1 * * * *", "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 1,
        "jobTemplate": template}})

    async def jobs(n: int) -> bool:
        return len(await live.jobs()) == n

    async def first_recorded() -> bool:  # the Job is created before the status that records it is written
        return await jobs(1) and bool(((await live.cronjob()).get("status") or {}).get("active"))

    await live.until(first_recorded, "the first Job, recorded active")
    first = (await live.jobs())[0]
    cj = await live.cronjob()
    minutes = int(parse_rfc3339(cj["status"]["lastScheduleTime"])) // 60
    assert first["metadata"]["name"] == f"every-{minutes}"
    assert first["metadata"]["annotations"][SCHEDULED_TIMESTAMP] == cj["status"]["lastScheduleTime"]
    assert first["metadata"]["ownerReferences"][0]["uid"] == cj["metadata"]["uid"]
    assert [r["name"] for r in cj["status"]["active"]] == [first["metadata"]["name"]]

    await live.clock.advance(61)  # Forbid: the next start finds the Job still running
    await live.until(lambda: _has(live, "JobAlreadyActive"), "JobAlreadyActive", step=0.0)
    assert await jobs(1)

    await live.finish(first)

    # The finished Job leaves status.active, and the start Forbid held back (no deadline) runs at once.
    async def replaced() -> bool:
        status, names = (await live.cronjob())["status"], [j["metadata"]["name"] for j in await live.jobs()]
        return bool(status.get("lastSuccessfulTime")) and len(names) == 2 and \
            [r["name"] for r in status.get("active") or []] == names[1:]

    await live.until(replaced, "the held-back start to run once the first Job finished", step=0.0)
    second = (await live.jobs())[1]
    await live.finish(second)

    async def only_second() -> bool:
        return [j["metadata"]["name"] for j in await live.jobs()] == [second["metadata"]["name"]]

    await live.until(only_second, "the history limit to delete the first Job", step=0.0)
    assert {"SuccessfulCreate", "SawCompletedJob", "SuccessfulDelete"} <= set(await live.reasons())


async def _has(live: Live, reason: str) -> bool:
    return reason in await live.reasons()


class FakeQueue:
    """fakeQueue: remembers the last delayed add (a plain add is not a delay)."""

    def __init__(self) -> None:
        self.delay = 0.0

    def add(self, key: Key) -> None:
        pass

    def add_after(self, key: Key, delay: float) -> None:
        self.delay = delay


def _with(schedule: str = "", labels: str = "b", last: float | None = None, time_zone: str | None = None) -> Obj:
    spec: Obj = {"schedule": schedule, "jobTemplate": {"metadata": {"labels": {"a": labels}}}}
    if time_zone is not None:
        spec["timeZone"] = time_zone
    status = {"lastScheduleTime": rfc3339(last)} if last is not None else {}
    return {"metadata": {"name": "cj", "namespace": "default", "creationTimestamp": rfc3339(JUST_BEFORE_THE_HOUR)},
            "spec": spec, "status": status}


# Mirrors TestControllerV2UpdateCronJob: a new schedule or zone requeues at its next start, other changes at once
# (delay 0); an unparseable schedule is not queued.
UPDATES = [
    ("spec.template changed", _with(), _with(labels="foo"), 0.0),
    ("spec.schedule changed", _with("30 * * * *", last=JUST_BEFORE_THE_HOUR),
     _with("*/1 * * * *", "foo", JUST_BEFORE_THE_HOUR), 1 + NEXT_SCHEDULE_DELTA),
    ("spec.schedule with @every changed - cadence decrease", _with("@every 1m", last=JUST_BEFORE_THE_HOUR),
     _with("@every 3m", "foo", JUST_BEFORE_THE_HOUR), 2 * MINUTE + 1 + NEXT_SCHEDULE_DELTA),
    ("spec.schedule with @every changed - cadence increase", _with("@every 3m", last=JUST_BEFORE_THE_HOUR),
     _with("@every 1m", "foo", JUST_BEFORE_THE_HOUR), 1 + NEXT_SCHEDULE_DELTA),
    ("spec.timeZone not changed", _with(time_zone=NEW_YORK), _with(labels="foo", time_zone=NEW_YORK), 0.0),
    ("spec.timeZone changed", _with(time_zone=NEW_YORK), _with(labels="foo"), 0.0),
]


@pytest.mark.parametrize(("name", "old", "new", "delay"), UPDATES, ids=[u[0] for u in UPDATES])
def test_update_cronjob(client: InProcessClient, name: str, old: Obj, new: Obj, delay: float) -> None:
    controller = CronJobController(client, FakeClock(start=JUST_BEFORE_THE_HOUR + 59))  # justASecondBeforeTheHour
    queue = FakeQueue()
    controller.runner.queue = queue  # type: ignore[assignment]
    controller._cronjob_updated(old, new)
    assert queue.delay == pytest.approx(delay)


def _owned(name: str, namespace: str = "foo-ns", owner: str | None = None, labels: str | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "resourceVersion": "1"}
    if owner is not None:
        meta["ownerReferences"] = [{"name": owner, "controller": True}]
    if labels is not None:
        meta["labels"] = {"key": labels}
    return {"metadata": meta}


# Mirrors TestControllerV2GetJobsToBeReconciled: a Job belongs to the CronJob its controller reference names,
# whatever its labels.
RECONCILED = [
    ("test getting jobs in namespace without controller reference",
     [_owned("foo"), _owned("foo1"), _owned("foo2")], []),
    ("test getting jobs in namespace with a controller reference",
     [_owned("foo"), _owned("foo1", owner="fooer"), _owned("foo2")], ["foo1"]),
    ("test getting jobs in other namespaces",
     [_owned("foo", "bar-ns"), _owned("foo1", "bar-ns"), _owned("foo2", "bar-ns")], []),
    ("test getting jobs whose labels do not match job template",
     [_owned("foo-fooer-owner-ref", owner="fooer", labels="different-value"),
      _owned("foo-other-owner-ref", owner="another-cronjob", labels="different-value")], ["foo-fooer-owner-ref"]),
]


@pytest.mark.parametrize(("name", "jobs", "expected"), RECONCILED, ids=[r[0] for r in RECONCILED])
def test_jobs_to_be_reconciled(client: InProcessClient, name: str, jobs: list[Obj], expected: list[str]) -> None:
    controller = CronJobController(client, FakeClock())
    for job in jobs:
        controller.jobs.add(job)
    cj = {"metadata": {"namespace": "foo-ns", "name": "fooer"},
          "spec": {"jobTemplate": {"metadata": {"labels": {"key": "value"}}}}}
    assert sorted(j["metadata"]["name"] for j in controller.jobs_to_be_reconciled(cj)) == expected


async def test_a_job_deleted_by_a_zero_history_limit_is_not_missing(live: Live) -> None:
    """QA: with successfulJobsHistoryLimit 0 and a Job that finishes at once, every run logged MissingJob: the
    cleanup ran on a CronJob read before our own status write (the informer behind it), and the retry found the
    deleted Job still active. The sync now starts from the newer of the informer's copy and our last write."""
    template = {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                                               "containers": [{"name": "c", "image": "busybox"}]}}}}
    await live.client.create(CRONJOBS, {"metadata": {"name": "every"}, "spec": {
        "schedule": "*/1 * * * *", "successfulJobsHistoryLimit": 0, "jobTemplate": template}})

    async def started() -> bool:
        return len(await live.jobs()) == 1

    async def gone() -> bool:
        return not await live.jobs() and not ((await live.cronjob()).get("status") or {}).get("active")

    for run in range(3):
        await live.until(started, f"run {run}'s Job")
        await live.finish((await live.jobs())[0])
        await live.until(gone, f"run {run}'s Job deleted and no longer active", step=0.0)
        await live.clock.advance(60)
    reasons = await live.reasons()
    assert reasons.count("SuccessfulDelete") == 3 and "MissingJob" not in reasons, reasons
