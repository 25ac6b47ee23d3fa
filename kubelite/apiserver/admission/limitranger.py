"""LimitRanger admission (plugin/pkg/admission/limitranger): a namespace's LimitRanges default and bound resources.

On pod create, each LimitRange's `Container` item fills the requests (`defaultRequest`) and limits
(`default`) a container or init container leaves out, and the pod is annotated with what was set
(`kubernetes.io/limit-ranger: LimitRanger plugin set: cpu request for container app`). Then every
LimitRange must hold: `min`/`max`/`maxLimitRequestRatio` per container (`Container`) and for the
pod's summed requests and limits (`Pod`), and `min`/`max` of the storage a PersistentVolumeClaim
requests (`PersistentVolumeClaim`, on create and update). A violation refuses the request (403)
with upstream's words, all of one LimitRange's violations in one aggregate. Pod updates are not
checked (their resources cannot change), nor are objects being deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kubelite.api.quantity import Quantity
from kubelite.api.quota import ResourceList, parse_list, pod_resources
from kubelite.apiserver.registry.base import Lookup, Obj

LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"


def aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate(errs).Error(): one message as it is, several deduplicated in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# --- defaults -------------------------------------------------------------------------------------

def default_container_resource_requirements(limit_range: Obj) -> tuple[dict[str, str], dict[str, str]]:
    """defaultContainerResourceRequirements: (requests, limits) from the `Container` items."""
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if item.get("type") == "Container":
            requests.update(item.get("defaultRequest") or {})
            limits.update(item.get("default") or {})
    return requests, limits


def _merge_container(container: Obj, requests: dict[str, str], limits: dict[str, str], prefix: str) -> list[str]:
    """mergeContainerResources: fill what the container does not state; say what was set."""
    resources = container.setdefault("resources", {})
    notes = []
    for field, defaults, word in (("requests", requests, "request"), ("limits", limits, "limit")):
        current = resources.get(field) or {}
        missing = sorted(name for name in defaults if name not in current)
        if missing:
            resources[field] = {**current, **{name: defaults[name] for name in missing}}
            notes.append(f"{', '.join(missing)} {word} for {prefix} {container.get('name', '')}")
    return notes


def merge_pod_resource_requirements(pod: Obj, requests: dict[str, str], limits: dict[str, str]) -> None:
    """mergePodResourceRequirements: containers, then init containers; the annotation lists every default set."""
    spec = pod.get("spec") or {}
    notes = [note for c in spec.get("containers") or [] for note in _merge_container(c, requests, limits, "container")]
    notes += [note for c in spec.get("initContainers") or []
              for note in _merge_container(c, requests, limits, "init container")]
    if notes:
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations[LIMIT_RANGER_ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


# --- constraints ----------------------------------------------------------------------------------

def min_constraint(limit_type: str, name: str, enforced: Quantity, requests: ResourceList,
                   limits: ResourceList) -> str:
    req, lim = requests.get(name), limits.get(name)
    if req is None:
        return f"minimum {name} usage per {limit_type} is {enforced}.  No request is specified"
    if req.milli_value() < enforced.milli_value():
        return f"minimum {name} usage per {limit_type} is {enforced}, but request is {req}"
    if lim is not None and lim.milli_value() < enforced.milli_value():
        return f"minimum {name} usage per {limit_type} is {enforced}, but limit is {lim}"
    return ""


def max_request_constraint(limit_type: str, name: str, enforced: Quantity, requests: ResourceList) -> str:
    """For claims, whose limits are not user input: the request alone is bounded."""
    req = requests.get(name)
    if req is None:
        return f"maximum {name} usage per {limit_type} is {enforced}.  No request is specified"
    if req.milli_value() > enforced.milli_value():
        return f"maximum {name} usage per {limit_type} is {enforced}, but request is {req}"
    return ""


def max_constraint(limit_type: str, name: str, enforced: Quantity, requests: ResourceList,
                   limits: ResourceList) -> str:
    req, lim = requests.get(name), limits.get(name)
    if lim is None:
        return f"maximum {name} usage per {limit_type} is {enforced}.  No limit is specified"
    if lim.milli_value() > enforced.milli_value():
        return f"maximum {name} usage per {limit_type} is {enforced}, but limit is {lim}"
    if req is not None and req.milli_value() > enforced.milli_value():
        return f"maximum {name} usage per {limit_type} is {enforced}, but request is {req}"
    return ""


def limit_request_ratio_constraint(limit_type: str, name: str, enforced: Quantity, requests: ResourceList,
                                   limits: ResourceList) -> str:
    req, lim = (q.milli_value() if (q := ls.get(name)) is not None else 0 for ls in (requests, limits))
    if req == 0:
        return (f"{name} max limit to request ratio per {limit_type} is {enforced}, but no request is specified "
                "or request is 0")
    if lim == 0:
        return (f"{name} max limit to request ratio per {limit_type} is {enforced}, but no limit is specified "
                "or limit is 0")
    observed = lim / req
    if observed * 1000 > enforced.milli_value():
        return f"{name} max limit to request ratio per {limit_type} is {enforced}, but provided ratio is {observed:f}"
    return ""


Check = Callable[[str, str, Quantity, ResourceList, ResourceList], str]
_CHECKS: tuple[tuple[str, Check], ...] = (("min", min_constraint), ("max", max_constraint),
                                          ("maxLimitRequestRatio", limit_request_ratio_constraint))


def _bounded(item: Obj, requests: ResourceList, limits: ResourceList) -> list[str]:
    """One item's min, max and ratio checks over one set of requests and limits (resources sorted: Go's map
    order is random; kubelite's is stable)."""
    out = []
    for field, check in _CHECKS:
        for name, enforced in sorted(parse_list(item.get(field)).items()):
            message = check(item["type"], name, enforced, requests, limits)
            if message:
                out.append(message)
    return out


