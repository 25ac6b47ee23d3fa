"""Quota usage: what an object costs a ResourceQuota, shared by quota admission and the quota controller.

Mirrors k8s.io/apiserver/pkg/quota/v1 (resources.go: Add, Mask, LessThanOrEqual; generic: Matches,
the object count evaluator, CalculateUsageStats) and pkg/quota/v1/evaluator/core (pods, services,
persistentvolumeclaims). Admission charges one new object against the quotas of its namespace;
the controller sums every stored object; both go through the same evaluator, so a quota's
`status.used` is the sum of the charges admission made.

Resource lists are `dict[str, Quantity]`: exact values with the format they print in, so
`used: requests.memory=1Gi` reads as upstream's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from kubelite.api.quantity import DECIMAL_SI, Quantity, QuantityError
from kubelite.api.validation import is_qualified_name
from kubelite.clock import parse_rfc3339

Obj = dict[str, Any]
ResourceList = dict[str, Quantity]

ONE = Quantity(Fraction(1), DECIMAL_SI)
ZERO = Quantity(Fraction(0), DECIMAL_SI)

# core/v1 ResourceQuotaScope values
TERMINATING, NOT_TERMINATING = "Terminating", "NotTerminating"
BEST_EFFORT, NOT_BEST_EFFORT = "BestEffort", "NotBestEffort"
PRIORITY_CLASS, CROSS_NAMESPACE_POD_AFFINITY = "PriorityClass", "CrossNamespacePodAffinity"
SCOPES = (TERMINATING, NOT_TERMINATING, BEST_EFFORT, NOT_BEST_EFFORT, PRIORITY_CLASS, CROSS_NAMESPACE_POD_AFFINITY)
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
REQUESTS_PREFIX = "requests."


# --- resource lists (quota/v1/resources.go) -------------------------------------------------------

def quantity(raw: Any) -> Quantity:
    """A stored quantity (a string, or a number a client sent) with the format it prints in."""
    return Quantity.parse(raw if isinstance(raw, str) else str(raw))


def parse_list(raw: Mapping[str, Any] | None) -> ResourceList:
    """A ResourceList from the wire; values that do not parse are left out (validation refused them)."""
    out: ResourceList = {}
    for name, value in (raw or {}).items():
        try:
            out[name] = quantity(value)
        except QuantityError:
            continue
    return out


def to_wire(rl: ResourceList) -> dict[str, str]:
    return {name: str(q) for name, q in sorted(rl.items())}


def plus(a: Quantity, b: Quantity) -> Quantity:
    """Quantity.Add: the sum keeps the first operand's format unless that operand is zero."""
    return Quantity(a.amount + b.amount, b.format if a.amount == 0 else a.format)


def add(a: ResourceList, b: ResourceList) -> ResourceList:
    out = dict(a)
    for name, q in b.items():
        out[name] = plus(out[name], q) if name in out else q
    return out


def subtract_non_negative(a: ResourceList, b: ResourceList) -> ResourceList:
    """SubtractWithNonNegativeResult: what `a` uses beyond `b`, never below zero."""
    return {name: Quantity(max(q.amount - b[name].amount, Fraction(0)), q.format) if name in b else q
            for name, q in a.items()}


def mask(rl: ResourceList, names: Iterable[str]) -> ResourceList:
    keep = set(names)
    return {name: q for name, q in rl.items() if name in keep}


def less_than_or_equal(a: ResourceList, b: ResourceList) -> tuple[bool, list[str]]:
    """Whether every value of `a` that `b` limits is within it, and the names that are not."""
    exceeded = [name for name, q in a.items() if name in b and q.amount > b[name].amount]
    return not exceeded, exceeded


def equals(a: ResourceList, b: ResourceList) -> bool:
    return a.keys() == b.keys() and all(q.amount == b[name].amount for name, q in a.items())


def remove_zeros(rl: ResourceList) -> ResourceList:
    return {name: q for name, q in rl.items() if q.amount != 0}


def negative(rl: ResourceList) -> list[str]:
    return sorted(name for name, q in rl.items() if q.amount < 0)


def pretty(rl: ResourceList) -> str:
    """prettyPrint: `name=value` pairs sorted by name, comma-separated."""
    return ",".join(f"{name}={rl[name]}" for name in sorted(rl))


def _maximum(into: ResourceList, other: ResourceList) -> None:
    for name, q in other.items():
        if name not in into or q.amount > into[name].amount:
            into[name] = q


# --- scopes ---------------------------------------------------------------------------------------

def scope_selectors(quota: Obj) -> list[Obj]:
    """getScopeSelectorsFromQuota: `spec.scopes` as Exists requirements, then `spec.scopeSelector`'s."""
    spec = quota.get("spec") or {}
    selectors = [{"scopeName": scope, "operator": "Exists"} for scope in spec.get("scopes") or []]
    return selectors + list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])


