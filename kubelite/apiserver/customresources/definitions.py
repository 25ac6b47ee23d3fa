"""The CustomResourceDefinition kind's defaults and validation, as apiextensions.k8s.io/v1 has them.

Mirrors apiextensions-apiserver's pkg/apis/apiextensions/v1 defaults (singular and listKind from the kind,
conversion None) and pkg/apis/apiextensions/validation's main rules and messages: the name is
`<plural>.<group>`, the group a DNS subdomain with a dot (protected *.k8s.io groups need the approval
annotation), names DNS-1035 labels, exactly one storage version, a structural schema per version (v1 requires
one), printer columns of known types, status and scale subresources only. Webhook conversion is accepted only
where it can never run (a single version): kubelite calls no webhooks.
"""

from __future__ import annotations

from typing import Any

from kubelite.api.errors import Cause
from kubelite.api.validation import (
    forbidden,
    immutable,
    invalid,
    is_dns1035_label,
    is_dns1123_subdomain,
    not_supported,
    required,
    validate_object_meta,
)
from kubelite.apiserver.customresources import schema

Obj = dict[str, Any]

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
_PROTECTED = ("k8s.io", "kubernetes.io")
_SCOPES = ["Cluster", "Namespaced"]
_COLUMN_TYPES = ["boolean", "date", "integer", "number", "string"]
_COLUMN_FORMATS = ["byte", "date", "date-time", "double", "float", "int32", "int64", "password"]
_SUBRESOURCES = ("status", "scale")


def storage_version(crd: Obj) -> str:
    """The name of the version marked `storage: true` ("" if none is)."""
    return next((v.get("name", "") for v in crd.get("spec", {}).get("versions") or [] if v.get("storage")), "")


