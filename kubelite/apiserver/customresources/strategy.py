"""A custom resource's registry entry: its `Resource` (one per served version), strategy and table printer.

Mirrors apiextensions-apiserver's customresource strategy: the version's structural schema prunes unknown
fields, sets defaults and validates (schema errors are a 422 with kube-openapi's messages); with the status
subresource, the main resource ignores status changes and /status ignores the rest, and generation counts every
change but to metadata and status (without it, every change but to metadata). Objects are stored in the storage
version; reads show them in the served version (conversion strategy None: apiVersion) with its defaults (`view`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

from kubelite.api.errors import Cause
from kubelite.apiserver import schema as k8s_schema
from kubelite.apiserver import tables, typecheck
from kubelite.apiserver.customresources import jsonpath, schema
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

_OBJECT_META = "V1ObjectMeta"
_AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


@dataclass(frozen=True, eq=False)
class CustomResource(Resource):
    """One served version of a CRD's resource. `schema` is the version's openAPIV3Schema; `storage` the
    storage version's name, in which every version's objects are stored."""

    crd: str = ""  # the CustomResourceDefinition's name
    list_kind: str = ""
    schema: Obj = field(default_factory=dict)
    storage: str = ""
    columns: tuple[Obj, ...] = ()  # additionalPrinterColumns
    scale: Obj | None = None  # the scale subresource's paths

    def prune_unknown(self, obj: Obj) -> list[str]:
        """The schema's pruning, and ObjectMeta's of metadata (upstream decodes it into the Go type)."""
        meta = obj.get("metadata")
        dropped = [f"metadata.{p}" for p in k8s_schema.prune_unknown(meta, _OBJECT_META)] \
            if isinstance(meta, dict) else []
        return dropped + schema.prune(obj, self.schema)

    def check_metadata(self, obj: Obj, unknown: list[str] | None) -> typecheck.Mismatch | None:
        meta = obj.get("metadata")
        if meta is None:
            return None
        if not isinstance(meta, dict):
            return typecheck.Mismatch("metadata", f"json: cannot unmarshal {typecheck.json_type(meta)} into Go "
                                                  f"struct field {self.kind}.metadata of type v1.ObjectMeta")
        found: list[str] | None = [] if unknown is not None else None
        mismatch = typecheck.check(meta, _OBJECT_META, found)
        if unknown is not None and found:
            unknown += [f"metadata.{p}" for p in found]
        if mismatch is None:
            return None
        return typecheck.Mismatch(f"metadata.{mismatch.path}", mismatch.error.replace(
            "Go struct field ObjectMeta.", f"Go struct field {self.kind}.metadata."))

    def view(self, obj: Obj) -> Obj:
        """A stored object as a read through this version shows it: in this version's apiVersion (conversion
        strategy None) and defaulted by its schema, as upstream defaults what it reads from storage (an object
        written before a default was added shows it). `obj` itself when nothing changes; else a copy of what
        does, sharing the rest (the watch cache's objects are never changed)."""
        if obj.get("apiVersion") != self.group_version:
            obj = {**obj, "apiVersion": self.group_version}
        out: Obj = schema.defaulted(obj, self.schema)
        return out

    @cached_property
    def printer(self) -> tables.Printer:
        """The table of `kubectl get`: Name, then the additionalPrinterColumns, or Age when there are none (the
        CR handler's tableconvertor)."""
        columns = self.columns or (_AGE_COLUMN,)
        specs: list[tables.Column] = [("Name", "string", 0)]
        specs += [(c.get("name", ""), c.get("type", "string"), int(c.get("priority") or 0)) for c in columns]
        paths = [str(c.get("jsonPath", "")) for c in columns]
        types = [c.get("type", "string") for c in columns]

        def cells(obj: Obj, now: float) -> list[Any]:
            obj = self.view(obj)  # a column may show a default set on read
            out: list[Any] = [obj["metadata"]["name"]]
            for path, typ in zip(paths, types, strict=True):
                out.append(_cell(jsonpath.first(obj, path), typ, now))
            return out

        return specs, cells


def _cell(value: Any, typ: str, now: float) -> Any:
    """cellForJSONValue: a missing value is None (kubectl prints <none>); dates become ages."""
    if value is None:
        return None
    if typ == "date":
        try:
            return tables.since(value, now) if isinstance(value, str) else None
        except ValueError:
            return "<invalid>"
    if typ == "integer":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if typ == "number":
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if typ == "boolean":
        return value if isinstance(value, bool) else None
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


class CustomResourceStrategy(Strategy):
    """`status`: whether the version has the status subresource (what the main resource may then not change)."""

    def __init__(self, resource: CustomResource, status: bool) -> None:
        super().__init__(resource)
        self.custom = resource
        self.has_status = status

    def _storage_form(self, obj: Obj) -> None:
        """Pruned (what the handler's fieldValidation did not already), defaulted, in the storage version."""
        schema.prune(obj, self.custom.schema)
        schema.default(obj, self.custom.schema)
        obj["apiVersion"] = f"{self.resource.group}/{self.custom.storage}"

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        obj["metadata"]["generation"] = 1
        self._storage_form(obj)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        self._storage_form(new)
        ignored = ("metadata", "apiVersion", "status") if self.has_status else ("metadata", "apiVersion")
        gen = old["metadata"].get("generation", 1)
        changed = any(new.get(k) != old.get(k) for k in {*new, *old} if k not in ignored)
        new["metadata"]["generation"] = gen + 1 if changed else gen

    def prepare_status_update(self, new: Obj, old: Obj) -> Obj:
        """The status as the main resource's would be: pruned and defaulted by the schema's `status` (the
        request's own value: `new` is a copy of the body)."""
        out = super().prepare_status_update(new, old)
        if "status" in out:
            whole = self.custom.schema
            only_status = {**whole, "properties": {k: v for k, v in (whole.get("properties") or {}).items()
                                                   if k == "status"}}
            holder = {"status": out["status"]}
            schema.prune(holder, only_status)
            schema.default(holder, only_status)
            if "status" in holder:
                out["status"] = holder["status"]
            else:
                del out["status"]
        return out

    def validate(self, obj: Obj) -> list[Cause]:
        return super().validate(obj) + schema.validate(obj, self.custom.schema)

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        return schema.validate(new, self.custom.schema)
