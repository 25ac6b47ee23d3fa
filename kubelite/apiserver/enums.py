"""Enumerated string fields that upstream's validation refuses outside their values, from one table.

Each row is (client model, JSON field) → the supported values in the order upstream's message lists
them (pkg/apis/core/validation: `field.NotSupported(path, value, validValues)`; where upstream keeps a
`sets.Set`, `sets.List` sorts them). The table is keyed by model, not by kind, so a Container's
`imagePullPolicy` is checked in a Pod, a Deployment's template and a Job's alike; the walk follows the
client's models (`schema`) into only those fields that can reach a row. A missing value is the
defaulter's business (every row here is defaulted or optional upstream); a value of the wrong JSON
type never gets here (`typecheck` refuses it while decoding).

Enum checks that depend on context stay with their kind's strategy (a Job template's restartPolicy
must be OnFailure or Never, a Deployment's Always; an init container's restartPolicy).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.apiserver import schema
from kubelite.apiserver.schema import FieldType

ENUMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("V1PodSpec", "restartPolicy"): ("Always", "OnFailure", "Never"),
    ("V1PodSpec", "dnsPolicy"): ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"),
    ("V1PodSpec", "preemptionPolicy"): ("PreemptLowerPriority", "Never"),
    ("V1Container", "imagePullPolicy"): ("Always", "IfNotPresent", "Never"),
    ("V1Container", "terminationMessagePolicy"): ("File", "FallbackToLogsOnError"),
    ("V1EphemeralContainer", "imagePullPolicy"): ("Always", "IfNotPresent", "Never"),
    ("V1EphemeralContainer", "terminationMessagePolicy"): ("File", "FallbackToLogsOnError"),
    ("V1ContainerPort", "protocol"): ("SCTP", "TCP", "UDP"),
    ("V1HTTPGetAction", "scheme"): ("HTTP", "HTTPS"),
    ("V1VolumeMount", "mountPropagation"): ("Bidirectional", "HostToContainer", "None"),
    ("V1Toleration", "operator"): ("Equal", "Exists"),
    ("V1Toleration", "effect"): ("NoSchedule", "PreferNoSchedule", "NoExecute"),
    ("V1Taint", "effect"): ("NoSchedule", "PreferNoSchedule", "NoExecute"),
    ("V1TopologySpreadConstraint", "whenUnsatisfiable"): ("DoNotSchedule", "ScheduleAnyway"),
    ("V1PersistentVolumeClaimSpec", "accessModes"): ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce",
                                                     "ReadWriteOncePod"),
    ("V1PersistentVolumeClaimSpec", "volumeMode"): ("Block", "Filesystem"),
}


def causes(obj: Any, model: str) -> list[Cause]:
    """`Unsupported value` causes for every enumerated field of `obj` (a `model`) outside its values."""
    out: list[Cause] = []
    if not model or not _reaches(model):
        return out
    stack: list[tuple[Any, str, str]] = [(obj, model, "")]  # iterative: a walker must not recurse per level
    while stack:
        value, current, path = stack.pop()
        if not isinstance(value, dict):
            continue
        for name, t, allowed in _relevant(current):
            if name not in value:
                continue
            sub = f"{path}.{name}" if path else name
            if allowed is not None:
                out += _check(value[name], allowed, sub)
            else:
                stack.extend(_children(value[name], t, sub))
    out.reverse()  # popped last-first: restore document order
    return out


def _check(value: Any, allowed: tuple[str, ...], path: str) -> list[Cause]:
    values = value if isinstance(value, list) else [value]  # a list of enums (accessModes) is named as a whole
    return [v.not_supported(path, x, list(allowed)) for x in values if isinstance(x, str) and x and x not in allowed]


def _children(value: Any, t: FieldType, path: str) -> list[tuple[Any, str, str]]:
    """The model-typed values inside `value` that can reach a table row, with their paths."""
    if t.kind == "model":
        return [(value, t.model, path)] if _reaches(t.model) else []
    if t.kind == "list" and isinstance(value, list):
        assert t.item is not None
        return [c for i, item in enumerate(value) for c in _children(item, t.item, f"{path}[{i}]")]
    if t.kind == "map" and isinstance(value, dict):
        assert t.item is not None
        return [c for k, item in value.items() for c in _children(item, t.item, f"{path}[{k}]")]
    return []


@cache
def _relevant(model: str) -> tuple[tuple[str, FieldType, tuple[str, ...] | None], ...]:
    """The fields of `model` that are a table row (with its values) or hold models that reach one, in the model's
    order: the walk looks at these alone (a pod's spec has ≈ 40 fields, its containers ≈ 20 each; most lead to
    no row, and looking at each of them for every pod written was a sixth of a pod's create)."""
    out = []
    for name, field in schema.fields(model).items():
        allowed = ENUMS.get((model, name))
        inner = schema.innermost(field.type)
        if allowed is not None or (inner is not None and inner.kind == "model" and _reaches(inner.model)):
            out.append((name, field.type, allowed))
    return tuple(out)


@cache
def _reaches(model: str) -> bool:
    """Whether a table row lies in `model` or any model it contains (a model met again on the way, as in
    JSONSchemaProps, adds nothing new)."""
    _visiting.add(model)
    try:
        for name, field in schema.fields(model).items():
            if (model, name) in ENUMS:
                return True
            t = schema.innermost(field.type)
            if t is not None and t.kind == "model" and t.model not in _visiting and _reaches(t.model):
                return True
        return False
    finally:
        _visiting.discard(model)


_visiting: set[str] = set()
