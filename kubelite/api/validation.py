"""Name, label and metadata validation, with upstream's messages.

Mirrors k8s.io/apimachinery/pkg/util/validation and api/validation/objectmeta.go.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kubelite.api.errors import Cause

# Upstream's regular expressions (quoted in the messages below), checked as their equivalent character class plus
# edge rules: one pass without backtracking, so a name of megabytes costs milliseconds, not a second.
_LABEL_CHARS = re.compile(r"[-a-z0-9]+")
_SUBDOMAIN_CHARS = re.compile(r"[-.a-z0-9]+")
_NAME_CHARS = re.compile(r"[-_.A-Za-z0-9]+")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _edges_alnum(value: str) -> bool:
    return value[0] in _ALNUM and value[-1] in _ALNUM


def _matches_label(value: str) -> bool:
    """[a-z0-9]([-a-z0-9]*[a-z0-9])?"""
    return bool(_LABEL_CHARS.fullmatch(value)) and _edges_alnum(value)


def _matches_dns1035(value: str) -> bool:
    """[a-z]([-a-z0-9]*[a-z0-9])?: a label starting with a letter."""
    return _matches_label(value) and value[0].isalpha()


def _matches_subdomain(value: str) -> bool:
    """[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*: labels joined by dots."""
    return bool(_SUBDOMAIN_CHARS.fullmatch(value)) and _edges_alnum(value) and \
        ".." not in value and ".-" not in value and "-." not in value


def _matches_name(value: str) -> bool:
    """([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"""
    return bool(_NAME_CHARS.fullmatch(value)) and _edges_alnum(value)

DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                     "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
                     "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                     "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                     "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                         "'-' or '.', and must start and end with an alphanumeric character (e.g. "
                         "'example.com', regex used for validation is "
                         "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")

Path = str
NameValidator = Callable[[str], list[str]]


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _matches_label(value):
        errs.append(DNS1123_LABEL_MSG)
    return errs


def is_dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label: a Service's name (it becomes a DNS label and environment variable names)."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _matches_dns1035(value):
        errs.append(DNS1035_LABEL_MSG)
    return errs


def is_path_segment_name(value: str) -> list[str]:
    """path.IsValidPathSegmentName: all an RBAC object's name must be (ValidateRBACName), and all any name must be
    to be a key (upstream's KeyFunc refuses others, whatever the kind's own validation says)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    bad = [c for c in ("/", "%") if c in value]
    return [f"may not contain '{c}'" for c in bad]


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _matches_subdomain(value):
        errs.append(DNS1123_SUBDOMAIN_MSG)
    return errs


def is_qualified_name(value: str) -> list[str]:
    """A label or annotation key: an optional DNS subdomain prefix and a name of at most 63 characters."""
    prefix, slash, name = value.rpartition("/")
    errs = []
    if slash:
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + e for e in is_dns1123_subdomain(prefix))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    elif not _matches_name(name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return errs


def is_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if value and not _matches_name(value):
        errs.append("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
                    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                    "'my_value',  or '12345', regex used for validation is "
                    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    return errs


def invalid(path: Path, value: Any, detail: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return Cause("FieldValueInvalid", f"Invalid value: {shown}: {detail}", path)


def required(path: Path, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", "Required value" + (f": {detail}" if detail else ""), path)


def forbidden(path: Path, detail: str) -> Cause:
    return Cause("FieldValueForbidden", f"Forbidden: {detail}", path)


def not_supported(path: Path, value: Any, supported: list[str]) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return Cause("FieldValueNotSupported",
                 f"Unsupported value: {shown}: supported values: " + ", ".join(f'"{s}"' for s in supported), path)


def duplicate(path: Path, value: Any) -> Cause:
    return Cause("FieldValueDuplicate", f'Duplicate value: "{value}"', path)


def immutable(path: Path) -> Cause:
    return Cause("FieldValueInvalid", "Invalid value: field is immutable", path)


def validate_labels(labels: Mapping[str, Any] | None, path: Path) -> list[Cause]:
    causes = []
    for k, v in (labels or {}).items():
        causes += [invalid(path, k, e) for e in is_qualified_name(k)]
        if not isinstance(v, str):
            causes.append(invalid(f"{path}[{k}]", v, "label values must be strings"))
            continue
        causes += [invalid(path, v, e) for e in is_label_value(v)]
    return causes


def validate_annotations(annotations: Mapping[str, Any] | None, path: Path) -> list[Cause]:
    causes = []
    total = 0
    for k, v in (annotations or {}).items():
        causes += [invalid(path, k, e) for e in is_qualified_name(k.lower())]
        total += len(k) + len(str(v))
    if total > 256 * 1024:
        causes.append(Cause("FieldValueTooLong", "Too long: must have at most 262144 bytes", path))
    return causes


def validate_object_meta(meta: Mapping[str, Any], namespaced: bool, name_fn: NameValidator) -> list[Cause]:
    causes: list[Cause] = []
    name = meta.get("name", "")
    if not name:
        causes.append(required("metadata.name", "name or generateName is required"))
    else:
        causes += [invalid("metadata.name", name, e) for e in name_fn(name)]
    ns = meta.get("namespace", "")
    if namespaced:
        if not ns:
            causes.append(required("metadata.namespace"))
        else:
            causes += [invalid("metadata.namespace", ns, e) for e in is_dns1123_label(ns)]
    elif ns:
        causes.append(forbidden("metadata.namespace", "not allowed on this type"))
    causes += validate_labels(meta.get("labels"), "metadata.labels")
    causes += validate_annotations(meta.get("annotations"), "metadata.annotations")
    for i, f in enumerate(meta.get("finalizers") or []):
        if not isinstance(f, str) or is_qualified_name(f):
            causes.append(invalid(f"metadata.finalizers[{i}]", f, "name is neither a standard finalizer name "
                                                                  "nor is it fully qualified"))
    return causes
