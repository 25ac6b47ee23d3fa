"""Pod strategy: upstream defaults, validation, update rules, priority admission, CheckGracefulDelete.

Mirrors pkg/apis/core/v1/defaults.go, pkg/apis/core/validation (the fields we use),
pkg/registry/core/pod/strategy.go and plugin/pkg/admission/priority.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.api.quantity import QuantityError, parse_quantity
from kubelite.api.selectors import COMMON_FIELDS, path_getter
from kubelite.apiserver.admission import limitranger
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy
from kubelite.apiserver.registry.config import is_config_map_key

POD_FIELDS = {
    **COMMON_FIELDS,
    "spec.nodeName": path_getter("spec", "nodeName"),
    "spec.restartPolicy": path_getter("spec", "restartPolicy"),
    "spec.schedulerName": path_getter("spec", "schedulerName"),
    "spec.serviceAccountName": path_getter("spec", "serviceAccountName"),
    "spec.hostNetwork": path_getter("spec", "hostNetwork"),
    "status.phase": path_getter("status", "phase"),
    "status.podIP": path_getter("status", "podIP"),
    "status.nominatedNodeName": path_getter("status", "nominatedNodeName"),
}

DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS = 0
PREEMPT_LOWER = "PreemptLowerPriority"
_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
_DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]
TERMINAL_PHASES = ("Succeeded", "Failed")
# kubectl delete --grace-period=0 --force's own warning, word for word.
FORCE_DELETE_WARNING = ("Immediate deletion does not wait for confirmation that the running resource has been "
                        "terminated. The resource may continue to run on the cluster indefinitely.")


def all_containers(spec: Obj) -> list[tuple[str, int, Obj]]:
    return [(kind, i, c) for kind in ("initContainers", "containers") for i, c in enumerate(spec.get(kind) or [])]


def container_names(spec: Obj) -> list[str]:
    """Every container's name, ephemeral ones too, in podutil.VisitContainers' order (init, regular, ephemeral):
    the names logs, exec and attach accept."""
    return [c.get("name", "") for kind in ("initContainers", "containers", "ephemeralContainers")
            for c in spec.get(kind) or []]


# --- defaults ------------------------------------------------------------------------------------

def _default_container(c: Obj) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = c.get("image", "")
    if "imagePullPolicy" not in c:
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        c["imagePullPolicy"] = "Always" if not tagged or image.endswith(":latest") else "IfNotPresent"
    c.setdefault("resources", {})
    for port in c.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(probe_name)
        if isinstance(probe, dict):
            for k, val in _PROBE_DEFAULTS.items():
                probe.setdefault(k, val)
            if isinstance(probe.get("httpGet"), dict):
                probe["httpGet"].setdefault("scheme", "HTTP")
                probe["httpGet"].setdefault("path", "/")
    for env in c.get("env") or []:
        ref = (env.get("valueFrom") or {}).get("fieldRef")
        if isinstance(ref, dict):
            ref.setdefault("apiVersion", "v1")


def default_pod_spec(spec: Obj) -> None:
    """SetDefaults_PodSpec, for a Pod's spec and any template's (a Pod's also gets `default_pod`). A service account
    is not defaulted here: upstream names `default` in ServiceAccount admission, for Pods only
    (`_default_service_account`); the v1 conversion only mirrors the deprecated `serviceAccount` and
    `serviceAccountName` into each other."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)  # a negative period is kept (and treated as 1)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account:
        spec["serviceAccountName"] = spec["serviceAccount"] = account
    for _, _, c in all_containers(spec):
        _default_container(c)
    for c in spec.get("ephemeralContainers") or []:  # SetObjectDefaults_Pod defaults them as containers
        _default_container(c)
    for vol in spec.get("volumes") or []:
        if not any(k for k in vol if k != "name"):
            vol["emptyDir"] = {}


def mapping(obj: Obj, key: str) -> Obj:
    """obj[key] as a mapping to default into, made one when absent or null: a null struct decodes as its zero value
    upstream, which defaulting then fills."""
    if not isinstance(obj.get(key), dict):
        obj[key] = {}
    value: Obj = obj[key]
    return value


def default_pod_template(spec: Obj) -> None:
    """The defaults of a workload's `spec.template`: SetDefaults_PodSpec only. SetDefaults_Pod (`default_pod`) is for
    Pods, never for a PodTemplate."""
    default_pod_spec(mapping(mapping(spec, "template"), "spec"))


def default_pod(spec: Obj) -> None:
    """SetDefaults_Pod then SetDefaults_PodSpec: a Pod's spec. Only a Pod's containers (regular and init) get requests
    copied from limits, never a template's (upstream's comment there: "we only want this defaulting semantic to take
    place on a v1.Pod and not a v1.PodTemplate"), so a later `kubectl set resources --limits` on a Deployment leaves
    no stale requests behind and its pods' QoS follows the limits."""
    for _, _, c in all_containers(spec):
        res = c.get("resources") if isinstance(c, dict) else None
        if isinstance(res, dict) and res.get("limits"):
            requests = res.setdefault("requests", {})
            for name, qty in res["limits"].items():
                requests.setdefault(name, qty)
    default_pod_spec(spec)


def _default_service_account(spec: Obj) -> None:
    """A Pod's service account: `default` unless it names one (ServiceAccount admission's default)."""
    if "serviceAccountName" not in spec:
        spec["serviceAccountName"] = spec.get("serviceAccount") or "default"
    spec["serviceAccount"] = spec["serviceAccountName"]


def _merge_default_tolerations(spec: Obj) -> None:
    """DefaultTolerationSeconds admission: tolerate not-ready/unreachable for 300s unless told otherwise."""
    tolerations = spec.setdefault("tolerations", [])
    for default in _DEFAULT_TOLERATIONS:
        covered = any((t.get("key") == default["key"] and t.get("effect") in ("NoExecute", None, ""))
                      or (not t.get("key") and t.get("operator") == "Exists") for t in tolerations)
        if not covered:
            tolerations.append(dict(default))


def qos_class(spec: Obj) -> str:
    """pkg/apis/core/helper/qos.GetPodQOS over app and init containers."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    for kind, _, c in all_containers(spec):
        if kind not in ("containers", "initContainers"):
            continue
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for name, q in req.items():
            if name in ("cpu", "memory") and _qty(q) != 0:
                requests[name] = q
        for name, q in lim.items():
            if name in ("cpu", "memory") and _qty(q) != 0:
                limits[name] = q
        full_limits = all(n in lim for n in ("cpu", "memory"))
        if not full_limits or any(_qty(req.get(n, lim[n])) != _qty(lim[n]) for n in ("cpu", "memory")):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed and len(limits) == 2 else "Burstable"


def _qty(q: Any) -> Any:
    try:
        return parse_quantity(q)
    except QuantityError:
        return None


# --- validation ----------------------------------------------------------------------------------

_RESTART = ["Always", "OnFailure", "Never"]


def _validate_name_and_image(c: Obj, path: str) -> list[Cause]:
    """validateContainerCommon's first checks: a DNS-label name and an image."""
    causes: list[Cause] = []
    name = c.get("name", "")
    if not name:
        causes.append(v.required(f"{path}.name"))
    else:
        causes += [v.invalid(f"{path}.name", name, e) for e in v.is_dns1123_label(name)]
    if not c.get("image"):
        causes.append(v.required(f"{path}.image"))
    return causes


def _validate_container(c: Obj, path: str) -> list[Cause]:
    causes = _validate_name_and_image(c, path)
    policy = c.get("restartPolicy")  # ContainerRestartRules: any container may say Always, OnFailure or Never;
    if policy is not None and policy not in _RESTART:  # on an init container, Always makes it a sidecar
        causes.append(v.not_supported(f"{path}.restartPolicy", policy, _RESTART))
    return causes + _validate_container_body(c, path)


def _validate_container_body(c: Obj, path: str) -> list[Cause]:
    """The rest of validateContainerCommon that kubelite checks: env, envFrom, ports and resources."""
    causes = _validate_env(c.get("env") or [], f"{path}.env")
    causes += _validate_env_from(c.get("envFrom") or [], f"{path}.envFrom")
    for i, port in enumerate(c.get("ports") or []):
        cp = port.get("containerPort")
        if not isinstance(cp, int) or not 1 <= cp <= 65535:
            causes.append(v.invalid(f"{path}.ports[{i}].containerPort", cp, "must be between 1 and 65535, "
                                                                            "inclusive"))
    res = c.get("resources") or {}
    for section in ("requests", "limits"):
        for rname, q in (res.get(section) or {}).items():
            parsed = _qty(q)
            if parsed is None:
                causes.append(v.invalid(f"{path}.resources.{section}[{rname}]", q,
                                        "must match the regex (\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))"
                                        "(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|"
                                        "(\\.[0-9]+))))?"))
            elif parsed < 0:
                causes.append(v.invalid(f"{path}.resources.{section}[{rname}]", q,
                                        "must be greater than or equal to 0"))
    for rname, q in (res.get("requests") or {}).items():
        lim = (res.get("limits") or {}).get(rname)
        if lim is not None and _qty(q) is not None and _qty(lim) is not None and _qty(q) > _qty(lim):
            causes.append(v.invalid(f"{path}.resources.requests", q, f"must be less than or equal to {rname} limit "
                                                                      f"of {lim}"))
    return causes


_RELAXED_ENV_NAME = "a valid environment variable name must consist only of printable ASCII characters other than '='"
_VALUE_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")


def is_relaxed_env_var_name(value: str) -> list[str]:
    """validation.IsRelaxedEnvVarName (RelaxedEnvironmentVariableValidation, on by default since 1.32)."""
    if not value:
        return ["environment variable name must be non-empty"]
    return [_RELAXED_ENV_NAME] if any(not " " <= ch <= "~" or ch == "=" for ch in value) else []


def _validate_env(env: list[Obj], path: str) -> list[Cause]:
    """ValidateEnv: each variable named (printable ASCII but '='), its valueFrom exactly one source and not with a
    `value` (validateEnvVarValueFrom) — the agent otherwise met a nameless variable or an empty source when it
    started the container."""
    causes: list[Cause] = []
    for i, ev in enumerate(env):
        at = f"{path}[{i}]"
        name = ev.get("name") or ""
        if not name:
            causes.append(v.required(f"{at}.name"))
        else:
            causes += [v.invalid(f"{at}.name", name, msg) for msg in is_relaxed_env_var_name(name)]
        value_from = ev.get("valueFrom")
        if value_from is None:
            continue
        sources = [k for k in _VALUE_SOURCES if value_from.get(k) is not None]
        for kind in sources:
            causes += _validate_value_source(kind, value_from[kind], f"{at}.valueFrom.{kind}")
        if not sources:
            causes.append(v.invalid(f"{at}.valueFrom", "", "must specify one of: `fieldRef`, `resourceFieldRef`, "
                                                           "`configMapKeyRef` or `secretKeyRef`"))
        elif ev.get("value"):
            causes.append(v.invalid(f"{at}.valueFrom", "", "may not be specified when `value` is not empty"))
        elif len(sources) > 1:
            causes.append(v.invalid(f"{at}.valueFrom", "", "may not have more than one field specified at a time"))
    return causes


def _validate_value_source(kind: str, source: Obj, path: str) -> list[Cause]:
    """The required parts of one valueFrom source (validateObjectFieldSelector's fieldPath,
    validateContainerResourceFieldSelector's resource, validate{ConfigMap,Secret}KeySelector's name and key)."""
    if kind == "fieldRef":
        return [] if source.get("fieldPath") else [v.required(f"{path}.fieldPath")]
    if kind == "resourceFieldRef":
        return [] if source.get("resource") else [v.required(f"{path}.resource")]
    causes = _validate_ref_name(source, path)
    key = source.get("key") or ""
    if not key:
        causes.append(v.required(f"{path}.key"))
    else:
        causes += [v.invalid(f"{path}.key", key, msg) for msg in is_config_map_key(key)]
    return causes


def _validate_ref_name(ref: Obj, path: str) -> list[Cause]:
    """A ConfigMap's or Secret's name in a reference: required, a DNS subdomain (ValidateConfigMapName,
    ValidateSecretName)."""
    name = ref.get("name") or ""
    if not name:
        return [v.required(f"{path}.name")]
    return [v.invalid(f"{path}.name", name, msg) for msg in v.is_dns1123_subdomain(name)]


def _validate_env_from(env_from: list[Obj], path: str) -> list[Cause]:
    """ValidateEnvFrom: a prefix is a variable name's start (printable ASCII but '='), and each source is exactly
    one of configMapRef and secretRef, named."""
    causes: list[Cause] = []
    for i, source in enumerate(env_from):
        at = f"{path}[{i}]"
        prefix = source.get("prefix") or ""
        if prefix:
            causes += [v.invalid(f"{at}.prefix", prefix, msg) for msg in is_relaxed_env_var_name(prefix)]
        refs = [k for k in ("configMapRef", "secretRef") if source.get(k) is not None]
        for kind in refs:
            causes += _validate_ref_name(source[kind], f"{at}.{kind}")
        if not refs:  # upstream names the list, not the item
            causes.append(v.invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif len(refs) > 1:
            causes.append(v.invalid(path, "", "may not have more than one field specified at a time"))
    return causes


def validate_pod_spec(spec: Obj, path: str = "spec") -> list[Cause]:
    causes: list[Cause] = []
    if not spec.get("containers"):
        causes.append(v.required(f"{path}.containers"))
    seen: set[str] = set()
    for kind, i, c in all_containers(spec):
        cpath = f"{path}.{kind}[{i}]"
        causes += _validate_container(c, cpath)
        name = c.get("name", "")
        if name in seen:
            causes.append(v.duplicate(f"{cpath}.name", name))
        seen.add(name)
    grace = spec.get("terminationGracePeriodSeconds")
    if not isinstance(grace, int) or isinstance(grace, bool):
        causes.append(v.invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be an integer"))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline <= 0):
        causes.append(v.invalid(f"{path}.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, "
                                                                          "inclusive"))
    vol_names: set[str] = set()
    for i, vol in enumerate(spec.get("volumes") or []):
        name = vol.get("name", "")
        if not name:
            causes.append(v.required(f"{path}.volumes[{i}].name"))
        elif name in vol_names:
            causes.append(v.duplicate(f"{path}.volumes[{i}].name", name))
        vol_names.add(name)
    for i, t in enumerate(spec.get("tolerations") or []):
        tpath = f"{path}.tolerations[{i}]"
        op = t.get("operator", "Equal")  # its values and the effect's are checked from the table in `enums`
        if op == "Exists" and t.get("value"):
            causes.append(v.invalid(f"{tpath}.operator", t.get("value"),
                                    "value must be empty when `operator` is 'Exists'"))
        if not t.get("key") and op != "Exists":
            causes.append(v.invalid(f"{tpath}.operator", op, "operator must be Exists when `key` is empty, which "
                                                            "means \"match all values and all keys\""))
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        causes += [v.invalid(f"{path}.schedulingGates[{i}].name", gate.get("name", ""), e)
                   for e in v.is_qualified_name(gate.get("name", ""))]
    for i, tsc in enumerate(spec.get("topologySpreadConstraints") or []):
        tpath = f"{path}.topologySpreadConstraints[{i}]"
        skew = tsc.get("maxSkew")
        if not isinstance(skew, int) or skew <= 0:
            causes.append(v.invalid(f"{tpath}.maxSkew", skew, "must be greater than zero"))
        if not tsc.get("topologyKey"):
            causes.append(v.required(f"{tpath}.topologyKey", "can not be empty"))
        if not tsc.get("whenUnsatisfiable"):
            causes.append(v.required(f"{tpath}.whenUnsatisfiable"))
        min_domains = tsc.get("minDomains")
        if min_domains is not None and (not isinstance(min_domains, int) or min_domains <= 0):
            causes.append(v.invalid(f"{tpath}.minDomains", min_domains, "must be greater than 0"))
    return causes + validate_ephemeral_containers(spec, path)


def validate_pod_template_spec(spec: Obj, path: str) -> list[Cause]:
    """A pod template's spec (ValidatePodTemplateSpec): a pod's, and no ephemeral containers."""
    causes = validate_pod_spec(spec, path)
    if spec.get("ephemeralContainers"):
        causes.append(v.forbidden(f"{path}.ephemeralContainers", "ephemeral containers not allowed in pod template"))
    return causes


# --- ephemeral containers (pods/ephemeralcontainers) -------------------------------------------------

# The EphemeralContainerCommon fields outside upstream's allowedEphemeralContainerFields, in the Go struct's order
# (the order of their errors): ephemeral containers are not for the pod's own services (no ports, probes, lifecycle,
# resources) and are never restarted. A field counts as set as Go's reflect.DeepEqual against its zero value: a
# pointer or list present at all (even `[]` or `""`), the resources struct with any member present.
_EPHEMERAL_FORBIDDEN = ("ports", "resources", "resizePolicy", "restartPolicy", "restartPolicyRules", "livenessProbe",
                        "readinessProbe", "startupProbe", "lifecycle")
_EPHEMERAL_NOT_ALLOWED = "cannot be set for an Ephemeral Container"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def _not_found(path: str, value: Any) -> Cause:
    """field.NotFound."""
    return Cause("FieldValueNotFound", f"Not found: {v.go_value(value)}", path)


def _ephemeral_field_set(c: Obj, name: str) -> bool:
    value = c.get(name)
    if name == "resources":
        return isinstance(value, dict) and any(x is not None for x in value.values())
    return value is not None


def validate_ephemeral_containers(spec: Obj, path: str = "spec") -> list[Cause]:
    """validateEphemeralContainers: each one a container (name, image, policies, env, ports, resources), its image
    without surrounding blanks, its name unique among all the pod's containers, its target a regular or init
    container, none of the forbidden fields, no subPath. The enumerated values of imagePullPolicy and
    terminationMessagePolicy are checked from `enums`' table with every container's; here only their absence."""
    causes: list[Cause] = []
    regular = {c.get("name", "") for _, _, c in all_containers(spec)}
    names = set(regular)
    for i, c in enumerate(spec.get("ephemeralContainers") or []):
        at = f"{path}.ephemeralContainers[{i}]"
        causes += _validate_name_and_image(c, at)
        if not c.get("terminationMessagePolicy"):
            causes.append(v.required(f"{at}.terminationMessagePolicy"))
        causes += _validate_container_body(c, at)
        if not c.get("imagePullPolicy"):
            causes.append(v.required(f"{at}.imagePullPolicy"))
        image = c.get("image") or ""
        if image != image.strip():  # validateContainerOnlyForPod
            causes.append(v.invalid(f"{at}.image", image, "must not have leading or trailing whitespace"))
        name = c.get("name", "")
        if name in names:
            causes.append(v.duplicate(f"{at}.name", name))
        names.add(name)
        target = c.get("targetContainerName") or ""
        if target and target not in regular:
            causes.append(_not_found(f"{at}.targetContainerName", target))
        causes += [v.forbidden(f"{at}.{f}", _EPHEMERAL_NOT_ALLOWED) for f in _EPHEMERAL_FORBIDDEN
                   if _ephemeral_field_set(c, f)]
        for j, mount in enumerate(c.get("volumeMounts") or []):
            causes += [v.forbidden(f"{at}.volumeMounts[{j}].{f}", _EPHEMERAL_NOT_ALLOWED)
                       for f in ("subPath", "subPathExpr") if mount.get(f)]
    return causes


def validate_pod_ephemeral_containers_update(new: Obj, old: Obj) -> list[Cause]:
    """ValidatePodEphemeralContainersUpdate after the object's own checks: the new spec is valid, a static (mirror)
    pod takes none, and an existing ephemeral container is neither removed nor changed (matched by name: a patch
    need not keep their order). The change's description is ours: upstream appends Go's cmp.Diff of the two."""
    causes = validate_pod_spec(new.get("spec") or {})
    if MIRROR_POD_ANNOTATION in ((old.get("metadata") or {}).get("annotations") or {}):
        return [v.forbidden("", "static pods do not support ephemeral containers")]
    by_name = {c.get("name"): c for c in (new.get("spec") or {}).get("ephemeralContainers") or []}
    for was in (old.get("spec") or {}).get("ephemeralContainers") or []:
        name = was.get("name", "")
        now = by_name.get(name)
        if now is None:
            causes.append(v.forbidden("spec.ephemeralContainers",
                                      f"existing ephemeral containers {v.go_quote(name)} may not be removed\n"))
        elif now != was:
            changed = "".join(f"  {k}: {v.go_value(was.get(k))} -> {v.go_value(now.get(k))}\n"
                              for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k))
            causes.append(v.forbidden("spec.ephemeralContainers", f"existing ephemeral containers {v.go_quote(name)} "
                                                                  f"may not be changed\n{changed}"))
    return causes


# The pods/ephemeralcontainers subresource's updates (PUT, PATCH) run the ordinary update path, whose registry hands
# strategies no subresource but `status`: its handler marks them here instead, per task (a ContextVar), so that
# PodStrategy's update hooks act as upstream's podEphemeralContainersStrategy for them and for them alone.
_EPHEMERAL_UPDATE: ContextVar[bool] = ContextVar("pods/ephemeralcontainers update", default=False)


@contextmanager
def ephemeral_containers_update() -> Iterator[None]:
    """Within it, updates of pods are pods/ephemeralcontainers updates."""
    token = _EPHEMERAL_UPDATE.set(True)
    try:
        yield
    finally:
        _EPHEMERAL_UPDATE.reset(token)


def _keep_all_but_ephemeral_containers(new: Obj, old: Obj) -> None:
    """dropNonEphemeralContainerUpdates: `new` becomes `old` (metadata, spec, status) with the ephemeral containers
    `new` asks for, defaulted. Parts of `old` are shared, never written: metadata and spec are copied one level,
    as the registry writes the new resourceVersion into the metadata."""
    wanted = (new.get("spec") or {}).get("ephemeralContainers")
    new.clear()
    new.update(old)
    new["metadata"] = dict(old["metadata"])
    spec = new["spec"] = dict(old.get("spec") or {})
    if wanted is None:
        spec.pop("ephemeralContainers", None)
    else:
        spec["ephemeralContainers"] = wanted
        for c in wanted:
            if isinstance(c, dict):
                _default_container(c)


# --- update rules --------------------------------------------------------------------------------

_UPDATE_FORBIDDEN = ("pod updates may not change fields other than `spec.containers[*].image`,"
                     "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                     "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                     "(allow it to be set to 1 if it was previously negative)")


def validate_pod_spec_update(new: Obj, old: Obj) -> list[Cause]:
    """ValidatePodUpdate: only images, deadline, added tolerations and removed gates may change."""
    causes: list[Cause] = []
    mutable = copy.deepcopy(new)
    for kind in ("containers", "initContainers"):
        olds = old.get(kind) or []
        for i, c in enumerate(mutable.get(kind) or []):
            if i < len(olds):
                c["image"] = olds[i].get("image")
    if _negative(old.get("terminationGracePeriodSeconds")) and new.get("terminationGracePeriodSeconds") == 1:
        mutable["terminationGracePeriodSeconds"] = old["terminationGracePeriodSeconds"]  # the one allowed change
    old_deadline, new_deadline = old.get("activeDeadlineSeconds"), new.get("activeDeadlineSeconds")
    if new_deadline is not None and (old_deadline is None or new_deadline <= old_deadline):
        mutable["activeDeadlineSeconds"] = old_deadline
        if old_deadline is None:
            mutable.pop("activeDeadlineSeconds", None)
    old_tol, new_tol = old.get("tolerations") or [], new.get("tolerations") or []
    if all(t in new_tol for t in old_tol):
        if old_tol:
            mutable["tolerations"] = old_tol
        else:
            mutable.pop("tolerations", None)
    old_gates, new_gates = old.get("schedulingGates") or [], new.get("schedulingGates") or []
    if any(g not in old_gates for g in new_gates):
        causes.append(v.forbidden("spec.schedulingGates", "only deletion is allowed, but found new scheduling "
                                                          "gate"))
    elif old_gates:
        mutable["schedulingGates"] = old_gates
    if not old_gates and not new_gates:
        mutable.pop("schedulingGates", None)
    for key in ("nodeName",):  # set through binding only; unchanged here
        if new.get(key) != old.get(key):
            causes.append(v.forbidden(f"spec.{key}", "field is immutable"))
            return causes
    if mutable != old and not causes:
        causes.append(v.forbidden("spec", _UPDATE_FORBIDDEN))
    return causes


def _negative(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value < 0


def pod_spec_warnings(spec: Obj, path: str = "spec") -> list[str]:
    """pkg/api/pod/warnings.go warningsForPodSpecAndMeta (the checks that apply to fields kubelite serves)."""
    warnings = []
    if _negative(spec.get("terminationGracePeriodSeconds")):
        warnings.append(f"{path}.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will "
                        "be treated as 1")
    return warnings


# --- the strategy --------------------------------------------------------------------------------

class PodStrategy(Strategy):
    has_status = True
    # Admission plugins the server configures (ServiceAccount: kubelite.apiserver.auth.admission), run before
    # priority admission as upstream's order; each may mutate the pod and returns its refusals.
    plugins: tuple[Callable[[Obj, Lookup], list[str]], ...] = ()

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        spec = obj.setdefault("spec", {})
        _default_service_account(spec)
        default_pod(spec)
        _merge_default_tolerations(spec)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
        if spec.get("schedulingGates"):
            obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                            "message": "Scheduling is blocked due to non-empty scheduling gates",
                                            "lastProbeTime": None,
                                            "lastTransitionTime": obj["metadata"]["creationTimestamp"]}]

    def admit(self, obj: Obj, lookup: Lookup) -> list[str]:
        """LimitRanger's defaults first, as upstream's order; they change the pod's resources, hence its QoS class
        (its refusals come after validation: `admit_validated`)."""
        limitranger.admit_pod(obj, lookup)
        if limitranger.LIMIT_RANGER_ANNOTATION in (obj["metadata"].get("annotations") or {}):
            obj["status"]["qosClass"] = qos_class(obj["spec"])
        refusals = [reason for plugin in self.plugins for reason in plugin(obj, lookup)]
        return refusals + admit_priority(obj["spec"], lookup)

    def admit_validated(self, obj: Obj, old: Obj | None, lookup: Lookup) -> list[str]:
        """LimitRanger's Validate, for a pod being created (its SupportsAttributes skips pod updates: containers
        cannot be added, removed or resized by one)."""
        return limitranger.validate_pod(obj, lookup) if old is None else []

    def validate(self, obj: Obj) -> list[Cause]:
        """ValidatePodCreate: ephemeral containers come only through pods/ephemeralcontainers."""
        spec = obj.get("spec") or {}
        causes = super().validate(obj) + validate_pod_spec(spec)
        if spec.get("ephemeralContainers"):
            causes.append(v.forbidden("spec.ephemeralContainers", "cannot be set on create"))
        return causes

    def warnings(self, obj: Obj, old: Obj | None) -> list[str]:
        if _EPHEMERAL_UPDATE.get():
            return []  # podEphemeralContainersStrategy.WarningsOnUpdate
        return pod_spec_warnings(obj.get("spec") or {})

    def prepare_update(self, new: Obj, old: Obj) -> None:
        if _EPHEMERAL_UPDATE.get():
            _keep_all_but_ephemeral_containers(new, old)
            return
        super().prepare_update(new, old)
        spec = new.setdefault("spec", {})
        _default_service_account(spec)
        default_pod(spec)
        _merge_default_tolerations(spec)  # DefaultTolerationSeconds admits updates too

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = super().validate(new)
        if _EPHEMERAL_UPDATE.get():
            return causes + validate_pod_ephemeral_containers_update(new, old)
        if causes:
            return causes
        return validate_pod_spec_update(new.get("spec") or {}, old.get("spec") or {})

    def graceful_period(self, obj: Obj, requested: int | None) -> int | None:
        """podStrategy.CheckGracefulDelete, exactly."""
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        period = requested if requested is not None else int(spec.get("terminationGracePeriodSeconds") or 0)
        if not spec.get("nodeName"):
            period = 0
        if status.get("phase") in TERMINAL_PHASES:
            period = 0
        if period < 0:
            period = 1
        return period

    def delete_warnings(self, obj: Obj, options: Obj) -> list[str]:
        """S7: a force delete (grace 0) of a pod bound to a node whose agent has not confirmed its
        processes dead (no terminal phase) is explained to every client, not only to kubectl users.

        Only the node's agent removes a pod in normal operation, and it writes the terminal phase
        before its grace-0 DELETE (as PodGC does before its force deletes), so those are not warned.
        """
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if options.get("gracePeriodSeconds") != 0 or not spec.get("nodeName") or status.get("phase") in TERMINAL_PHASES:
            return []
        meta = obj["metadata"]
        return [f"pod {meta.get('namespace')}/{meta['name']} on node {spec['nodeName']} was deleted immediately: "
                f"{FORCE_DELETE_WARNING}"]


def admit_priority(spec: Obj, lookup: Lookup) -> list[str]:
    """Priority admission (P2): resolve priorityClassName to spec.priority and preemptionPolicy.

    Mirrors plugin/pkg/admission/priority: refusals are Forbidden, with upstream's wording.
    """
    name = spec.get("priorityClassName", "")
    if name:
        pc = lookup.get("priorityclasses", "", name)
        if pc is None:
            return [f"no PriorityClass with name {name} was found"]
    else:
        pc = next((p for p in lookup.list("priorityclasses") if p.get("globalDefault")), None)
    value = pc.get("value", 0) if pc else DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS
    policy = (pc or {}).get("preemptionPolicy") or PREEMPT_LOWER
    if spec.get("priority") is not None and spec["priority"] != value:
        return [f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; priority "
                f"admission controller computed {value} from the given PriorityClass name"]
    if spec.get("preemptionPolicy") not in (None, policy):
        return [f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided in pod "
                f"spec; priority admission controller computed {policy} from the given PriorityClass name"]
    spec["priority"] = value
    spec["preemptionPolicy"] = policy
    if pc is not None and not name:
        spec["priorityClassName"] = pc["metadata"]["name"]
    return []


PODS = Resource("", "v1", "pods", "pod", "Pod", True, "V1Pod", short_names=("po",), categories=("all",),
                subresources=("status", "binding", "eviction", "log", "exec", "attach", "portforward",
                              "ephemeralcontainers"),
                fields=POD_FIELDS)
