"""Pod ranking for scale-down, ported from controller_utils_test.go (TestSortingActivePods*)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubelite.clock import rfc3339
from kubelite.controllers import podutil

Obj = dict[str, Any]
NOW = 1_700_000_000.0
THEN_1_MONTH = NOW - 31 * 86400
THEN_2_HOURS = NOW - 2 * 3600
THEN_5_HOURS = NOW - 5 * 3600
THEN_8_HOURS = NOW - 8 * 3600
ZERO = 0.0


def pod(name: str, node: str, phase: str, ready: bool, restarts: int, ready_since: float, created: float,
        annotations: dict[str, str] | None = None) -> Obj:
    """The `pod` constructor of TestSortingActivePodsWithRanks (0 is Go's zero time: field unset)."""
    meta: Obj = {"name": name}  # no uid, as upstream's: equal logarithmic ranks tie
    if created:
        meta["creationTimestamp"] = rfc3339(created)
    if annotations:
        meta["annotations"] = annotations
    status: Obj = {"phase": phase}
    if ready:
        cond: Obj = {"type": "Ready", "status": "True"}
        if ready_since:
            cond["lastTransitionTime"] = rfc3339(ready_since)
        status["conditions"] = [cond]
        status["containerStatuses"] = [{"restartCount": restarts}]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


UNSCHEDULED = pod("unscheduled", "", "Pending", False, 0, ZERO, ZERO)
SCHEDULED_PENDING = pod("pending", "node", "Pending", False, 0, ZERO, ZERO)
UNKNOWN_PHASE = pod("unknown-phase", "node", "Unknown", False, 0, ZERO, ZERO)
RUNNING_NOT_READY = pod("not-ready", "node", "Running", False, 0, ZERO, ZERO)
READY_NO_LAST_TRANSITION = pod("ready-no-last-transition-time", "node", "Running", True, 0, ZERO, ZERO)
READY_NOW = pod("ready-now", "node", "Running", True, 0, NOW, NOW)
READY_THEN = pod("ready-then", "node", "Running", True, 0, THEN_1_MONTH, THEN_1_MONTH)
READY_NOW_HIGH_RESTARTS = pod("ready-high-restarts", "node", "Running", True, 9001, NOW, NOW)
READY_NOW_CREATED_THEN = pod("ready-now-created-then", "node", "Running", True, 0, NOW, THEN_1_MONTH)
LOW_DELETION_COST = pod("low-deletion-cost", "node", "Running", True, 0, NOW, THEN_1_MONTH,
                        {podutil.POD_DELETION_COST: "10"})
HIGH_DELETION_COST = pod("high-deletion-cost", "node", "Running", True, 0, NOW, THEN_1_MONTH,
                         {podutil.POD_DELETION_COST: "100"})
UNSCHEDULED_5_HOURS = pod("unscheduled-5-hours", "", "Pending", False, 0, THEN_5_HOURS, THEN_5_HOURS)
UNSCHEDULED_8_HOURS = pod("unscheduled-10-hours", "", "Pending", False, 0, THEN_8_HOURS, THEN_8_HOURS)
READY_2_HOURS = pod("ready-2-hours", "", "Running", True, 0, THEN_2_HOURS, THEN_1_MONTH)
READY_5_HOURS = pod("ready-5-hours", "", "Running", True, 0, THEN_5_HOURS, THEN_1_MONTH)
READY_10_HOURS = pod("ready-10-hours", "", "Running", True, 0, THEN_8_HOURS, THEN_1_MONTH)


@pytest.mark.parametrize(("p1", "p2"), [
    pytest.param(UNSCHEDULED, UNSCHEDULED, id="Equality tests 0"),
    pytest.param(SCHEDULED_PENDING, SCHEDULED_PENDING, id="Equality tests 1"),
    pytest.param(UNKNOWN_PHASE, UNKNOWN_PHASE, id="Equality tests 2"),
    pytest.param(RUNNING_NOT_READY, RUNNING_NOT_READY, id="Equality tests 3"),
    pytest.param(READY_NOW_CREATED_THEN, READY_NOW_CREATED_THEN, id="Equality tests 4"),
    pytest.param(READY_NOW, READY_NOW, id="Equality tests 5"),
    pytest.param(READY_THEN, READY_THEN, id="Equality tests 6"),
    pytest.param(READY_NOW_HIGH_RESTARTS, READY_NOW_HIGH_RESTARTS, id="Equality tests 7"),
    pytest.param(READY_NOW_CREATED_THEN, READY_NOW_CREATED_THEN, id="Equality tests 8"),
    pytest.param(UNSCHEDULED_5_HOURS, UNSCHEDULED_8_HOURS, id="Equality tests 9"),
    pytest.param(READY_5_HOURS, READY_10_HOURS, id="Equality tests 10"),
])
def test_sorting_active_pods_with_ranks_equality(p1: Obj, p2: Obj) -> None:
    """TestSortingActivePodsWithRanks, equalityTests: neither pod ranks before the other."""
    assert not podutil.less(p1, 1, p2, 1, NOW)
    assert not podutil.less(p2, 1, p1, 1, NOW)


@pytest.mark.parametrize(("lesser", "lesser_rank", "greater", "greater_rank"), [
    pytest.param(UNSCHEDULED, 1, SCHEDULED_PENDING, 2, id="Inequality tests 0"),
    pytest.param(UNSCHEDULED, 2, SCHEDULED_PENDING, 1, id="Inequality tests 1"),
    pytest.param(SCHEDULED_PENDING, 1, UNKNOWN_PHASE, 2, id="Inequality tests 2"),
    pytest.param(UNKNOWN_PHASE, 1, RUNNING_NOT_READY, 2, id="Inequality tests 3"),
    pytest.param(RUNNING_NOT_READY, 1, READY_NO_LAST_TRANSITION, 1, id="Inequality tests 4"),
    pytest.param(READY_NO_LAST_TRANSITION, 1, READY_NOW, 1, id="Inequality tests 5"),
    pytest.param(READY_NOW, 2, READY_NO_LAST_TRANSITION, 1, id="Inequality tests 6"),
    pytest.param(READY_NOW, 1, READY_THEN, 1, id="Inequality tests 7"),
    pytest.param(READY_NOW, 2, READY_THEN, 1, id="Inequality tests 8"),
    pytest.param(READY_NOW_HIGH_RESTARTS, 1, READY_NOW, 1, id="Inequality tests 9"),
    pytest.param(READY_NOW, 2, READY_NOW_HIGH_RESTARTS, 1, id="Inequality tests 10"),
    pytest.param(READY_NOW, 1, READY_NOW_CREATED_THEN, 1, id="Inequality tests 11"),
    pytest.param(READY_NOW_CREATED_THEN, 2, READY_NOW, 1, id="Inequality tests 12"),
    pytest.param(LOW_DELETION_COST, 2, HIGH_DELETION_COST, 1, id="Inequality tests 13"),
    pytest.param(READY_2_HOURS, 1, READY_5_HOURS, 1, id="Inequality tests 15"),
])
def test_sorting_active_pods_with_ranks_inequality(lesser: Obj, lesser_rank: int, greater: Obj,
                                                   greater_rank: int) -> None:
    """TestSortingActivePodsWithRanks, inequalityTests (case 14 disables the PodDeletionCost gate, which
    kubelite does not have: the annotation is always honoured)."""
    assert podutil.less(lesser, lesser_rank, greater, greater_rank, NOW)
    assert not podutil.less(greater, greater_rank, lesser, lesser_rank, NOW)


def _legacy(name: str, node: str, phase: str, ready_at: float | None, restarts: list[int],
            created: float = ZERO) -> Obj:
    status: Obj = {"phase": phase}
    if ready_at is not None:
        cond: Obj = {"type": "Ready", "status": "True"}
        if ready_at:
            cond["lastTransitionTime"] = rfc3339(ready_at)
        status["conditions"] = [cond]
    if restarts:
        status["containerStatuses"] = [{"restartCount": r} for r in restarts]
    meta: Obj = {"name": name, "uid": name}
    if created:
        meta["creationTimestamp"] = rfc3339(created)
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


@pytest.mark.parametrize("seed", range(5))
def test_sorting_active_pods_sorts_by_active_pod(seed: int) -> None:
    """TestSortingActivePods "Sorts by active pod": any shuffled input sorts into upstream's order."""
    then = NOW - 3600
    want = [
        _legacy("unscheduled", "", "Pending", None, []),
        _legacy("scheduledButPending", "bar", "Pending", None, []),
        _legacy("unknownPhase", "foo", "Unknown", None, []),
        _legacy("runningButNotReady", "foo", "Running", None, []),
        _legacy("runningNoLastTransitionTime", "foo", "Running", ZERO, [3, 0]),
        _legacy("runningWithLastTransitionTime", "foo", "Running", NOW, [3, 0]),
        _legacy("runningLongerTime", "foo", "Running", then, [3, 0]),
        _legacy("lowerContainerRestartCount", "foo", "Running", then, [2, 1], created=NOW),
        _legacy("oldest", "foo", "Running", then, [2, 1], created=then),
    ]
    shuffled = list(want)
    random.Random(seed).shuffle(shuffled)
    got = podutil.sort_active(shuffled)  # ActivePods: no logarithmic buckets
    assert [p["metadata"]["name"] for p in got] == [p["metadata"]["name"] for p in want]


@pytest.mark.parametrize(("pods", "related", "diff", "want"), [
    pytest.param([UNSCHEDULED, READY_NOW, SCHEDULED_PENDING], [], 2, ["unscheduled", "pending"],
                 id="unscheduled and pending pods go first"),
    pytest.param([pod("a", "n1", "Running", True, 0, THEN_1_MONTH, THEN_1_MONTH),
                  pod("b", "n2", "Running", True, 0, THEN_1_MONTH, THEN_1_MONTH)],
                 [pod("c", "n2", "Running", True, 0, THEN_1_MONTH, THEN_1_MONTH)], 1, ["b"],
                 id="a pod doubled up on a node with a related pod goes first"),
    pytest.param([READY_NOW, READY_THEN], [], 5, ["ready-now", "ready-then"], id="diff beyond the pods: all of them"),
])
def test_get_pods_to_delete(pods: list[Obj], related: list[Obj], diff: int, want: list[str]) -> None:
    """TestGetPodsToDelete: ranking by related pods on the same node."""
    got = podutil.pods_to_delete(pods, pods + related, diff, NOW)
    assert sorted(p["metadata"]["name"] for p in got) == sorted(want)


@pytest.mark.parametrize(("pod_obj", "min_ready", "now", "want"), [
    pytest.param(RUNNING_NOT_READY, 0, NOW, False, id="not ready: not available"),
    pytest.param(READY_NOW, 0, NOW, True, id="ready, no minReadySeconds: available"),
    pytest.param(READY_NOW, 10, NOW + 5, False, id="ready for less than minReadySeconds"),
    pytest.param(READY_NOW, 10, NOW + 11, True, id="ready for more than minReadySeconds"),
])
def test_is_pod_available(pod_obj: Obj, min_ready: int, now: float, want: bool) -> None:
    """podutil.IsPodAvailable."""
    assert podutil.is_pod_available(pod_obj, min_ready, now) is want
