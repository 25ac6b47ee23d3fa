"""PodDisruptionBudget arithmetic, shared by the eviction API and the disruption controller.

Mirrors pkg/controller/disruption (getExpectedPodCount, countHealthyPods) for budgets
over bare pods: the expected count is the number of selected pods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubelite.api.selectors import compile_label_selector

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Budget:
    expected_pods: int
    current_healthy: int
    desired_healthy: int
    disruptions_allowed: int


def pod_is_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def selects(pdb: Obj, pod: Obj) -> bool:
    if pdb["metadata"].get("namespace") != pod["metadata"].get("namespace"):
        return False
    selector = (pdb.get("spec") or {}).get("selector")
    if not selector:  # policy/v1: an empty selector selects every pod in the namespace; nil selects none
        return selector is not None
    return compile_label_selector(selector).matches(pod["metadata"].get("labels"))


def _scaled(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    pct = int(value.rstrip("%")) * total
    return math.ceil(pct / 100) if round_up else pct // 100


def counts(pdb: Obj, pod: Obj) -> bool:
    """Whether `pod` is one of the budget's expected pods: selected, not being deleted, not finished."""
    return (selects(pdb, pod) and not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def members(pdb: Obj, pods: list[Obj]) -> dict[str, bool]:
    """The budget's expected pods by name, each with whether it is ready."""
    return {p["metadata"]["name"]: pod_is_ready(p) for p in pods if counts(pdb, p)}


def compute(pdb: Obj, pods: list[Obj]) -> Budget:
    return budget(pdb, members(pdb, pods))


def current(pdb: Obj, pods: list[Obj]) -> Budget:
    """The budget as the eviction API reads it: the disruption controller's status when it is current
    (it also counts the evictions spent since), else computed from `pods` (the namespace's) now."""
    status = pdb.get("status") or {}
    if status.get("observedGeneration") is not None and \
            status["observedGeneration"] >= pdb["metadata"].get("generation", 1):
        return Budget(status.get("expectedPods", 0), status.get("currentHealthy", 0),
                      status.get("desiredHealthy", 0), status.get("disruptionsAllowed", 0))
    return compute(pdb, pods)


def budget(pdb: Obj, expected_pods: Mapping[str, bool]) -> Budget:
    """The budget over its expected pods (name → ready); pods already in `status.disruptedPods`
    (evicted, not yet gone) do not count as healthy."""
    disrupted = (pdb.get("status") or {}).get("disruptedPods") or {}
    expected = len(expected_pods)
    healthy = sum(1 for name, ready in expected_pods.items() if ready and name not in disrupted)
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, True))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, True)
    else:
        desired = expected
    return Budget(expected, healthy, desired, max(0, healthy - desired))
