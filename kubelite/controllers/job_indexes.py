"""Completion indexes of Indexed Jobs (pkg/controller/job/indexed_job_utils.go).

`status.completedIndexes` is a compressed list of ordered intervals ("1,3-5,7"); each pod
carries its index in the `batch.kubernetes.io/job-completion-index` annotation and label, and
sees it as `JOB_COMPLETION_INDEX` through a fieldRef on that annotation.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
MAX_GENERATED_NAME_LENGTH = 58  # names.MaxGeneratedNameLength: 63 minus the 5 random characters


def pod_generate_name_with_index(job_name: str, index: int) -> str:
    """podGenerateNameWithIndex: `<job>-<index>-`, the job name cut so the whole stays a valid generateName."""
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME_LENGTH:
        prefix = prefix[:MAX_GENERATED_NAME_LENGTH - len(suffix)] + suffix
    return prefix


def parse_indexes(text: str, completions: int) -> set[int]:
    """parseIndexesFromString: the indexes below `completions` named by `text`; malformed parts are skipped."""
    out: set[int] = set()
    for part in text.split(",") if text else []:
        first, _, last = part.partition("-")
        try:
            lo, hi = int(first), int(last or first)
        except ValueError:
            continue
        out.update(range(max(lo, 0), min(hi, completions - 1) + 1))
    return out


def format_indexes(indexes: set[int]) -> str:
    """orderedIntervals.String: "1,3-5,7"; a run of two is listed ("3,4"), only longer runs become ranges."""
    parts: list[tuple[int, int]] = []
    for i in sorted(indexes):
        if parts and parts[-1][1] == i - 1:
            parts[-1] = (parts[-1][0], i)
        else:
            parts.append((i, i))
    return ",".join(str(lo) if lo == hi else f"{lo},{hi}" if hi == lo + 1 else f"{lo}-{hi}" for lo, hi in parts)


def completion_index(pod: Obj) -> int | None:
    """getCompletionIndex: the pod's index from its annotation, None when missing or malformed."""
    value = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    if value is None or not (value.isascii() and value.isdigit()) or (len(value) > 1 and value[0] == "0"):
        return None
    return int(value)


def first_pending_indexes(active: list[Obj], succeeded: set[int], count: int, completions: int) -> list[int]:
    """firstPendingIndexes: the lowest `count` indexes neither succeeded nor held by an active pod."""
    taken = succeeded | {i for i in (completion_index(p) for p in active) if i is not None}
    out: list[int] = []
    for i in range(completions):
        if len(out) == count:
            break
        if i not in taken:
            out.append(i)
    return out


def add_completion_index(pod: Obj, index: int) -> None:
    """addCompletionIndexAnnotation, the index label and addCompletionIndexEnvVariables on a new pod."""
    meta = pod["metadata"]
    meta.setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
    meta.setdefault("labels", {})[COMPLETION_INDEX] = str(index)
    ref = {"fieldRef": {"apiVersion": "v1", "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}
    spec = pod["spec"]
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        env = container.setdefault("env", [])
        if not any(e.get("name") == COMPLETION_INDEX_ENV for e in env):
            env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": ref})
