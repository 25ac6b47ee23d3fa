"""The `scale` subresource of Deployments, ReplicaSets and StatefulSets (autoscaling/v1 Scale).

Mirrors pkg/registry/apps/*/storage ScaleREST: GET shows the object as a Scale (spec.replicas,
status.replicas and the selector as a string); PUT and PATCH change only spec.replicas of the
object, through the ordinary update path (generation bump, optimistic concurrency on the
Scale's resourceVersion, which is the object's). `kubectl scale` patches this subresource.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kubelite.api import errors
from kubelite.api.errors import Cause
from kubelite.api.selectors import format_selector
from kubelite.apiserver import patch
from kubelite.apiserver.registry.base import Obj
from kubelite.apiserver.request import (
    APPLY_PATCH,
    BODY_TYPES,
    JSON_PATCH,
    PATCH_TYPES,
    Target,
    decode_request_body,
    media_type,
    read_body,
)
from kubelite.apiserver.rest import Registry


@dataclass(frozen=True, slots=True)
class ScalePaths:
    """Where an object keeps what its Scale shows: the workloads' fixed fields, or a CRD's scale subresource's
    specReplicasPath, statusReplicasPath and labelSelectorPath (a selector already in string form there)."""

    spec: tuple[str, ...] = ("spec", "replicas")
    status: tuple[str, ...] = ("status", "replicas")
    selector: tuple[str, ...] | None = None  # None: the workloads' spec.selector, formatted

    @staticmethod
    def of_custom(scale: Obj) -> ScalePaths:
        def path(expr: Any) -> tuple[str, ...]:
            return tuple(p for p in str(expr or "").split(".") if p)

        selector = scale.get("labelSelectorPath")
        return ScalePaths(path(scale.get("specReplicasPath")), path(scale.get("statusReplicasPath")),
                          path(selector) if selector else ())


WORKLOADS = ScalePaths()


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def to_scale(obj: Obj, paths: ScalePaths = WORKLOADS) -> Obj:
    meta = obj["metadata"]
    if paths.selector is None:
        selector = format_selector(_label_selector(obj))
    else:
        selector = _at(obj, paths.selector) if paths.selector else ""
    status: Obj = {"replicas": _at(obj, paths.status) or 0}
    if selector or paths.selector is None:
        status["selector"] = selector if isinstance(selector, str) else ""
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": _at(obj, paths.spec) or 0}, "status": status}


def _set(obj: Obj, path: tuple[str, ...], value: int) -> None:
    """Set `value` at `path`, making the maps on the way (a copy of the current object: its own to change)."""
    for part in path[:-1]:
        child = obj.get(part)
        if not isinstance(child, dict):
            child = obj[part] = {}
        obj = child
    obj[path[-1]] = value


def _label_selector(obj: Obj) -> Obj | None:
    """The object's selector as a LabelSelector: a ReplicationController's is a plain label map."""
    selector = (obj.get("spec") or {}).get("selector")
    if obj.get("kind") == "ReplicationController" and isinstance(selector, dict):
        return {"matchLabels": selector}
    return selector if isinstance(selector, dict) else None


def _replicas(scale: Any, name: str) -> int:
    if not isinstance(scale, dict):
        raise errors.bad_request("Scale must be an object")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid("Scale", name, [Cause("FieldValueInvalid", f"Invalid value: {replicas!r}: must be "
                                                   "greater than or equal to 0", "spec.replicas")], "autoscaling")
    return replicas


async def handle(request: web.Request, registry: Registry, target: Target, dry_run: bool,
                 paths: ScalePaths = WORKLOADS) -> Obj:
    r = target.resource
    assert r is not None
    method = request.method
    if method == "GET":
        return to_scale(registry.current(r, target.namespace, target.name), paths)
    if method not in ("PUT", "PATCH"):
        raise errors.method_not_allowed(method, f"{r.plural}/scale")
    ctype = media_type(request)
    if method == "PATCH" and ctype == APPLY_PATCH:
        raise errors.unsupported_media_type(ctype, [t for t in PATCH_TYPES if t != APPLY_PATCH])
    raw = await read_body(request)
    body = await decode_request_body(raw, ctype, PATCH_TYPES if method == "PATCH" else BODY_TYPES)

    def apply(cur: Obj) -> Obj:
        view = to_scale(cur, paths)
        if method == "PUT":
            wanted = body
        elif ctype == JSON_PATCH:
            wanted = patch.json_patch(view, body)
        else:  # merge and strategic merge are the same on a Scale (no lists)
            wanted = patch.merge_patch(view, body)
        _set(cur, paths.spec, _replicas(wanted, target.name))
        pinned = ((wanted or {}).get("metadata") or {}).get("resourceVersion")
        if pinned:
            cur["metadata"]["resourceVersion"] = pinned  # a stale Scale is a 409, as for the object
        return cur

    updated = await registry.patch(r, target.namespace, target.name, apply, "", dry_run)
    return to_scale(updated, paths)
