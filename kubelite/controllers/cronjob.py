"""The CronJob controller: creates a Job at each scheduled time (pkg/controller/cronjob, cronjob_controllerv2.go).

Each sync of a CronJob, as upstream's:
1. account for its Jobs (those whose controller reference names it): a finished one leaves `status.active`
   (SawCompletedJob) and may move `lastSuccessfulTime`; an unfinished one it did not list is UnexpectedJob;
   an active one that no longer exists is MissingJob;
2. delete the oldest finished Jobs beyond `successfulJobsHistoryLimit` / `failedJobsHistoryLimit`;
3. unless it is being deleted, suspended, or its timeZone or schedule is unusable (a Warning event each),
   find the most recent start due at or before now. Too late for `startingDeadlineSeconds` is MissSchedule;
   already started (its Job is active, or it is `lastScheduleTime`) is nothing; under `Forbid` with a Job
   still active it is JobAlreadyActive; under `Replace` the active Jobs are deleted first (background
   propagation); then the Job `<cronjob>-<minutes since the epoch>` is created from the template, owned by
   the CronJob, and added to `status.active` with `lastScheduleTime`. A Job of that name already there
   (created just before a crash) is adopted into the status rather than made twice;
4. requeue the CronJob 100 ms after its next start, on the injected clock: nothing sleeps on its own.

More than 100 missed starts since the last one (a controller down for long, a clock far off) start only the
most recent, with a TooManyMissedTimes warning. Schedules without a timeZone run in UTC.

`CronJobSyncer` is the decision and its side effects behind two seams (`JobControl`, `CronJobControl`), so
upstream's table (TestControllerV2SyncCronJob) runs against recording fakes; `CronJobController` is the shell:
shared informers, the work queue, events.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from kubelite.api.cron_schedule import CronError, Schedule, load_location, parse_standard
from kubelite.api.errors import ApiError
from kubelite.api.validation import go_quote
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import resource_path
from kubelite.client.informer import NAMESPACE_INDEX, Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_rfc3339, rfc3339
from kubelite.controllers.cronjob_utils import (
    Missed,
    by_job_start_time,
    controlled_by,
    delete_from_active_list,
    finished_condition,
    in_active_list,
    in_active_list_by_name,
    is_namespace_terminating,
    job_from_template,
    job_name,
    job_ref,
    next_schedule_time,
    next_schedule_time_duration,
)
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.ownership import controller_of
from kubelite.controllers.podcontrol import newest
from kubelite.controllers.runner import Runner, run_synced

Obj = dict[str, Any]
COMPONENT = "cronjob-controller"
WORKERS = 5  # --concurrent-cron-job-syncs
GROUP_VERSION = "batch/v1"


class Recorder(Protocol):
    def __call__(self, cj: Obj, event_type: str, reason: str, message: str) -> None: ...


class JobControl(Protocol):
    """jobControlInterface: the Jobs a CronJob makes, read and written through the API."""

    async def get_job(self, namespace: str, name: str) -> Obj: ...

    async def create_job(self, namespace: str, job: Obj) -> Obj: ...

    async def delete_job(self, namespace: str, name: str) -> None: ...


class CronJobControl(Protocol):
    """cjControlInterface."""

    async def get_cronjob(self, namespace: str, name: str) -> Obj: ...

    async def update_status(self, cj: Obj) -> Obj: ...


class ApiControl:
    """The real controls: the API through `client`; Jobs are deleted with background propagation."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def get_job(self, namespace: str, name: str) -> Obj:
        return await self.client.get(resource_path("jobs", namespace, name, group_version=GROUP_VERSION))

    async def create_job(self, namespace: str, job: Obj) -> Obj:
        return await self.client.create(resource_path("jobs", namespace, group_version=GROUP_VERSION), job)

    async def delete_job(self, namespace: str, name: str) -> None:
        await self.client.delete(resource_path("jobs", namespace, name, group_version=GROUP_VERSION),
                                 {"propagationPolicy": "Background"})

    async def get_cronjob(self, namespace: str, name: str) -> Obj:
        return await self.client.get(resource_path("cronjobs", namespace, name, group_version=GROUP_VERSION))

    async def update_status(self, cj: Obj) -> Obj:
        meta = cj["metadata"]
        path = resource_path("cronjobs", meta["namespace"], meta["name"], "status", group_version=GROUP_VERSION)
        out: Obj = await self.client.request("PUT", path, cj)
        return out


@dataclass
class SyncResult:
    """What syncCronJob returns: the CronJob as it now stands (possibly a fresher copy read from the API), when
    to look again, whether its status must be written, and the error that ends the sync."""

    cronjob: Obj
    requeue_after: float | None = None
    update_status: bool = False
    error: Exception | None = None


