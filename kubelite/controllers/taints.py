"""Taints, tolerations and node conditions on wire objects, as the node controllers read and write them.

The node lifecycle controller, the taint eviction controller and pod GC all ask the same
questions of a node (its Ready condition, whether it carries a taint) and of a pod (which of
its tolerations match a NoExecute taint, and for how long). Upstream answers them in
pkg/util/taints, pkg/apis/core/v1/helper and controller_utils; here they are one small module
so the three controllers agree. Writes go through `swap_node_taints`, the one place a
controller changes a node's taints (controller_utils.SwapNodeControllerTaint).
"""

from __future__ import annotations

from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.interface import Client
from kubelite.clock import rfc3339
from kubelite.controllers import podcontrol as pc

Obj = dict[str, Any]

NO_EXECUTE = "NoExecute"
NO_SCHEDULE = "NoSchedule"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
UNREACHABLE_NO_EXECUTE: Obj = {"key": UNREACHABLE, "effect": NO_EXECUTE}
NOT_READY_NO_EXECUTE: Obj = {"key": NOT_READY, "effect": NO_EXECUTE}
UPDATE_TAINT_ATTEMPTS = 5


def condition(obj: Obj | None, kind: str) -> Obj | None:
    """A copy of the status condition of type `kind` (controllerutil.GetNodeCondition / podutil.GetPodCondition);
    `podcontrol.condition` is the condition itself, to read only."""
    found = pc.condition(obj or {}, kind)
    return dict(found) if found is not None else None


def taints_of(node: Obj | None) -> list[Obj]:
    return list(((node or {}).get("spec") or {}).get("taints") or [])


def matches(a: Obj, b: Obj) -> bool:
    """Taint.MatchTaint: same key and effect (value and timeAdded do not matter)."""
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def taint_exists(taints: list[Obj], taint: Obj) -> bool:
    return any(matches(t, taint) for t in taints)


def no_execute(taints: list[Obj]) -> list[Obj]:
    """getNoExecuteTaints."""
    return [t for t in taints if t.get("effect") == NO_EXECUTE]


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """v1 Toleration.ToleratesTaint (an empty effect matches every effect, an empty key with Exists every key)."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if (toleration.get("operator") or "Equal") == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def matching_tolerations(taints: list[Obj], tolerations: list[Obj]) -> tuple[bool, list[Obj]]:
    """v1helper.GetMatchingTolerations: whether every taint is tolerated, and the tolerations used."""
    used: list[Obj] = []
    for taint in taints:
        match = [t for t in tolerations if tolerates(t, taint)]
        if not match:
            return False, []
        used.extend(match)
    return True, used


def min_toleration_seconds(tolerations: list[Obj]) -> float | None:
    """getMinTolerationTime: the shortest tolerationSeconds (<= 0 means at once); None means forever."""
    if not tolerations:
        return 0.0
    shortest: float | None = None
    for t in tolerations:
        seconds = t.get("tolerationSeconds")
        if seconds is None:
            continue
        if seconds <= 0:
            return 0.0
        if shortest is None or seconds < shortest:
            shortest = float(seconds)
    return shortest


async def swap_node_taints(client: Client, node: Obj, add: list[Obj], remove: list[Obj], now: float) -> bool:
    """Add `add` and drop `remove` from the node's taints in one write; False when nothing had to change.

    As controller_utils.SwapNodeControllerTaint: NoExecute taints are stamped with timeAdded; the first
    attempt uses the cached node, and a conflict (someone else wrote the node since) is retried on a
    fresh copy (RetryOnConflict with UpdateTaintBackoff's five steps), so taints others changed are kept.
    """
    path = resource_path("nodes", name=node["metadata"]["name"])
    for attempt in range(UPDATE_TAINT_ATTEMPTS):
        if attempt:
            node = await client.get(path)
        body = _with_taints(node, add, remove, now)
        if body is None:
            return False
        try:
            await client.request("PUT", path, body)
            return True
        except ApiError as exc:
            if exc.code != 409 or attempt == UPDATE_TAINT_ATTEMPTS - 1:
                raise
    return False


def _with_taints(node: Obj, add: list[Obj], remove: list[Obj], now: float) -> Obj | None:
    old = taints_of(node)
    kept = [t for t in old if not taint_exists(remove, t)]
    for taint in add:
        if not taint_exists(kept, taint):
            stamped = dict(taint)
            if stamped.get("effect") == NO_EXECUTE:
                stamped["timeAdded"] = rfc3339(now)
            kept.append(stamped)
    if len(kept) == len(old) and all(taint_exists(old, t) for t in kept):
        return None
    spec = {k: v for k, v in (node.get("spec") or {}).items() if k != "taints"}
    if kept:  # NodeSpec.Taints is omitempty: the last one removed leaves no `taints: []` behind
        spec["taints"] = kept
    return {**node, "spec": spec}
