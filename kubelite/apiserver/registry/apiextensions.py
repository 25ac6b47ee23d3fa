"""apiextensions.k8s.io/v1: CustomResourceDefinitions (apiextensions-apiserver's registry/customresourcedefinition).

Only the kind's own rules live here; serving the resources a CRD defines is `customresources.serving`'s.
"""

from __future__ import annotations

from kubelite.api.errors import Cause
from kubelite.apiserver.customresources import definitions
from kubelite.apiserver.customresources.definitions import CLEANUP_FINALIZER
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy


class CustomResourceDefinitionStrategy(Strategy):
    """strategy.go: generation counts spec changes; the status starts empty but for the storage version, which
    every write adds to storedVersions; a delete first marks the CRD Terminating with the cleanup finalizer (etcd.go's
    Delete), and the serving controller removes it once every custom resource is gone."""

    has_status = True
    has_spec_generation = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        definitions.set_defaults(obj)
        obj["status"] = {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []}
        self._store_version(obj)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        definitions.set_defaults(new)
        super().prepare_update(new, old)
        self._store_version(new)

    @staticmethod
    def _store_version(crd: Obj) -> None:
        version = definitions.storage_version(crd)
        status = crd.setdefault("status", {})
        stored = status.get("storedVersions") or []
        if version and version not in stored:
            status["storedVersions"] = [*stored, version]

    def validate(self, obj: Obj) -> list[Cause]:
        return definitions.validate(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        return definitions.validate_update(new, old)

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        return definitions.validate_status(new.get("status") or {})

    def pending_finalizers(self, obj: Obj) -> list[str]:
        finalizers = super().pending_finalizers(obj)
        if not obj["metadata"].get("deletionTimestamp") and CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        return finalizers

    def mark_deleting(self, obj: Obj) -> None:
        meta = obj["metadata"]
        if CLEANUP_FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), CLEANUP_FINALIZER]
        conditions = [c for c in obj.setdefault("status", {}).get("conditions") or [] if c.get("type") != "Terminating"]
        conditions.append({"type": "Terminating", "status": "True", "lastTransitionTime": meta["deletionTimestamp"],
                           "reason": "InstanceDeletionPending",
                           "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will "
                                      "begin soon"})
        obj["status"]["conditions"] = conditions


CUSTOM_RESOURCE_DEFINITIONS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                       "customresourcedefinition", "CustomResourceDefinition", False,
                                       "V1CustomResourceDefinition", short_names=("crd", "crds"),
                                       categories=("api-extensions",), subresources=("status",))
