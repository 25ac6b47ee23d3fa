"""Deployment arithmetic: how far to scale which ReplicaSet, and the status that results.

Pure functions ported from pkg/controller/deployment (rolling.go, sync.go, progress.go and
util/deployment_util.go), kept apart from the controller so upstream's table tests run on
them directly. ReplicaSets are plain wire objects; "replicas" is always spec.replicas and the
counts come from each ReplicaSet's status, as upstream.
"""

from __future__ import annotations

import math
from typing import Any

from kubelite.clock import parse_rfc3339, rfc3339
from kubelite.controllers.gojson import omit_empty

Obj = dict[str, Any]
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
HASH_LABEL = "pod-template-hash"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
# apps/v1 DeploymentStatus fields tagged omitempty and held by value: a 0 (or no conditions) is not written.
# collisionCount is an *int32, so its 0 is.
STATUS_OMITEMPTY = frozenset({"observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                              "availableReplicas", "unavailableReplicas", "conditions"})


def replicas(obj: Obj | None) -> int:
    return int(((obj or {}).get("spec") or {}).get("replicas", 1 if obj else 0) or 0)


def _status(obj: Obj | None, field: str) -> int:
    return _count((obj or {}).get("status") or {}, field)


def scaled_value(value: int | str | None, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent; a malformed percentage raises ValueError."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if not value.endswith("%") or not (value[:-1].isascii() and value[:-1].isdigit()):
        raise ValueError(f"invalid value for IntOrString: invalid value {value!r}")
    scaled = int(value[:-1]) * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def resolve_fenceposts(max_surge: int | str | None, max_unavailable: int | str | None,
                       desired: int) -> tuple[int, int]:
    """ResolveFenceposts: surge rounds up, unavailability down; both 0 makes unavailability 1."""
    surge = scaled_value(max_surge, desired, True)
    unavailable = scaled_value(max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # surge might not work (quota): progress by letting one pod go
    return surge, unavailable


def _rolling(d: Obj) -> Obj | None:
    strategy = (d.get("spec") or {}).get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None
    return strategy.get("rollingUpdate") or {}


def is_rolling(d: Obj) -> bool:
    return _rolling(d) is not None


def max_unavailable(d: Obj) -> int:
    rolling = _rolling(d)
    want = replicas(d)
    if rolling is None or want == 0:
        return 0
    _, unavailable = resolve_fenceposts(rolling.get("maxSurge"), rolling.get("maxUnavailable"), want)
    return min(unavailable, want)


def max_surge(d: Obj) -> int:
    rolling = _rolling(d)
    if rolling is None:
        return 0
    surge, _ = resolve_fenceposts(rolling.get("maxSurge"), rolling.get("maxUnavailable"), replicas(d))
    return surge


def total(rss: list[Obj]) -> int:
    """GetReplicaCountForReplicaSets."""
    return sum(replicas(rs) for rs in rss)


def total_status(rss: list[Obj | None], field: str) -> int:
    return sum(_status(rs, field) for rs in rss if rs is not None)


def created(rs: Obj) -> tuple[str, str]:
    """ReplicaSetsByCreationTimestamp's key: oldest first, names break ties."""
    return rs["metadata"].get("creationTimestamp", ""), rs["metadata"]["name"]


def new_rs_new_replicas(d: Obj, all_rss: list[Obj], new_rs: Obj) -> int:
    """NewRSNewReplicas: how big the new ReplicaSet may be now."""
    if _rolling(d) is None:
        return replicas(d)
    max_total = replicas(d) + scaled_value(_rolling(d).get("maxSurge"), replicas(d), True)  # type: ignore[union-attr]
    current = total(all_rss)
    if current >= max_total:
        return replicas(new_rs)
    return replicas(new_rs) + min(max_total - current, replicas(d) - replicas(new_rs))


def reconcile_new(d: Obj, all_rss: list[Obj], new_rs: Obj) -> int | None:
    """reconcileNewReplicaSet: the new ReplicaSet's size, or None when it stays."""
    if replicas(new_rs) == replicas(d):
        return None
    if replicas(new_rs) > replicas(d):
        return replicas(d)
    want = new_rs_new_replicas(d, all_rss, new_rs)
    return None if want == replicas(new_rs) else want


def cleanup_unhealthy(old_rss: list[Obj], max_cleanup: int) -> dict[str, int]:
    """cleanupUnhealthyReplicas: scale old ReplicaSets down by their unavailable pods, oldest first."""
    out: dict[str, int] = {}
    done = 0
    for rs in sorted(old_rss, key=created):
        if done >= max_cleanup:
            break
        size, available = replicas(rs), _status(rs, "availableReplicas")
        if size == 0 or size == available:
            continue
        count = min(max_cleanup - done, size - available)
        out[rs["metadata"]["name"]] = size - count
        done += count
    return out


def scale_down_old_for_rolling_update(d: Obj, all_rss: list[Obj], old_rss: list[Obj]) -> dict[str, int]:
    """scaleDownOldReplicaSetsForRollingUpdate: take available pods from old ReplicaSets, oldest first,
    down to the minimum availability."""
    min_available = replicas(d) - max_unavailable(d)
    available = total_status(list(all_rss), "availableReplicas")
    if available <= min_available:
        return {}
    want = available - min_available
    out: dict[str, int] = {}
    done = 0
    for rs in sorted(old_rss, key=created):
        if done >= want:
            break
        if replicas(rs) == 0:
            continue
        count = min(replicas(rs), want - done)
        out[rs["metadata"]["name"]] = replicas(rs) - count
        done += count
    return out


def reconcile_old(d: Obj, all_rss: list[Obj], old_rss: list[Obj], new_rs: Obj) -> dict[str, int]:
    """reconcileOldReplicaSets: the old ReplicaSets' new sizes (unhealthy replicas first)."""
    if total(old_rss) == 0:
        return {}
    min_available = replicas(d) - max_unavailable(d)
    new_unavailable = replicas(new_rs) - _status(new_rs, "availableReplicas")
    max_scaled_down = total(all_rss) - min_available - new_unavailable
    if max_scaled_down <= 0:
        return {}
    plan = cleanup_unhealthy(old_rss, max_scaled_down)
    after = [_resized(rs, plan) for rs in old_rss]
    plan.update(scale_down_old_for_rolling_update(d, [*after, new_rs], after))
    return plan


def _resized(rs: Obj, plan: dict[str, int]) -> Obj:
    name = rs["metadata"]["name"]
    if name not in plan:
        return rs
    return {**rs, "spec": {**(rs.get("spec") or {}), "replicas": plan[name]}}


def _annotation_int(rs: Obj, key: str) -> int | None:
    raw = (rs["metadata"].get("annotations") or {}).get(key)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def proportion(rs: Obj, d: Obj, to_add: int, added: int) -> int:
    """GetProportion / getReplicaSetFraction: a ReplicaSet's share of a scaling event."""
    if replicas(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    if replicas(d) == 0:
        fraction = -replicas(rs)
    else:
        annotated = _annotation_int(rs, MAX_REPLICAS) or _status(d, "replicas")
        size = replicas(rs) * (replicas(d) + max_surge(d)) / annotated if annotated else float(replicas(rs))
        fraction = math.floor(size + 0.5) - replicas(rs)  # integer.RoundToInt32
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def proportional_scale(d: Obj, active: list[Obj]) -> dict[str, int]:
    """The rolling part of sync.go's scale(): spread a change of spec.replicas over the active ReplicaSets
    by their share, leftovers to the largest."""
    allowed = replicas(d) + max_surge(d) if replicas(d) > 0 else 0
    to_add = allowed - total(active)
    # Largest first; among equals newest first when adding (ReplicaSetsBySizeNewer), oldest when removing.
    ordered = sorted(sorted(active, key=created, reverse=to_add > 0), key=lambda rs: -replicas(rs))
    sizes: dict[str, int] = {}
    added = 0
    for rs in ordered:
        share = proportion(rs, d, to_add, added) if to_add else 0
        sizes[rs["metadata"]["name"]] = replicas(rs) + share
        added += share
    if ordered and to_add:
        first = ordered[0]["metadata"]["name"]
        sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes


# --- status and conditions --------------------------------------------------------------------------


def condition(status: Obj, kind: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def set_condition(status: Obj, cond: Obj) -> None:
    """SetDeploymentCondition: same status and reason → nothing; same status → keep lastTransitionTime."""
    current = condition(status, cond["type"])
    if current is not None and current.get("status") == cond["status"] and current.get("reason") == cond["reason"]:
        return
    if current is not None and current.get("status") == cond["status"]:
        cond = {**cond, "lastTransitionTime": current.get("lastTransitionTime")}
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != cond["type"]] + [cond]


def remove_condition(status: Obj, kind: str) -> None:
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != kind]


def new_condition(kind: str, status: str, reason: str, message: str, now: float) -> Obj:
    stamp = rfc3339(now)
    return {"type": kind, "status": status, "lastUpdateTime": stamp, "lastTransitionTime": stamp,
            "reason": reason, "message": message}


def calculate_status(d: Obj, all_rss: list[Obj], new_rs: Obj | None, now: float) -> Obj:
    """calculateStatus, with the Available condition."""
    available = total_status(list(all_rss), "availableReplicas")
    old = d.get("status") or {}
    status: Obj = {
        "observedGeneration": d["metadata"].get("generation", 1),
        "replicas": total_status(list(all_rss), "replicas"),
        "updatedReplicas": _status(new_rs, "replicas"),
        "readyReplicas": total_status(list(all_rss), "readyReplicas"),
        "availableReplicas": available,
        "unavailableReplicas": max(0, total(all_rss) - available),
        "conditions": [dict(c) for c in old.get("conditions") or []],
    }
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    if available >= replicas(d) - max_unavailable(d):
        set_condition(status, new_condition("Available", "True", "MinimumReplicasAvailable",
                                            "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition("Available", "False", "MinimumReplicasUnavailable",
                                            "Deployment does not have minimum availability.", now))
    return omit_empty(status, STATUS_OMITEMPTY)


def complete(d: Obj, status: Obj) -> bool:
    """DeploymentComplete."""
    want = replicas(d)
    return (_count(status, "updatedReplicas") == want and _count(status, "replicas") == want
            and _count(status, "availableReplicas") == want
            and int(status.get("observedGeneration") or 0) >= int(d["metadata"].get("generation", 1)))


def progressing(d: Obj, new: Obj) -> bool:
    """DeploymentProgressing: more updated, ready or available pods, or fewer old ones, than last time."""
    old = d.get("status") or {}
    old_old = int(old.get("replicas") or 0) - int(old.get("updatedReplicas") or 0)
    new_old = int(new.get("replicas") or 0) - int(new.get("updatedReplicas") or 0)
    return (int(new.get("updatedReplicas") or 0) > int(old.get("updatedReplicas") or 0) or new_old < old_old
            or int(new.get("readyReplicas") or 0) > int(old.get("readyReplicas") or 0)
            or int(new.get("availableReplicas") or 0) > int(old.get("availableReplicas") or 0))


def timed_out(d: Obj, status: Obj, now: float) -> bool:
    """DeploymentTimedOut: no progress for progressDeadlineSeconds since the Progressing condition's update."""
    deadline = (d.get("spec") or {}).get("progressDeadlineSeconds")
    cond = condition(status, "Progressing")
    if deadline is None or cond is None or cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    return parse_rfc3339(cond["lastUpdateTime"]) + int(deadline) < now


def rollout_status(d: Obj, all_rss: list[Obj], new_rs: Obj | None, now: float) -> Obj:
    """syncRolloutStatus: calculateStatus plus the Progressing and ReplicaFailure conditions."""
    status = calculate_status(d, all_rss, new_rs, now)
    has_deadline = (d.get("spec") or {}).get("progressDeadlineSeconds") is not None
    if not has_deadline:
        remove_condition(status, "Progressing")
    current = condition(d.get("status") or {}, "Progressing")
    finished = _count(status, "replicas") == _count(status, "updatedReplicas") and current is not None and \
        current.get("reason") == NEW_RS_AVAILABLE
    name = d["metadata"]["name"]
    if has_deadline and not finished:
        if complete(d, status):
            rs_name = (new_rs or {}).get("metadata", {}).get("name", "")
            set_condition(status, new_condition("Progressing", "True", NEW_RS_AVAILABLE,
                                                f'ReplicaSet "{rs_name}" has successfully progressed.', now))
        elif progressing(d, status):
            what = f'ReplicaSet "{new_rs["metadata"]["name"]}"' if new_rs else f'Deployment "{name}"'
            cond = new_condition("Progressing", "True", "ReplicaSetUpdated", f"{what} is progressing.", now)
            if current is not None and current.get("status") == "True":
                cond["lastTransitionTime"] = current.get("lastTransitionTime")
            remove_condition(status, "Progressing")
            set_condition(status, cond)
        elif timed_out(d, status, now):
            what = f'ReplicaSet "{new_rs["metadata"]["name"]}"' if new_rs else f'Deployment "{name}"'
            set_condition(status, new_condition("Progressing", "False", TIMED_OUT,
                                                f"{what} has timed out progressing.", now))
    failures = [c for rs in all_rss for c in (rs.get("status") or {}).get("conditions") or []
                if c.get("type") == "ReplicaFailure" and c.get("status") == "True"]
    if failures:
        f = failures[0]
        set_condition(status, new_condition("ReplicaFailure", "True", f.get("reason", ""), f.get("message", ""),
                                            now))
    else:
        remove_condition(status, "ReplicaFailure")
    return omit_empty(status, STATUS_OMITEMPTY)


def _count(status: Obj, field: str) -> int:
    """A count of the status, 0 when left out (as omitempty writes a 0)."""
    return int(status.get(field) or 0)
