"""kubelite.io/v1alpha1 NodeFence: the record of one fence of one node (S4).

The fencing controller (kubelite/controllers/fencing.py) creates a NodeFence named after the
node when it decides to fence it, and reports the fence's progress in its status: phase
Pending → Running → Succeeded, or Failed between retries (attempts, the agent tried last, its
message). A Succeeded NodeFence is what allows the controller to detach the node's volumes and
force delete its pods; deleting it (`kubectl delete nodefence NODE`) is the administrator's word
that the node may run pods again, and the controller then clears the node's Fenced condition.
"""

from __future__ import annotations

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.apiserver.registry.base import Obj, Resource, Strategy

PHASES = ["Pending", "Running", "Succeeded", "Failed"]


class NodeFenceStrategy(Strategy):
    """spec.nodeName is required and immutable; the status (phase, attempts, agent, message) is the controller's."""

    has_status = True

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        if not (obj.get("spec") or {}).get("nodeName"):
            causes.append(v.required("spec.nodeName"))
        return causes  # a create's status is dropped (status subresource): validated on status updates

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = super().validate_update(new, old)
        if (new.get("spec") or {}).get("nodeName") != (old.get("spec") or {}).get("nodeName"):
            causes.append(v.immutable("spec.nodeName"))
        return causes

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        return super().validate_status_update(new, old) + _status_causes(new)


def _status_causes(obj: Obj) -> list[Cause]:
    status = obj.get("status") or {}
    causes = []
    phase = status.get("phase")
    if phase is not None and phase not in PHASES:
        causes.append(v.not_supported("status.phase", phase, PHASES))
    attempts = status.get("attempts")
    if attempts is not None and (not isinstance(attempts, int) or attempts < 0):
        causes.append(v.invalid("status.attempts", attempts, "must be a non-negative integer"))
    return causes


NODE_FENCES = Resource("kubelite.io", "v1alpha1", "nodefences", "nodefence", "NodeFence", False, "",
                       short_names=("nf",), subresources=("status",))
