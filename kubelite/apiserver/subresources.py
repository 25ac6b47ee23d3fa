"""Subresources with their own semantics: pod binding and eviction, namespace finalize.

binding mirrors pkg/registry/core/pod/storage BindingREST (assign once, PodScheduled
True); eviction mirrors EvictionREST (PDB check with 429, budget decremented by
compare-and-swap, DisruptionTarget condition, then the ordinary delete).
"""

from __future__ import annotations

from typing import Any

from kubelite.api import disruption, errors
from kubelite.api.errors import Cause
from kubelite.apiserver.registry.base import Obj
from kubelite.apiserver.registry.core import NAMESPACES
from kubelite.apiserver.registry.pods import PODS, TERMINAL_PHASES
from kubelite.apiserver.registry.policy import PDBS
from kubelite.apiserver.rest import Registry


def set_condition(status: Obj, condition: Obj, now: str) -> None:
    """Insert or replace a condition by type; lastTransitionTime moves only when status changes."""
    conditions = status.setdefault("conditions", [])
    for i, c in enumerate(conditions):
        if c.get("type") == condition["type"]:
            same = c.get("status") == condition["status"]
            merged = {**c, **condition}
            merged["lastTransitionTime"] = c.get("lastTransitionTime") if same else now
            conditions[i] = merged
            return
    conditions.append({"lastProbeTime": None, "lastTransitionTime": now, **condition})


async def finalize(registry: Registry, name: str, body: Any, dry_run: bool) -> Obj:
    """namespaces/finalize (FinalizeREST): only spec.finalizers changes; a terminating namespace whose last
    finalizer goes is removed."""
    finalizers = ((body or {}).get("spec") or {}).get("finalizers") if isinstance(body, dict) else None
    if finalizers is None:
        finalizers = []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) and f for f in finalizers):
        raise errors.invalid("Namespace", name, [Cause("FieldValueInvalid", "Invalid value: finalizers must be "
                                                       "non-empty strings", "spec.finalizers")])

    def set_finalizers(ns: Obj) -> Obj:
        ns.setdefault("spec", {})["finalizers"] = finalizers
        return ns

    return await registry.guaranteed_update(NAMESPACES, "", name, set_finalizers, dry_run)


async def bind(registry: Registry, namespace: str, binding: Obj, dry_run: bool) -> None:
    name = (binding.get("metadata") or {}).get("name", "")
    target = binding.get("target") or {}
    node = target.get("name", "")
    if not name:
        raise errors.bad_request("binding metadata.name is required")
    if not node:
        raise errors.invalid("Binding", name, [Cause("FieldValueRequired", "Required value", "target.name")])

    def assign(pod: Obj) -> Obj:
        if pod["metadata"].get("deletionTimestamp"):
            raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        current = pod["spec"].get("nodeName")
        if current:
            raise errors.conflict("pods/binding", name, f'pod {name} is already assigned to node "{current}"')
        if pod["spec"].get("schedulingGates"):
            raise errors.conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
        pod["spec"]["nodeName"] = node
        annotations = (binding.get("metadata") or {}).get("annotations")
        if annotations:
            pod["metadata"].setdefault("annotations", {}).update(annotations)
        set_condition(pod.setdefault("status", {}), {"type": "PodScheduled", "status": "True"}, registry.now())
        return pod

    await registry.guaranteed_update(PODS, namespace, name, assign, dry_run)


async def evict(registry: Registry, namespace: str, name: str, eviction: Obj, dry_run: bool) -> Obj:
    pod = registry.current(PODS, namespace, name)
    options: dict[str, Any] = dict(eviction.get("deleteOptions") or {})
    if not _can_ignore_pdb(pod):
        pdbs = [p for p in registry.caches[PDBS].list(namespace) if disruption.selects(p, pod)]
        if len(pdbs) > 1:
            raise errors.ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the "
                                                        "eviction subresource does not support.")
        if pdbs:
            await _take_disruption(registry, pdbs[0], pod, dry_run)
    if not dry_run:
        def mark(p: Obj) -> Obj:
            set_condition(p.setdefault("status", {}), {
                "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting"}, registry.now())
            return p

        await registry.guaranteed_update(PODS, namespace, name, mark)
    await registry.delete(PODS, namespace, name, options, dry_run)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _can_ignore_pdb(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["metadata"].get("deletionTimestamp")) or phase in TERMINAL_PHASES or phase == "Pending"


async def _take_disruption(registry: Registry, pdb: Obj, pod: Obj, dry_run: bool) -> None:
    """Spend one disruption; the check runs inside the compare-and-swap so concurrent evictions can't overspend."""
    pods = registry.caches[PODS].list(pod["metadata"]["namespace"])
    policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")

    def spend(p: Obj) -> Obj:
        b = disruption.current(p, pods)
        if not disruption.pod_is_ready(pod) and (policy == "AlwaysAllow" or b.current_healthy >= b.desired_healthy):
            return p  # an unready pod may go without spending the budget
        if b.disruptions_allowed <= 0:
            raise errors.too_many_requests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                [Cause("DisruptionBudget", f"The disruption budget {p['metadata']['name']} needs "
                                           f"{b.desired_healthy} healthy pods and has {b.current_healthy} currently")])
        status = p.setdefault("status", {})
        status.update({"disruptionsAllowed": b.disruptions_allowed - 1, "desiredHealthy": b.desired_healthy,
                       "currentHealthy": b.current_healthy, "expectedPods": b.expected_pods})
        status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = registry.now()
        return p

    await registry.guaranteed_update(PDBS, pdb["metadata"]["namespace"], pdb["metadata"]["name"], spend, dry_run)
