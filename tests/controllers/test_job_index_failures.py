"""Ported table tests for backoffLimitPerIndex and successPolicy (pkg/controller/job: indexed_job_utils_test.go,
backoff_utils_test.go, success_policy_test.go), each case named as upstream names it."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.clock import parse_rfc3339, rfc3339
from kubelite.controllers.job import TRACKING_FINALIZER, is_pod_failed, tracked_pods
from kubelite.controllers.job_index_failures import (
    INDEX_FAILURE_COUNT,
    INDEX_IGNORED_FAILURE_COUNT,
    calculate_failed_indexes,
    index_failure_count,
    is_index_failed,
    new_index_failure_counts,
    pods_with_delayed_deletion_per_index,
    remaining_time_per_index,
)
from kubelite.controllers.job_indexes import COMPLETION_INDEX, first_pending_indexes, parse_indexes
from kubelite.controllers.job_success_policy import match_success_policy
from kubelite.controllers.podutil import is_pod_active

Obj = dict[str, Any]
T0 = parse_rfc3339("2009-11-10T23:00:00Z")


def pod(index: str | None = None, failures: str | None = "0", phase: str = "Failed", uid: str = "a",
        finalizer: bool = True, deleted_at: float | None = None, ignored: str | None = None,
        exit_code: int | None = None, conditions: list[Obj] | None = None) -> Obj:
    """buildPod(): only what a case sets."""
    annotations = {}
    if index is not None:
        annotations[COMPLETION_INDEX] = index
    if failures is not None:
        annotations[INDEX_FAILURE_COUNT] = failures
    if ignored is not None:
        annotations[INDEX_IGNORED_FAILURE_COUNT] = ignored
    meta: Obj = {"name": f"pod-{uid}", "namespace": "default", "uid": uid, "annotations": annotations,
                 "finalizers": [TRACKING_FINALIZER] if finalizer else []}
    if deleted_at is not None:
        meta["deletionTimestamp"] = rfc3339(deleted_at)
    status: Obj = {"phase": phase, "conditions": conditions or []}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "c", "state": {"terminated": {"exitCode": exit_code}}}]
    return {"metadata": meta, "spec": {}, "status": status}


def job(completions: int = 2, per_index: int | None = None, policy: Obj | None = None, failed: str | None = None
        ) -> Obj:
    spec: Obj = {"completions": completions, "completionMode": "Indexed"}
    if per_index is not None:
        spec["backoffLimitPerIndex"] = per_index
    if policy is not None:
        spec["podFailurePolicy"] = policy
    return {"spec": spec, "status": {"failedIndexes": failed} if failed is not None else {}}


FAIL_INDEX_ON_3 = {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3]}}]}
IGNORE_DISRUPTION = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                                         "status": "True"}]}]}
DISRUPTED = [{"type": "DisruptionTarget", "status": "True"}]


@pytest.mark.parametrize(("j", "p", "want"), [
    pytest.param(job(per_index=0), pod("0", "0"), True,
                 id="failed pod exceeding backoffLimitPerIndex, when backoffLimitPerIndex=0"),
    pytest.param(job(per_index=1), pod("1", "1"), True,
                 id="failed pod exceeding backoffLimitPerIndex, when backoffLimitPerIndex=1"),
    pytest.param(job(per_index=1, policy=FAIL_INDEX_ON_3), pod("0", "0", exit_code=3), True,
                 id="matching FailIndex pod failure policy"),
    pytest.param(job(per_index=1), pod("0", "0"), False, id="a failure within the index's budget"),
    pytest.param(job(per_index=0, policy=IGNORE_DISRUPTION), pod("0", "0", conditions=DISRUPTED), False,
                 id="a failure the pod failure policy ignores"),
])
def test_is_index_failed(j: Obj, p: Obj, want: bool) -> None:
    """TestIsIndexFailed."""
    assert is_index_failed(j, p, is_pod_failed(p, j)) is want


def _failed_indexes(j: Obj, pods: list[Obj]) -> set[int]:
    previous = parse_indexes(j["status"].get("failedIndexes") or "", j["spec"]["completions"])
    return calculate_failed_indexes(j, tracked_pods(pods, set()), lambda p: is_pod_failed(p, j), previous)


@pytest.mark.parametrize(("j", "pods", "want"), [
    pytest.param(job(per_index=1), [pod("0", "0", uid="a"), pod("1", "1", uid="b")], {1}, id="one new index failed"),
    pytest.param(job(per_index=0), [pod("0", "0", finalizer=False)], set(), id="pod without finalizer is ignored"),
    pytest.param(job(per_index=0), [pod("3", "0", finalizer=False)], set(), id="pod outside completions is ignored"),
    pytest.param(job(per_index=0, failed="0"), [pod("1", "0")], {0, 1}, id="extend the failed indexes"),
    pytest.param(job(per_index=0, failed=""), [pod("1", "0")], {1}, id="prev failed indexes empty"),
    pytest.param(job(per_index=0, failed="9"), [pod("1", "0")], {1}, id="prev failed indexes outside the completions"),
])
def test_calculate_failed_indexes(j: Obj, pods: list[Obj], want: set[int]) -> None:
    """TestCalculateFailedIndexes."""
    assert _failed_indexes(j, pods) == want


@pytest.mark.parametrize(("j", "pods", "expected_removals", "want"), [
    pytest.param(job(3, per_index=1), [pod("0", "0", uid="a"), pod("1", "1", uid="b"), pod("2", "0", uid="c")],
                 set(), ["a", "c"], id="failed pods are kept corresponding to non-failed indexes are kept"),
    pytest.param(job(per_index=0), [pod("0", "0", finalizer=False)], set(), [],
                 id="failed pod without finalizer; the pod's deletion is not delayed as it already started"),
    pytest.param(job(per_index=0), [pod("0", "0")], {"a"}, [],
                 id="failed pod with expected finalizer removal; the pod's deletion is not delayed as it already "
                    "started"),
    pytest.param(job(per_index=0), [pod("4", "0")], set(), [],
                 id="failed pod with index outside of completions; the pod's deletion is not delayed"),
    pytest.param(job(per_index=1), [pod("0", "0", uid="a1"), pod("0", "1", "Running", uid="a2")], set(), [],
                 id="failed pod for active index; the pod's deletion is not delayed as it is already replaced"),
    pytest.param(job(per_index=1), [pod("0", "0", uid="a1"), pod("0", "1", "Succeeded", uid="a2")], set(), [],
                 id="failed pod for succeeded index; the pod's deletion is not delayed as it is already replaced"),
    pytest.param(job(per_index=4), [pod("0", "0", uid="a1"), pod("0", "2", uid="a3"), pod("0", "1", uid="a2")],
                 set(), ["a3"], id="multiple failed pods for index with different failure count; only the pod with "
                                   "highest failure count is kept"),
    pytest.param(job(per_index=4), [pod("0", "1", uid="a1", deleted_at=T0 - 1), pod("0", "1", uid="a3", deleted_at=T0),
                                    pod("0", "1", uid="a2", deleted_at=T0 - 2)],
                 set(), ["a3"], id="multiple failed pods for index with different finish times; only the last failed "
                                   "pod is kept"),
])
def test_get_pods_with_delayed_deletion_per_index(j: Obj, pods: list[Obj], expected_removals: set[str],
                                                  want: list[str]) -> None:
    """TestGetPodsWithDelayedDeletionPerIndex."""
    tracked = tracked_pods(pods, expected_removals)
    succeeded = {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in tracked
                 if p["status"]["phase"] == "Succeeded"}
    got = pods_with_delayed_deletion_per_index(j, tracked, lambda p: is_pod_failed(p, j), succeeded,
                                               _failed_indexes(j, pods), [p for p in pods if is_pod_active(p)])
    assert sorted(p["metadata"]["uid"] for p in got.values()) == want


@pytest.mark.parametrize(("j", "replaced", "want"), [
    pytest.param(job(), None, (0, 0), id="first pod created"),
    pytest.param(job(), pod("0", "0"), (1, 0), id="failed pod being replaced with 0 index failure count"),
    pytest.param(job(), pod("0", "3"), (4, 0), id="failed pod being replaced with >0 index failure count"),
    pytest.param(job(policy=IGNORE_DISRUPTION), pod("3", "3", conditions=DISRUPTED), (3, 1),
                 id="failed pod being replaced, matching the ignore rule"),
])
def test_get_new_index_failure_count_value(j: Obj, replaced: Obj | None, want: tuple[int, int]) -> None:
    """TestGetNewIndexFailureCountValue."""
    assert new_index_failure_counts(j, replaced) == want


@pytest.mark.parametrize(("value", "want"), [
    pytest.param(None, 0, id="no annotation"),
    pytest.param("2", 2, id="valid value"),
    pytest.param(str(2**31 - 1), 2**31 - 1, id="valid maxint32 value"),
    pytest.param(str(2**31), 0, id="too large value"),
    pytest.param("-1", 0, id="negative value"),
    pytest.param("xyz", 0, id="invalid int value"),
])
def test_get_index_failure_count(value: str | None, want: int) -> None:
    """TestGetIndexFailureCount."""
    assert index_failure_count(pod(failures=value)) == want


@pytest.mark.parametrize(("last_failed", "want"), [
    pytest.param(None, 0.0, id="no failures"),
    pytest.param(pod(failures="2", deleted_at=T0), 20.0,
                 id="two prev failures; current time and failure time are same"),
    pytest.param(pod(failures="1", ignored="1", deleted_at=T0), 20.0,
                 id="one prev failure counted and one ignored; current time and failure time are same"),
])
def test_get_remaining_backoff_time_per_index(last_failed: Obj | None, want: float) -> None:
    """TestGetRemainingBackoffTimePerIndex (5 s default, 700 s cap)."""
    assert remaining_time_per_index(last_failed, T0, 5.0, 700.0) == pytest.approx(want)


def test_first_pending_indexes_with_failed_indexes() -> None:
    """TestFirstPendingIndexes "with failed indexes": failed indexes are not pending, as succeeded ones."""
    active = [pod("3", phase="Pending"), pod("9", phase="Pending")]
    succeeded, failed = {1, 5, 9}, {2, 6, 7}
    assert first_pending_indexes(active, succeeded | failed, 5, 20) == [0, 4, 8, 10, 11]


def intervals(*pairs: tuple[int, int]) -> set[int]:
    return {i for lo, hi in pairs for i in range(lo, hi + 1)}


def rules(*items: Obj) -> Obj:
    return {"rules": list(items)}


M0 = "Matched rules at index 0"


@pytest.mark.parametrize(("policy", "succeeded", "want"), [
    pytest.param(None, intervals((0, 0)), None, id="successPolicy is null"),
    pytest.param(rules(), intervals((0, 0)), None, id="any rules are nothing"),
    pytest.param(rules({"succeededIndexes": "invalid-form"}), intervals((0, 0)), None,
                 id="rules.succeededIndexes is invalid format"),
    pytest.param(rules({"succeededIndexes": "0-2"}), intervals((0, 2), (4, 7)), M0,
                 id="rules.succeededIndexes is specified; succeededIndexes matched rules"),
    pytest.param(rules({"succeededIndexes": "3"}), intervals((0, 2)), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules"),
    pytest.param(rules({"succeededCount": 2}), intervals((0, 2)), M0,
                 id="rules.succeededCount is specified; succeededIndexes matched rules"),
    pytest.param(rules({"succeededCount": 4}), intervals((0, 2)), None,
                 id="rules.succeededCount is specified; succeededIndexes didn't match rules"),
    pytest.param(rules({"succeededIndexes": "9"}, {"succeededIndexes": "4,6"}), intervals((0, 2), (4, 7)),
                 "Matched rules at index 1",
                 id="multiple rules; rules.succeededIndexes is specified; succeededIndexes met one of rules"),
    pytest.param(rules({"succeededIndexes": "0,1"}, {"succeededIndexes": "5"}), intervals((0, 2), (4, 7)), M0,
                 id="multiple rules; rules.succeededIndexes is specified; succeededIndexes met all rules"),
    pytest.param(rules({"succeededIndexes": "3-6", "succeededCount": 2}), intervals((0, 2), (4, 7)), M0,
                 id="rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes met all rules"),
    pytest.param(rules({"succeededIndexes": "3-6", "succeededCount": 2}), intervals((0, 2), (6, 7)), None,
                 id="rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes didn't match "
                    "rules"),
    pytest.param(rules({"succeededCount": 4}), set(), None,
                 id="rules.succeededIndexes is specified; succeededIndexes are nothing"),
    pytest.param(rules({"succeededIndexes": "2-4,6-8"}), intervals((1, 5), (6, 9)), M0,
                 id="rules.succeededIndexes is specified; succeededIndexes matched rules; rules is proper subset of "
                    "succeededIndexes"),
    pytest.param(rules({"succeededIndexes": "2-4,6-9"}), intervals((2, 4), (6, 9)), M0,
                 id="rules.succeededIndexes is specified; succeededIndexes matched rules; rules equals "
                    "succeededIndexes"),
    pytest.param(rules({"succeededIndexes": "2-4,8-12"}), intervals((2, 5), (7, 15)), M0,
                 id="rules.succeededIndexes is specified; succeededIndexes matched rules; rules is subset of "
                    "succeededIndexes"),
    pytest.param(rules({"succeededIndexes": ""}), intervals((1, 3)), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules is an empty set"),
    pytest.param(rules({"succeededIndexes": ""}), set(), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules; succeededIndexes is an "
                    "empty set"),
    pytest.param(rules({"succeededIndexes": "10-12,14-16"}), intervals((1, 3), (5, 7)), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules; all elements of "
                    "rules.succeededIndexes aren't included in succeededIndexes"),
    pytest.param(rules({"succeededIndexes": "1-3,5-7"}), intervals((2, 4), (6, 8)), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules overlaps "
                    "succeededIndexes at first"),
    pytest.param(rules({"succeededIndexes": "1-3,5-7", "succeededCount": 4}), intervals((2, 4), (6, 8)), M0,
                 id="rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; "
                    "rules overlaps succeededIndexes at first"),
    pytest.param(rules({"succeededIndexes": "2-4,6-9"}), intervals((1, 3), (5, 7)), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules overlaps "
                    "succeededIndexes at last"),
    pytest.param(rules({"succeededIndexes": "2-4,6-9", "succeededCount": 4}), intervals((1, 3), (5, 7)), M0,
                 id="rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; "
                    "rules overlaps succeededIndexes at last"),
    pytest.param(rules({"succeededIndexes": "0-4,6-9"}), intervals((1, 3), (7, 8)), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules completely "
                    "overlaps succeededIndexes"),
    pytest.param(rules({"succeededIndexes": "0-4,6-9", "succeededCount": 5}), intervals((1, 3), (7, 8)), M0,
                 id="rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; "
                    "rules completely overlaps succeededIndexes"),
    pytest.param(rules({"succeededIndexes": "0-6,8-9"}), intervals((1, 3), (5, 9)), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules overlaps "
                    "multiple succeededIndexes at last"),
    pytest.param(rules({"succeededIndexes": "0-6,8-9", "succeededCount": 7}), intervals((1, 3), (5, 9)), M0,
                 id="rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; "
                    "rules overlaps multiple succeededIndexes at last"),
    pytest.param(rules({"succeededIndexes": "0-5,7-9"}), intervals((1, 5), (7, 10)), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules overlaps "
                    "succeededIndexes at first, and rules equals succeededIndexes at last"),
    pytest.param(rules({"succeededIndexes": "0-5,7-9", "succeededCount": 8}), intervals((1, 5), (7, 10)), M0,
                 id="rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; "
                    "rules overlaps succeededIndexes at first, and rules equals succeededIndexes at last"),
    pytest.param(rules({"succeededIndexes": "0-3,6-9"}), intervals((1, 10)), None,
                 id="rules.succeededIndexes is specified; succeededIndexes didn't match rules; the first rules "
                    "overlaps succeededIndexes at first"),
    pytest.param(rules({"succeededIndexes": "0-3,6-9", "succeededCount": 7}), intervals((1, 10)), M0,
                 id="rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; "
                    "the first rules overlaps succeededIndexes at first"),
])
def test_match_success_policy(policy: Obj | None, succeeded: set[int], want: str | None) -> None:
    """TestMatchSuccessPolicy (completions 10; the feature-gate-off cases are moot, the policy always applies)."""
    assert match_success_policy(policy, 10, succeeded) == want
