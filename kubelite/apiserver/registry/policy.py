"""PodDisruptionBudget strategy: exactly one of minAvailable / maxUnavailable, a valid policy."""

from __future__ import annotations

import re

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

_PERCENT = re.compile(r"^\d+%$")
UNHEALTHY_POLICIES = ["AlwaysAllow", "IfHealthyBudget"]


def _validate_int_or_percent(value: object, path: str) -> list[Cause]:
    if isinstance(value, bool):
        return [v.invalid(path, value, "must be an integer or percentage")]
    if isinstance(value, int):
        return [] if value >= 0 else [v.invalid(path, value, "must be greater than or equal to 0")]
    if isinstance(value, str) and _PERCENT.match(value):
        return [] if int(value[:-1]) <= 100 else [v.invalid(path, value, "must not be greater than 100%")]
    return [v.invalid(path, value, "a valid percent string must be a numeric string followed by an ending '%' "
                                   "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")]


class PodDisruptionBudgetStrategy(Strategy):
    has_status = True
    has_spec_generation = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        obj["status"] = {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        has_min, has_max = spec.get("minAvailable") is not None, spec.get("maxUnavailable") is not None
        if has_min and has_max:
            causes.append(v.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
        if has_min:
            causes += _validate_int_or_percent(spec["minAvailable"], "spec.minAvailable")
        if has_max:
            causes += _validate_int_or_percent(spec["maxUnavailable"], "spec.maxUnavailable")
        policy = spec.get("unhealthyPodEvictionPolicy")
        if policy is not None and policy not in UNHEALTHY_POLICIES:
            causes.append(v.not_supported("spec.unhealthyPodEvictionPolicy", policy, UNHEALTHY_POLICIES))
        return causes


PDBS = Resource("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", True,
                "V1PodDisruptionBudget", short_names=("pdb",), subresources=("status",))
