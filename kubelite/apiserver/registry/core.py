"""Strategies for the core/v1 types other than pods: namespaces, nodes, events (volumes: storage.py)."""

from __future__ import annotations

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.api.selectors import COMMON_FIELDS, path_getter
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

_EVENT_FIELDS = {
    **COMMON_FIELDS,
    **{f"involvedObject.{f}": path_getter("involvedObject", f)
       for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reason": path_getter("reason"),
    "reportingComponent": path_getter("reportingComponent"),
    "source": path_getter("source", "component"),
    "type": path_getter("type"),
}
_NODE_FIELDS = {**COMMON_FIELDS, "spec.unschedulable": path_getter("spec", "unschedulable")}
_NAMESPACE_FIELDS = {**COMMON_FIELDS, "status.phase": path_getter("status", "phase")}


class NamespaceStrategy(Strategy):
    has_status = True
    name_validator = staticmethod(v.is_dns1123_label)

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]

    def prepare_update(self, new: Obj, old: Obj) -> None:
        """spec.finalizers change only through the finalize subresource (here: the namespace finalizer)."""
        super().prepare_update(new, old)
        if "spec" in old:
            new["spec"] = old["spec"]
        new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = new["metadata"]["name"]

    def pending_finalizers(self, obj: Obj) -> list[str]:
        """Spec finalizers ("kubernetes") hold a namespace in Terminating until its content is gone."""
        return super().pending_finalizers(obj) + list((obj.get("spec") or {}).get("finalizers") or [])


class NodeStrategy(Strategy):
    has_status = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        # Node registration carries its status (kubelet registers with capacity), as upstream allows.
        obj.setdefault("spec", {})

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        for i, t in enumerate((obj.get("spec") or {}).get("taints") or []):
            if not t.get("key"):
                causes.append(v.required(f"spec.taints[{i}].key"))
            if not t.get("effect"):  # a value outside the enum: the table in `enums`
                causes.append(v.required(f"spec.taints[{i}].effect"))
        return causes


class EventStrategy(Strategy):
    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        if not obj.get("involvedObject"):
            causes.append(v.required("involvedObject"))
        return causes


class LeaseStrategy(Strategy):
    pass


# Namespaces have no collection delete upstream (their REST storage implements none; discovery omits the verb)
NAMESPACES = Resource("", "v1", "namespaces", "namespace", "Namespace", False, "V1Namespace", short_names=("ns",),
                      subresources=("status", "finalize"), fields=_NAMESPACE_FIELDS,
                      verbs=("create", "delete", "get", "list", "patch", "update", "watch"))
NODES = Resource("", "v1", "nodes", "node", "Node", False, "V1Node", short_names=("no",),
                 subresources=("status",), fields=_NODE_FIELDS)
EVENTS = Resource("", "v1", "events", "event", "Event", True, "CoreV1Event", short_names=("ev",),
                  fields=_EVENT_FIELDS)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "lease", "Lease", True, "V1Lease")
