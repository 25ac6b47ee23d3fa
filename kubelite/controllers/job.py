"""The Job controller: runs pods to `completions` successes, `parallelism` at a time (pkg/controller/job).

Counting is exact, as upstream's pod tracking with finalizers: every pod a Job creates carries
the `batch.kubernetes.io/job-tracking` finalizer, so it cannot vanish uncounted. A finished pod
is first recorded in `status.uncountedTerminatedPods` (or, for Indexed Jobs, in
`completedIndexes`), then its finalizer is removed, then its uid moves into `succeeded` /
`failed`; a crash between any two steps is resumed from the status on the next sync, and a pod
is never counted twice (finalizer removals not yet seen by the informer are remembered).

A failure counts against `backoffLimit` unless the `podFailurePolicy` says `Ignore`; `FailJob`
fails the Job at once. Replacements wait out the back-off (10 s doubling to 6 min). A Job that
has met its success criteria gets `SuccessCriteriaMet` and then `Complete` once no pod of it is
left running; a failing one `FailureTarget` and then `Failed` (reasons BackoffLimitExceeded,
DeadlineExceeded, PodFailurePolicy), its remaining pods deleted gracefully — never forced.
Indexed Jobs may instead give each index its own failure budget (`backoffLimitPerIndex`, failing
the Job once more than `maxFailedIndexes` indexes failed, or with FailedIndexes when every index
is done or failed; job_index_failures.py) and may succeed early under a `successPolicy`
(job_success_policy.py).

Expectations, as upstream's ControllerExpectations: pods created or deleted and not yet seen
by the informer hold back further creation, so watch lag never over-creates.

Not done: orphan adoption by selector, managedBy.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass, field
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import resource_path
from kubelite.client.informer import OWNER_UID_INDEX, Handlers, Key, by_owner_uid, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_rfc3339, rfc3339
from kubelite.controllers import ownership
from kubelite.controllers import podcontrol as pc
from kubelite.controllers.gojson import omit_empty
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.job_backoff import BackoffRecord, new_backoff_record
from kubelite.controllers.job_failure_policy import match_pod_failure_policy
from kubelite.controllers.job_index_failures import (
    calculate_failed_indexes,
    has_backoff_limit_per_index,
    index_failure_annotations,
    pods_with_delayed_deletion_per_index,
    remaining_time_per_index,
)
from kubelite.controllers.job_indexes import (
    add_completion_index,
    completion_index,
    first_pending_indexes,
    format_indexes,
    parse_indexes,
    pod_generate_name_with_index,
)
from kubelite.controllers.job_success_policy import REASON as SUCCESS_POLICY
from kubelite.controllers.job_success_policy import match_success_policy
from kubelite.controllers.podutil import is_pod_active, is_pod_ready
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.job")

Obj = dict[str, Any]
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPONENT = "job-controller"
EXPECTATIONS_TIMEOUT = 300.0
SLOW_START_INITIAL_BATCH = 1
WORKERS = 5  # --concurrent-job-syncs
# batch/v1 JobStatus fields tagged omitempty and held by value: a 0 or "" is not written. ready, terminating,
# failedIndexes and uncountedTerminatedPods are pointers, so their zero values are.
STATUS_OMITEMPTY = frozenset({"conditions", "active", "succeeded", "failed", "completedIndexes"})


@dataclass
class Expectations:
    """Creations and deletions a Job is waiting to see through the informer."""
    adds: int = 0
    deletes: set[str] = field(default_factory=set)
    since: float = 0.0

    def satisfied(self, now: float) -> bool:
        return (self.adds <= 0 and not self.deletes) or now - self.since > EXPECTATIONS_TIMEOUT


def _is_indexed(job: Obj) -> bool:
    return bool(job["spec"].get("completionMode") == "Indexed")


def is_pod_failed(pod: Obj, job: Obj) -> bool:
    """isPodFailed: Failed, or (unless only failed pods are replaced) deleted before succeeding."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Failed":
        return True
    if job["spec"].get("podReplacementPolicy") == "Failed":
        return False
    return bool(pod["metadata"].get("deletionTimestamp")) and phase != "Succeeded"


