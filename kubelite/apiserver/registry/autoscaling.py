"""autoscaling HorizontalPodAutoscalers: v2 stored and served, v1 served by conversion, as upstream's.

Mirrors pkg/apis/autoscaling/v2/defaults.go (SetDefaults_HorizontalPodAutoscaler), pkg/apis/autoscaling/validation
and pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go: minReplicas defaults to 1; an HPA without metrics
gets an 80% CPU utilization target; a `behavior` given in part is completed with the default scale-up rules (no
stabilization, at most 4 pods or 100% per 15 s, the larger) and scale-down rules (100% per 15 s; its stabilization
window left unset, for the controller's 300 s). The HPAScaleToZero gate is off: minReplicas 0 is refused unless the
stored object already had it.

autoscaling/v1 (`kubectl autoscale` posts it) is pkg/apis/autoscaling/v1/conversion.go: targetCPUUtilizationPercentage
is the CPU utilization metric; every other metric, the current metrics, the behavior and the conditions ride in the
`autoscaling.alpha.kubernetes.io/*` annotations, so a v1 read-modify-write keeps them.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.api.quantity import QuantityError, parse_quantity
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

DEFAULT_CPU_UTILIZATION = 80
MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_WINDOW_SECONDS = 3600
METRIC_SOURCE_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"]
SELECT_POLICIES = ["Disabled", "Max", "Min"]
POLICY_TYPES = ["Percent", "Pods"]
TARGET_TYPES = ("Utilization", "Value", "AverageValue")
# the metric source field each metric type must fill (validateMetricSpec's typesPresent names)
SOURCE_FIELDS = {"Object": "object", "Pods": "pods", "Resource": "resource", "External": "external",
                 "ContainerResource": "containerResource"}

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
ROUND_TRIP_ANNOTATIONS = (METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, BEHAVIOR_ANNOTATION, CONDITIONS_ANNOTATION)


def default_scale_up_rules() -> Obj:
    """defaultHPAScaleUpRules: no stabilization; at most 4 pods or 100% per 15 s, whichever adds more."""
    return {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                         {"type": "Percent", "value": 100, "periodSeconds": 15}]}


def default_scale_down_rules() -> Obj:
    """defaultHPAScaleDownRules: 100% per 15 s; the window is left to the controller's downscale stabilization."""
    return {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _completed_rules(given: Any, defaults: Obj) -> Obj:
    """copyHPAScalingRules: the given rules' set fields over the defaults."""
    if not isinstance(given, dict):
        return defaults
    for field in ("selectPolicy", "stabilizationWindowSeconds", "policies"):
        if given.get(field) is not None:
            defaults[field] = given[field]
    return defaults


def default_hpa(spec: Obj) -> None:
    """SetDefaults_HorizontalPodAutoscaler (v2), on create and on every update as upstream defaults every decode."""
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _completed_rules(behavior.get("scaleUp"), default_scale_up_rules())
        behavior["scaleDown"] = _completed_rules(behavior.get("scaleDown"), default_scale_down_rules())


# --- validation (pkg/apis/autoscaling/validation) --------------------------------------------------------------

def _positive_quantity(value: Any, path: str) -> list[Cause]:
    if value is None:
        return []
    try:
        positive = parse_quantity(value) > 0
    except QuantityError:
        positive = False
    return [] if positive else [Cause("FieldValueInvalid", f"Invalid value: {value}: must be positive", path)]


def validate_cross_version_object_reference(ref: Any, path: str) -> list[Cause]:
    ref = ref if isinstance(ref, dict) else {}
    causes: list[Cause] = []
    for field in ("kind", "name"):
        value = ref.get(field) or ""
        if not value:
            causes.append(v.required(f"{path}.{field}"))
        else:
            causes += [v.invalid(f"{path}.{field}", value, msg) for msg in v.is_path_segment_name(value)]
    return causes


def _validate_metric_target(target: Obj, path: str) -> list[Cause]:
    causes: list[Cause] = []
    kind = target.get("type") or ""
    if not kind:
        causes.append(v.required(f"{path}.type", "must specify a metric target type"))
    if kind not in TARGET_TYPES:
        causes.append(v.invalid(f"{path}.type", kind, "must be either Utilization, Value, or AverageValue"))
    causes += _positive_quantity(target.get("value"), f"{path}.value")
    causes += _positive_quantity(target.get("averageValue"), f"{path}.averageValue")
    utilization = target.get("averageUtilization")
    if utilization is not None and utilization < 1:
        causes.append(v.invalid(f"{path}.averageUtilization", utilization, "must be greater than 0"))
    return causes


def _validate_metric_identifier(metric: Any, path: str) -> list[Cause]:
    name = (metric if isinstance(metric, dict) else {}).get("name") or ""
    if not name:
        return [v.required(f"{path}.name", "must specify a metric name")]
    return [v.invalid(f"{path}.name", name, msg) for msg in v.is_path_segment_name(name)]


def _validate_source(kind: str, src: Obj, path: str) -> list[Cause]:
    """validateObjectSource / validateExternalSource / validatePodsSource / validate(Container)ResourceSource."""
    target: Obj = src["target"] if isinstance(src.get("target"), dict) else {}
    tpath = f"{path}.target"
    causes: list[Cause] = []
    if kind == "object":
        causes += validate_cross_version_object_reference(src.get("describedObject"), f"{path}.describedObject")
    if kind in ("object", "external", "pods"):
        causes += _validate_metric_identifier(src.get("metric"), f"{path}.metric")
    if kind in ("resource", "containerResource") and not src.get("name"):
        causes.append(v.required(f"{path}.name", "must specify a resource name"))
    if kind == "containerResource":
        container = src.get("container") or ""
        if not container:
            causes.append(v.required(f"{path}.container", "must specify a container"))
        else:
            causes += [v.invalid(f"{path}.container", container, msg) for msg in v.is_dns1123_label(container)]
    causes += _validate_metric_target(target, tpath)
    value, average, utilization = target.get("value"), target.get("averageValue"), target.get("averageUtilization")
    if kind == "object" and value is None and average is None:
        causes.append(v.required(f"{tpath}.averageValue", "must set either a target value or averageValue"))
    if kind == "external":
        if value is None and average is None:
            causes.append(v.required(f"{tpath}.averageValue",
                                     "must set either a target value for metric or a per-pod target"))
        if value is not None and average is not None:
            causes.append(v.forbidden(f"{tpath}.value",
                                      "may not set both a target value for metric and a per-pod target"))
    if kind == "pods" and average is None:
        causes.append(v.required(f"{tpath}.averageValue", "must specify a positive target averageValue"))
    if kind in ("resource", "containerResource"):
        if utilization is None and average is None:
            causes.append(v.required(f"{tpath}.averageUtilization",
                                     "must set either a target raw value or a target utilization"))
        if utilization is not None and average is not None:
            causes.append(v.forbidden(f"{tpath}.averageValue",
                                      "may not set both a target raw value and a target utilization"))
    return causes


def validate_metric_spec(spec: Obj, path: str) -> list[Cause]:
    """validateMetricSpec: a known type, its source filled, and no other source."""
    causes: list[Cause] = []
    kind = spec.get("type") or ""
    if not kind:
        causes.append(v.required(f"{path}.type", "must specify a metric source type"))
    if kind not in METRIC_SOURCE_TYPES:
        causes.append(v.not_supported(f"{path}.type", kind, METRIC_SOURCE_TYPES))
    present = [f for f in ("object", "external", "pods", "resource", "containerResource") if spec.get(f) is not None]
    if present:  # only the first source present is validated, as upstream's typesPresent.Len() == 1 checks
        first = spec[present[0]]
        causes += _validate_source(present[0], first if isinstance(first, dict) else {}, f"{path}.{present[0]}")
    expected = SOURCE_FIELDS.get(kind)
    if expected is not None and spec.get(expected) is None:
        causes.append(v.required(f"{path}.{expected}", "must populate information for the given metric source"))
    elif expected is None:
        causes.append(v.not_supported(f"{path}.type", kind, METRIC_SOURCE_TYPES))
    if len(present) != 1:
        causes += [v.forbidden(f"{path}.{f}", "must populate the given metric source only")
                   for f in present if f != expected]
    return causes


def _validate_scaling_rules(rules: Any, path: str) -> list[Cause]:
    if not isinstance(rules, dict):
        return []
    causes: list[Cause] = []
    window = rules.get("stabilizationWindowSeconds")
    if window is not None and window < 0:
        causes.append(v.invalid(f"{path}.stabilizationWindowSeconds", window, "must be greater than or equal to zero"))
    if window is not None and window > MAX_STABILIZATION_WINDOW_SECONDS:
        causes.append(v.invalid(f"{path}.stabilizationWindowSeconds", window,
                                f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"))
    select = rules.get("selectPolicy")
    if select is not None and select not in SELECT_POLICIES:
        causes.append(v.not_supported(f"{path}.selectPolicy", select, SELECT_POLICIES))
    policies = rules.get("policies") or []
    if not policies:
        causes.append(v.required(f"{path}.policies", "must specify at least one Policy"))
    for i, policy in enumerate(policies):
        ppath = f"{path}.policies[{i}]"
        policy = policy if isinstance(policy, dict) else {}
        if policy.get("type") not in POLICY_TYPES:
            causes.append(v.not_supported(f"{ppath}.type", policy.get("type") or "", POLICY_TYPES))
        value, period = policy.get("value") or 0, policy.get("periodSeconds") or 0
        if value <= 0:
            causes.append(v.invalid(f"{ppath}.value", value, "must be greater than zero"))
        if period <= 0:
            causes.append(v.invalid(f"{ppath}.periodSeconds", period, "must be greater than zero"))
        if period > MAX_PERIOD_SECONDS:
            causes.append(v.invalid(f"{ppath}.periodSeconds", period,
                                    f"must be less than or equal to {MAX_PERIOD_SECONDS}"))
    return causes


def validate_hpa_spec(spec: Obj, min_replicas_lower_bound: int = 1) -> list[Cause]:
    """validateHorizontalPodAutoscalerSpec."""
    causes: list[Cause] = []
    low, high = spec.get("minReplicas"), spec.get("maxReplicas") or 0
    if low is not None and low < min_replicas_lower_bound:
        causes.append(v.invalid("spec.minReplicas", low,
                                f"must be greater than or equal to {min_replicas_lower_bound}"))
    if high < 1:
        causes.append(v.invalid("spec.maxReplicas", high, "must be greater than 0"))
    if low is not None and high < low:
        causes.append(v.invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    causes += validate_cross_version_object_reference(spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    metrics = spec.get("metrics") or []
    for i, metric in enumerate(metrics):
        causes += validate_metric_spec(metric if isinstance(metric, dict) else {}, f"spec.metrics[{i}]")
    if low == 0 and not any(isinstance(m, dict) and m.get("type") in ("Object", "External") for m in metrics):
        causes.append(v.forbidden("spec.metrics", "must specify at least one Object or External metric to support "
                                                  "scaling to zero replicas"))
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        causes += _validate_scaling_rules(behavior.get("scaleUp"), "spec.behavior.scaleUp")
        causes += _validate_scaling_rules(behavior.get("scaleDown"), "spec.behavior.scaleDown")
    return causes


class HorizontalPodAutoscalerStrategy(Strategy):
    """pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go: status only through its subresource."""

    has_status = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        default_hpa(_spec(obj))
        obj["status"] = {"currentReplicas": 0, "desiredReplicas": 0}

    def prepare_update(self, new: Obj, old: Obj) -> None:
        default_hpa(_spec(new))
        super().prepare_update(new, old)

    def validate(self, obj: Obj) -> list[Cause]:
        return super().validate(obj) + validate_hpa_spec(obj.get("spec") or {})

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        """ValidateHorizontalPodAutoscalerUpdate: minReplicas 0 stays allowed on an object that already has it."""
        lower = 0 if (old.get("spec") or {}).get("minReplicas") == 0 else 1
        return super().validate(new) + validate_hpa_spec(new.get("spec") or {}, lower)

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        status = new.get("status") or {}
        return [v.invalid(f"status.{k}", status[k], "must be greater than or equal to 0")
                for k in ("currentReplicas", "desiredReplicas") if isinstance(status.get(k), int) and status[k] < 0]


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


# --- autoscaling/v1 <-> v2 (pkg/apis/autoscaling/v1/conversion.go) ---------------------------------------------

def _is_cpu_utilization(metric: Obj) -> bool:
    resource = metric.get("resource") or {}
    return metric.get("type") == "Resource" and resource.get("name") == "cpu" and \
        (resource.get("target") or {}).get("averageUtilization") is not None


def _set(out: Obj, key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _metric_spec_to_v1(m: Obj) -> Obj:
    """Convert_autoscaling_MetricSpec_To_v1_MetricSpec: targets flattened back into v2beta1-style fields."""
    out: Obj = {"type": m.get("type")}
    if (src := m.get("object")) is not None:
        t, metric = src.get("target") or {}, src.get("metric") or {}
        obj: Obj = {"target": src.get("describedObject") or {}, "metricName": metric.get("name", ""),
                    "targetValue": t.get("value") or "0"}
        _set(obj, "selector", metric.get("selector"))
        _set(obj, "averageValue", t.get("averageValue"))
        out["object"] = obj
    if (src := m.get("pods")) is not None:
        t, metric = src.get("target") or {}, src.get("metric") or {}
        pods: Obj = {"metricName": metric.get("name", ""), "targetAverageValue": t.get("averageValue") or "0"}
        _set(pods, "selector", metric.get("selector"))
        out["pods"] = pods
    for field in ("resource", "containerResource"):
        if (src := m.get(field)) is not None:
            t = src.get("target") or {}
            res: Obj = {"name": src.get("name", "")}
            _set(res, "container", src.get("container"))
            _set(res, "targetAverageUtilization", t.get("averageUtilization"))
            _set(res, "targetAverageValue", t.get("averageValue"))
            out[field] = res
    if (src := m.get("external")) is not None:
        t, metric = src.get("target") or {}, src.get("metric") or {}
        ext: Obj = {"metricName": metric.get("name", "")}
        _set(ext, "metricSelector", metric.get("selector"))
        _set(ext, "targetValue", t.get("value"))
        _set(ext, "targetAverageValue", t.get("averageValue"))
        out["external"] = ext
    return out


def _metric_spec_from_v1(m: Obj) -> Obj:
    """Convert_v1_MetricSpec_To_autoscaling_MetricSpec: each source's target type from which value it sets."""
    out: Obj = {"type": m.get("type")}
    if isinstance(src := m.get("object"), dict):
        average = src.get("averageValue")
        target: Obj = {"type": "Value" if average is None else "AverageValue"}
        _set(target, "value", src.get("targetValue"))
        _set(target, "averageValue", average)
        out["object"] = {"describedObject": src.get("target") or {}, "target": target,
                         "metric": _identifier(src.get("metricName"), src.get("selector"))}
    if isinstance(src := m.get("pods"), dict):
        out["pods"] = {"metric": _identifier(src.get("metricName"), src.get("selector")),
                       "target": {"type": "AverageValue", "averageValue": src.get("targetAverageValue")}}
    for field in ("resource", "containerResource"):
        if isinstance(src := m.get(field), dict):
            utilization = src.get("targetAverageUtilization")
            target = {"type": "AverageValue" if utilization is None else "Utilization"}
            _set(target, "averageUtilization", utilization)
            _set(target, "averageValue", src.get("targetAverageValue"))
            res: Obj = {"name": src.get("name", ""), "target": target}
            _set(res, "container", src.get("container"))
            out[field] = res
    if isinstance(src := m.get("external"), dict):
        value = src.get("targetValue")
        target = {"type": "AverageValue" if value is None else "Value"}
        _set(target, "value", value)
        _set(target, "averageValue", src.get("targetAverageValue"))
        out["external"] = {"metric": _identifier(src.get("metricName"), src.get("metricSelector")),
                           "target": target}
    return out


def _identifier(name: Any, selector: Any) -> Obj:
    out: Obj = {"name": name or ""}
    _set(out, "selector", selector)
    return out


def _metric_status_to_v1(m: Obj) -> Obj:
    out: Obj = {"type": m.get("type")}
    if (src := m.get("object")) is not None:
        c, metric = src.get("current") or {}, src.get("metric") or {}
        obj: Obj = {"target": src.get("describedObject") or {}, "metricName": metric.get("name", ""),
                    "currentValue": c.get("value") or "0"}
        _set(obj, "selector", metric.get("selector"))
        _set(obj, "averageValue", c.get("averageValue"))
        out["object"] = obj
    if (src := m.get("pods")) is not None:
        c, metric = src.get("current") or {}, src.get("metric") or {}
        pods: Obj = {"metricName": metric.get("name", ""), "currentAverageValue": c.get("averageValue") or "0"}
        _set(pods, "selector", metric.get("selector"))
        out["pods"] = pods
    for field in ("resource", "containerResource"):
        if (src := m.get(field)) is not None:
            c = src.get("current") or {}
            res: Obj = {"name": src.get("name", ""), "currentAverageValue": c.get("averageValue") or "0"}
            _set(res, "container", src.get("container"))
            _set(res, "currentAverageUtilization", c.get("averageUtilization"))
            out[field] = res
    if (src := m.get("external")) is not None:
        c, metric = src.get("current") or {}, src.get("metric") or {}
        ext: Obj = {"metricName": metric.get("name", ""), "currentValue": c.get("value") or "0"}
        _set(ext, "metricSelector", metric.get("selector"))
        _set(ext, "currentAverageValue", c.get("averageValue"))
        out["external"] = ext
    return out


def _metric_status_from_v1(m: Obj) -> Obj:
    out: Obj = {"type": m.get("type")}
    if isinstance(src := m.get("object"), dict):
        current: Obj = {}
        _set(current, "value", src.get("currentValue"))
        _set(current, "averageValue", src.get("averageValue"))
        out["object"] = {"describedObject": src.get("target") or {}, "current": current,
                         "metric": _identifier(src.get("metricName"), src.get("selector"))}
    if isinstance(src := m.get("pods"), dict):
        out["pods"] = {"metric": _identifier(src.get("metricName"), src.get("selector")),
                       "current": {"averageValue": src.get("currentAverageValue")}}
    for field in ("resource", "containerResource"):
        if isinstance(src := m.get(field), dict):
            current = {}
            _set(current, "averageValue", src.get("currentAverageValue"))
            _set(current, "averageUtilization", src.get("currentAverageUtilization"))
            res: Obj = {"name": src.get("name", ""), "current": current}
            _set(res, "container", src.get("container"))
            out[field] = res
    if isinstance(src := m.get("external"), dict):
        current = {}
        _set(current, "value", src.get("currentValue"))
        _set(current, "averageValue", src.get("currentAverageValue"))
        out["external"] = {"metric": _identifier(src.get("metricName"), src.get("metricSelector")),
                           "current": current}
    return out


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _annotation(annotations: dict[str, str], key: str) -> Any:
    """A round-trip annotation's JSON, or None when absent or not JSON (upstream ignores what it cannot decode)."""
    text = annotations.get(key)
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def to_v1(obj: Obj) -> Obj:
    """Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = "autoscaling/v1"
    meta = out.setdefault("metadata", {})
    annotations = {k: a for k, a in (meta.get("annotations") or {}).items() if k not in ROUND_TRIP_ANNOTATIONS}
    spec = out.get("spec") or {}
    # v1's status is a struct value whose replica counts have no omitempty (v2's currentReplicas has): always written
    status = out["status"] = {"currentReplicas": 0, "desiredReplicas": 0, **(out.get("status") or {})}
    metrics = spec.pop("metrics", None) or []
    behavior = spec.pop("behavior", None)
    cpu = next((m for m in metrics if _is_cpu_utilization(m)), None)
    if cpu is not None:
        spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"]["averageUtilization"]
    others = [_metric_spec_to_v1(m) for m in metrics if not _is_cpu_utilization(m)]
    if others:
        annotations[METRICS_ANNOTATION] = _json(others)
    if behavior is not None:
        annotations[BEHAVIOR_ANNOTATION] = _json(behavior)
    current = status.pop("currentMetrics", None) or []
    for m in current:
        utilization = ((m.get("resource") or {}).get("current") or {}).get("averageUtilization")
        if m.get("type") == "Resource" and (m.get("resource") or {}).get("name") == "cpu" and utilization is not None:
            status["currentCPUUtilizationPercentage"] = utilization
    if current:
        annotations[CURRENT_METRICS_ANNOTATION] = _json([_metric_status_to_v1(m) for m in current])
    conditions = status.pop("conditions", None)
    if conditions:
        annotations[CONDITIONS_ANNOTATION] = _json(conditions)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return out


def from_v1(obj: Obj) -> Obj:
    """Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler: the annotations are read back
    into the v2 fields and dropped."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = "autoscaling/v2"
    meta = out.get("metadata")
    annotations: dict[str, str] = (meta.get("annotations") or {}) if isinstance(meta, dict) else {}
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else None
    if spec is not None:
        target = spec.pop("targetCPUUtilizationPercentage", None)
        metrics = [_metric_spec_from_v1(m) for m in _annotation(annotations, METRICS_ANNOTATION) or []
                   if isinstance(m, dict)]
        if target is not None:
            metrics.append({"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}})
        if metrics:
            spec["metrics"] = metrics
        behavior = _annotation(annotations, BEHAVIOR_ANNOTATION)
        if isinstance(behavior, dict):
            spec["behavior"] = behavior
    status = out.get("status") if isinstance(out.get("status"), dict) else None
    if status is not None:
        cpu = status.pop("currentCPUUtilizationPercentage", None)
        current = _annotation(annotations, CURRENT_METRICS_ANNOTATION)
        if isinstance(current, list):
            status["currentMetrics"] = [_metric_status_from_v1(m) for m in current if isinstance(m, dict)]
        elif cpu is not None:
            status["currentMetrics"] = [{"type": "Resource", "resource": {
                "name": "cpu", "current": {"averageUtilization": cpu}}}]
        conditions = _annotation(annotations, CONDITIONS_ANNOTATION)
        if isinstance(conditions, list):
            status["conditions"] = conditions
    if isinstance(meta, dict) and annotations:
        kept = {k: a for k, a in annotations.items() if k not in ROUND_TRIP_ANNOTATIONS}
        if kept:
            meta["annotations"] = kept
        else:
            meta.pop("annotations", None)
    return out


HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "horizontalpodautoscaler", "HorizontalPodAutoscaler",
                True, "V2HorizontalPodAutoscaler", short_names=("hpa",), categories=("all",), subresources=("status",))
HPAS_V1 = Resource("autoscaling", "v1", "horizontalpodautoscalers", "horizontalpodautoscaler",
                   "HorizontalPodAutoscaler", True, "V1HorizontalPodAutoscaler", short_names=("hpa",),
                   categories=("all",), subresources=("status",))