def condition(crd: Obj, kind: str) -> Obj | None:
    return next((c for c in (crd.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def is_true(crd: Obj, kind: str) -> bool:
    cond = condition(crd, kind)
    return cond is not None and cond.get("status") == "True"


def set_defaults(crd: Obj) -> None:
    """SetDefaults_CustomResourceDefinitionSpec: singular, listKind and the conversion strategy."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str) and names["kind"]:
        if not names.get("singular"):
            names["singular"] = names["kind"].lower()
        if not names.get("listKind"):
            names["listKind"] = names["kind"] + "List"
    if not spec.get("conversion"):
        spec["conversion"] = {"strategy": "None"}


def _protected(group: str) -> bool:
    return any(group == p or group.endswith("." + p) for p in _PROTECTED)


def validate(crd: Obj) -> list[Cause]:
    """ValidateCustomResourceDefinition."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    required_name = f"{names.get('plural', '')}.{spec.get('group', '')}"

    def name_fn(name: str) -> list[str]:
        errs = is_dns1123_subdomain(name)
        return errs + ([] if name == required_name else ['must be spec.names.plural+"."+spec.group'])

    meta = crd.get("metadata") or {}
    causes = validate_object_meta(meta, False, name_fn)
    group = spec.get("group", "")
    if group and _protected(group) and APPROVAL_ANNOTATION not in (meta.get("annotations") or {}):
        causes.append(required(f"metadata.annotations[{APPROVAL_ANNOTATION}]",
                               f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}", see '
                               "https://github.com/kubernetes/enhancements/pull/1111"))
    return causes + validate_spec(spec) + validate_status(crd.get("status") or {}) + validate_stored_versions(crd)


def validate_update(new: Obj, old: Obj) -> list[Cause]:
    """ValidateCustomResourceDefinitionUpdate: group and plural never change; scope and kind not once
    Established; every stored version stays listed."""
    causes = validate(new)
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if spec.get("group") != old_spec.get("group"):
        causes.append(immutable("spec.group"))
    if (spec.get("names") or {}).get("plural") != (old_spec.get("names") or {}).get("plural"):
        causes.append(immutable("spec.names.plural"))
    if is_true(old, "Established"):
        if spec.get("scope") != old_spec.get("scope"):
            causes.append(immutable("spec.scope"))
        if (spec.get("names") or {}).get("kind") != (old_spec.get("names") or {}).get("kind"):
            causes.append(immutable("spec.names.kind"))
    return causes


def validate_stored_versions(crd: Obj) -> list[Cause]:
    stored = (crd.get("status") or {}).get("storedVersions") or []
    versions = (crd.get("spec") or {}).get("versions") or []
    if not stored:
        return [invalid("status.storedVersions", stored, "must have at least one stored version")]
    causes = [invalid("status.storedVersions", v.get("name"), f"must have the storage version {v.get('name')}")
              for v in versions if v.get("storage") and v.get("name") not in stored]
    names = {v.get("name") for v in versions}
    return causes + [invalid(f"status.storedVersions[{i}]", v, "must appear in spec.versions")
                     for i, v in enumerate(stored) if v not in names]


def validate_spec(spec: Obj) -> list[Cause]:
    causes: list[Cause] = []
    group = spec.get("group") or ""
    if not group:
        causes.append(required("spec.group"))
    elif errs := is_dns1123_subdomain(group):
        causes.append(invalid("spec.group", group, ",".join(errs)))
    elif "." not in group:
        causes.append(invalid("spec.group", group, "should be a domain with at least one dot"))
    scope = spec.get("scope") or ""
    if not scope:
        causes.append(required("spec.scope"))
    elif scope not in _SCOPES:
        causes.append(not_supported("spec.scope", scope, _SCOPES))
    causes += _validate_versions(spec)
    names = spec.get("names") or {}
    for field in ("plural", "singular", "kind", "listKind"):
        if not names.get(field):
            causes.append(required(f"spec.names.{field}"))
    causes += validate_names(names, "spec.names")
    conversion = spec.get("conversion") or {}
    strategy = conversion.get("strategy", "None")
    if strategy not in ("None", "Webhook"):
        causes.append(not_supported("spec.conversion.strategy", strategy, ["None", "Webhook"]))
    elif strategy == "Webhook" and len(spec.get("versions") or []) > 1:
        causes.append(forbidden("spec.conversion.strategy", "kubelite does not call conversion webhooks: "
                                                            "versions are converted with strategy None only"))
    return causes


def _validate_versions(spec: Obj) -> list[Cause]:
    causes: list[Cause] = []
    versions = spec.get("versions") or []
    if not versions:
        causes.append(invalid("spec.versions", [], "must have exactly one version marked as storage version"))
        return causes
    seen: set[str] = set()
    for i, version in enumerate(versions):
        path = f"spec.versions[{i}]"
        name = version.get("name") or ""
        if not name:
            causes.append(required(f"{path}.name"))
        elif errs := is_dns1035_label(name):
            causes.append(invalid(f"{path}.name", name, ",".join(errs)))
        if name in seen:
            causes.append(invalid("spec.versions", name, "must contain unique version names"))
        seen.add(name)
        causes += _validate_version(version, path)
    if sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(invalid("spec.versions", [v.get("name", "") for v in versions],
                              "must have exactly one version marked as storage version"))
    if not any(v.get("served") for v in versions):
        causes.append(invalid("spec.versions", [v.get("name", "") for v in versions],
                              "must have at least one version marked as served"))
    return causes


def _validate_version(version: Obj, path: str) -> list[Cause]:
    causes: list[Cause] = []
    subresources = version.get("subresources") or {}
    for name in subresources:
        if name not in _SUBRESOURCES:
            causes.append(not_supported(f"{path}.subresources", name, list(_SUBRESOURCES)))
    scale = subresources.get("scale")
    if isinstance(scale, dict):
        for field in ("specReplicasPath", "statusReplicasPath"):
            value = scale.get(field) or ""
            if not value:
                causes.append(required(f"{path}.subresources.scale.{field}"))
            elif not value.startswith(".spec." if field == "specReplicasPath" else ".status."):
                causes.append(invalid(f"{path}.subresources.scale.{field}", value,
                                      f"should be a json path under {'.spec' if field[1] == 'p' else '.status'}"))
    openapi = (version.get("schema") or {}).get("openAPIV3Schema")
    schema_path = f"{path}.schema.openAPIV3Schema"
    if openapi is None:
        causes.append(required(schema_path, "schemas are required"))
    else:
        causes += schema.structural_errors(openapi, schema_path)
        if "status" in subresources and isinstance(openapi, dict) and openapi.get("type") not in (None, "object"):
            causes.append(invalid(f"{schema_path}.type", openapi.get("type"), 'only "object" is allowed as the '
                                  "type at the root of the schema if the status subresource is enabled"))
    for i, column in enumerate(version.get("additionalPrinterColumns") or []):
        causes += _validate_column(column, f"{path}.additionalPrinterColumns[{i}]")
    return causes


def _validate_column(column: Obj, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not column.get("name"):
        causes.append(required(f"{path}.name"))
    typ = column.get("type") or ""
    if not typ:
        causes.append(required(f"{path}.type", f"must be one of {','.join(_COLUMN_TYPES)}"))
    elif typ not in _COLUMN_TYPES:
        causes.append(not_supported(f"{path}.type", typ, _COLUMN_TYPES))
    fmt = column.get("format") or ""
    if fmt and fmt not in _COLUMN_FORMATS:
        causes.append(not_supported(f"{path}.format", fmt, _COLUMN_FORMATS))
    json_path = column.get("jsonPath") or ""
    if not json_path:
        causes.append(required(f"{path}.jsonPath"))
    elif not json_path.startswith("."):
        causes.append(invalid(f"{path}.jsonPath", json_path, "must be a simple json path starting with ."))
    return causes


def validate_names(names: Obj, path: str) -> list[Cause]:
    """ValidateCustomResourceDefinitionNames (of spec.names and of status.acceptedNames)."""
    causes: list[Cause] = []
    for field, lower in (("plural", False), ("singular", False), ("kind", True), ("listKind", True)):
        value = names.get(field) or ""
        if value and (errs := is_dns1035_label(value.lower() if lower else value)):
            detail = ",".join(errs)
            causes.append(invalid(f"{path}.{field}", value,
                                  f"may have mixed case, but should otherwise match: {detail}" if lower else detail))
    for i, short in enumerate(names.get("shortNames") or []):
        if errs := is_dns1035_label(short):
            causes.append(invalid(f"{path}.shortNames[{i}]", short, ",".join(errs)))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        causes.append(invalid(f"{path}.listKind", names["listKind"], "kind and listKind may not be the same"))
    for i, category in enumerate(names.get("categories") or []):
        if errs := is_dns1035_label(category):
            causes.append(invalid(f"{path}.categories[{i}]", category, ",".join(errs)))
    return causes


def validate_status(status: Obj) -> list[Cause]:
    return validate_names(status.get("acceptedNames") or {}, "status.acceptedNames")
