"""Storage kinds (S5): PersistentVolumes and claims (core/v1), StorageClasses and VolumeAttachments (storage.k8s.io/v1).

Validation follows pkg/apis/core/validation (ValidatePersistentVolume, ValidatePersistentVolumeClaim
and their updates) and pkg/apis/storage/validation, limited to the fields kubelite acts on; the
defaults are upstream's (reclaim policy Retain for a PV, Delete and Immediate for a class, volume
mode Filesystem). The admission plugin StorageObjectInUseProtection is folded into the create:
every claim gets `kubernetes.io/pvc-protection` and every volume `kubernetes.io/pv-protection`.

A VolumeAttachment's spec is immutable, so its name — deterministic per volume, see
kubelite/controllers/attachdetach.py — is the lock: a second create of the same name is 409
AlreadyExists, which is the compare-and-swap that keeps a ReadWriteOnce volume on one node.
"""

from __future__ import annotations

from typing import Any

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.api.quantity import QuantityError, parse_quantity
from kubelite.api.selectors import COMMON_FIELDS, path_getter
from kubelite.api.volumes import PV_PROTECTION, PVC_PROTECTION
from kubelite.apiserver.admission import limitranger
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
VOLUME_MODES = ["Block", "Filesystem"]
PV_RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
SC_RECLAIM_POLICIES = ["Delete", "Retain"]
BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
# The volume sources a PV may carry; kubelite's agent mounts hostPath, local and its own CSI drivers.
PV_SOURCES = ("hostPath", "local", "csi", "nfs", "iscsi", "fc", "cephfs", "rbd", "awsElasticBlockStore",
              "gcePersistentDisk", "azureDisk", "azureFile", "cinder", "flexVolume", "glusterfs", "portworxVolume",
              "quobyte", "scaleIO", "storageos", "vsphereVolume", "photonPersistentDisk", "flocker")


