"""Load-time checks of what a scenario's run will ask of the API server and the scheduler, by their own rules.

A run creates PriorityClasses, Nodes, its workloads' objects and PodDisruptionBudgets through the API. What the
API refused there used to surface mid-run: as a traceback without a line (a Node, a PriorityClass) or as a
workload that never arrived (a warning, shown only with -v). Here each object is built as the run builds it
(`workloads.manifest`, `workloads.pdb`, the Node as `runner` registers it) and put through the steps
`Registry.create` takes before it writes — decoding's type check (and kubectl's default strict field
validation: no unknown fields), the namespace's name, the strategy's defaults, admission, validation — with the
API server's own functions. The first refusal is `FILE:LINE: ...`: the line of the field it names where the
scenario has that field, else the line of what made the object.

The KubeSchedulerConfiguration files are read here too, as kube-scheduler reads them: strict decoding (an
unknown field is an error, upstream's `strict decoding error`), then `kubelite.scheduler.config.parse`'s
validation, each error with the file and line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kubelite.api.errors import ApiError, Cause
from kubelite.api.validation import is_dns1123_label
from kubelite.apiserver.nesting import copy_obj
from kubelite.apiserver.registry import STRATEGIES
from kubelite.apiserver.registry.base import Lookup, Obj, Resource
from kubelite.apiserver.registry.scheduling import SYSTEM_PRIORITY_CLASSES
from kubelite.apiserver.rest import Registry
from kubelite.scheduler.config import EXTENSION_POINTS, ConfigError, SchedulerConfig, parse
from kubelite.sim import workloads
from kubelite.sim.scenario import Ctx, Marked, Scenario, ScenarioError, line_of, parse_yaml

_RESOURCES: dict[tuple[str, str], Resource] = {(r.group_version, r.kind): r for r in STRATEGIES}
_TOKENS = re.compile(r"[^.\[\]]+|\[([^\]]*)\]")
CREATED = "2026-01-01T00:00:00Z"  # what Registry.create stamps (the value does not matter to any check)


class Known(Lookup):
    """What exists when the run creates its objects, for admission: the system PriorityClasses (bootstrap.py)
    and the scenario's own, created before any workload."""

    def __init__(self, priority_classes: list[Obj]) -> None:
        self._classes = {name: {"metadata": {"name": name}, "value": value}
                         for name, value in SYSTEM_PRIORITY_CLASSES.items()}
        self._classes.update({_name(pc): pc for pc in priority_classes})

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self._classes.get(name) if resource == "priorityclasses" else None

    def list(self, resource: str, namespace: str = "") -> list[Obj]:
        return list(self._classes.values()) if resource == "priorityclasses" else []


def _name(obj: Obj) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name")) if isinstance(meta, dict) else ""


def refusal(obj: Obj, known: Lookup) -> Cause | None:
    """The first reason the API server would refuse to create `obj` (a copy is checked), or None — in the order
    of `Registry.create`: decode and type check, unknown fields, namespace, defaults, admission, validation."""
    resource = _RESOURCES[(obj["apiVersion"], obj["kind"])]
    obj = copy_obj(obj)
    unknown: list[str] = []
    try:
        Registry.check_types(resource, obj, unknown=unknown)
    except ApiError as exc:
        causes = exc.details.get("causes") or [{}]
        return Cause(exc.reason, exc.message, causes[0].get("field", ""))
    if unknown:  # the server prunes them with a warning; kubectl's default (--validate=strict) refuses them
        return Cause("FieldValueInvalid", f'strict decoding error: unknown field "{unknown[0]}"', unknown[0])
    meta = obj.setdefault("metadata", {})
    meta.update(uid="00000000-0000-4000-8000-000000000000", creationTimestamp=CREATED)
    namespace = meta.get("namespace", "")
    problems = is_dns1123_label(namespace) if resource.namespaced else []
    if problems:  # the run creates each namespace its objects use (runner._namespaces): a name no Namespace can have
        return Cause("FieldValueInvalid", f'metadata.namespace: Invalid value: "{namespace}": {problems[0]}',
                     "metadata.namespace")
    strategy = STRATEGIES[resource](resource)
    strategy.prepare_create(obj, known)
    refusals = strategy.admit(obj, known)
    if refusals:
        return Cause("Forbidden", "; ".join(refusals))
    causes = strategy.validate(obj)
    return causes[0] if causes else None


def deepest_line(tree: Any, path: str) -> int:
    """The line of the deepest part of a field path (`spec.containers[0].resources.requests[cpu]`, or a
    list item by name, `enabled[NodeResourcesFit]`) found in a marked YAML tree; 0 when none is."""
    line, node = line_of(tree), tree
    for match in _TOKENS.finditer(path):
        token, bracket = match.group(0), match.group(1)
        key = bracket if bracket is not None else token
        if isinstance(node, dict) and key in node:
            line, node = line_of(node, key) or line, node[key]
        elif isinstance(node, list) and key.isascii() and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
            line = line_of(node) or line
        elif isinstance(node, list) and any(isinstance(i, dict) and i.get("name") == key for i in node):
            node = next(i for i in node if isinstance(i, dict) and i.get("name") == key)
            line = line_of(node) or line
        else:
            break
    return line


