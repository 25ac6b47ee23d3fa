"""The Job back-off between pod failures (pkg/controller/job/backoff_utils.go).

A Job whose pods keep failing gets its replacements after 10 s, 20 s, 40 s, … capped at 6
minutes (upstream's DefaultJobPodFailureBackOff / MaxJobPodFailureBackOff), counted from the
finish time of the last failure; a success resets the count. The record is the controller's
memory of failures since the last success, updated from the pods whose finalizers it removes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubelite.clock import parse_rfc3339

Obj = dict[str, Any]
DEFAULT_BACKOFF = 10.0
MAX_BACKOFF = 360.0


@dataclass(frozen=True)
class BackoffRecord:
    failures_after_last_success: int = 0
    last_failure_time: float | None = None

    def remaining(self, now: float, default: float = DEFAULT_BACKOFF, cap: float = MAX_BACKOFF) -> float:
        """getRemainingTime: how long to wait before creating a replacement pod."""
        if self.failures_after_last_success == 0 or self.last_failure_time is None:
            return 0.0
        backoff = default
        for _ in range(1, self.failures_after_last_success):
            backoff *= 2
            if backoff >= cap:
                backoff = cap
                break
        elapsed = now - self.last_failure_time
        return 0.0 if backoff < elapsed else backoff - elapsed


def _ts(value: Any) -> float | None:
    return parse_rfc3339(value) if value else None


def finished_time(pod: Obj) -> float:
    """getFinishedTime: the latest container finish, else Ready=False's transition, else deletion minus grace,
    else creation."""
    statuses = list((pod.get("status") or {}).get("containerStatuses") or [])
    sidecars = {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []
                if c.get("restartPolicy") == "Always"}
    statuses += [s for s in (pod.get("status") or {}).get("initContainerStatuses") or [] if s.get("name") in sidecars]
    finishes = [_ts(((s.get("state") or {}).get("terminated") or {}).get("finishedAt")) for s in statuses]
    if finishes and all(f is not None for f in finishes):
        return max(f for f in finishes if f is not None)
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "False" and c.get("lastTransitionTime"):
            return parse_rfc3339(c["lastTransitionTime"])
    meta = pod["metadata"]
    if meta.get("deletionTimestamp"):
        return parse_rfc3339(meta["deletionTimestamp"]) - (meta.get("deletionGracePeriodSeconds") or 0)
    return _ts(meta.get("creationTimestamp")) or 0.0


def new_backoff_record(old: BackoffRecord, succeeded: list[Obj], failed: list[Obj]) -> BackoffRecord:
    """newBackoffRecord: fold newly finished pods into the record."""
    success_times = sorted(finished_time(p) for p in succeeded)
    failure_times = sorted(finished_time(p) for p in failed)
    if not success_times:
        if not failure_times:
            return old
        return BackoffRecord(old.failures_after_last_success + len(failure_times), failure_times[-1])
    last_success = success_times[-1]
    after = [t for t in failure_times if t > last_success]
    return BackoffRecord(len(after), after[-1] if after else None)
