"""Per-resource registry strategies: defaults, validation, update rules, graceful delete.

Mirrors k8s.io/apiserver/pkg/registry/rest: a `Resource` says what a type is (its
group-version-kind, scope, discovery facts); its `Strategy` says how writes to it are
prepared and checked. Handlers stay generic and call these hooks in upstream's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from kubelite.api.errors import Cause
from kubelite.api.selectors import COMMON_FIELDS, FieldGetter
from kubelite.api.validation import is_dns1123_subdomain, validate_object_meta
from kubelite.apiserver import enums, schema, typecheck
from kubelite.apiserver.nesting import copy_obj

Obj = dict[str, Any]


class Lookup(Protocol):
    """Read access to current objects, for admission decisions (priority classes, namespaces)."""

    def get(self, resource: str, namespace: str, name: str) -> Obj | None: ...

    def list(self, resource: str, namespace: str = "") -> list[Obj]: ...


@dataclass(frozen=True, eq=False)
class Resource:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    model: str  # kubernetes.client model name, for field validation
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    fields: Mapping[str, FieldGetter] = field(default_factory=lambda: COMMON_FIELDS)

    # Asked several times by every request (routing, keys, defaults): computed once per resource.
    @cached_property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def key_prefix(self) -> str:
        return f"/registry/{self.group or 'core'}/{self.plural}/"

    def key(self, namespace: str, name: str) -> str:
        return f"{self.key_prefix}{namespace}/{name}" if self.namespaced else f"{self.key_prefix}{name}"

    def prune_unknown(self, obj: Obj) -> list[str]:
        """Remove the fields this type does not know from `obj` (in place); their paths (fieldValidation)."""
        return schema.prune_unknown(obj, self.model)

    def check_metadata(self, obj: Obj, unknown: list[str] | None) -> typecheck.Mismatch | None:
        """A type without a Go struct (`model` ""): the first type mismatch in its metadata, which upstream decodes
        into ObjectMeta (kubelite's own kinds: none checked). With `unknown`, as `typecheck.check`'s."""
        return None


class Strategy:
    """Default behaviour, as upstream's generic registry store; resources override what differs.

    The update hooks (`prepare_update`, `admit_update`, `validate_update`, `warnings`, the status ones) may read
    `old` and put its parts into `new`, but never write into `old`: it is the watch cache's own object.
    """

    has_status = False
    has_spec_generation = False  # bump metadata.generation on spec changes
    orphans_by_default = False  # DefaultGarbageCollectionPolicy: OrphanDependents (True) or DeleteDependents
    name_validator = staticmethod(is_dns1123_subdomain)

    def __init__(self, resource: Resource) -> None:
        self.resource = resource

    # create
    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        if self.has_status:
            obj.pop("status", None)
        if self.has_spec_generation:
            obj["metadata"]["generation"] = 1

    def admit(self, obj: Obj, lookup: Lookup) -> list[str]:
        """Admission that needs other objects; each returned reason refuses the request (403 Forbidden)."""
        return []

    def admit_validated(self, obj: Obj, old: Obj | None, lookup: Lookup) -> list[str]:
        """Validating admission of a create (`old` None) or an update of the main resource: runs after the object's
        validation, as upstream's validating admission phase after its mutating one (`admit`); each returned reason
        refuses the request (403 Forbidden)."""
        return []

    def validate(self, obj: Obj) -> list[Cause]:
        return validate_object_meta(obj.get("metadata", {}), self.resource.namespaced, self.name_validator) + \
            enums.causes(obj, self.resource.model)

    def warnings(self, obj: Obj, old: Obj | None) -> list[str]:
        """WarningsOnCreate / WarningsOnUpdate (`old` set): accepted but suspicious values, sent as Warning headers."""
        return []

    # update of the main resource
    def prepare_update(self, new: Obj, old: Obj) -> None:
        if self.has_status:
            if "status" in old:
                new["status"] = copy_obj(old["status"])
            else:
                new.pop("status", None)
        if self.has_spec_generation:
            gen = old["metadata"].get("generation", 1)
            new["metadata"]["generation"] = gen + 1 if new.get("spec") != old.get("spec") else gen

    def admit_update(self, new: Obj, old: Obj, lookup: Lookup) -> list[str]:
        """Admission of an update of the main resource; each returned reason refuses it (403 Forbidden)."""
        return []

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        return self.validate(new)

    # update of the status subresource: only status changes
    def prepare_status_update(self, new: Obj, old: Obj) -> Obj:
        # `old` is read after this but never written (it may be the watch cache's object: Registry.guaranteed_update,
        # `reads_only`): the new object shares its unchanged parts, so a top-level copy does (a deep one was a fifth
        # of a pod status PATCH). What replaces them below is the caller's own.
        out = dict(old)
        out["metadata"] = new.get("metadata", out["metadata"])
        if "status" in new:
            out["status"] = new["status"]
        else:
            out.pop("status", None)
        return out

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        return []

    # delete
    def pending_finalizers(self, obj: Obj) -> list[str]:
        return list(obj["metadata"].get("finalizers") or [])

    def mark_deleting(self, obj: Obj) -> None:
        """What a type's own Delete adds to the object a delete marks (it has its deletionTimestamp already)."""

    def graceful_period(self, obj: Obj, requested: int | None) -> int | None:
        """CheckGracefulDelete: the grace period to apply, or None when the type deletes at once."""
        return None

    def delete_warnings(self, obj: Obj, options: Obj) -> list[str]:
        """Warning headers for a DELETE of `obj` (as it was removed or marked) with `options`."""
        return []