def _add_finalizer(obj: Obj, finalizer: str) -> None:
    finalizers = obj["metadata"].setdefault("finalizers", [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)


def _validate_access_modes(modes: Any, path: str) -> list[Cause]:
    """validateAccessModes plus ReadWriteOncePod's rule: it may not be combined with another mode."""
    if not modes:
        return [v.required(path)]
    causes = [v.not_supported(path, m, ACCESS_MODES) for m in modes if m not in ACCESS_MODES]
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        causes.append(v.forbidden(path, "may not use ReadWriteOncePod with other access modes"))
    return causes


def _validate_storage(resources: Any, path: str, positive: bool) -> list[Cause]:
    storage = (resources or {}).get("storage")
    if storage is None:
        return [v.required(f"{path}[storage]")]
    try:
        amount = parse_quantity(storage)
    except QuantityError as exc:
        return [v.invalid(f"{path}[storage]", storage, str(exc))]
    if amount < 0 or (positive and amount == 0):
        return [v.invalid(f"{path}[storage]", storage, "must be greater than zero")]
    return []


def _validate_volume_mode(mode: Any, path: str) -> list[Cause]:
    return [] if mode is None or mode in VOLUME_MODES else [v.not_supported(path, mode, VOLUME_MODES)]


def _validate_class_name(name: Any, path: str) -> list[Cause]:
    return [v.invalid(path, name, e) for e in v.is_dns1123_subdomain(name)] if name else []


class PersistentVolumeStrategy(Strategy):
    """pkg/registry/core/persistentvolume: status Pending on create, then written by the PV controller only."""

    has_status = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        obj["status"] = {"phase": "Pending"}
        spec = obj.setdefault("spec", {})
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")
        _add_finalizer(obj, PV_PROTECTION)

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        causes += _validate_access_modes(spec.get("accessModes"), "spec.accessModes")
        causes += _validate_storage(spec.get("capacity"), "spec.capacity", positive=False)
        sources = [s for s in PV_SOURCES if spec.get(s) is not None]
        if not sources:
            causes.append(v.required("spec", "must specify a volume type"))
        elif len(sources) > 1:
            causes.append(v.forbidden(f"spec.{sources[1]}", "may not specify more than 1 volume type"))
        policy = spec.get("persistentVolumeReclaimPolicy")
        if policy not in PV_RECLAIM_POLICIES:
            causes.append(v.not_supported("spec.persistentVolumeReclaimPolicy", policy, PV_RECLAIM_POLICIES))
        causes += _validate_volume_mode(spec.get("volumeMode"), "spec.volumeMode")
        causes += _validate_class_name(spec.get("storageClassName"), "spec.storageClassName")
        if "local" in sources and not (spec.get("nodeAffinity") or {}).get("required"):
            causes.append(v.required("spec.nodeAffinity", "Local volume requires node affinity"))
        if "hostPath" in sources and not str((spec["hostPath"] or {}).get("path") or "").startswith("/"):
            causes.append(v.invalid("spec.hostPath.path", (spec["hostPath"] or {}).get("path"),
                                    "must be an absolute path"))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        """ValidatePersistentVolumeUpdate: the source, volumeMode and nodeAffinity are fixed at creation."""
        causes = self.validate(new)
        ns, os_ = new.get("spec") or {}, old.get("spec") or {}
        for field in (*PV_SOURCES, "volumeMode", "nodeAffinity"):
            if ns.get(field) != os_.get(field):
                causes.append(v.immutable(f"spec.{field}" if field in ("volumeMode", "nodeAffinity") else
                                          "spec.persistentvolumesource"))
                break
        return causes


class PersistentVolumeClaimStrategy(Strategy):
    """pkg/registry/core/persistentvolumeclaim: the spec is fixed once created, except binding (volumeName
    set while empty) and resources.requests."""

    has_status = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        obj["status"] = {"phase": "Pending"}
        spec = obj.setdefault("spec", {})
        spec.setdefault("volumeMode", "Filesystem")
        if "storageClassName" not in spec:  # the DefaultStorageClass admission plugin
            default = next((sc for sc in lookup.list("storageclasses") if is_default_class(sc)), None)
            if default is not None:
                spec["storageClassName"] = default["metadata"]["name"]
        _add_finalizer(obj, PVC_PROTECTION)

    def admit_validated(self, obj: Obj, old: Obj | None, lookup: Lookup) -> list[str]:
        return limitranger.validate_claim(obj, old, lookup)

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        causes += _validate_access_modes(spec.get("accessModes"), "spec.accessModes")
        causes += _validate_storage((spec.get("resources") or {}).get("requests"), "spec.resources.requests",
                                    positive=True)
        causes += _validate_volume_mode(spec.get("volumeMode"), "spec.volumeMode")
        causes += _validate_class_name(spec.get("storageClassName"), "spec.storageClassName")
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        ns, os_ = dict(new.get("spec") or {}), dict(old.get("spec") or {})
        if not os_.get("volumeName"):  # binding: volumeName may be set while empty
            os_.pop("volumeName", None)
            ns.pop("volumeName", None)
        for spec in (ns, os_):
            spec["resources"] = {k: val for k, val in (spec.get("resources") or {}).items() if k != "requests"}
        if ns != os_:
            causes.append(v.forbidden("spec", "spec is immutable after creation except resources.requests and "
                                              "volumeAttributesClassName for bound claims"))
        return causes


class StorageClassStrategy(Strategy):
    """pkg/registry/storage/storageclass: defaults, and everything but labels/annotations fixed."""

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        provisioner = obj.get("provisioner")
        if not provisioner:
            causes.append(v.required("provisioner"))
        else:
            causes += [v.invalid("provisioner", provisioner, e) for e in v.is_qualified_name(str(provisioner))]
        if obj.get("reclaimPolicy") not in SC_RECLAIM_POLICIES:
            causes.append(v.not_supported("reclaimPolicy", obj.get("reclaimPolicy"), SC_RECLAIM_POLICIES))
        if obj.get("volumeBindingMode") not in BINDING_MODES:
            causes.append(v.not_supported("volumeBindingMode", obj.get("volumeBindingMode"), BINDING_MODES))
        for key, value in (obj.get("parameters") or {}).items():
            if not isinstance(value, str):
                causes.append(v.invalid(f"parameters[{key}]", value, "must be a string"))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        for field in ("parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"):
            if new.get(field) != old.get(field):
                causes.append(v.forbidden(field, "updates to " + field + " are forbidden."))
        return causes


class VolumeAttachmentStrategy(Strategy):
    """pkg/registry/storage/volumeattachment: the spec is immutable; status comes from the attacher."""

    has_status = True

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        if not spec.get("attacher"):
            causes.append(v.required("spec.attacher"))
        if not spec.get("nodeName"):
            causes.append(v.required("spec.nodeName"))
        source = spec.get("source") or {}
        if bool(source.get("persistentVolumeName")) == bool(source.get("inlineVolumeSpec")):
            causes.append(v.required("spec.source", "must specify exactly one of persistentVolumeName and "
                                                    "inlineVolumeSpec"))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        if new.get("spec") != old.get("spec"):
            causes.append(v.invalid("spec", new.get("spec"), "field is immutable"))
        return causes


def is_default_class(sc: Obj) -> bool:
    annotations = sc["metadata"].get("annotations") or {}
    return "true" in (annotations.get("storageclass.kubernetes.io/is-default-class"),
                      annotations.get("storageclass.beta.kubernetes.io/is-default-class"))


_PVC_FIELDS = {**COMMON_FIELDS, "spec.volumeName": path_getter("spec", "volumeName")}
_VA_FIELDS = {**COMMON_FIELDS, "spec.nodeName": path_getter("spec", "nodeName")}

PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", False,
                              "V1PersistentVolume", short_names=("pv",), subresources=("status",))
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "persistentvolumeclaim",
                                    "PersistentVolumeClaim", True, "V1PersistentVolumeClaim", short_names=("pvc",),
                                    subresources=("status",), fields=_PVC_FIELDS)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", False,
                           "V1StorageClass", short_names=("sc",))
VOLUME_ATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "volumeattachment", "VolumeAttachment",
                              False, "V1VolumeAttachment", subresources=("status",), fields=_VA_FIELDS)
