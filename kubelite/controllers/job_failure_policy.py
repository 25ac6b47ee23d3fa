"""Matching a failed pod against a Job's `podFailurePolicy` (pkg/controller/job/pod_failure_policy.go).

Rules are tried in order; the first whose requirement matches decides: `FailJob` fails the Job
at once with a message naming the container and exit code (or the pod condition), `Ignore`
does not count the failure against `backoffLimit` (the pod is replaced), `Count` counts it as
usual, and `FailIndex` counts it and fails the pod's index at once (with backoffLimitPerIndex,
job_index_failures.py). A rule with an unknown action or operator is skipped, as upstream does,
so a newer policy never breaks an older controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
KNOWN_ACTIONS = ("Ignore", "Count", "FailJob", "FailIndex")


@dataclass(frozen=True)
class Match:
    message: str | None  # set when a FailJob rule matched
    count_failed: bool  # whether the failure counts against backoffLimit
    action: str | None  # the matched rule's action, None when no rule matched


NO_MATCH = Match(None, True, None)


def _exit_code_matches(code: int, requirement: Obj) -> bool:
    values = requirement.get("values") or []
    if requirement.get("operator") == "In":
        return code in values
    if requirement.get("operator") == "NotIn":
        return code not in values
    return False


def _matching_container(statuses: list[Obj], requirement: Obj) -> Obj | None:
    """getMatchingContainerFromList: the first terminated, non-zero container status the requirement matches."""
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated is None:
            continue  # still terminating: no exit code to match
        name = requirement.get("containerName")
        code = terminated.get("exitCode", 0)
        if (name is None or name == status.get("name")) and code != 0 and _exit_code_matches(code, requirement):
            return status
    return None


def match_on_exit_codes(pod_status: Obj, requirement: Obj) -> Obj | None:
    return (_matching_container(pod_status.get("containerStatuses") or [], requirement)
            or _matching_container(pod_status.get("initContainerStatuses") or [], requirement))


def match_on_pod_conditions(pod_status: Obj, patterns: list[Obj]) -> Obj | None:
    for condition in pod_status.get("conditions") or []:
        for pattern in patterns:
            if condition.get("type") == pattern.get("type") and condition.get("status") == pattern.get("status"):
                return condition  # type: ignore[no-any-return]
    return None


def match_pod_failure_policy(policy: Obj | None, pod: Obj) -> Match:
    """matchPodFailurePolicy: how a failed pod counts under `policy`."""
    if policy is None:
        return NO_MATCH
    status = pod.get("status") or {}
    meta = pod["metadata"]
    for index, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        if action not in KNOWN_ACTIONS:
            continue
        if rule.get("onExitCodes") is not None:
            container = match_on_exit_codes(status, rule["onExitCodes"])
            if container is None:
                continue
            code = container["state"]["terminated"].get("exitCode", 0)
            message = (f"Container {container.get('name', '')} for pod {meta.get('namespace', '')}/{meta['name']} "
                       f"failed with exit code {code} matching {action} rule at index {index}")
        elif rule.get("onPodConditions") is not None:
            condition = match_on_pod_conditions(status, rule["onPodConditions"])
            if condition is None:
                continue
            message = (f"Pod {meta.get('namespace', '')}/{meta['name']} has condition {condition.get('type')} "
                       f"matching {action} rule at index {index}")
        else:
            continue
        if action == "Ignore":
            return Match(None, False, "Ignore")
        if action in ("Count", "FailIndex"):
            return Match(None, True, action)
        return Match(message, True, "FailJob")
    return NO_MATCH
