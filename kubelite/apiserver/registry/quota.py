"""core/v1 LimitRanges and ResourceQuotas: validation and the status split, as upstream.

Mirrors pkg/apis/core/validation (ValidateLimitRange, ValidateResourceQuota and its Update and
StatusUpdate forms, with the resource-name helpers of pkg/apis/core/helper) and
pkg/registry/core/{limitrange,resourcequota}/strategy.go: a quota's status changes only through
`resourcequotas/status` (the quota controller) and quota admission's charges, its spec only through
the main resource, and its scopes never change; LimitRange `Container` items are defaulted
(SetDefaults_LimitRangeItem). What the two kinds do to other objects is admission's
(kubelite/apiserver/admission) and the quota controller's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from kubelite.api import quota
from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.api.quantity import Quantity
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
_NOT_NEGATIVE = "must be greater than or equal to 0"
_NOT_INTEGER = "must be an integer"
_INVALID_QUOTA_RESOURCE = "must be a standard resource for quota"
_STANDARD_CONTAINER = frozenset({"cpu", "memory", "ephemeral-storage"})
_STANDARD_QUOTA = frozenset({"cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
                             "requests.storage", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
                             "limits.ephemeral-storage", "pods", "resourcequotas", "services",
                             "replicationcontrollers", "secrets", "persistentvolumeclaims", "configmaps",
                             "services.nodeports", "services.loadbalancers"})
_STANDARD = _STANDARD_QUOTA | {"storage"}
_INTEGER = frozenset({"pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
                      "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"})
_POD_COUNT = frozenset({"pods"})
_POD_COMPUTE = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
_EXISTS_ONLY = (quota.BEST_EFFORT, quota.NOT_BEST_EFFORT, quota.TERMINATING, quota.NOT_TERMINATING,
                quota.CROSS_NAMESPACE_POD_AFFINITY)
_CONFLICTING = ({quota.BEST_EFFORT, quota.NOT_BEST_EFFORT}, {quota.TERMINATING, quota.NOT_TERMINATING})


def _hugepages(name: str) -> bool:
    """IsQuotaHugePageResourceName."""
    return name.startswith(("hugepages-", "requests.hugepages-"))


def _resource_name(name: str, path: str) -> list[Cause]:
    """validateResourceName: a qualified name; without a domain, a standard one."""
    causes = [v.invalid(path, name, msg) for msg in v.is_qualified_name(name)]
    if not causes and "/" not in name and name not in _STANDARD and not _hugepages(name):
        causes.append(v.invalid(path, name, "must be a standard resource type or fully qualified"))
    return causes


def _container_resource_name(name: str, path: str) -> list[Cause]:
    """validateContainerResourceName."""
    causes = _resource_name(name, path)
    if "/" not in name:
        if name not in _STANDARD_CONTAINER and not name.startswith("hugepages-"):
            causes.append(v.invalid(path, name, "must be a standard resource for containers"))
    elif not quota.is_native_resource(name) and not quota.is_extended_resource(name):
        causes.append(v.invalid(path, name, "doesn't follow extended resource name standard"))
    return causes


# --- LimitRange -----------------------------------------------------------------------------------

def _limit_type(value: str, path: str) -> list[Cause]:
    """validateLimitRangeTypeName."""
    causes = [v.invalid(path, value, msg) for msg in v.is_qualified_name(value)]
    if not causes and "/" not in value and value not in LIMIT_TYPES:
        causes.append(v.invalid(path, value, "must be a standard limit type or fully qualified"))
    return causes


def validate_limit_range(obj: Obj) -> list[Cause]:
    """ValidateLimitRange (after the object metadata)."""
    causes: list[Cause] = []
    seen_types: set[str] = set()
    for i, item in enumerate((obj.get("spec") or {}).get("limits") or []):
        path = f"spec.limits[{i}]"
        kind = item.get("type", "")
        causes += _limit_type(kind, f"{path}.type")
        if kind in seen_types:
            causes.append(v.duplicate(f"{path}.type", kind))
        seen_types.add(kind)
        name_check = _container_resource_name if kind in ("Pod", "Container") else _resource_name
        fields: dict[str, dict[str, Quantity]] = {}
        order = ["max", "min"] + (["default", "defaultRequest"] if kind != "Pod" else []) + ["maxLimitRequestRatio"]
        if kind == "Pod":
            causes += [v.forbidden(f"{path}.{f}", "may not be specified when `type` is 'Pod'")
                       for f in ("default", "defaultRequest") if item.get(f)]
        for field in order:
            raw = item.get(field) or {}
            for name in raw:
                causes += name_check(name, f"{path}.{field}[{name}]")
            fields[field] = quota.parse_list(raw)
        if kind == "PersistentVolumeClaim" and "storage" not in fields["min"] and "storage" not in fields["max"]:
            causes.append(v.required(f"{path}.limits", "either minimum or maximum storage value is required, but "
                                                       "neither was provided"))
        causes += _limit_item_bounds(path, fields)
    return causes


def _limit_item_bounds(path: str, fields: dict[str, dict[str, Quantity]]) -> list[Cause]:
    """min ≤ defaultRequest ≤ default ≤ max per resource, a ratio of at least 1 and at most max/min."""
    causes: list[Cause] = []
    low, high = fields["min"], fields["max"]
    default, request = fields.get("default", {}), fields.get("defaultRequest", {})
    ratio = fields["maxLimitRequestRatio"]
    for k in sorted(set().union(*fields.values())):
        lo, hi, d, dr, r = low.get(k), high.get(k), default.get(k), request.get(k), ratio.get(k)
        if lo is not None and hi is not None and lo.amount > hi.amount:
            causes.append(v.invalid(f"{path}.min[{k}]", str(lo), f"min value {lo} is greater than max value {hi}"))
        if dr is not None and lo is not None and lo.amount > dr.amount:
            causes.append(v.invalid(f"{path}.defaultRequest[{k}]", str(dr),
                                    f"min value {lo} is greater than default request value {dr}"))
        if dr is not None and hi is not None and dr.amount > hi.amount:
            causes.append(v.invalid(f"{path}.defaultRequest[{k}]", str(dr),
                                    f"default request value {dr} is greater than max value {hi}"))
        if dr is not None and d is not None and dr.amount > d.amount:
            causes.append(v.invalid(f"{path}.defaultRequest[{k}]", str(dr),
                                    f"default request value {dr} is greater than default limit value {d}"))
        if d is not None and lo is not None and lo.amount > d.amount:
            causes.append(v.invalid(f"{path}.default[{k}]", str(lo),
                                    f"min value {lo} is greater than default value {d}"))
        if d is not None and hi is not None and d.amount > hi.amount:
            causes.append(v.invalid(f"{path}.default[{k}]", str(hi),
                                    f"default value {d} is greater than max value {hi}"))
        if r is not None and r.amount < 1:
            causes.append(v.invalid(f"{path}.maxLimitRequestRatio[{k}]", str(r), f"ratio {r} is less than 1"))
        if r is not None and lo is not None and hi is not None:
            # float64 division, as upstream
            limit = hi.milli_value() / lo.milli_value() if lo.milli_value() else math.inf
            if r.milli_value() / 1000 > limit:
                causes.append(v.invalid(f"{path}.maxLimitRequestRatio[{k}]", str(r),
                                        f"ratio {r} is greater than max/min = {limit:f}"))
        overcommit = quota.is_native_resource(k) and not k.startswith("hugepages-")  # IsOvercommitAllowed
        if not overcommit and d is not None and dr is not None and d.amount != dr.amount:
            causes.append(v.invalid(f"{path}.defaultRequest[{k}]", str(dr),
                                    f"default value {d} must equal to defaultRequest value {dr} in {k}"))
    return causes


def default_limit_range(obj: Obj) -> None:
    """SetDefaults_LimitRangeItem for `Container` items: the default limit from `max`, the default request from
    the default limit, else from `min`."""
    for item in (obj.get("spec") or {}).get("limits") or []:
        if item.get("type") != "Container":
            continue
        default = item["default"] = dict(item.get("default") or {})
        request = item["defaultRequest"] = dict(item.get("defaultRequest") or {})
        for source, target in ((item.get("max"), default), (default, request), (item.get("min"), request)):
            for name, value in (source or {}).items():
                target.setdefault(name, value)


class LimitRangeStrategy(Strategy):
    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        default_limit_range(obj)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        default_limit_range(new)

    def validate(self, obj: Obj) -> list[Cause]:
        return super().validate(obj) + validate_limit_range(obj)


# --- ResourceQuota --------------------------------------------------------------------------------

def _quota_resource_name(name: str, path: str) -> list[Cause]:
    """ValidateResourceQuotaResourceName."""
    causes = _resource_name(name, path)
    if "/" not in name and name not in _STANDARD_QUOTA and not _hugepages(name):
        causes.append(v.invalid(path, name, _INVALID_QUOTA_RESOURCE))
    return causes


def _resource_list(raw: object, path: str) -> list[Cause]:
    """Names and values of `hard`/`used`: quota resource names, quantities not negative, counts whole."""
    causes: list[Cause] = []
    values = raw if isinstance(raw, dict) else {}
    parsed = quota.parse_list(values)
    for name in values:
        at = f"{path}[{name}]"
        causes += _quota_resource_name(name, at)
        q = parsed.get(name)
        if q is None:
            continue
        if q.amount < 0:
            causes.append(v.invalid(at, str(q), _NOT_NEGATIVE))
        if (name in _INTEGER or quota.is_extended_resource(name)) and (q.amount * 1000) % 1000 != 0:
            causes.append(v.invalid(at, str(q), _NOT_INTEGER))
    return causes


def _scope_valid_for(scope: str, resource: str) -> bool:
    """IsResourceQuotaScopeValidForResource."""
    if scope == quota.BEST_EFFORT:
        return resource in _POD_COUNT
    if scope in (quota.TERMINATING, quota.NOT_TERMINATING, quota.NOT_BEST_EFFORT, quota.PRIORITY_CLASS,
                 quota.CROSS_NAMESPACE_POD_AFFINITY):
        return resource in _POD_COUNT or resource in _POD_COMPUTE
    return True


def _standard_quota_names(hard: Iterable[str]) -> list[str]:
    return sorted(k for k in hard if k in _STANDARD_QUOTA or _hugepages(k))


def _validate_scopes(spec: Obj) -> list[Cause]:
    """validateResourceQuotaScopes."""
    scopes = spec.get("scopes") or []
    causes: list[Cause] = []
    hard = _standard_quota_names(spec.get("hard") or {})
    for scope in scopes:
        if scope not in quota.SCOPES:
            causes.append(v.invalid("spec.scopes", scopes, "unsupported scope"))
        causes += [v.invalid("spec.scopes", scopes, "unsupported scope applied to resource")
                   for k in hard if not _scope_valid_for(scope, k)]
    causes += [v.invalid("spec.scopes", scopes, "conflicting scopes") for pair in _CONFLICTING
               if pair <= set(scopes)]
    return causes


def _validate_scope_selector(spec: Obj) -> list[Cause]:
    """validateScopedResourceSelectorRequirement."""
    selector = spec.get("scopeSelector")
    if selector is None:
        return []
    path = "spec.scopeSelector.matchExpressions"
    hard = _standard_quota_names(spec.get("hard") or {})
    causes: list[Cause] = []
    names: set[str] = set()
    for req in selector.get("matchExpressions") or []:
        scope, op, values = req.get("scopeName", ""), req.get("operator", ""), req.get("values") or []
        if scope not in quota.SCOPES:
            causes.append(v.invalid(f"{path}.scopeName", scope, "unsupported scope"))
        causes += [v.invalid(path, selector, "unsupported scope applied to resource")
                   for k in hard if not _scope_valid_for(scope, k)]
        if scope in _EXISTS_ONLY and op != "Exists":
            causes.append(v.invalid(f"{path}.operator", op, "must be 'Exist' when scope is any of "
                                    "ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "
                                    "ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or "
                                    "ResourceQuotaScopeCrossNamespacePodAffinity"))
        if op in ("In", "NotIn"):
            if not values:
                causes.append(v.required(f"{path}.values", "must be at least one value when `operator` is 'In' or "
                                                           "'NotIn' for scope selector"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                causes.append(v.invalid(f"{path}.values", values, "must be no value when `operator` is 'Exist' or "
                                                                  "'DoesNotExist' for scope selector"))
        else:
            causes.append(v.invalid(f"{path}.operator", op, "not a valid selector operator"))
        names.add(scope)
    causes += [v.invalid(path, None, "conflicting scopes") for pair in _CONFLICTING if pair <= names]
    return causes


def validate_resource_quota_spec(spec: Obj) -> list[Cause]:
    """ValidateResourceQuotaSpec."""
    return _resource_list(spec.get("hard"), "spec.hard") + _validate_scopes(spec) + _validate_scope_selector(spec)


def validate_resource_quota_status(status: Obj) -> list[Cause]:
    """ValidateResourceQuotaStatus."""
    return _resource_list(status.get("hard"), "status.hard") + _resource_list(status.get("used"), "status.used")


class ResourceQuotaStrategy(Strategy):
    has_status = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        """resourcequotaStrategy.PrepareForCreate: status is the system's (admission and the controller fill it)."""
        super().prepare_create(obj, lookup)
        obj.setdefault("spec", {})

    def validate(self, obj: Obj) -> list[Cause]:
        return super().validate(obj) + validate_resource_quota_spec(obj.get("spec") or {}) + \
            validate_resource_quota_status(obj.get("status") or {})

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        """ValidateResourceQuotaUpdate: the scopes never change."""
        causes = self.validate(new)
        new_scopes = (new.get("spec") or {}).get("scopes") or []
        if set(new_scopes) != set((old.get("spec") or {}).get("scopes") or []):
            causes.append(v.invalid("spec.scopes", new_scopes, "field is immutable"))
        return causes

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        return super().validate(new) + validate_resource_quota_status(new.get("status") or {})


LIMIT_RANGES = Resource("", "v1", "limitranges", "limitrange", "LimitRange", True, "V1LimitRange",
                        short_names=("limits",))
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "resourcequota", "ResourceQuota", True, "V1ResourceQuota",
                           short_names=("quota",), subresources=("status",))
