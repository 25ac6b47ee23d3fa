"""The Job and TTL-after-finished controllers against a real API server, the test playing the agent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.clock import rfc3339
from kubelite.controllers.job import TRACKING_FINALIZER, JobController
from kubelite.controllers.ttl_after_finished import TTLAfterFinishedController
from tests.controllers.harness import Harness, running

Obj = dict[str, Any]
JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"


class Cluster(Harness):
    async def job(self, name: str) -> Obj:
        return await self.client.get(f"{JOBS}/{name}")

    async def pods(self, job: str) -> list[Obj]:
        out = await self.client.get(PODS, {"labelSelector": f"batch.kubernetes.io/job-name={job}"})
        return sorted(out["items"], key=lambda p: p["metadata"]["creationTimestamp"] + p["metadata"]["name"])

    async def finish(self, pod: Obj, phase: str, exit_code: int = 0, conditions: list[Obj] | None = None) -> None:
        """What an agent reports when the pod's only container exits."""
        terminated = {"exitCode": exit_code, "finishedAt": rfc3339(self.clock.now())}
        status = {"phase": phase, "conditions": conditions or [],
                  "containerStatuses": [{"name": "c", "state": {"terminated": terminated}}]}
        await self.client.patch(f"{PODS}/{pod['metadata']['name']}/status", {"status": status},
                                "application/merge-patch+json")

    async def active(self, job: str) -> list[Obj]:
        return [p for p in await self.pods(job) if not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with running(tmp_path, JobController, TTLAfterFinishedController) as h:
        yield Cluster(h.client, h.clock)


def job(name: str, **spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}, **spec}}


def conditions(job: Obj) -> dict[str, str]:
    return {c["type"]: c["reason"] for c in (job.get("status") or {}).get("conditions") or []
            if c["status"] == "True"}


async def test_completions_with_parallelism_complete_exactly(cluster: Cluster) -> None:
    await cluster.client.create(JOBS, job("work", completions=3, parallelism=2))

    async def two_active() -> bool:
        return len(await cluster.active("work")) == 2
    await cluster.until(two_active, "two pods")
    pods = await cluster.pods("work")
    assert all(TRACKING_FINALIZER in p["metadata"]["finalizers"] for p in pods)
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "Job" for p in pods)
    await cluster.finish(pods[0], "Succeeded")

    async def third_created() -> bool:
        return len(await cluster.pods("work")) == 3 and len(await cluster.active("work")) == 2
    await cluster.until(third_created, "a third pod after one success")
    for pod in await cluster.active("work"):
        await cluster.finish(pod, "Succeeded")

    async def complete() -> bool:
        return "Complete" in conditions(await cluster.job("work"))
    await cluster.until(complete, "Complete")
    done = await cluster.job("work")
    assert conditions(done) == {"SuccessCriteriaMet": "CompletionsReached", "Complete": "CompletionsReached"}
    assert done["status"]["succeeded"] == 3
    assert not {"failed", "active"} & set(done["status"]), "omitempty int32s upstream: no 0 written"
    assert done["status"]["completionTime"] and done["status"]["uncountedTerminatedPods"] == {}
    pods = await cluster.pods("work")
    assert len(pods) == 3 and not any(p["metadata"].get("finalizers") for p in pods)

    async def reasons() -> list[str]:
        events = await cluster.client.get("/api/v1/namespaces/default/events")
        return [e["reason"] for e in events["items"]]

    async def completed_event() -> bool:
        return "Completed" in await reasons()
    await cluster.until(completed_event, "the Completed event")
    assert (await reasons()).count("SuccessfulCreate") == 3


async def test_backoff_limit_with_backoff_between_failures(cluster: Cluster) -> None:
    await cluster.client.create(JOBS, job("flaky", backoffLimit=1))

    async def one_active() -> bool:
        return len(await cluster.active("flaky")) == 1
    await cluster.until(one_active, "first pod")
    await cluster.finish((await cluster.active("flaky"))[0], "Failed", exit_code=1)

    async def counted() -> bool:
        return (await cluster.job("flaky"))["status"].get("failed") == 1
    await cluster.until(counted, "one failure counted")
    await cluster.clock.advance(5)
    assert await cluster.active("flaky") == []  # back-off: 10 s after the first failure
    await cluster.until(one_active, "replacement after the back-off", step=0.5, rounds=40)
    await cluster.finish((await cluster.active("flaky"))[0], "Failed", exit_code=1)

    async def failed() -> bool:
        return "Failed" in conditions(await cluster.job("flaky"))
    await cluster.until(failed, "Failed")
    out = await cluster.job("flaky")
    assert conditions(out) == {"FailureTarget": "BackoffLimitExceeded", "Failed": "BackoffLimitExceeded"}
    assert out["status"]["failed"] == 2 and "completionTime" not in out["status"]


