"""OpenAPI v3 documents per group-version, generated from the client's models (see `schema`).

Shaped as kube-apiserver's: `components.schemas` holds one schema per type, the kinds carry
`x-kubernetes-group-version-kind` (how `kubectl explain` finds a resource's schema),
references are `allOf: [{$ref}]` so a field keeps its own description, lists carry the
strategic-merge keys kubelite's patcher uses (upstream's struct tags, `PATCH_FIELDS`: so
`kubectl apply` computes the same patches the server applies), and each kind's patch path
declares `fieldValidation` (how kubectl decides to hand validation to the server,
research/kubectl-compat.md §4.3).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kubelite.apiserver import schema
from kubelite.apiserver.customresources.strategy import CustomResource
from kubelite.apiserver.nesting import copy_obj
from kubelite.apiserver.patch_fields import PATCH_FIELDS
from kubelite.apiserver.registry.base import Resource
from kubelite.apiserver.schema import FieldType

Obj = dict[str, Any]

_PREFIX = "#/components/schemas/"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_SHARED: dict[str, Obj] = {
    _QUANTITY: {"description": "Quantity is a fixed-point representation of a number. It provides convenient "
                               "marshaling/unmarshaling in JSON and YAML, in addition to String() and AsInt64() "
                               "accessors.", "oneOf": [{"type": "string"}, {"type": "number"}]},
    _INT_OR_STRING: {"description": "IntOrString is a type that can hold an int32 or a string.",
                     "oneOf": [{"type": "integer"}, {"type": "string"}]},
}
_OBJECT_META = "V1ObjectMeta"
_PARAMS = [{"name": p, "in": "query", "schema": {"type": "string"}}
           for p in ("dryRun", "fieldManager", "fieldValidation", "force")]


def schema_name(model: str) -> str:
    """`V1PodSpec` → `io.k8s.api.v1.PodSpec`: kubectl shows the part after the last dot as the type."""
    package, name = schema.go_name(model)
    group = model[:len(model) - len(package) - len(name)].lower()  # CoreV1Event → core
    return f"io.k8s.api.{group + '.' if group else ''}{package}.{name}"


def _kind_name(r: Resource) -> str:
    if isinstance(r, CustomResource):  # upstream's name of a CRD's kind: its group reversed, then version and kind
        return ".".join([*reversed(r.group.split(".")), r.version, r.kind])
    return schema_name(r.model) if r.model else f"io.kubelite.{r.version}.{r.kind}"


def _ref(name: str) -> Obj:
    return {"$ref": _PREFIX + name}


def _property(t: FieldType) -> Obj:
    if t.kind == "list":
        assert t.item is not None
        return {"type": "array", "items": _property(t.item)}
    if t.kind == "map":
        assert t.item is not None
        return {"type": "object", "additionalProperties": _property(t.item)}
    if t.kind == "model":
        return {"allOf": [_ref(schema_name(t.model))], "default": {}}
    if t.kind == "quantity":
        return {"allOf": [_ref(_QUANTITY)]}
    if t.kind == "int-or-string":
        return {"allOf": [_ref(_INT_OR_STRING)]}
    if t.kind == "time":
        return {"type": "string", "format": "date-time"}
    if t.kind == "bytes":
        return {"type": "string", "format": "byte"}
    if t.kind == "any":
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if t.kind == "int32":
        return {"type": "integer", "format": "int32"}
    return {"type": t.kind, "format": "int64"} if t.kind == "integer" else {"type": t.kind}


def _element_model(t: FieldType) -> str:
    while t.item is not None:
        t = t.item
    return t.model


def _component(model: str) -> Obj:
    properties: Obj = {}
    required = []
    for name, field in schema.fields(model).items():
        prop = _property(field.type)
        element = _element_model(field.type)
        text = field.description or (schema.description(element) if element else "")
        if text:  # a field without its own words (`metadata`) is described by its type, as upstream's docs do
            prop["description"] = text
        strategy, key = PATCH_FIELDS.get((model, name), ("", ""))
        if strategy:
            prop["x-kubernetes-patch-strategy"] = strategy
            if key:
                prop["x-kubernetes-patch-merge-key"] = key
        properties[name] = prop
        if field.required:
            required.append(name)
    out: Obj = {"type": "object", "properties": properties}
    if schema.description(model):
        out["description"] = schema.description(model)
    if required:
        out["required"] = required
    return out


def _reachable(model: str, seen: set[str]) -> None:
    if model in seen:
        return
    seen.add(model)
    for field in schema.fields(model).values():
        element = _element_model(field.type)
        if element:
            _reachable(element, seen)


def _untyped(r: Resource) -> Obj:
    """kubelite's own kinds have no client model: metadata is typed, the rest is kept as sent."""
    return {"type": "object", "description": f"{r.kind} is a kubelite kind ({r.group_version}); its fields are "
                                             "described in kubelite's README.",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": {"allOf": [_ref(schema_name(_OBJECT_META))], "default": {}}}}


def _custom(r: CustomResource) -> Obj:
    """A CRD version's schema as its kind's component: apiVersion, kind and metadata (ObjectMeta) added."""
    component = copy_obj(r.schema) or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    properties = component.setdefault("properties", {})
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = {"allOf": [_ref(schema_name(_OBJECT_META))]}
    return component


@cache
def document(group_version: str, resources: tuple[Resource, ...]) -> Obj:
    """The document of one group-version of built-in resources (remembered: it never changes)."""
    return build_document(group_version, resources)


def build_document(group_version: str, resources: tuple[Resource, ...]) -> Obj:
    """The document of one group-version: its kinds' schemas (and all they use) and one patch path per kind."""
    typed = [r for r in resources if r.model]
    models: set[str] = {_OBJECT_META} if len(typed) < len(resources) else set()
    for r in typed:
        _reachable(r.model, models)
    schemas: Obj = {schema_name(m): _component(m) for m in sorted(models)}
    schemas.update(_SHARED)
    for r in resources:
        if isinstance(r, CustomResource):
            component = schemas[_kind_name(r)] = _custom(r)
        else:
            component = schemas[schema_name(r.model)] if r.model else schemas.setdefault(_kind_name(r), _untyped(r))
        component["x-kubernetes-group-version-kind"] = [{"group": r.group, "kind": r.kind, "version": r.version}]
    paths: Obj = {}
    prefix = "/api/v1/" if group_version == "v1" else f"/apis/{group_version}/"
    for r in resources:
        base = prefix + ("namespaces/{namespace}/" if r.namespaced else "") + r.plural
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        ok = {"200": {"description": "OK", "content": {"application/json": {"schema": _ref(_kind_name(r))}}}}
        paths[base + "/{name}"] = {
            "get": {"operationId": f"read{r.kind}", "x-kubernetes-action": "get",
                    "x-kubernetes-group-version-kind": gvk, "responses": ok},
            "patch": {"operationId": f"patch{r.kind}", "x-kubernetes-action": "patch",
                      "x-kubernetes-group-version-kind": gvk, "parameters": _PARAMS, "responses": ok}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "components": {"schemas": schemas}, "paths": paths}