def _fail(ctx: Ctx, raw: Obj, field: str, what: str, cause: Cause) -> ScenarioError:
    """A refusal of the object made from `raw`: at the line of `field` (a path within `raw`) where it is there."""
    message = cause.message if cause.message.startswith(cause.field) or not cause.field else \
        f"{cause.field}: {cause.message}"
    return ctx.error(deepest_line(raw, field), f"{what}: the API server would refuse it: {message}")


def _in_workload(kind: str, field: str) -> str:
    """A field of a workload's object as a path in the scenario's workload mapping: the pod spec is `spec`,
    the metadata and the controller's own fields (replicas, completions) are top-level keys."""
    for prefix in ("spec.template.spec.", "spec."):
        if field.startswith(prefix) and (kind == "Pod" or prefix == "spec.template.spec."):
            return "spec." + field[len(prefix):]
    return field.rsplit(".", 1)[-1].split("[", 1)[0]


def api_objects(ctx: Ctx, scn: Scenario, pools: list[Obj], raw_workloads: list[Obj], faults: list[Obj]) -> None:
    """Every object the run would create, checked now (see the module's docstring)."""
    seen: dict[str, Obj] = {}
    for raw in scn.priority_classes:
        name = _name(raw)
        if name in seen:
            raise ctx.fail(raw, None, f"priorityClasses: {name!r} twice (also line {line_of(seen[name])})")
        seen[name] = raw
    for i, raw in enumerate(scn.priority_classes):  # created in order: admission sees those before
        cause = refusal({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **raw},
                        Known(scn.priority_classes[:i]))
        if cause:
            raise _fail(ctx, raw, cause.field, "priorityClass", cause)
    known = Known(scn.priority_classes)
    for pool, raw in zip(scn.pools, pools, strict=True):
        name = f"{pool.name}-{pool.count - 1}"  # the longest name of the pool's nodes
        node: Obj = {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": name, "labels": {**pool.labels, "kubernetes.io/hostname": name}},
                     "spec": {"taints": pool.taints} if pool.taints else {},
                     "status": {"capacity": pool.capacity, "allocatable": pool.capacity}}
        cause = refusal(node, known)
        if cause:
            field = "name" if cause.field == "metadata.name" else cause.field.split(".", 1)[-1]
            raise _fail(ctx, raw, field, f"nodePool {pool.name} (node {name})", cause)
    for w, raw in zip(scn.workloads, raw_workloads, strict=True):
        pod_spec_types(ctx, raw, w.name)
        # One object for the workload, and one more for each distinct cpu/memory a trace row gives it.
        variants = {(a.overrides.get("cpu"), a.overrides.get("memory")): (i, a) for i, a in enumerate(w.arrivals)}
        for index, arrival in sorted(variants.values(), key=lambda v: v[0]):
            _workload(ctx, w.kind, raw, workloads.manifest(w, index, arrival), known,
                      f"workload {w.name}" + (f" (a trace row's cpu/memory {arrival.overrides})"
                                              if {"cpu", "memory"} & set(arrival.overrides) else ""))
    for raw in faults:
        if isinstance(raw.get("pdb"), dict):
            _, pdb = workloads.pdb(dict(raw["pdb"]))
            cause = refusal(pdb, known)
            if cause:
                field = cause.field.rsplit(".", 1)[-1] if cause.field.startswith("spec.") else \
                    ("name" if cause.field == "metadata.name" else "")
                raise _fail(ctx, raw["pdb"], field, "fault pdb", cause)


def _workload(ctx: Ctx, kind: str, raw: Obj, obj: Obj, known: Known, what: str) -> None:
    """A workload's object, and for a controller's the Pod it would create from its template."""
    objects = [obj]
    if kind != "Pod":
        template = obj["spec"]["template"]
        objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"],
                        "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"]},
                        "spec": template["spec"]})
    for each in objects:
        cause = refusal(each, known)
        if cause:
            field = _in_workload(kind if each is obj else "Pod", cause.field)
            spec = raw.get("spec") or {}
            if "resources" in spec and "containers" not in spec:  # the shorthand made every container's resources
                field = re.sub(r"^spec\.containers\[\d+\]\.resources", "spec.resources", field)
            raise _fail(ctx, raw, field, what, cause)


