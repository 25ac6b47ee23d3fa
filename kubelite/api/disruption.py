"""PodDisruptionBudget arithmetic, shared by the eviction API and the disruption controller.

Mirrors pkg/controller/disruption (getExpectedPodCount, countHealthyPods) for budgets
over bare pods: the expected count is the number of selected pods.
"""

from __future__ import annotations

import math
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


def compute(pdb: Obj, pods: list[Obj]) -> Budget:
    """Pods already in `status.disruptedPods` (evicted, not yet gone) do not count as healthy."""
    disrupted = set((pdb.get("status") or {}).get("disruptedPods") or {})
    live = [p for p in pods if selects(pdb, p) and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    expected = len(live)
    healthy = sum(1 for p in live if pod_is_ready(p) and p["metadata"]["name"] not in disrupted)
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, True))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, True)
    else:
        desired = expected
    return Budget(expected, healthy, desired, max(0, healthy - desired))
