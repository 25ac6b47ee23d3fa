"""Name, label and metadata validation, with upstream's messages.

Mirrors k8s.io/apimachinery/pkg/util/validation and api/validation/objectmeta.go.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
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


_QUALIFIED_NAME_REGEX_ERROR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def is_qualified_name(value: str) -> list[str]:
    """IsQualifiedName: a label or annotation key, an optional DNS subdomain prefix and '/', then a name of at
    most 63 characters. As upstream, an empty or overlong name also fails the pattern (both are said), and a
    value with more than one '/' gets the one message that says the whole form."""
    parts = value.split("/")
    if len(parts) > 2:
        return [f"a qualified name {_QUALIFIED_NAME_REGEX_ERROR} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    errs = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + e for e in is_dns1123_subdomain(prefix))
    name = parts[-1]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _matches_name(name):
        errs.append("name part " + _QUALIFIED_NAME_REGEX_ERROR)
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


@dataclass(frozen=True)
class GoType:
    """The Go type of a value a field error holds, for printing it as upstream does (`%#v`) where the JSON value
    alone does not say: a struct's name and fields (in declaration order, absent ones printed as zero values)."""

    name: str  # as %#v prints it: "string", "map[string]string", "[]string", "v1.LabelSelector"
    fields: tuple[tuple[str, str, GoType], ...] = ()  # a struct's (JSON name, Go name, type)
    element: GoType | None = None  # a slice's


_STRING = GoType("string")
STRINGS = GoType("[]string", element=_STRING)
_STRING_MAP = GoType("map[string]string")
_REQUIREMENT = GoType("v1.LabelSelectorRequirement", (("key", "Key", _STRING), ("operator", "Operator", _STRING),
                                                      ("values", "Values", STRINGS)))
LABEL_SELECTOR = GoType("v1.LabelSelector", (
    ("matchLabels", "MatchLabels", _STRING_MAP),
    ("matchExpressions", "MatchExpressions", GoType("[]v1.LabelSelectorRequirement", element=_REQUIREMENT))))


def go_quote(value: str) -> str:
    """strconv.Quote, as %q: JSON's escapes are Go's for the characters that occur in names and values."""
    return json.dumps(value, ensure_ascii=False)


def _go_float(value: float) -> str:
    """%v of a float64: the shortest digits, in %e form when the exponent is below -4 or at least 6 (as %g)."""
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[repr(value)]
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text, point = "".join(map(str, digits)), len(digits) + exponent  # value = 0.<text> x 10^point
    if value == 0:
        return "-0" if sign else "0"
    exp = point - 1
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    return format(Decimal(repr(value)).normalize(), "f")


def go_value(value: Any, go_type: GoType | None = None) -> str:
    """A bad value as upstream's field.Error prints it (ErrorBody): strings quoted, numbers and booleans as Go's
    %v, null as `null`, other values as %#v — maps of strings as `map[string]string{"k":"v"}`, lists of strings
    as `[]string{"a", "b"}`, a struct of a known `go_type` as `v1.LabelSelector{MatchLabels:...}`. A struct whose
    Go type is not given is shown as its JSON (upstream would print its Go type and fields)."""
    if go_type is not None:
        return _typed(value, go_type)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return _typed(value, _STRING_MAP)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return _typed(value, STRINGS)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _typed(value: Any, t: GoType) -> str:
    if t.fields:
        obj = value if isinstance(value, dict) else {}
        return t.name + "{" + ", ".join(f"{go}:{_typed(obj.get(js), ft)}" for js, go, ft in t.fields) + "}"
    if t.element is not None or t.name.startswith("map["):
        if value is None:
            return f"{t.name}(nil)"
        if t.element is not None and isinstance(value, list):
            return t.name + "{" + ", ".join(_typed(e, t.element) for e in value) + "}"
        if t.element is None and isinstance(value, dict):
            return t.name + "{" + ", ".join(f"{go_quote(str(k))}:{go_value(v)}" for k, v in sorted(value.items())) \
                + "}"
    if t is _STRING:
        return go_quote(value) if isinstance(value, str) else '""' if value is None else go_value(value)
    return go_value(value)


def invalid(path: Path, value: Any, detail: str, go_type: GoType | None = None) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {go_value(value, go_type)}: {detail}", path)


def required(path: Path, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", "Required value" + (f": {detail}" if detail else ""), path)


def forbidden(path: Path, detail: str) -> Cause:
    return Cause("FieldValueForbidden", f"Forbidden: {detail}", path)


def not_supported(path: Path, value: Any, supported: list[str]) -> Cause:
    return Cause("FieldValueNotSupported",
                 f"Unsupported value: {go_value(value)}: supported values: " + ", ".join(f'"{s}"' for s in supported),
                 path)


def duplicate(path: Path, value: Any) -> Cause:
    return Cause("FieldValueDuplicate", f"Duplicate value: {go_value(value)}", path)


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


def validate_label_selector(selector: Mapping[str, Any], path: Path) -> list[Cause]:
    """ValidateLabelSelector: matchLabels as labels; each requirement a qualified key, a known operator, values
    for In/NotIn only, each a label value."""
    causes = validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")
    expressions = selector.get("matchExpressions") or []
    for i, req in enumerate(expressions if isinstance(expressions, list) else []):
        req, at = req if isinstance(req, Mapping) else {}, f"{path}.matchExpressions[{i}]"
        values, operator = req.get("values") or [], req.get("operator")
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(forbidden(f"{at}.values",
                                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            causes.append(invalid(f"{at}.operator", operator, "not a valid selector operator"))
        key = req.get("key")
        causes += [invalid(f"{at}.key", key, e) for e in is_qualified_name(key if isinstance(key, str) else "")]
        for j, value in enumerate(values if isinstance(values, list) else []):
            causes += [invalid(f"{at}.values[{j}]", value, e) for e in is_label_value(str(value))]
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
    """ValidateObjectMetaAccessor. generateName is checked as a prefix (its trailing dash masked, as the name
    functions' `prefix` does): a bad one is reported on metadata.generateName as well as on the name made of it."""
    causes: list[Cause] = []
    generate = meta.get("generateName") or ""
    if generate:
        # maskTrailingDash as written upstream: it drops two characters, not one ("a-.-" passes as "a-a")
        masked = generate[:-2] + "a" if len(generate) > 1 and generate.endswith("-") else generate
        causes += [invalid("metadata.generateName", generate, e) for e in name_fn(masked)]
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
