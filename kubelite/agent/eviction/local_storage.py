"""Local ephemeral storage limits (kubelet's localStorageEviction, LocalStorageCapacityIsolation).

Independently of node thresholds, kubelet evicts at once a pod whose emptyDir outgrew its
`sizeLimit`, whose total ephemeral usage (containers' logs and writable layers plus local
volumes) exceeds the sum of its containers' `ephemeral-storage` limits, or one of whose
containers exceeds its own limit. The messages are upstream's.
"""

from __future__ import annotations

from typing import Any

from kubelite.agent.eviction.quantity import Quantity
from kubelite.agent.eviction.stats import PodStats
from kubelite.agent.eviction.thresholds import EPHEMERAL_STORAGE
from kubelite.api.podresources import pod_requests
from kubelite.api.quantity import QuantityError
from kubelite.api.validation import go_quote

Obj = dict[str, Any]
EMPTY_DIR_MESSAGE = "Usage of EmptyDir volume {} exceeds the limit {}. "
POD_MESSAGE = "Pod ephemeral local storage usage exceeds the total limit of containers {}. "
CONTAINER_MESSAGE = "Container {} exceeded its local ephemeral storage limit {}. "


def _quantity(raw: Any) -> Quantity | None:
    try:
        return Quantity.parse(str(raw)) if raw is not None else None
    except QuantityError:
        return None


def _limits_spec(spec: Obj) -> Obj:
    """The spec with limits in place of requests, so PodRequests' arithmetic gives PodLimits."""
    def swap(c: Obj) -> Obj:
        return {**c, "resources": {"requests": (c.get("resources") or {}).get("limits") or {}}}
    return {**spec, "containers": [swap(c) for c in spec.get("containers") or []],
            "initContainers": [swap(c) for c in spec.get("initContainers") or []]}


def local_storage_violation(pod: Obj, stats: PodStats | None) -> str | None:
    """The eviction message when the pod breaks a local storage limit, else None."""
    if stats is None:
        return None
    spec = pod.get("spec") or {}
    used = dict(stats.volumes)
    for vol in spec.get("volumes") or []:
        if "emptyDir" not in vol:
            continue
        size = _quantity((vol.get("emptyDir") or {}).get("sizeLimit"))
        usage = used.get(vol.get("name", ""))
        if size is not None and size.amount > 0 and usage is not None and (usage.used or 0) > size.amount:
            return EMPTY_DIR_MESSAGE.format(go_quote(vol["name"]), go_quote(str(size)))
    if any(EPHEMERAL_STORAGE in ((c.get("resources") or {}).get("limits") or {})
           for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]):
        limit = pod_requests(_limits_spec(spec)).get(EPHEMERAL_STORAGE, 0)
        total = stats.ephemeral_storage.used if stats.ephemeral_storage is not None else 0
        if (total or 0) > limit:
            return POD_MESSAGE.format(Quantity.of(limit))
    limits = {c.get("name"): _quantity(((c.get("resources") or {}).get("limits") or {}).get(EPHEMERAL_STORAGE))
              for c in spec.get("containers") or []}
    for cs in stats.containers:
        limit_q = limits.get(cs.name)
        if limit_q is None or limit_q.amount == 0:
            continue
        container_used = ((cs.logs.used if cs.logs else 0) or 0) + ((cs.rootfs.used if cs.rootfs else 0) or 0)
        if container_used > limit_q.amount:
            return CONTAINER_MESSAGE.format(cs.name, go_quote(str(limit_q)))
    return None