def _selector_matches(selector: Obj, labels: Mapping[str, str]) -> bool:
    """ScopedResourceSelectorRequirementsAsSelector(...).Matches(labels)."""
    key, op, values = selector.get("scopeName", ""), selector.get("operator"), selector.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    return op == "DoesNotExist" and key not in labels


# --- evaluators -----------------------------------------------------------------------------------

class Evaluator(Protocol):
    """quota.Evaluator: what quota knows about one group-resource."""

    def matching_resources(self, names: Iterable[str]) -> list[str]: ...

    def matches_scope(self, selector: Obj, obj: Obj) -> bool: ...

    def usage(self, obj: Obj, now: float) -> ResourceList: ...

    def constraints(self, required: Iterable[str], obj: Obj) -> str: ...


def object_count_name(group: str, resource: str) -> str:
    """ObjectCountQuotaResourceNameFor: `count/pods`, `count/deployments.apps`."""
    return f"count/{resource}.{group}" if group else f"count/{resource}"


# core resources counted by their legacy names too (evaluator/core/registry.go legacyObjectCountAliases)
LEGACY_COUNT_ALIASES = {"configmaps": "configmaps", "resourcequotas": "resourcequotas",
                        "replicationcontrollers": "replicationcontrollers", "secrets": "secrets"}


@dataclass(frozen=True)
class ObjectCountEvaluator:
    """generic.objectCountEvaluator: every stored object counts 1 (and 1 under its legacy name); no scopes."""

    group: str
    resource: str

    @property
    def names(self) -> tuple[str, ...]:
        alias = LEGACY_COUNT_ALIASES.get(self.resource) if not self.group else None
        return (object_count_name(self.group, self.resource),) + ((alias,) if alias else ())

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in self.names]

    def matches_scope(self, selector: Obj, obj: Obj) -> bool:
        return False

    def usage(self, obj: Obj, now: float) -> ResourceList:
        return {name: ONE for name in self.names}

    def constraints(self, required: Iterable[str], obj: Obj) -> str:
        return ""


# --- pods (evaluator/core/pods.go) ----------------------------------------------------------------

POD_RESOURCES = ("count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
                 "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods")
# "it was a mistake": a quota on these makes every container state them
_VALIDATION_SET = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})


def is_native_resource(name: str) -> bool:
    """helper.IsNativeResource: no domain, or one in kubernetes.io."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain outside kubernetes.io, not `requests.`-prefixed, and still a
    qualified name once prefixed (its quota name)."""
    return not is_native_resource(name) and not name.startswith(REQUESTS_PREFIX) and \
        not is_qualified_name(REQUESTS_PREFIX + name)


def _container_resources(c: Obj, field: str) -> ResourceList:
    return parse_list((c.get("resources") or {}).get(field))


def pod_resources(spec: Obj, field: str, overhead: bool = True) -> ResourceList:
    """resourcehelper.PodRequests / PodLimits: the app containers and started sidecars summed, at least the
    largest init container (with the sidecars before it), plus the overhead — to every request, to the limits
    that are set (LimitRanger's copy leaves it out)."""
    total: ResourceList = {}
    for c in spec.get("containers") or []:
        total = add(total, _container_resources(c, field))
    sidecars: ResourceList = {}
    init_max: ResourceList = {}
    for c in spec.get("initContainers") or []:
        own = _container_resources(c, field)
        if c.get("restartPolicy") == "Always":
            total = add(total, own)
            sidecars = add(sidecars, own)
            _maximum(init_max, sidecars)
        else:
            _maximum(init_max, add(own, sidecars))
    _maximum(total, init_max)
    if not overhead:
        return total
    extra = parse_list(spec.get("overhead"))
    return add(total, extra if field == "requests" else mask(extra, total))