def tracked_pods(pods: list[Obj], released: set[str]) -> list[Obj]:
    """The pods whose outcome is not counted yet: they still carry the tracking finalizer, and no removal of
    it is on its way (getValidPodsWithFilter)."""
    return [p for p in pods if TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])
            and p["metadata"]["uid"] not in released]


def finish_condition(job: Obj) -> Obj | None:
    for kind in ("Complete", "Failed"):
        c = pc.condition(job, kind)
        if c is not None and c.get("status") == "True":
            return c
    return None


class JobController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[Key] = Runner("job", self.reconcile, clock, workers=WORKERS)
        self.events = EventSink(client, clock)
        self.expectations: dict[str, Expectations] = {}  # job uid →
        self.released: set[str] = set()  # pod uids whose finalizer we removed, not yet seen without it
        self.backoff: dict[str, BackoffRecord] = {}  # job uid →
        self.owner_uids: dict[Key, set[str]] = {}  # Job key → uids its tracked pods name as owner
        self.written: dict[Key, Obj] = {}  # each Job as our last status write returned it
        self.jobs = shared_informer(client, clock, "/apis/batch/v1/jobs",
                                    Handlers(self._job_changed, lambda o, n: self._job_changed(n), self._job_deleted))
        self.pods = shared_informer(client, clock, "/api/v1/pods",
                                    Handlers(self._pod_added, self._pod_updated, self._pod_deleted))
        self.pods.add_index(OWNER_UID_INDEX, by_owner_uid)

    # --- event handlers ---------------------------------------------------------------------------

    def _job_changed(self, job: Obj) -> None:
        self.runner.enqueue(key_of(job))

    def _job_deleted(self, job: Obj) -> None:
        self.owner_uids.setdefault(key_of(job), set()).add(job["metadata"]["uid"])
        self.runner.enqueue(key_of(job))  # the reconcile releases its pods' finalizers

    def _owner_key(self, pod: Obj) -> Key | None:
        name = pc.controller_of(pod, "Job")
        return (pod["metadata"].get("namespace", ""), name) if name else None

    def _pod_added(self, pod: Obj) -> None:
        uid = pc.controller_uid(pod)
        if uid in self.expectations:
            self.expectations[uid].adds -= 1
        self._pod_updated(None, pod)

    def _pod_updated(self, old: Obj | None, pod: Obj) -> None:
        uid = pc.controller_uid(pod)
        if pod["metadata"].get("deletionTimestamp") and uid in self.expectations:
            self.expectations[uid].deletes.discard(pod["metadata"]["uid"])
        key = self._owner_key(pod)
        if TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or []):
            self.released.discard(pod["metadata"]["uid"])
        elif key is not None and uid is not None:
            self.owner_uids.setdefault(key, set()).add(uid)
        if key is not None:
            self.runner.enqueue(key)

    def _pod_deleted(self, pod: Obj) -> None:
        uid = pc.controller_uid(pod)
        if uid in self.expectations:
            self.expectations[uid].deletes.discard(pod["metadata"]["uid"])
        self.released.discard(pod["metadata"]["uid"])
        key = self._owner_key(pod)
        if key is not None:
            self.runner.enqueue(key)

    async def run(self) -> None:
        await run_synced((self.jobs, self.pods), (self.runner.run,), alongside=(self.events.run,))

    # --- sync -------------------------------------------------------------------------------------

    def _event(self, job: Obj, reason: str, message: str, kind: str = "Normal") -> None:
        self.events.post(event_for({**job, "apiVersion": "batch/v1"}, reason, message, "Job", COMPONENT,
                                   self.clock.now(), kind))

    def _owned_pods(self, uid: str) -> list[Obj]:
        return [p for p in self.pods.by_index(OWNER_UID_INDEX, uid) if pc.controller_uid(p) == uid]

    async def reconcile(self, key: Key) -> None:
        # Our own last write when the informer lags: a sync from a stale status would undercount released
        # pods and create too many.
        job = pc.newest(self.jobs.store.get(key), self.written.get(key))
        current = job["metadata"]["uid"] if job is not None else None
        owners = self.owner_uids.get(key, set())
        for gone in sorted(owners - {current}):
            # Pods of a Job that no longer exists (deleted, maybe while this controller was down): cleanupOrphanPods.
            await self._release(self._owned_pods(gone))
            owners.discard(gone)
            self.expectations.pop(gone, None)
            self.backoff.pop(gone, None)
        if not owners:
            self.owner_uids.pop(key, None)
        if job is None:
            self.written.pop(key, None)
            return
        pods = self._owned_pods(current or "")
        if finish_condition(job) is not None or job["metadata"].get("deletionTimestamp"):
            await self._release([p for p in pods if TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])])
            return
        await JobSync(self, job, pods).run()

    async def _release(self, pods: list[Obj]) -> None:
        """Remove the tracking finalizer from `pods` (a pod already gone is fine); each is remembered in
        `released` until the informer shows it without the finalizer."""
        async def one(pod: Obj) -> None:
            meta = pod["metadata"]
            if TRACKING_FINALIZER not in (meta.get("finalizers") or []):
                return
            rest = [f for f in meta.get("finalizers") or [] if f != TRACKING_FINALIZER]
            patch = [{"op": "test", "path": "/metadata/finalizers", "value": meta["finalizers"]},
                     {"op": "replace", "path": "/metadata/finalizers", "value": rest}]
            try:
                await self.client.patch(resource_path("pods", meta.get("namespace", ""), meta["name"]), patch,
                                        "application/json-patch+json")
            except ApiError as exc:
                if exc.code != 404:
                    raise
            self.released.add(meta["uid"])
        await asyncio.gather(*(one(p) for p in pods))


