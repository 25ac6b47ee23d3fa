"""Pod facts every workload controller asks, and the order in which they give pods up.

A port of pkg/controller/controller_utils.go (IsPodActive, ActivePodsWithRanks) and
pkg/api/v1/pod (IsPodReady, IsPodAvailable). The ranking decides which pods a ReplicaSet
deletes first when it has too many: the ones whose loss costs least — unscheduled before
scheduled, pending before running, not ready before ready, cheap (pod-deletion-cost) before
dear, doubled-up on a node before alone, ready for a short time before a long one, many
restarts before few, young before old. As upstream with LogarithmicScaleDown (on by default),
ready and creation times compare in powers-of-two buckets of their age, ties broken by uid,
so a scale-down spreads over pods of similar age instead of always taking the very newest.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from kubelite.clock import parse_rfc3339

Obj = dict[str, Any]
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


def is_pod_active(pod: Obj) -> bool:
    """IsPodActive: not finished and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def ready_condition(pod: Obj) -> Obj | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)


def is_pod_ready(pod: Obj) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def _stamp(value: str | None) -> float:
    """A timestamp in seconds; 0 stands for upstream's zero time (unset or unreadable)."""
    if not value:
        return 0.0
    try:
        return parse_rfc3339(value)
    except ValueError:
        return 0.0


def ready_since(pod: Obj) -> float:
    """podReadyTime: when the Ready condition last became True (0 when not ready or unknown)."""
    cond = ready_condition(pod)
    return _stamp(cond.get("lastTransitionTime")) if cond and cond.get("status") == "True" else 0.0


def is_pod_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """IsPodAvailable: ready, and for at least minReadySeconds."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds == 0:
        return True
    since = ready_since(pod)
    return since > 0 and since + min_ready_seconds < now


def max_container_restarts(pod: Obj) -> int:
    return max((int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or []),
               default=0)


def deletion_cost(pod: Obj) -> int:
    """GetDeletionCostFromPodAnnotations: an int32 annotation; absent or malformed counts as 0."""
    raw = (pod["metadata"].get("annotations") or {}).get(POD_DELETION_COST)
    try:
        value = int(raw) if raw is not None else 0
    except ValueError:
        return 0
    return value if -(2**31) <= value < 2**31 else 0


def _after_or_zero(t1: float, t2: float) -> bool:
    """afterOrZero: a zero time first, else the later time first."""
    if t1 == 0 or t2 == 0:
        return t1 == 0
    return t1 > t2


def _log_rank_diff(t1: float, t2: float, now: float) -> int:
    """logarithmicRankDiff: compare ages (in nanoseconds, as upstream) by their integer log2."""
    d1, d2 = (now - t1) * 1e9, (now - t2) * 1e9
    r1 = int(math.log2(d1)) if d1 > 0 else -1
    r2 = int(math.log2(d2)) if d2 > 0 else -1
    return r1 - r2


def _time_less(t1: float, t2: float, uid1: str, uid2: str, now: float) -> bool | None:
    """Rules 6 and 8: None when the times are equal (the next rule decides)."""
    if t1 == t2:
        return None
    if now == 0 or t1 == 0 or t2 == 0:
        return _after_or_zero(t1, t2)
    diff = _log_rank_diff(t1, t2, now)
    if diff == 0:
        return uid1 < uid2
    return diff < 0


def less(p1: Obj, rank1: int, p2: Obj, rank2: int, now: float) -> bool:
    """ActivePodsWithRanks.Less: whether p1 should be deleted before p2."""
    n1, n2 = (p1.get("spec") or {}).get("nodeName") or "", (p2.get("spec") or {}).get("nodeName") or ""
    if n1 != n2 and (not n1 or not n2):  # 1. unassigned < assigned
        return not n1
    o1 = _PHASE_ORDINAL.get((p1.get("status") or {}).get("phase") or "", 0)
    o2 = _PHASE_ORDINAL.get((p2.get("status") or {}).get("phase") or "", 0)
    if o1 != o2:  # 2. Pending < Unknown < Running
        return o1 < o2
    r1, r2 = is_pod_ready(p1), is_pod_ready(p2)
    if r1 != r2:  # 3. not ready < ready
        return not r1
    c1, c2 = deletion_cost(p1), deletion_cost(p2)
    if c1 != c2:  # 4. lower pod-deletion-cost < higher
        return c1 < c2
    if rank1 != rank2:  # 5. doubled up < not doubled up
        return rank1 > rank2
    uid1, uid2 = p1["metadata"].get("uid", ""), p2["metadata"].get("uid", "")
    if r1 and r2:  # 6. ready for a shorter time < longer
        by_ready = _time_less(ready_since(p1), ready_since(p2), uid1, uid2, now)
        if by_ready is not None:
            return by_ready
    m1, m2 = max_container_restarts(p1), max_container_restarts(p2)
    if m1 != m2:  # 7. more restarts < fewer
        return m1 > m2
    by_age = _time_less(_stamp(p1["metadata"].get("creationTimestamp")),  # 8. newer < older
                        _stamp(p2["metadata"].get("creationTimestamp")), uid1, uid2, now)
    return bool(by_age)


def _node(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def pods_to_delete(candidates: list[Obj], related: list[Obj], diff: int, now: float) -> list[Obj]:
    """getPodsToDelete: the `diff` candidates to delete first, each ranked by how many active pods of
    `related` share its node (getPodsRankedByRelatedPodsOnSameNode)."""
    if diff >= len(candidates):
        return list(candidates)
    on_node = Counter(_node(p) for p in related if is_pod_active(p))
    return sort_active(candidates, now, lambda p: on_node[_node(p)])[:diff]


def sort_active(pods: list[Obj], now: float = 0.0, rank: Callable[[Obj], int] = lambda p: 0) -> list[Obj]:
    """The pods in deletion order (with `now` 0, plain timestamp comparisons, as ActivePods)."""

    def compare(a: Obj, b: Obj) -> int:
        if less(a, rank(a), b, rank(b), now):
            return -1
        return 1 if less(b, rank(b), a, rank(a), now) else 0

    return sorted(pods, key=functools.cmp_to_key(compare))
