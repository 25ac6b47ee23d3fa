"""Pod resource requests and quantities in integer units, as upstream computes them.

Requests follow k8s.io/component-helpers resource.PodRequests: max(app containers +
sidecars, the largest init container plus the sidecars started before it) + overhead.
"Non-zero" requests (100m CPU and 200Mi memory for containers that ask for none) are what
upstream's scoring uses. Shared by the scheduler (fit, scores) and the node agent (admission).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from kubelite.api.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]
CPU, MEMORY, PODS = "cpu", "memory", "pods"
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024


@lru_cache(maxsize=4096)
def quantity_units(resource: str, value: Any) -> int:
    """Integer units per resource: milli-CPU for cpu, whole units (bytes, counts) otherwise, rounded up."""
    try:
        q = parse_quantity(value)
    except QuantityError:
        return 0
    scaled = q * 1000 if resource == CPU else q
    return int(-(-scaled.numerator // scaled.denominator))


def resource_list(raw: Mapping[str, Any] | None) -> dict[str, int]:
    return {name: quantity_units(name, v) for name, v in (raw or {}).items()}


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def pod_requests(spec: Obj, non_zero: bool = False) -> dict[str, int]:
    def container(c: Obj) -> dict[str, int]:
        req = resource_list((c.get("resources") or {}).get("requests"))
        if non_zero:
            req.setdefault(CPU, 0)
            req.setdefault(MEMORY, 0)
            if req[CPU] == 0 and CPU not in ((c.get("resources") or {}).get("requests") or {}):
                req[CPU] = DEFAULT_MILLI_CPU
            if req[MEMORY] == 0 and MEMORY not in ((c.get("resources") or {}).get("requests") or {}):
                req[MEMORY] = DEFAULT_MEMORY
        return req

    reqs: dict[str, int] = {}
    for c in spec.get("containers") or []:
        _add(reqs, container(c))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        creq = container(c)
        if c.get("restartPolicy") == "Always":
            _add(reqs, creq)
            _add(sidecars, creq)
            current = dict(sidecars)
        else:
            current = dict(creq)
            _add(current, sidecars)
        _max(init_max, current)
    _max(reqs, init_max)
    _add(reqs, resource_list(spec.get("overhead")))
    return reqs
