"""PriorityClass strategy (P1): value bounds, reserved system names, one global default."""

from __future__ import annotations

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
POLICIES = ["Never", "PreemptLowerPriority"]


class PriorityClassStrategy(Strategy):
    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def admit(self, obj: Obj, lookup: Lookup) -> list[str]:
        """At most one global default (plugin/pkg/admission/priority validatePriorityClass)."""
        if obj.get("globalDefault"):
            name = obj["metadata"]["name"]
            other = next((p for p in lookup.list("priorityclasses")
                          if p.get("globalDefault") and p["metadata"]["name"] != name), None)
            if other is not None:
                return [f"PriorityClass {other['metadata']['name']} is already marked as default. Only one default "
                        "can exist"]
        return []

    def admit_update(self, new: Obj, old: Obj, lookup: Lookup) -> list[str]:
        """The priority plugin validates updates as creates: becoming a second global default is refused."""
        return self.admit(new, lookup)

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        name, value = obj["metadata"].get("name", ""), obj.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            causes.append(v.required("value"))
        elif name in SYSTEM_PRIORITY_CLASSES:
            if value != SYSTEM_PRIORITY_CLASSES[name]:
                causes.append(v.forbidden("metadata.name", f"{name!r} is a reserved name; its value must be "
                                                           f"{SYSTEM_PRIORITY_CLASSES[name]}"))
        elif name.startswith("system-"):
            causes.append(v.forbidden("metadata.name", "priority class names with 'system-' prefix are reserved "
                                                       "for system use only"))
        elif value > HIGHEST_USER_PRIORITY:
            causes.append(v.forbidden("value", f"maximum allowed value of a user defined priority is "
                                               f"{HIGHEST_USER_PRIORITY}"))
        if obj.get("preemptionPolicy") not in POLICIES:
            causes.append(v.not_supported("preemptionPolicy", obj.get("preemptionPolicy"), POLICIES))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        if new.get("value") != old.get("value"):
            causes.append(v.forbidden("value", "may not be changed in an update."))
        if new.get("preemptionPolicy") != old.get("preemptionPolicy"):
            causes.append(v.immutable("preemptionPolicy"))
        return causes


PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", False,
                            "V1PriorityClass", short_names=("pc",))
