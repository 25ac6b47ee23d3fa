"""`backoffLimitPerIndex` of Indexed Jobs (pkg/controller/job/indexed_job_utils.go, backoff_utils.go).

Each index gets its own budget of failures: a replacement pod carries the number of earlier
failures of its index in the `batch.kubernetes.io/job-index-failure-count` annotation (and
failures the pod failure policy ignored in `…-ignored-failure-count`). A failed pod whose count
already reached `backoffLimitPerIndex`, or one matched by a `FailIndex` rule, fails its index:
the index joins `status.failedIndexes` and is not run again, while the other indexes go on.
Replacements within an index wait out their own back-off (10 s doubling to 6 min, from the
index's absolute failure count), not the Job-wide one. An index's last failed pod keeps its
tracking finalizer, uncounted, until its replacement exists (canRemoveFinalizer): so the count
the replacement inherits cannot be lost to that pod being deleted meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelite.controllers.job_backoff import BackoffRecord, finished_time
from kubelite.controllers.job_failure_policy import match_pod_failure_policy
from kubelite.controllers.job_indexes import completion_index

Obj = dict[str, Any]
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
MAX_INT32 = 2**31 - 1


def has_backoff_limit_per_index(job: Obj) -> bool:
    return job["spec"].get("backoffLimitPerIndex") is not None


def _count(pod: Obj, key: str) -> int:
    """parseInt32: 0 for a missing, malformed, negative or beyond-int32 value (a user may have written it)."""
    value = (pod["metadata"].get("annotations") or {}).get(key)
    try:
        count = int(value) if value is not None else 0
    except ValueError:
        return 0
    return count if 0 <= count <= MAX_INT32 else 0


def index_failure_count(pod: Obj) -> int:
    return _count(pod, INDEX_FAILURE_COUNT)


def index_absolute_failure_count(pod: Obj) -> int:
    """Counted and ignored failures together: what the index's back-off grows with."""
    return _count(pod, INDEX_FAILURE_COUNT) + _count(pod, INDEX_IGNORED_FAILURE_COUNT)


def is_index_failed(job: Obj, pod: Obj, failed: bool) -> bool:
    """isIndexFailed: whether this pod (`failed` says whether the Job counts it as failed) fails its index."""
    if not failed:
        return False
    counted = True
    policy = job["spec"].get("podFailurePolicy")
    if policy is not None:
        match = match_pod_failure_policy(policy, pod)
        if match.action == "FailIndex":
            return True
        counted = match.count_failed
    return counted and index_failure_count(pod) >= int(job["spec"]["backoffLimitPerIndex"])


def calculate_failed_indexes(job: Obj, pods: list[Obj], is_failed: Callable[[Obj], bool],
                             previous: set[int]) -> set[int]:
    """calculateFailedIndexes: `previous` (status.failedIndexes) and the indexes `pods`, those not counted yet,
    fail now."""
    completions = int(job["spec"].get("completions") or 0)
    failed = set(previous)
    for pod in pods:
        index = completion_index(pod)
        if index is not None and index < completions and is_index_failed(job, pod, is_failed(pod)):
            failed.add(index)
    return failed


def new_index_failure_counts(job: Obj, replaced: Obj | None) -> tuple[int, int]:
    """getNewIndexFailureCounts: (failures, ignored failures) for the pod replacing `replaced`."""
    if replaced is None:
        return 0, 0
    failures, ignored = _count(replaced, INDEX_FAILURE_COUNT), _count(replaced, INDEX_IGNORED_FAILURE_COUNT)
    policy = job["spec"].get("podFailurePolicy")
    if policy is not None and not match_pod_failure_policy(policy, replaced).count_failed:
        return failures, ignored + 1
    return failures + 1, ignored


def index_failure_annotations(job: Obj, replaced: Obj | None) -> dict[str, str]:
    """addIndexFailureCountAnnotation: the annotations a new pod of the index carries."""
    failures, ignored = new_index_failure_counts(job, replaced)
    out = {INDEX_FAILURE_COUNT: str(failures)}
    if ignored > 0:
        out[INDEX_IGNORED_FAILURE_COUNT] = str(ignored)
    return out


def pods_with_delayed_deletion_per_index(job: Obj, pods: list[Obj], is_failed: Callable[[Obj], bool],
                                         succeeded: set[int], failed_indexes: set[int],
                                         active: list[Obj]) -> dict[int, Obj]:
    """getPodsWithDelayedDeletionPerIndex: per index still to be run again, its latest failed pod (the most
    failures, then the latest finish) among `pods`, those not counted yet — the pod a replacement takes its
    failure count and back-off from, whose finalizer stays until that replacement exists."""
    completions = int(job["spec"].get("completions") or 0)
    busy = {i for i in (completion_index(p) for p in active) if i is not None}
    out: dict[int, Obj] = {}
    for pod in pods:
        index = completion_index(pod)
        if index is None or index >= completions or not is_failed(pod):
            continue
        if index in succeeded or index in failed_indexes or index in busy:
            continue
        last = out.get(index)
        if last is None or (index_absolute_failure_count(last) <= index_absolute_failure_count(pod)
                            and finished_time(pod) >= finished_time(last)):
            out[index] = pod
    return out


def remaining_time_per_index(last_failed: Obj | None, now: float, default: float | None = None,
                             cap: float | None = None) -> float:
    """getRemainingTimePerIndex: how long the index waits before its replacement pod is created."""
    if last_failed is None:
        return 0.0
    record = BackoffRecord(index_absolute_failure_count(last_failed) + 1, finished_time(last_failed))
    if default is None or cap is None:
        return record.remaining(now)
    return record.remaining(now, default, cap)