def pod_compute_usage(requests: ResourceList, limits: ResourceList) -> ResourceList:
    """podComputeUsageHelper."""
    out: ResourceList = {"pods": ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = out[REQUESTS_PREFIX + name] = requests[name]
        if name in limits:
            out["limits." + name] = limits[name]
    for name, q in requests.items():
        if name.startswith("hugepages-"):
            out[name] = out[REQUESTS_PREFIX + name] = q
        if is_extended_resource(name):
            out[REQUESTS_PREFIX + name] = q
    return out


def counts_for_quota(pod: Obj, now: float) -> bool:
    """QuotaV1Pod: terminal pods, and pods whose deletion grace period has run out, are not charged."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    grace = meta.get("deletionGracePeriodSeconds")
    if meta.get("deletionTimestamp") and grace is not None:
        return bool(now <= parse_rfc3339(meta["deletionTimestamp"]) + grace)
    return True


def is_best_effort(pod: Obj) -> bool:
    """qos.GetPodQOS == BestEffort: the class the API server stored, else no cpu or memory asked for."""
    stored = (pod.get("status") or {}).get("qosClass")
    if stored:
        return bool(stored == "BestEffort")
    spec = pod.get("spec") or {}
    return not any(amount.amount != 0 for kind in ("containers", "initContainers") for c in spec.get(kind) or []
                   for field in ("requests", "limits")
                   for name, amount in _container_resources(c, field).items() if name in ("cpu", "memory"))


def _cross_namespace_affinity(spec: Obj) -> bool:
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        preferred = [t.get("podAffinityTerm") or {}
                     for t in terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in [*required, *preferred]):
            return True
    return False


@dataclass(frozen=True)
class PodEvaluator:
    group: str = ""
    resource: str = "pods"

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in POD_RESOURCES or n.startswith(("hugepages-", "requests.hugepages-"))
                or (not is_native_resource(n) and n.startswith(REQUESTS_PREFIX))]

    def matches_scope(self, selector: Obj, obj: Obj) -> bool:
        """podMatchesScopeFunc."""
        spec = obj.get("spec") or {}
        scope: str = selector.get("scopeName", "")
        if scope in (TERMINATING, NOT_TERMINATING):
            deadline = spec.get("activeDeadlineSeconds")
            return bool(deadline is not None and deadline >= 0) == (scope == TERMINATING)
        if scope in (BEST_EFFORT, NOT_BEST_EFFORT):
            return is_best_effort(obj) == (scope == BEST_EFFORT)
        if scope == PRIORITY_CLASS:
            name = spec.get("priorityClassName") or ""
            if selector.get("operator") == "Exists":
                return bool(name)
            return _selector_matches(selector, {PRIORITY_CLASS: name} if name else {})
        if scope == CROSS_NAMESPACE_POD_AFFINITY:
            return _cross_namespace_affinity(spec)
        return False

    def usage(self, obj: Obj, now: float) -> ResourceList:
        """PodUsageFunc: `count/pods` always; compute resources only while the pod is charged."""
        out: ResourceList = {"count/pods": ONE}
        if not counts_for_quota(obj, now):
            return out
        spec = obj.get("spec") or {}
        return add(out, pod_compute_usage(pod_resources(spec, "requests"), pod_resources(spec, "limits")))

    def constraints(self, required: Iterable[str], obj: Obj) -> str:
        """Every container must state the cpu/memory requests and limits a quota tracks (backward compatibility)."""
        wanted = set(required) & _VALIDATION_SET
        missing: dict[str, set[str]] = {}
        spec = obj.get("spec") or {}
        for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            has = pod_compute_usage(_container_resources(c, "requests"), _container_resources(c, "limits"))
            for name in wanted - set(has):
                missing.setdefault(name, set()).add(c.get("name", ""))
        if not missing:
            return ""
        return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


# --- services and claims --------------------------------------------------------------------------

SERVICE_RESOURCES = ("count/services", "services", "services.loadbalancers", "services.nodeports")


@dataclass(frozen=True)
class ServiceEvaluator:
    group: str = ""
    resource: str = "services"

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in SERVICE_RESOURCES]

    def matches_scope(self, selector: Obj, obj: Obj) -> bool:
        return False

    def usage(self, obj: Obj, now: float) -> ResourceList:
        """evaluator/core/services.go: a NodePort or LoadBalancer Service uses a node port per port (a LoadBalancer
        that allocates none, per port that asks for one)."""
        spec = obj.get("spec") or {}
        ports = spec.get("ports") or []
        out: ResourceList = {"count/services": ONE, "services": ONE, "services.loadbalancers": ZERO,
                             "services.nodeports": ZERO}
        kind = spec.get("type")
        if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is False:
            ports = [p for p in ports if p.get("nodePort")]
        if kind in ("NodePort", "LoadBalancer"):
            out["services.nodeports"] = Quantity(Fraction(len(ports)), DECIMAL_SI)
        if kind == "LoadBalancer":
            out["services.loadbalancers"] = ONE
        return out

    def constraints(self, required: Iterable[str], obj: Obj) -> str:
        return ""


def by_storage_class(storage_class: str, name: str) -> str:
    """V1ResourceByStorageClass: `gold.storageclass.storage.k8s.io/requests.storage`."""
    return f"{storage_class}{STORAGE_CLASS_SUFFIX}{name}"


PVC_RESOURCES = ("count/persistentvolumeclaims", "persistentvolumeclaims", "requests.storage")


@dataclass(frozen=True)
class PersistentVolumeClaimEvaluator:
    group: str = ""
    resource: str = "persistentvolumeclaims"

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in PVC_RESOURCES or (
            STORAGE_CLASS_SUFFIX in n and n.endswith(("/requests.storage", "/persistentvolumeclaims")))]

    def matches_scope(self, selector: Obj, obj: Obj) -> bool:
        return False

    def usage(self, obj: Obj, now: float) -> ResourceList:
        """evaluator/core/persistent_volume_claims.go (the storage a claim requests, per class too)."""
        spec = obj.get("spec") or {}
        out: ResourceList = {"count/persistentvolumeclaims": ONE, "persistentvolumeclaims": ONE}
        storage_class = spec.get("storageClassName") or (obj["metadata"].get("annotations") or {}).get(
            "volume.beta.kubernetes.io/storage-class", "")
        if storage_class:
            out[by_storage_class(storage_class, "persistentvolumeclaims")] = ONE
        requested = parse_list((spec.get("resources") or {}).get("requests")).get("storage")
        allocated = parse_list((obj.get("status") or {}).get("allocatedResources")).get("storage")
        if requested is not None:  # getStorageUsage: whole bytes, at least what was allocated (1.32's
            if allocated is not None and allocated.amount > requested.amount:  # RecoverVolumeExpansionFailure)
                requested = allocated
            requested = Quantity(Fraction(math.ceil(requested.amount)), requested.format)
            out["requests.storage"] = requested
            if storage_class:
                out[by_storage_class(storage_class, "requests.storage")] = requested
        return out

    def constraints(self, required: Iterable[str], obj: Obj) -> str:
        return ""


_EVALUATORS: dict[tuple[str, str], Evaluator] = {
    ("", "pods"): PodEvaluator(), ("", "services"): ServiceEvaluator(),
    ("", "persistentvolumeclaims"): PersistentVolumeClaimEvaluator(),
}
# charged on update too (their evaluators' Handles): a Service may change type, a claim may grow
UPDATE_EVALUATED = frozenset({("", "services"), ("", "persistentvolumeclaims")})
# never charged (quota/v1/install: DefaultIgnoredResources)
IGNORED = frozenset({("", "events"), ("authorization.k8s.io", "localsubjectaccessreviews"),
                     ("authorization.k8s.io", "selfsubjectaccessreviews"),
                     ("authorization.k8s.io", "selfsubjectrulesreviews"),
                     ("authorization.k8s.io", "subjectaccessreviews"),
                     ("authentication.k8s.io", "tokenreviews"), ("authentication.k8s.io", "selfsubjectreviews")})


def evaluator_for(group: str, resource: str) -> Evaluator:
    """The registry's evaluator, else an object count evaluator (quota admission adds one per resource)."""
    return _EVALUATORS.get((group, resource)) or ObjectCountEvaluator(group, resource)


def count_resource(name: str) -> tuple[str, str] | None:
    """(group, resource) a `count/<resource>.<group>` or legacy count name refers to, else None."""
    if name in LEGACY_COUNT_ALIASES:
        return "", name
    if not name.startswith("count/"):
        return None
    resource, _, group = name.removeprefix("count/").partition(".")
    return group, resource


def matches(evaluator: Evaluator, quota: Obj, obj: Obj) -> bool:
    """generic.Matches: the quota tracks one of the evaluator's resources and the object is in every scope."""
    hard = ((quota.get("status") or {}).get("hard")) or {}
    return bool(evaluator.matching_resources(hard)) and all(
        evaluator.matches_scope(selector, obj) for selector in scope_selectors(quota))


def usage_stats(evaluator: Evaluator, quota: Obj, resources: Iterable[str], objects: Iterable[Obj],
                now: float) -> ResourceList:
    """generic.CalculateUsageStats: the usage of the objects in the quota's scopes, for `resources`."""
    used: ResourceList = {name: ZERO for name in resources}
    selectors = scope_selectors(quota)
    for obj in objects:
        if all(evaluator.matches_scope(selector, obj) for selector in selectors):
            used = add(used, evaluator.usage(obj, now))
    return used


Lister = Callable[[str, str], Iterable[Obj] | None]  # (group, resource) → the namespace's objects, None: unknown


def calculate_usage(quota: Obj, hard: ResourceList, list_objects: Lister, now: float) -> ResourceList:
    """quota.CalculateUsage: the usage of every hard resource some evaluator (or object count) can measure."""
    names = list(hard)
    evaluators: dict[tuple[str, str], Evaluator] = dict(_EVALUATORS)
    for name in names:
        target = count_resource(name)
        if target is not None and target not in evaluators:
            evaluators[target] = ObjectCountEvaluator(*target)
    used: ResourceList = {}
    for key, evaluator in evaluators.items():
        tracked = evaluator.matching_resources(names)
        objects = list_objects(*key) if tracked else None
        if objects is None:
            continue
        used = add(used, usage_stats(evaluator, quota, tracked, objects, now))
    return mask(used, names)
