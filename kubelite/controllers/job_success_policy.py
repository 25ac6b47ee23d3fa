"""A Job's `successPolicy` (pkg/controller/job/success_policy.go): an Indexed Job may succeed before every
index did. Rules are tried in order; a rule with `succeededIndexes` matches when all those indexes
succeeded, or at least `succeededCount` of them; a rule with only `succeededCount` matches when that
many indexes succeeded in all. The first match gives the Job `SuccessCriteriaMet` (reason
`SuccessPolicy`, "Matched rules at index N"), its remaining pods are deleted, and it is `Complete`
once they are gone."""

from __future__ import annotations

from typing import Any

from kubelite.controllers.job_indexes import parse_indexes

Obj = dict[str, Any]
REASON = "SuccessPolicy"


def match_success_policy(policy: Obj | None, completions: int, succeeded: set[int]) -> str | None:
    """matchSuccessPolicy: the message of the first rule the succeeded indexes meet, None when none does."""
    if policy is None or not succeeded:
        return None
    for index, rule in enumerate(policy.get("rules") or []):
        count = rule.get("succeededCount")
        if rule.get("succeededIndexes") is not None:
            required = parse_indexes(rule["succeededIndexes"], completions)
            if not required:
                continue  # unparsable, or empty: never matches
            contains = len(required & succeeded)
            if contains == len(required) or (count is not None and contains >= count):
                return f"Matched rules at index {index}"
        elif count is not None and len(succeeded) >= count:
            return f"Matched rules at index {index}"
    return None