class JobSync:
    """One sync of one Job: account for finished pods, decide whether it is done, else create or delete pods."""

    def __init__(self, ctl: JobController, job: Obj, pods: list[Obj]) -> None:
        self.ctl = ctl
        self.job = job
        self.spec: Obj = job["spec"]
        self.status: Obj = copy.deepcopy(job.get("status") or {})
        self.pods = pods
        self.now = ctl.clock.now()
        self.uid: str = job["metadata"]["uid"]
        self.key = key_of(job)
        self.fail_message: str | None = None  # from a FailJob rule of the pod failure policy
        self.per_index = _is_indexed(job) and has_backoff_limit_per_index(job)
        self.completions = int(self.spec.get("completions") or 0)
        self.failed_indexes = parse_indexes(self.status.get("failedIndexes") or "", self.completions) \
            if self.per_index else set()
        self.delayed: dict[int, Obj] = {}  # index → its last failed pod, kept uncounted until replaced
        self.verdict_event: tuple[str, str, str] | None = None  # sent once the final condition is written

    async def run(self) -> None:
        if not self.status.get("startTime") and not self.spec.get("suspend"):
            self.status["startTime"] = rfc3339(self.now)
        await self._track_finished_pods()
        active = [p for p in self.pods if is_pod_active(p)]
        terminating = [p for p in self.pods if p["metadata"].get("deletionTimestamp") and not pc.is_terminal(p)]
        target = self._finishing()
        if target is not None:
            deleted = await self._delete(active)
            active = []
            terminating += deleted
            if not terminating and not self._uncounted() and not self.delayed:
                self._finish(target)
        elif self.ctl.expectations.get(self.uid, Expectations()).satisfied(self.now):
            active = await self._manage(active, terminating)
        self.status["active"] = len(active)
        self.status["ready"] = sum(1 for p in active if is_pod_ready(p))
        self.status["terminating"] = len(terminating)
        await self._write()
        if self.verdict_event is not None:
            self.ctl._event(self.job, *self.verdict_event)
        self._requeue_for_deadline()

    # --- accounting -------------------------------------------------------------------------------

    def _index_failures(self, tracked: list[Obj], done: set[int]) -> None:
        """calculateFailedIndexes and getPodsWithDelayedDeletionPerIndex over the pods not counted yet. Once the
        Job is finishing, neither: every pod is counted, delayed or not, and the pods it deletes then are no index
        failures (upstream removes their finalizers before deleting them, so it never sees them fail)."""
        if any(pc.condition({"status": self.status}, kind) for kind in ("FailureTarget", "SuccessCriteriaMet")):
            return
        self.failed_indexes = calculate_failed_indexes(self.job, tracked, lambda p: is_pod_failed(p, self.job),
                                                       self.failed_indexes)
        succeeded = done | {i for p in tracked if (p.get("status") or {}).get("phase") == "Succeeded"
                            and (i := completion_index(p)) is not None}
        self.delayed = pods_with_delayed_deletion_per_index(
            self.job, tracked, lambda p: is_pod_failed(p, self.job), succeeded, self.failed_indexes,
            [p for p in self.pods if is_pod_active(p)])

    def _uncounted(self) -> bool:
        u = self.status.get("uncountedTerminatedPods") or {}
        return bool(u.get("succeeded") or u.get("failed"))

    async def _track_finished_pods(self) -> None:
        """trackJobStatusAndRemoveFinalizers: record, release, then count."""
        uncounted = self.status.get("uncountedTerminatedPods") or {}
        succ, fail = set(uncounted.get("succeeded") or []), set(uncounted.get("failed") or [])
        indexed = _is_indexed(self.job)
        completions = self.spec.get("completions") or 0
        done = parse_indexes(self.status.get("completedIndexes", ""), completions) if indexed else set()
        policy = self.spec.get("podFailurePolicy")
        release: list[Obj] = []
        new_succeeded: list[Obj] = []
        new_failed: list[Obj] = []
        tracked = tracked_pods(self.pods, self.ctl.released)
        if self.per_index:
            self._index_failures(tracked, done)
        for pod in tracked:
            meta = pod["metadata"]
            puid = meta["uid"]
            index = completion_index(pod)
            if index is not None and self.delayed.get(index) is pod:
                continue  # canRemoveFinalizer: counted once its replacement exists, which takes its failure count
            if puid in succ or puid in fail:
                release.append(pod)  # recorded before, its finalizer removal failed: retry it
                continue
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Succeeded":
                index = completion_index(pod)
                if not indexed:
                    succ.add(puid)
                elif index is not None and index < completions:
                    done.add(index)
                new_succeeded.append(pod)
            elif is_pod_failed(pod, self.job):
                if phase != "Failed" and self.spec.get("suspend"):
                    release.append(pod)  # deleted because the Job was suspended: not a failure, no back-off
                    continue
                if policy is not None and phase != "Failed":
                    continue  # the policy looks at exit codes and conditions: wait for the pod to be terminal
                match = match_pod_failure_policy(policy, pod)
                if match.message and self.fail_message is None:
                    self.fail_message = match.message
                if match.count_failed:
                    fail.add(puid)
                    new_failed.append(pod)
            else:
                continue
            release.append(pod)
        if indexed:
            self.status["completedIndexes"] = format_indexes(done)
            self.status["succeeded"] = len(done)
        if self.per_index:
            self.status["failedIndexes"] = format_indexes(self.failed_indexes)
        if release:
            self.status["uncountedTerminatedPods"] = {"succeeded": sorted(succ), "failed": sorted(fail)}
            await self._write()  # recorded first: a crash from here on loses no count
            await self.ctl._release(release)
            released_now = {p["metadata"]["uid"] for p in release}
            record = self.ctl.backoff.get(self.uid, BackoffRecord())
            self.ctl.backoff[self.uid] = new_backoff_record(record, new_succeeded, new_failed)
        else:
            released_now = set()
        present = {p["metadata"]["uid"]: p for p in self.pods}

        def gone(puid: str) -> bool:
            pod = present.get(puid)
            return (pod is None or puid in released_now or puid in self.ctl.released
                    or TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or []))

        moved_s, moved_f = {u for u in succ if gone(u)}, {u for u in fail if gone(u)}
        self.status["succeeded"] = self.status.get("succeeded", 0) + (0 if indexed else len(moved_s))
        self.status["failed"] = self.status.get("failed", 0) + len(moved_f)
        self.status["uncountedTerminatedPods"] = {"succeeded": sorted(succ - moved_s),
                                                  "failed": sorted(fail - moved_f)}

    # --- finishing --------------------------------------------------------------------------------

    def _finishing(self) -> tuple[str, str, str] | None:
        """The Job's terminal verdict, (final condition, reason, message), or None while it runs."""
        for interim, final in (("FailureTarget", "Failed"), ("SuccessCriteriaMet", "Complete")):
            c = pc.condition({"status": self.status}, interim)
            if c is not None and c.get("status") == "True":
                return final, c.get("reason", ""), c.get("message", "")
        verdict: tuple[str, str, str] | None = None
        deadline = self.spec.get("activeDeadlineSeconds")
        started = self.status.get("startTime")
        if self.fail_message:
            verdict = ("Failed", "PodFailurePolicy", self.fail_message)
        elif self.status.get("failed", 0) + len(self._uncounted_list("failed")) > self.spec.get("backoffLimit", 6):
            verdict = ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif deadline is not None and started and self.now - parse_rfc3339(started) >= deadline:
            verdict = ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
        else:
            verdict = self._indexed_verdict()
            if verdict is None and self._complete():
                verdict = ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
        if verdict is not None:
            interim = "FailureTarget" if verdict[0] == "Failed" else "SuccessCriteriaMet"
            pc.set_condition(self.status, interim, "True", verdict[1], verdict[2], self.now)
        return verdict

    def _indexed_verdict(self) -> tuple[str, str, str] | None:
        """Failed indexes beyond maxFailedIndexes, or none left to run with some failed; else a met successPolicy."""
        if not _is_indexed(self.job):
            return None
        done = parse_indexes(self.status.get("completedIndexes", ""), self.completions)
        if self.per_index:
            most = self.spec.get("maxFailedIndexes")
            if most is not None and len(self.failed_indexes) > most:
                return ("Failed", "MaxFailedIndexesExceeded",
                        "Job has exceeded the specified maximal number of failed indexes")
            if self.failed_indexes and len(self.failed_indexes) + len(done) >= self.completions:
                return "Failed", "FailedIndexes", "Job has failed indexes"
        message = match_success_policy(self.spec.get("successPolicy"), self.completions, done)
        return ("Complete", SUCCESS_POLICY, message) if message is not None else None

    def _uncounted_list(self, kind: str) -> list[str]:
        return list((self.status.get("uncountedTerminatedPods") or {}).get(kind) or [])

    def _complete(self) -> bool:
        succeeded = self.status.get("succeeded", 0) + len(self._uncounted_list("succeeded"))
        completions = self.spec.get("completions")
        if completions is None:  # work queue: one success and nothing left running
            return succeeded > 0 and not any(is_pod_active(p) for p in self.pods)
        return bool(succeeded >= completions)

    def _finish(self, verdict: tuple[str, str, str]) -> None:
        kind, reason, message = verdict
        pc.set_condition(self.status, kind, "True", reason, message, self.now)
        if kind == "Complete":
            self.status["completionTime"] = rfc3339(self.now)
            self.verdict_event = ("Completed", "Job completed", "Normal")
        else:
            self.verdict_event = (reason, message, "Warning")

    # --- managing pods ----------------------------------------------------------------------------

    async def _manage(self, active: list[Obj], terminating: list[Obj]) -> list[Obj]:
        """manageJob: reach the wanted number of active pods; returns the active pods after."""
        self._suspend_condition()
        parallelism = self.spec.get("parallelism", 1)
        completions = self.spec.get("completions")
        succeeded = self.status.get("succeeded", 0) + len(self._uncounted_list("succeeded"))
        if self.spec.get("suspend"):
            want = 0
        elif completions is None:
            want = len(active) if succeeded > 0 else parallelism
        else:
            want = max(0, min(completions - succeeded, parallelism))
        surplus: list[Obj] = []
        if _is_indexed(self.job):
            surplus = self._misplaced_indexes(active)
            active = [p for p in active if p not in surplus]
        if len(active) > want:
            ranked = sorted(active, key=_deletion_rank)
            surplus += ranked[:len(active) - want]
            active = ranked[len(active) - want:]
        if surplus:
            await self._delete(surplus)
        busy = len(active) + (len(terminating) if self.spec.get("podReplacementPolicy") == "Failed" else 0)
        missing = want - busy
        if missing <= 0:
            return active
        if not self.per_index:  # per-index back-off is the index's own, when its pods are created
            wait = self.ctl.backoff.get(self.uid, BackoffRecord()).remaining(self.now)
            if wait > 0:
                self.ctl.runner.queue.add_after(self.key, wait)
                return active
        return active + await self._create(missing, active)

    def _suspend_condition(self) -> None:
        """The Suspended condition, and syncJob's Normal event when it turns: `Suspended` "Job suspended",
        `Resumed` "Job resumed"."""
        suspended = pc.condition({"status": self.status}, "Suspended")
        if self.spec.get("suspend"):
            if pc.set_condition(self.status, "Suspended", "True", "JobSuspended", "Job suspended", self.now):
                self.ctl._event(self.job, "Suspended", "Job suspended")
        elif suspended is not None and suspended.get("status") == "True":
            pc.set_condition(self.status, "Suspended", "False", "JobResumed", "Job resumed", self.now)
            self.ctl._event(self.job, "Resumed", "Job resumed")
            self.status["startTime"] = rfc3339(self.now)

    def _misplaced_indexes(self, active: list[Obj]) -> list[Obj]:
        """Active pods of an Indexed Job with no valid index, an index already done, or a duplicate index."""
        done = parse_indexes(self.status.get("completedIndexes", ""), self.completions) | self.failed_indexes
        seen: set[int] = set()
        out = []
        for pod in sorted(active, key=_deletion_rank, reverse=True):  # keep the best pod of each index
            index = completion_index(pod)
            if index is None or index >= (self.spec.get("completions") or 0) or index in done or index in seen:
                out.append(pod)
            else:
                seen.add(index)
        return out

    async def _create(self, count: int, active: list[Obj]) -> list[Obj]:
        """Create `count` pods in slow-start batches (1, 2, 4, …); a failed batch stops the rest."""
        indexes: list[int | None] = [None] * count
        if _is_indexed(self.job):
            done = parse_indexes(self.status.get("completedIndexes", ""), self.completions)
            indexes = list(first_pending_indexes(active, done | self.failed_indexes, count, self.completions))
            if self.per_index:
                indexes = self._indexes_out_of_backoff(indexes)
        if not indexes:
            return []
        exp = self.ctl.expectations.setdefault(self.uid, Expectations())
        exp.adds, exp.since = len(indexes), self.now
        created: list[Obj] = []
        batch = SLOW_START_INITIAL_BATCH
        pending = list(indexes)
        while pending:
            chunk, pending = pending[:batch], pending[batch:]
            results = await asyncio.gather(*(self._create_one(i) for i in chunk), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            created += [r for r in results if not isinstance(r, BaseException)]
            if errors:
                exp.adds -= len(errors) + len(pending)  # never to be observed
                raise errors[0]
            batch *= 2
        return created

    def _indexes_out_of_backoff(self, indexes: list[int | None]) -> list[int | None]:
        """getPodCreationInfoForIndependentIndexes: of the pending indexes, those whose own back-off is over
        (the Job is synced again when the next one's ends)."""
        ready: list[int | None] = []
        waits: list[float] = []
        for index in indexes:
            wait = remaining_time_per_index(self.delayed.get(index) if index is not None else None, self.now)
            if wait > 0:
                waits.append(wait)
            else:
                ready.append(index)
        if waits:
            self.ctl.runner.queue.add_after(self.key, min(waits))
        return ready

    async def _create_one(self, index: int | None) -> Obj:
        name = self.job["metadata"]["name"]
        ref = ownership.controller_ref(self.job, "batch/v1", "Job")
        prefix = f"{name}-" if index is None else pod_generate_name_with_index(name, index)
        pod = pc.pod_from_template(self.job, ref, generate_name=prefix)
        pod["metadata"].setdefault("finalizers", []).append(TRACKING_FINALIZER)
        if index is not None:
            add_completion_index(pod, index)
            if self.per_index:
                pod["metadata"].setdefault("annotations", {}).update(
                    index_failure_annotations(self.job, self.delayed.get(index)))
        out = await self.ctl.client.create(resource_path("pods", self.key[0]), pod)
        self.ctl._event(self.job, "SuccessfulCreate", f"Created pod: {out['metadata']['name']}")
        return out

    async def _delete(self, pods: list[Obj]) -> list[Obj]:
        """Graceful deletes only (S2): the agent removes each pod once its processes are dead."""
        if not pods:
            return []
        exp = self.ctl.expectations.setdefault(self.uid, Expectations())
        exp.deletes |= {p["metadata"]["uid"] for p in pods}
        exp.since = self.now

        async def one(pod: Obj) -> None:
            meta = pod["metadata"]
            try:
                await self.ctl.client.delete(resource_path("pods", meta.get("namespace", ""), meta["name"]))
            except ApiError as exc:
                exp.deletes.discard(meta["uid"])
                if exc.code != 404:
                    raise
                return
            self.ctl._event(self.job, "SuccessfulDelete", f"Deleted pod: {meta['name']}")
        await asyncio.gather(*(one(p) for p in pods))
        return pods

    # --- status -----------------------------------------------------------------------------------

    async def _write(self) -> None:
        status = omit_empty(self.status, STATUS_OMITEMPTY)
        if not (status.get("uncountedTerminatedPods") or {}).get("succeeded") and \
                not (status.get("uncountedTerminatedPods") or {}).get("failed"):
            status["uncountedTerminatedPods"] = {}
        if status == (self.job.get("status") or {}):
            return
        body = {**self.job, "status": status}
        meta = self.job["metadata"]
        self.job = await self.ctl.client.request(
            "PUT", resource_path("jobs", meta.get("namespace", ""), meta["name"], "status", group_version="batch/v1"),
            body)
        self.ctl.written[self.key] = self.job

    def _requeue_for_deadline(self) -> None:
        deadline, started = self.spec.get("activeDeadlineSeconds"), self.status.get("startTime")
        if deadline is None or not started or finish_condition({"status": self.status}) is not None:
            return
        self.ctl.runner.queue.add_after(self.key, max(0.0, parse_rfc3339(started) + deadline - self.now))


def _deletion_rank(pod: Obj) -> tuple[int, int, int]:
    """controller.ActivePods ordering, coarse: unassigned < pending < not ready < ready (first deleted first)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return (1 if spec.get("nodeName") else 0, 1 if status.get("phase") == "Running" else 0,
            1 if is_pod_ready(pod) else 0)