def pod_validate_limit(limit_range: Obj, pod: Obj) -> list[str]:
    """PodValidateLimitFunc: each container against `Container` items, the pod's sums against `Pod` items."""
    spec = pod.get("spec") or {}
    out: list[str] = []
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if item.get("type") == "Container":
            for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
                resources = c.get("resources") or {}
                out += _bounded(item, parse_list(resources.get("requests")), parse_list(resources.get("limits")))
        elif item.get("type") == "Pod":
            out += _bounded(item, pod_resources(spec, "requests", overhead=False),
                            pod_resources(spec, "limits", overhead=False))
    return out


def claim_validate_limit(limit_range: Obj, claim: Obj) -> list[str]:
    """PersistentVolumeClaimValidateLimitFunc: min and max of the requested storage."""
    requests = parse_list(((claim.get("spec") or {}).get("resources") or {}).get("requests"))
    out: list[str] = []
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if item.get("type") != "PersistentVolumeClaim":
            continue
        for name, enforced in sorted(parse_list(item.get("min")).items()):
            out += filter(None, [min_constraint(item["type"], name, enforced, requests, {})])
        for name, enforced in sorted(parse_list(item.get("max")).items()):
            out += filter(None, [max_request_constraint(item["type"], name, enforced, requests)])
    return out


# --- the plugin -----------------------------------------------------------------------------------

def _refusals(limit_ranges: Iterable[Obj], validate: Callable[[Obj, Obj], list[str]], obj: Obj) -> list[str]:
    """runLimitFunc: the first LimitRange that refuses the object refuses the request."""
    for limit_range in limit_ranges:
        messages = validate(limit_range, obj)
        if messages:
            return [aggregate(messages)]
    return []


def admit_pod(pod: Obj, lookup: Lookup) -> None:
    """Admit (the mutating phase, before validation): defaults from every LimitRange of the namespace, for a pod
    being created."""
    for limit_range in lookup.list("limitranges", pod["metadata"]["namespace"]):
        merge_pod_resource_requirements(pod, *default_container_resource_requirements(limit_range))


def validate_pod(pod: Obj, lookup: Lookup) -> list[str]:
    """Validate (the validating phase, after the object's validation): the min/max/ratio refusals of a pod being
    created, so an invalid pod is a 422 before any LimitRange refuses it."""
    return _refusals(lookup.list("limitranges", pod["metadata"]["namespace"]), pod_validate_limit, pod)


def validate_claim(claim: Obj, old: Obj | None, lookup: Lookup) -> list[str]:
    """Validate (after the object's validation) for a claim created or updated (one being deleted is let
    through); claims get no defaults."""
    if old is not None and old["metadata"].get("deletionTimestamp"):
        return []
    return _refusals(lookup.list("limitranges", claim["metadata"]["namespace"]), claim_validate_limit, claim)