def pod_spec_types(ctx: Ctx, raw: Obj, name: str) -> None:
    """A workload's `spec` fragment has the types of a PodSpec, and its `resources` (the scenario's shorthand for
    every container's) those of a container's: checked before the run's pod is built from it, which assumes
    them (`containers: {name: main}` once ended in an AttributeError inside the run, shown only with -v)."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return
    for kind in ("containers", "initContainers"):  # the run's builder fills in each item (workloads.manifest)
        items = spec.get(kind)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict):
                raise ctx.error(deepest_line(raw, f"spec.{kind}[{i}]"),
                                f"workload {name}: spec.{kind}[{i}]: must be a container (a mapping), not "
                                f"{'null' if item is None else type(item).__name__}")
    pod_spec: Obj = {k: v for k, v in spec.items() if k != "resources"}
    fragments = [pod_spec]
    if "resources" in spec:
        fragments.append({"containers": [{"name": "check", "resources": spec["resources"]}]})
    for fragment in fragments:
        try:
            Registry.check_types(_RESOURCES[("v1", "Pod")], {"metadata": {"name": "check"},
                                                              "spec": copy_obj(fragment)})
        except ApiError as exc:
            field = ((exc.details.get("causes") or [{}])[0]).get("field", "")
            if fragment is not pod_spec:  # the shorthand's field, where the scenario has it
                field = field.replace("spec.containers[0].resources", "spec.resources", 1)
            raise _fail(ctx, raw, field, f"workload {name}", Cause(exc.reason, exc.message, field)) from None


# --- KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1), strict decoding -----------------------------
# Each struct's JSON fields, from upstream's v1 types (staging/src/k8s.io/kube-scheduler/config/v1/types.go and
# types_pluginargs.go): a mapping is a struct, a one-item list a list of it, None a value not looked into.
_PLUGIN = {"name": None, "weight": None}
_PLUGIN_SET = {"enabled": [_PLUGIN], "disabled": [_PLUGIN]}
_RESOURCE_SPEC = [{"name": None, "weight": None}]
_SHAPE = [{"utilization": None, "score": None}]
_ARGS: dict[str, Obj] = {
    "DefaultPreemption": {"minCandidateNodesPercentage": None, "minCandidateNodesAbsolute": None},
    "InterPodAffinity": {"hardPodAffinityWeight": None, "ignorePreferredTermsOfExistingPods": None},
    "NodeAffinity": {"addedAffinity": None},
    "NodeResourcesBalancedAllocation": {"resources": _RESOURCE_SPEC},
    "NodeResourcesFit": {"ignoredResources": None, "ignoredResourceGroups": None, "scoringStrategy": {
        "type": None, "resources": _RESOURCE_SPEC, "requestedToCapacityRatio": {"shape": _SHAPE}}},
    "PodTopologySpread": {"defaultConstraints": None, "defaultingType": None},
    "VolumeBinding": {"bindTimeoutSeconds": None, "shape": _SHAPE},
}
_PROFILE = {"schedulerName": None, "percentageOfNodesToScore": None,
            "plugins": {point: _PLUGIN_SET for point in EXTENSION_POINTS},
            "pluginConfig": [{"name": None, "args": None}]}
_CONFIGURATION = {"apiVersion": None, "kind": None, "parallelism": None, "leaderElection": None,
                  "clientConnection": None, "enableProfiling": None, "enableContentionProfiling": None,
                  "percentageOfNodesToScore": None, "podInitialBackoffSeconds": None, "podMaxBackoffSeconds": None,
                  "profiles": [_PROFILE], "extenders": None, "delayCacheUntilActive": None}


def _strict(ctx: Ctx, value: Any, schema: Any, path: str, where: Obj, key: str | None) -> None:
    """Upstream's strict decoding of `value` against `schema` (see _CONFIGURATION): unknown fields and a
    mapping or list where the other is due are errors."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise ctx.fail(where, key, f"{path}: must be a mapping")
        for k, v in value.items():
            if k not in schema:
                raise ctx.fail(value, k, f'strict decoding error: unknown field "{path + "." if path else ""}{k}"')
            if schema[k] is not None and v is not None:
                _strict(ctx, v, schema[k], f"{path}.{k}" if path else k, value, k)
        if isinstance(value.get("args"), dict) and value.get("name") in _ARGS:  # a pluginConfig entry
            _strict(ctx, value["args"], {"apiVersion": None, "kind": None, **_ARGS[value["name"]]},
                    f"{path}.args", value, "args")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise ctx.fail(where, key, f"{path}: must be a list")
        for i, item in enumerate(value):
            if item is not None:
                _strict(ctx, item, schema[0], f"{path}[{i}]", item if isinstance(item, Marked) else where, key)


def scheduler_config(path: Path) -> SchedulerConfig:
    """A KubeSchedulerConfiguration file read as kube-scheduler reads it; every error is `FILE:LINE: ...`."""
    ctx = Ctx(str(path))
    raw = parse_yaml(path)
    if not isinstance(raw, dict):
        raise ctx.error(1, "a KubeSchedulerConfiguration is a mapping (apiVersion, kind, profiles, …)")
    _strict(ctx, raw, _CONFIGURATION, "", raw, None)
    try:
        return parse(raw)
    except ConfigError as exc:  # its message starts with the field's path, as upstream's validation errors
        raise ctx.error(deepest_line(raw, str(exc).partition(": ")[0]), str(exc)) from None
    except (TypeError, AttributeError, ValueError) as exc:  # a value of the wrong type where parse assumes one
        raise ctx.error(line_of(raw), f"not a valid KubeSchedulerConfiguration: {exc}") from None