@pytest.mark.parametrize(("rules", "exit_code", "pod_conditions", "want"), [
    pytest.param([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}], 42, [],
                 {"failed": 1, "reason": "PodFailurePolicy"}, id="FailJob on exit code fails the Job at once"),
    pytest.param([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}], 137,
                 [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}],
                 {"failed": 0, "replaced": True}, id="Ignore on DisruptionTarget: not counted, replaced"),
    pytest.param([{"action": "Count", "onExitCodes": {"operator": "In", "values": [3]}}], 3, [],
                 {"failed": 1, "replaced": True}, id="Count: counted against backoffLimit"),
])
async def test_pod_failure_policy(cluster: Cluster, rules: list[Obj], exit_code: int, pod_conditions: list[Obj],
                                  want: dict[str, Any]) -> None:
    await cluster.client.create(JOBS, job("pfp", backoffLimit=6, podFailurePolicy={"rules": rules}))

    async def one_active() -> bool:
        return len(await cluster.active("pfp")) == 1
    await cluster.until(one_active, "first pod")
    first = (await cluster.active("pfp"))[0]
    await cluster.finish(first, "Failed", exit_code, pod_conditions)

    async def released() -> bool:
        return not any(p["metadata"].get("finalizers") for p in await cluster.pods("pfp")
                       if p["metadata"]["name"] == first["metadata"]["name"])
    await cluster.until(released, "the failed pod accounted for")
    if want.get("reason"):
        async def failed() -> bool:
            return "Failed" in conditions(await cluster.job("pfp"))
        await cluster.until(failed, "Failed")
        assert conditions(await cluster.job("pfp"))["Failed"] == want["reason"]
    if want.get("replaced"):
        await cluster.until(one_active, "replacement", step=0.5, rounds=60)
    assert (await cluster.job("pfp"))["status"].get("failed", 0) == want["failed"]


async def test_indexed_job_pods_carry_their_index(cluster: Cluster) -> None:
    await cluster.client.create(JOBS, job("idx", completions=3, parallelism=3, completionMode="Indexed"))

    async def three() -> bool:
        return len(await cluster.active("idx")) == 3
    await cluster.until(three, "three pods")
    pods = await cluster.pods("idx")
    index_key = "batch.kubernetes.io/job-completion-index"
    assert sorted(p["metadata"]["annotations"][index_key] for p in pods) == ["0", "1", "2"]
    assert all(p["metadata"]["labels"][index_key] == p["metadata"]["annotations"][index_key] for p in pods)
    assert all(p["metadata"]["name"].startswith(f"idx-{p['metadata']['annotations'][index_key]}-") for p in pods)
    env = pods[0]["spec"]["containers"][0]["env"]
    assert env == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"apiVersion": "v1",
        "fieldPath": f"metadata.annotations['{index_key}']"}}}]
    by_index = {p["metadata"]["annotations"][index_key]: p for p in pods}
    await cluster.finish(by_index["1"], "Succeeded")
    await cluster.finish(by_index["2"], "Failed", exit_code=1)

    async def progress() -> bool:
        status = (await cluster.job("idx"))["status"]
        return status.get("completedIndexes") == "1" and status.get("failed") == 1

    await cluster.until(progress, "index 1 completed, one failure")

    async def index_2_again() -> bool:
        return sorted(p["metadata"]["annotations"][index_key] for p in await cluster.active("idx")) == ["0", "2"]
    await cluster.until(index_2_again, "a new pod for index 2 only", step=0.5, rounds=60)


async def test_active_deadline_fails_the_job(cluster: Cluster) -> None:
    await cluster.client.create(JOBS, job("slow", activeDeadlineSeconds=30))

    async def one_active() -> bool:
        return len(await cluster.active("slow")) == 1
    await cluster.until(one_active, "first pod")
    await cluster.clock.advance(31)

    async def failed() -> bool:
        return "Failed" in conditions(await cluster.job("slow"))
    await cluster.until(failed, "DeadlineExceeded")
    assert conditions(await cluster.job("slow"))["Failed"] == "DeadlineExceeded"
    assert await cluster.pods("slow") == []  # deleted (unscheduled pods go at once), their finalizers released


async def test_ttl_after_finished_deletes_the_job(cluster: Cluster) -> None:
    await cluster.client.create(JOBS, job("short", ttlSecondsAfterFinished=60))

    async def one_active() -> bool:
        return len(await cluster.active("short")) == 1
    await cluster.until(one_active, "first pod")
    await cluster.finish((await cluster.active("short"))[0], "Succeeded")

    async def complete() -> bool:
        return "Complete" in conditions(await cluster.job("short"))
    await cluster.until(complete, "Complete")
    await cluster.clock.advance(30)
    assert (await cluster.job("short"))["metadata"]["name"] == "short"

    async def gone() -> bool:
        jobs = await cluster.client.get(JOBS)
        return not any(j["metadata"]["name"] == "short" and not j["metadata"].get("deletionTimestamp")
                       for j in jobs["items"])
    await cluster.until(gone, "the job deleted 60 s after it finished", step=1, rounds=60)