def format_schedule(cj: Obj, record: Recorder | None) -> str:
    """formatSchedule: TZ in the schedule wins (with an UnsupportedSchedule warning); else a usable timeZone is
    prefixed as robfig's `TZ=`."""
    spec = cj["spec"]
    schedule, zone = str(spec.get("schedule") or ""), spec.get("timeZone")
    if "TZ" in schedule:
        if record is not None:
            record(cj, "Warning", "UnsupportedSchedule", f"CRON_TZ or TZ used in schedule {go_quote(schedule)} is "
                   "not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/"
                   "cron-jobs/ for more details")
        return schedule
    if zone is not None:
        try:
            load_location(zone)
        except CronError:
            return schedule
        return f"TZ={zone} {schedule}"
    return schedule


class CronJobSyncer:
    """syncCronJob and cleanupFinishedJobs over the controls: every decision of one sync, and its writes."""

    def __init__(self, jobs: JobControl, cronjobs: CronJobControl, record: Recorder, now: Callable[[], float]
                 ) -> None:
        self.jobs = jobs
        self.cronjobs = cronjobs
        self.record = record
        self.now = now

    async def sync_cronjob(self, cj: Obj, jobs: list[Obj]) -> SyncResult:
        """One sync of `cj` (a copy: its status is updated in place) given the Jobs it controls."""
        now = self.now()
        result = SyncResult(cj)
        try:
            await self._account_for_jobs(result, jobs)
            await self._forget_missing_jobs(result, {j["metadata"].get("uid") for j in jobs})
        except ApiError as exc:
            result.error = exc
            return result
        cj = result.cronjob
        if cj["metadata"].get("deletionTimestamp"):
            return result
        schedule = self._usable_schedule(cj)
        if schedule is None:
            return result
        scheduled, missed, err = next_schedule_time(cj, now, schedule)
        if missed is Missed.MANY:
            self.record(cj, "Warning", "TooManyMissedTimes", "too many missed start times. Set or decrease "
                        ".spec.startingDeadlineSeconds or check clock skew")
        if err is not None:
            self.record(cj, "Warning", "InvalidSchedule", f"invalid schedule: {cj['spec']['schedule']} : {err}")
            return result
        if scheduled is None or not self._should_start(cj, now, scheduled):
            result.requeue_after = next_schedule_time_duration(cj, now, schedule)
            return result
        try:
            started = await self._start(result, scheduled)
        except ApiError as exc:
            result.error = exc
            return result
        if started:
            result.requeue_after = next_schedule_time_duration(cj, now, schedule)
        return result

    async def _account_for_jobs(self, result: SyncResult, jobs: list[Obj]) -> None:
        """Step 1: finished Jobs leave status.active (and set lastSuccessfulTime); unlisted unfinished ones are
        looked up in a fresh copy of the CronJob before they are called unexpected."""
        for job in jobs:
            cj, meta = result.cronjob, job["metadata"]
            found, finished = in_active_list(cj, meta.get("uid", "")), finished_condition(job)
            if not found and finished is None:
                fresh = await self.cronjobs.get_cronjob(cj["metadata"]["namespace"], cj["metadata"]["name"])
                if in_active_list(fresh, meta.get("uid", "")):
                    result.cronjob = fresh
                    continue
                self.record(cj, "Warning", "UnexpectedJob",
                            f"Saw a job that the controller did not create or forgot: {meta['name']}")
                continue
            if finished is None:
                continue
            if found:
                delete_from_active_list(cj, meta["uid"])
                self.record(cj, "Normal", "SawCompletedJob", f"Saw completed job: {meta['name']}, "
                                                             f"condition: {finished}")
                result.update_status = True
            completed = (job.get("status") or {}).get("completionTime")
            status = cj.setdefault("status", {})
            last = status.get("lastSuccessfulTime")
            if finished == "Complete" and completed and (not last or parse_rfc3339(completed) > parse_rfc3339(last)):
                status["lastSuccessfulTime"] = completed
                result.update_status = True

    async def _forget_missing_jobs(self, result: SyncResult, children: set[str | None]) -> None:
        """Step 1b: an active Job the cache does not show is read from the API; if it is gone it leaves the list,
        so a lost Job never keeps the CronJob active for good."""
        cj = result.cronjob
        for ref in list((cj.get("status") or {}).get("active") or []):
            if ref.get("uid") in children:
                continue
            try:
                await self.jobs.get_job(ref.get("namespace", ""), ref.get("name", ""))
            except ApiError as exc:
                if exc.code != 404:
                    raise
                self.record(cj, "Normal", "MissingJob", f"Active job went missing: {ref.get('name')}")
                delete_from_active_list(cj, ref.get("uid", ""))
                result.update_status = True

    def _usable_schedule(self, cj: Obj) -> Schedule | None:
        """Step 3's preconditions: a known timeZone, not suspended, a schedule that parses (a warning otherwise)."""
        zone = cj["spec"].get("timeZone")
        if zone is not None:
            try:
                load_location(zone)
            except CronError as exc:
                self.record(cj, "Warning", "UnknownTimeZone", f"invalid timeZone: {go_quote(zone)}: {exc}")
                return None
        if cj["spec"].get("suspend"):
            return None
        try:
            return parse_standard(format_schedule(cj, self.record))
        except CronError as exc:
            self.record(cj, "Warning", "UnparseableSchedule",
                        f"unparseable schedule: {go_quote(str(cj['spec'].get('schedule')))} : {exc}")
            return None

    def _should_start(self, cj: Obj, now: float, scheduled: float) -> bool:
        """Not too late, not started already, and (under Forbid) nothing still running."""
        deadline = cj["spec"].get("startingDeadlineSeconds")
        if deadline is not None and scheduled + deadline < now:
            stamp = datetime.fromtimestamp(scheduled, UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")
            self.record(cj, "Warning", "MissSchedule", f"Missed scheduled time to start a job: {stamp}")
            return False
        status = cj.get("status") or {}
        if in_active_list_by_name(cj, cj["metadata"]["namespace"], job_name(cj, scheduled)) or \
                status.get("lastScheduleTime") == rfc3339(scheduled):
            return False
        if cj["spec"].get("concurrencyPolicy") == "Forbid" and status.get("active"):
            self.record(cj, "Normal", "JobAlreadyActive",
                        "Not starting job because prior execution is running and concurrency policy is Forbid")
            return False
        return True

    async def _start(self, result: SyncResult, scheduled: float) -> bool:
        """Replace the active Jobs if told to, then create (or adopt) the scheduled time's Job and list it.
        False when an existing Job of that name is not to be listed (not ours, or listed already)."""
        cj = result.cronjob
        namespace = cj["metadata"]["namespace"]
        if cj["spec"].get("concurrencyPolicy") == "Replace":
            for ref in list((cj.get("status") or {}).get("active") or []):
                try:
                    job = await self.jobs.get_job(ref.get("namespace", ""), ref.get("name", ""))
                except ApiError as exc:
                    self.record(cj, "Warning", "FailedGet", f"Get job: {exc}")
                    raise
                if not await self.delete_job(cj, job):
                    raise ApiError(500, "InternalError", f"could not replace job {namespace}/{ref.get('name')}")
                result.update_status = True
        try:
            job = await self.jobs.create_job(namespace, job_from_template(cj, scheduled))
        except ApiError as exc:
            if is_namespace_terminating(exc):
                raise
            if exc.code != 409 or exc.reason != "AlreadyExists":
                self.record(cj, "Warning", "FailedCreate", f"Error creating job: {exc}")
                raise
            # Made before a crash that kept it out of the status: list it now, if it is ours and not listed.
            job = await self.jobs.get_job(namespace, job_name(cj, scheduled))
            if not controlled_by(job, cj) or in_active_list(cj, job["metadata"].get("uid", "")):
                return False
        else:
            self.record(cj, "Normal", "SuccessfulCreate", f"Created job {job['metadata']['name']}")
        status = cj.setdefault("status", {})
        status["active"] = [*(status.get("active") or []), job_ref(job)]
        status["lastScheduleTime"] = rfc3339(scheduled)
        result.update_status = True
        return True

    async def delete_job(self, cj: Obj, job: Obj) -> bool:
        """deleteJob: delete it (its pods follow in the background) and drop it from status.active."""
        meta = job["metadata"]
        try:
            await self.jobs.delete_job(meta.get("namespace", ""), meta["name"])
        except ApiError as exc:
            self.record(cj, "Warning", "FailedDelete", f"Deleted job: {exc}")
            return False
        delete_from_active_list(cj, meta.get("uid", ""))
        self.record(cj, "Normal", "SuccessfulDelete", f"Deleted job {meta['name']}")
        return True

    async def cleanup_finished_jobs(self, cj: Obj, jobs: list[Obj]) -> bool:
        """cleanupFinishedJobs: beyond each history limit, the finished Jobs that started first are deleted."""
        spec = cj.get("spec") or {}
        update = False
        for kind, limit in (("Complete", spec.get("successfulJobsHistoryLimit")),
                            ("Failed", spec.get("failedJobsHistoryLimit"))):
            done = sorted((j for j in jobs if finished_condition(j) == kind), key=by_job_start_time)
            if limit is None or len(done) <= limit:
                continue
            for job in done[:len(done) - limit]:
                update = await self.delete_job(cj, job) or update
        return update


class CronJobController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.clock = clock
        self.runner: Runner[Key] = Runner("cronjob", self.reconcile, clock, workers=WORKERS)
        self.events = EventSink(client, clock)
        self.control = ApiControl(client)
        self.syncer = CronJobSyncer(self.control, self.control, self._record, clock.now)
        self.cronjobs = shared_informer(client, clock, "/apis/batch/v1/cronjobs",
                                        Handlers(self._enqueue, self._cronjob_updated, self._cronjob_deleted))
        self.written: dict[Key, Obj] = {}  # each CronJob as our last status write returned it
        self.jobs = shared_informer(client, clock, "/apis/batch/v1/jobs",
                                    Handlers(self._job_added, self._job_updated, self._job_deleted))

    async def run(self) -> None:
        await run_synced((self.cronjobs, self.jobs), (self.runner.run,), alongside=(self.events.run,))

    def _record(self, cj: Obj, event_type: str, reason: str, message: str) -> None:
        self.events.post(event_for({**cj, "apiVersion": GROUP_VERSION}, reason, message, "CronJob", COMPONENT,
                                   self.clock.now(), event_type))

    # --- event handlers ---------------------------------------------------------------------------

    def _enqueue(self, cj: Obj) -> None:
        self.runner.enqueue(key_of(cj))

    def _cronjob_deleted(self, cj: Obj) -> None:
        self.written.pop(key_of(cj), None)
        self._enqueue(cj)

    def _cronjob_updated(self, old: Obj, new: Obj) -> None:
        """updateCronJob: a new schedule or zone requeues at its next start; any other change syncs now."""
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        if (spec.get("schedule"), spec.get("timeZone")) == (old_spec.get("schedule"), old_spec.get("timeZone")):
            self._enqueue(new)
            return
        try:
            schedule = parse_standard(format_schedule(new, None))
        except CronError:
            self._record(new, "Warning", "UnParseableCronJobSchedule",
                         f"unparseable schedule for cronjob: {spec.get('schedule')}")
            return
        delay = next_schedule_time_duration(new, self.clock.now(), schedule)
        self.runner.queue.add_after(key_of(new), delay)

    def _owner_key(self, job: Obj) -> Key | None:
        """resolveControllerRef: the CronJob (of that name and uid) that controls `job`."""
        ref = controller_of(job)
        if ref is None or ref.get("kind") != "CronJob":
            return None
        namespace = job["metadata"].get("namespace", "")
        cj = self.cronjobs.get(namespace, ref.get("name", ""))
        return key_of(cj) if cj is not None and cj["metadata"].get("uid") == ref.get("uid") else None

    def _job_added(self, job: Obj) -> None:
        self._job_deleted(job)

    def _job_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        if controller_of(old) != controller_of(new):
            self._job_deleted(old)
        self._job_deleted(new)

    def _job_deleted(self, job: Obj) -> None:
        key = self._owner_key(job)
        if key is not None:
            self.runner.enqueue(key)

    # --- sync -------------------------------------------------------------------------------------

    def jobs_to_be_reconciled(self, cj: Obj) -> list[Obj]:
        """getJobsToBeReconciled: the Jobs in its namespace whose controller reference names it (labels may have
        changed since)."""
        name = cj["metadata"]["name"]
        return [j for j in self.jobs.by_index(NAMESPACE_INDEX, cj["metadata"].get("namespace", ""))
                if (controller_of(j) or {}).get("name") == name]

    async def reconcile(self, key: Key) -> None:
        # The informer's copy, or our last status write's while the informer lags behind it: a Job that finished at
        # once (a history limit of 0 deletes it) is otherwise cleaned up from a status without it in `active`, and
        # the write of that status conflicts; the retry then finds it active and gone (MissingJob).
        cached = newest(self.cronjobs.store.get(key), self.written.get(key))
        if cached is None:
            return
        jobs = self.jobs_to_be_reconciled(cached)
        cj = copy.deepcopy(cached)  # every change of this sync lands here, written once
        cleaned = await self.syncer.cleanup_finished_jobs(cj, jobs)
        result = await self.syncer.sync_cronjob(cj, jobs)
        if cleaned or result.update_status:
            self.written[key] = await self.control.update_status(result.cronjob)
        if result.requeue_after is not None:
            self.runner.queue.add_after(key, result.requeue_after)
            return
        if result.error is not None:
            raise result.error
