"""Ported table tests of pkg/controller/job: pod failure policy, back-off, completion indexes (upstream case names)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.clock import parse_rfc3339, rfc3339
from kubelite.controllers.job_backoff import BackoffRecord, finished_time, new_backoff_record
from kubelite.controllers.job_failure_policy import match_pod_failure_policy
from kubelite.controllers.job_indexes import (
    COMPLETION_INDEX,
    first_pending_indexes,
    format_indexes,
    parse_indexes,
    pod_generate_name_with_index,
)

Obj = dict[str, Any]
T0 = parse_rfc3339("2009-11-10T23:00:00Z")


def failed_pod(*codes: tuple[str, int | None], conditions: list[Obj] | None = None, init: bool = False) -> Obj:
    statuses = [{"name": name, "state": {"terminated": {"exitCode": code}} if code is not None else {}}
                for name, code in codes]
    key = "initContainerStatuses" if init else "containerStatuses"
    return {"metadata": {"namespace": "default", "name": "mypod"},
            "status": {"phase": "Failed", key: statuses, "conditions": conditions or []}}


def rule(action: str, op: str | None = None, values: list[int] | None = None,
         conditions: list[Obj] | None = None) -> Obj:
    if conditions is not None:
        return {"action": action, "onPodConditions": conditions}
    return {"action": action, "onExitCodes": {"operator": op, "values": values}}


DISRUPTED = [{"type": "DisruptionTarget", "status": "True"}]


# TestMatchPodFailurePolicy (pod_failure_policy_test.go).
@pytest.mark.parametrize(("policy", "pod", "message", "count", "action"), [
    pytest.param({"rules": [rule("UnknownAction", "In", [1, 2]), rule("FailJob", "In", [2, 3])]},
                 failed_pod(("main-container", 2)),
                 "Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at "
                 "index 1", True, "FailJob",
                 id="unknown action for rule matching by exit codes - skip rule with unknown action"),
    pytest.param({"rules": [rule("UnkonwnAction", conditions=DISRUPTED), rule("Ignore", conditions=DISRUPTED)]},
                 failed_pod(conditions=DISRUPTED), None, False, "Ignore",
                 id="unknown action for rule matching by pod conditions - skip rule with unknown action"),
    pytest.param({"rules": [rule("Ignore", "UnknownOperator", [1, 2]), rule("FailJob", "In", [2, 3])]},
                 failed_pod(("main-container", 2)),
                 "Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at "
                 "index 1", True, "FailJob",
                 id="unknown operator - rule with unknown action is skipped for onExitCodes"),
    pytest.param(None, failed_pod(("", 2)), None, True, None, id="no policy rules"),
    pytest.param({"rules": [rule("Ignore", "In", [1, 2, 3])]}, failed_pod(("", 2)), None, False, "Ignore",
                 id="ignore rule matched for exit codes"),
    pytest.param({"rules": [rule("FailJob", "In", [1, 2, 3])]}, failed_pod(("main-container", 2)),
                 "Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at "
                 "index 0", True, "FailJob", id="FailJob rule matched for exit codes"),
    pytest.param({"rules": [rule("FailJob", "NotIn", [111])]},
                 {"metadata": {"namespace": "default", "name": "mypod"}, "status": {
                     "phase": "Failed",
                     "initContainerStatuses": [{"name": "init-container", "state": {"terminated": {"exitCode": 0}}}],
                     "containerStatuses": [
                         {"name": "main-container", "state": {"terminated": {"exitCode": 111}}},
                         {"name": "suppport-container", "state": {"terminated": {"exitCode": 0}}}]}},
                 None, True, None, id="successful containers are skipped by the rules"),
    pytest.param({"rules": [rule("FailIndex", "In", [1, 2, 3])]}, failed_pod(("", 2)), None, True, "FailIndex",
                 id="FailIndex rule matched for exit codes; JobBackoffLimitPerIndex enabled"),
    pytest.param({"rules": [rule("FailJob", "NotIn", [0])]},
                 failed_pod(("main-container", 1), ("suppport-container", 0)),
                 "Container main-container for pod default/mypod failed with exit code 1 matching FailJob rule at "
                 "index 0", True, "FailJob", id="pod failure policy with NotIn operator and value 0"),
    pytest.param({"rules": [rule("Count", "In", [1, 2, 3]), rule("FailJob", "In", [4, 5, 6])]},
                 failed_pod(("main-container", 6)),
                 "Container main-container for pod default/mypod failed with exit code 6 matching FailJob rule at "
                 "index 1", True, "FailJob", id="second jobfail rule matched for exit codes"),
    pytest.param({"rules": [rule("Count", "In", [1, 2, 3])]}, failed_pod(("foo", None), ("bar", 2)), None, True,
                 "Count", id="count rule matched for exit codes"),
    pytest.param({"rules": [rule("FailIndex", conditions=DISRUPTED)]}, failed_pod(conditions=DISRUPTED), None, True,
                 "FailIndex", id="FailIndex rule matched for pod conditions; JobBackoffLimitPerIndex enabled"),
    pytest.param({"rules": [rule("Ignore", conditions=DISRUPTED)]}, failed_pod(conditions=DISRUPTED), None, False,
                 "Ignore", id="ignore rule matched for pod conditions"),
    pytest.param({"rules": [rule("Ignore", conditions=[{"type": "DisruptionTarget", "status": "False"}])]},
                 failed_pod(conditions=[{"type": "DisruptionTarget", "status": "False"}]), None, False, "Ignore",
                 id="ignore rule matches by the status=False"),
    pytest.param({"rules": [rule("FailJob", conditions=DISRUPTED)]}, failed_pod(conditions=DISRUPTED),
                 "Pod default/mypod has condition DisruptionTarget matching FailJob rule at index 0", True, "FailJob",
                 id="FailJob rule matched for pod conditions"),
    pytest.param({"rules": [rule("Count", conditions=DISRUPTED)]}, failed_pod(conditions=DISRUPTED), None, True,
                 "Count", id="count rule matched for pod conditions"),
    pytest.param({"rules": [rule("FailJob", "In", [1, 2, 3])]}, failed_pod(("init-container", 3), init=True),
                 "Container init-container for pod default/mypod failed with exit code 3 matching FailJob rule at "
                 "index 0", True, "FailJob",
                 id="(kubelite) init container exit codes are matched after app containers"),
    pytest.param({"rules": [rule("FailJob", conditions=DISRUPTED)]},
                 failed_pod(conditions=[{"type": "DisruptionTarget", "status": "False"}]), None, True, None,
                 id="(kubelite) condition with another status matches no rule"),
])
def test_match_pod_failure_policy(policy: Obj | None, pod: Obj, message: str | None, count: bool,
                                  action: str | None) -> None:
    got = match_pod_failure_policy(policy, pod)
    assert (got.message, got.count_failed, got.action) == (message, count, action)


def finished(phase: str, at: float) -> Obj:
    return {"metadata": {}, "status": {"phase": phase, "containerStatuses": [
        {"state": {"terminated": {"finishedAt": rfc3339(at)}}}]}}


# TestNewBackoffRecord (backoff_utils_test.go); rfc3339 has second resolution, so upstream's milliseconds are seconds.
@pytest.mark.parametrize(("initial", "succeeded", "failed", "want"), [
    pytest.param(BackoffRecord(), [], [T0], BackoffRecord(1, T0), id="Empty backoff store and one new failure"),
    pytest.param(BackoffRecord(), [], [T0, T0 - 1], BackoffRecord(2, T0),
                 id="Empty backoff store and two new failures"),
    pytest.param(BackoffRecord(), [T0], [T0 - 2, T0 - 1], BackoffRecord(0, None),
                 id="Empty backoff store, two failures followed by success"),
    pytest.param(BackoffRecord(), [T0 - 2], [T0, T0 - 4, T0 - 3, T0 - 1], BackoffRecord(2, T0),
                 id="Empty backoff store, two failures, one success and two more failures"),
    pytest.param(BackoffRecord(2, None), [], [T0], BackoffRecord(3, T0),
                 id="Backoff store having failure count 2 and one new failure"),
    pytest.param(BackoffRecord(), [T0], [T0], BackoffRecord(0, None),
                 id="Empty backoff store with success and failure at same timestamp"),
    pytest.param(BackoffRecord(), [], [], BackoffRecord(0, None), id="Empty backoff store with no success/failure"),
    pytest.param(BackoffRecord(), [T0], [], BackoffRecord(0, None), id="Empty backoff store with one success"),
])
def test_new_backoff_record(initial: BackoffRecord, succeeded: list[float], failed: list[float],
                            want: BackoffRecord) -> None:
    got = new_backoff_record(initial, [finished("Succeeded", t) for t in succeeded],
                             [finished("Failed", t) for t in failed])
    assert got == want


def _terminated(at: float | None) -> Obj:
    return {"state": {"terminated": {"finishedAt": rfc3339(at)} if at is not None else {}}}


# TestGetFinishedTime.
@pytest.mark.parametrize(("pod", "want"), [
    pytest.param({"metadata": {}, "status": {"containerStatuses": [_terminated(T0 - 1), _terminated(T0),
                                                                   _terminated(T0 - 2)]}}, T0,
                 id="Pod with multiple containers and all containers terminated"),
    pytest.param({"metadata": {"deletionTimestamp": rfc3339(T0)}, "status": {"containerStatuses": [
        _terminated(T0 - 1), {"state": {"running": {}}}, _terminated(T0 - 2)]}}, T0,
        id="Pod with multiple containers; two containers in terminated state and one in running state; fallback to "
           "deletionTimestamp"),
    pytest.param({"metadata": {"deletionTimestamp": rfc3339(T0)},
                  "status": {"containerStatuses": [{"state": {"running": {}}}]}}, T0,
                 id="fallback to deletionTimestamp"),
    pytest.param({"metadata": {"deletionTimestamp": rfc3339(T0), "deletionGracePeriodSeconds": 30},
                  "status": {"containerStatuses": [{"state": {"running": {}}}]}}, T0 - 30,
                 id="fallback to deletionTimestamp, decremented by grace period"),
    pytest.param({"metadata": {}, "status": {"containerStatuses": [_terminated(None)], "conditions": [
        {"type": "Ready", "status": "False", "reason": "PodFailed", "lastTransitionTime": rfc3339(T0)}]}}, T0,
        id="fallback to PodReady.LastTransitionTime when status of the condition is False"),
    pytest.param({"metadata": {"deletionTimestamp": rfc3339(T0)}, "status": {
        "containerStatuses": [_terminated(None)],
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(T0 - 30)}]}}, T0,
        id="skip fallback to PodReady.LastTransitionTime when status of the condition is True"),
    pytest.param({"metadata": {"creationTimestamp": rfc3339(T0)}, "status": {"containerStatuses": [_terminated(None)]}},
                 T0, id="fallback to creationTimestamp"),
    pytest.param({"metadata": {}, "spec": {"initContainers": [{"name": "sidecar", "restartPolicy": "Always"}]},
                  "status": {"containerStatuses": [_terminated(T0 - 1)],
                             "initContainerStatuses": [{"name": "sidecar", **_terminated(T0)}]}}, T0,
                 id="Pod with sidecar container and all containers terminated"),
])
def test_get_finished_time(pod: Obj, want: float) -> None:
    assert finished_time(pod) == want


# TestGetRemainingBackoffTime (default 5 s, max 700 s as in the upstream table).
@pytest.mark.parametrize(("record", "now", "want"), [
    pytest.param(BackoffRecord(0, None), T0, 0, id="no failures"),
    pytest.param(BackoffRecord(1, T0), T0, 5, id="one failure; current time and failure time are same"),
    pytest.param(BackoffRecord(1, T0), T0 + 1, 4, id="one failure; current time == 1 second + failure time"),
    pytest.param(BackoffRecord(1, T0), T0 + 5, 0, id="one failure; current time == expected backoff time"),
    pytest.param(BackoffRecord(1, T0), T0 + 6, 0, id="one failure; current time == expected backoff time + 1 Second"),
    pytest.param(BackoffRecord(3, T0), T0, 20, id="three failures; current time and failure time are same"),
    pytest.param(BackoffRecord(8, T0), T0, 640,
                 id="eight failures; current time and failure time are same; backoff not exceeding maxBackoff"),
    pytest.param(BackoffRecord(9, T0), T0, 700,
                 id="nine failures; current time and failure time are same; backoff exceeding maxBackoff"),
])
def test_get_remaining_backoff_time(record: BackoffRecord, now: float, want: float) -> None:
    assert record.remaining(now, default=5, cap=700) == want


def test_default_backoff_is_10s_doubling_to_6_minutes() -> None:
    assert [BackoffRecord(n, T0).remaining(T0) for n in (1, 2, 3, 6, 7, 20)] == [10, 20, 40, 320, 360, 360]


def indexed(*indexes: str | None) -> list[Obj]:
    return [{"metadata": {"annotations": {COMPLETION_INDEX: i}} if i is not None else {"metadata": {}}}
            for i in indexes]


# TestFirstPendingIndexes (indexed_job_utils_test.go).
@pytest.mark.parametrize(("active", "succeeded", "count", "completions", "want"), [
    pytest.param([], set(), 5, 3, [0, 1, 2], id="cnt greater than completions"),
    pytest.param([], set(), 2, 5, [0, 1], id="cnt less than completions"),
    pytest.param(indexed("0", "1"), set(), 3, 10, [2, 3, 4], id="first pods active"),
    pytest.param(indexed("6"), {4, 5}, 6, 6, [0, 1, 2, 3], id="last pods active or succeeded"),
    pytest.param(indexed("3", "5", "8", None, "-3"), {2, 3, 4, 9}, 5, 20, [0, 1, 6, 7, 10], id="mixed"),
])
def test_first_pending_indexes(active: list[Obj], succeeded: set[int], count: int, completions: int,
                               want: list[int]) -> None:
    assert first_pending_indexes(active, succeeded, count, completions) == want


# The status half of TestCalculateSucceededIndexes: completedIndexes read back, clipped to completions.
@pytest.mark.parametrize(("text", "completions", "want"), [
    pytest.param("0-5,8-10", 8, "0-5", id="prev interval out of range"),
    pytest.param("0-5,8-10", 10, "0-5,8,9", id="prev interval partially out of range"),
    pytest.param("0,4,5,10-12", 13, "0,4,5,10-12", id="prev and new separate"),
    pytest.param("3,4,6", 9, "3,4,6", id="prev between new"),
    pytest.param("2-7", 10, "2-7", id="new within prev"),
    pytest.param("0-1", 2, "0,1", id="a run of two is listed, as orderedIntervals.String"),
    pytest.param("0,1-foo,bar", 4, "0", id="corrupted interval"),
])
def test_completed_indexes_round_trip(text: str, completions: int, want: str) -> None:
    assert format_indexes(parse_indexes(text, completions)) == want


# TestPodGenerateNameWithIndex.
@pytest.mark.parametrize(("job", "index", "want"), [
    pytest.param("indexed-job", 1, "indexed-job-1-", id="short job name"),
    pytest.param("hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooo", 1,
                 "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
                 id="job name exceeds MaxGeneneratedNameLength"),
    pytest.param("hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhoo", 1,
                 "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
                 id="job name with index suffix exceeds MaxGeneratedNameLength"),
])
def test_pod_generate_name_with_index(job: str, index: int, want: str) -> None:
    assert pod_generate_name_with_index(job, index) == want