async def test_suspend_deletes_active_pods_and_resume_recreates_them(cluster: Cluster) -> None:
    await cluster.client.create(JOBS, job("pause", parallelism=2, completions=4))

    async def two() -> bool:
        return len(await cluster.active("pause")) == 2
    await cluster.until(two, "two pods")
    await cluster.client.patch(f"{JOBS}/pause", {"spec": {"suspend": True}}, "application/merge-patch+json")

    async def suspended() -> bool:
        out = await cluster.job("pause")
        return "Suspended" in conditions(out) and not await cluster.active("pause")
    await cluster.until(suspended, "Suspended with no active pods")
    assert conditions(await cluster.job("pause"))["Suspended"] == "JobSuspended"
    await cluster.client.patch(f"{JOBS}/pause", {"spec": {"suspend": False}}, "application/merge-patch+json")
    await cluster.until(two, "two pods again after resume (no back-off: suspension is not a failure)")

    async def resumed() -> bool:
        out = await cluster.job("pause")
        return any(c["type"] == "Suspended" and (c["status"], c["reason"]) == ("False", "JobResumed")
                   for c in out["status"]["conditions"])
    await cluster.until(resumed, "Suspended=False, JobResumed")
    assert (await cluster.job("pause"))["status"].get("failed", 0) == 0

    async def events_recorded() -> bool:  # syncJob's Normal events as the condition turns, once each
        events = (await cluster.client.get("/api/v1/namespaces/default/events"))["items"]
        turns = [(e["reason"], e["message"], e.get("count", 1)) for e in events
                 if e["involvedObject"]["name"] == "pause" and e["reason"] in ("Suspended", "Resumed")]
        return sorted(turns) == [("Resumed", "Job resumed", 1), ("Suspended", "Job suspended", 1)]
    await cluster.until(events_recorded, "a Suspended and a Resumed event")


async def test_pods_of_a_job_that_no_longer_exists_are_released(cluster: Cluster) -> None:
    """cleanupOrphanPods: the tracking finalizer must not keep pods of a deleted Job (e.g. deleted while the
    controller was down) forever."""
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "gone", "uid": "0000-gone", "controller": True}
    await cluster.client.create(PODS, {"metadata": {"name": "left-behind", "finalizers": [TRACKING_FINALIZER],
                                                    "ownerReferences": [ref],
                                                    "labels": {"batch.kubernetes.io/job-name": "gone"}},
                                       "spec": {"restartPolicy": "Never",
                                                "containers": [{"name": "c", "image": "busybox"}]}})

    async def released() -> bool:
        return not (await cluster.client.get(f"{PODS}/left-behind"))["metadata"].get("finalizers")
    await cluster.until(released, "the finalizer removed")


INDEX = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"


async def by_index(cluster: Cluster, name: str) -> dict[str, Obj]:
    """The active pod of each index."""
    return {p["metadata"]["annotations"][INDEX]: p for p in await cluster.active(name)}


async def until_finished(cluster: Cluster, name: str, step: float = 0.005) -> Obj:
    async def finished() -> bool:
        return bool({"Complete", "Failed"} & set(conditions(await cluster.job(name))))
    await cluster.until(finished, f"{name} to finish", step=step)
    return await cluster.job(name)


async def test_backoff_limit_per_index_fails_only_its_index(cluster: Cluster) -> None:
    """TestJobBackoffLimitPerIndex's "job with some indexes failed": index 1 fails beyond its own limit of 1 and is
    not run again, the other indexes finish, and the Job fails with FailedIndexes (backoffLimit stays untouched)."""
    await cluster.client.create(JOBS, job("per", completions=3, parallelism=3, completionMode="Indexed",
                                          backoffLimitPerIndex=1))

    async def three() -> bool:
        return len(await cluster.active("per")) == 3
    await cluster.until(three, "three pods")
    pods = await by_index(cluster, "per")
    assert {i: p["metadata"]["annotations"][FAILURE_COUNT] for i, p in pods.items()} == {"0": "0", "1": "0", "2": "0"}
    await cluster.finish(pods["1"], "Failed", exit_code=1)
    await cluster.clock.advance(5)
    assert sorted(await by_index(cluster, "per")) == ["0", "2"]  # index 1 waits out its own 10 s back-off
    first = next(p for p in await cluster.pods("per") if p["metadata"]["name"] == pods["1"]["metadata"]["name"])
    assert TRACKING_FINALIZER in first["metadata"]["finalizers"]  # uncounted until its index is replaced
    assert (await cluster.job("per"))["status"].get("failed", 0) == 0

    async def index_1_again() -> bool:
        return "1" in await by_index(cluster, "per")
    await cluster.until(index_1_again, "a new pod for index 1", step=0.5, rounds=60)
    second = (await by_index(cluster, "per"))["1"]
    assert second["metadata"]["annotations"][FAILURE_COUNT] == "1"

    async def first_counted() -> bool:
        return (await cluster.job("per"))["status"].get("failed") == 1
    await cluster.until(first_counted, "the first failure counted once its index was replaced")
    await cluster.finish(second, "Failed", exit_code=1)

    async def index_1_failed() -> bool:
        return (await cluster.job("per"))["status"].get("failedIndexes") == "1"
    await cluster.until(index_1_failed, "index 1 failed")
    await cluster.clock.advance(30)
    assert sorted(await by_index(cluster, "per")) == ["0", "2"]  # a failed index is not run again
    for pod in (await by_index(cluster, "per")).values():
        await cluster.finish(pod, "Succeeded")
    done = await until_finished(cluster, "per")
    assert conditions(done) == {"FailureTarget": "FailedIndexes", "Failed": "FailedIndexes"}
    st = done["status"]
    assert (st["completedIndexes"], st["failedIndexes"], st["failed"], st["succeeded"]) == ("0,2", "1", 2, 2)


@pytest.mark.parametrize(("spec", "exit_code", "want_reason", "want_failed_indexes"), [
    pytest.param({"backoffLimitPerIndex": 0, "maxFailedIndexes": 1}, 1, "MaxFailedIndexesExceeded", "0,1",
                 id="more failed indexes than maxFailedIndexes fail the Job at once"),
    pytest.param({"backoffLimitPerIndex": 5, "maxFailedIndexes": 1, "podFailurePolicy": {"rules": [
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}}]}}, 42,
        "MaxFailedIndexesExceeded", "0,1", id="a FailIndex rule fails the index without retries"),
])
async def test_failed_indexes_fail_the_job(cluster: Cluster, spec: Obj, exit_code: int, want_reason: str,
                                           want_failed_indexes: str) -> None:
    await cluster.client.create(JOBS, job("many", completions=4, parallelism=4, completionMode="Indexed", **spec))

    async def four() -> bool:
        return len(await cluster.active("many")) == 4
    await cluster.until(four, "four pods")
    pods = await by_index(cluster, "many")
    await cluster.finish(pods["0"], "Failed", exit_code=exit_code)

    async def index_0_failed() -> bool:
        return (await cluster.job("many"))["status"].get("failedIndexes") == "0"
    await cluster.until(index_0_failed, "index 0 failed")
    assert "Failed" not in conditions(await cluster.job("many"))  # one failed index is within maxFailedIndexes
    await cluster.finish(pods["1"], "Failed", exit_code=exit_code)

    async def rest_deleted() -> bool:
        return await cluster.active("many") == []
    await cluster.until(rest_deleted, "the remaining indexes' pods deleted")
    for pod in await cluster.pods("many"):  # the agent ends them (with a pod failure policy the Job waits for it)
        if pod["metadata"].get("deletionTimestamp"):
            try:
                await cluster.finish(pod, "Failed", exit_code=137)
            except ApiError as exc:
                assert exc.code == 404  # counted and gone meanwhile (no pod failure policy: deleted is failed)
    done = await until_finished(cluster, "many")
    assert conditions(done)["Failed"] == want_reason
    assert done["status"]["failedIndexes"] == want_failed_indexes  # pods the Job deleted are no failed indexes


async def test_success_policy_completes_the_job_early(cluster: Cluster) -> None:
    """An Indexed Job whose leader (index 0) succeeded is done: the other pods are deleted, reason SuccessPolicy."""
    await cluster.client.create(JOBS, job("leader", completions=3, parallelism=3, completionMode="Indexed",
                                          successPolicy={"rules": [{"succeededIndexes": "0"}]}))

    async def three() -> bool:
        return len(await cluster.active("leader")) == 3
    await cluster.until(three, "three pods")
    await cluster.finish((await by_index(cluster, "leader"))["0"], "Succeeded")
    done = await until_finished(cluster, "leader")
    assert conditions(done) == {"SuccessCriteriaMet": "SuccessPolicy", "Complete": "SuccessPolicy"}
    assert next(c for c in done["status"]["conditions"] if c["type"] == "Complete")["message"] == \
        "Matched rules at index 0"
    assert (done["status"]["completedIndexes"], done["status"]["succeeded"]) == ("0", 1)
    assert await cluster.active("leader") == []
