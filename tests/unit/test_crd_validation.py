"""CustomResourceDefinition validation and the structural schema's validation, pruning and defaulting of objects.

The CRD cases are upstream's by name (apiextensions-apiserver pkg/apis/apiextensions/validation/validation_test.go,
TestValidateCustomResourceDefinition), written in the v1 shape kubelite serves (a version's schema instead of
spec.validation, which v1 no longer has; v1beta1's spec.version is left out): each lists the fields and error types
upstream's case expects. Pruning's and defaulting's cases are upstream's TestPrune and TestDefault by name
(pkg/apiserver/schema/pruning and defaulting, algorithm_test.go); the object validation cases follow
kube-openapi's messages as kube-apiserver reports them.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from kubelite.apiserver.customresources import definitions, schema

Obj = dict[str, Any]
OBJECT = {"type": "object"}


def crd(versions: list[Obj] | None = None, name: str = "plural.group.com", group: str = "group.com",
        scope: str = "Cluster", names: Obj | None = None, stored: list[str] | None = None,
        accepted: Obj | None = None, **spec: Any) -> Obj:
    out: Obj = {"metadata": {"name": name}, "spec": {
        "group": group, "scope": scope,
        "names": names if names is not None else {"plural": "plural", "singular": "singular", "kind": "Plural",
                                                  "listKind": "PluralList"},
        "versions": versions if versions is not None else [version()],
        "conversion": {"strategy": "None"}, **spec},
        "status": {"storedVersions": stored if stored is not None else ["version"]}}
    if accepted is not None:
        out["status"]["acceptedNames"] = accepted
    return out


def version(name: str = "version", storage: bool = True, openapi: Any = OBJECT, **extra: Any) -> Obj:
    out = {"name": name, "served": True, "storage": storage, **extra}
    if openapi is not None:
        out["schema"] = {"openAPIV3Schema": openapi}
    return out


def nested(levels: int) -> Obj:
    """An object schema `levels` levels of `properties` deep: 1 + 2 * levels JSON levels."""
    out: Obj = {"type": "object"}
    for _ in range(levels):
        out = {"type": "object", "properties": {"a": out}}
    return out


SCHEMA = "spec.versions[0].schema.openAPIV3Schema"
BAD = {"plural": "pl()*ural", "singular": "value()*a", "kind": "value()*a", "listKind": "value()*a"}
MATCHING = {"plural": "plural", "singular": "singular", "kind": "matching", "listKind": "matching"}

# (upstream's name, CRD, the (field, reason) of each error upstream expects)
CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("invalid types disallowed",
     crd([version(openapi={"type": "object", "properties": {"foo": {"type": "bogus"}}})]),
     [(f"{SCHEMA}.properties[foo].type", "FieldValueNotSupported")]),
    ("no_storage_version", crd([version(storage=False), version("version2", storage=False)]),
     [("spec.versions", "FieldValueInvalid")]),
    ("multiple_storage_version", crd([version(), version("version2")]),
     [("spec.versions", "FieldValueInvalid"), ("status.storedVersions", "FieldValueInvalid")]),
    ("missing_storage_version_in_stored_versions", crd([version(storage=False), version("version2")]),
     [("status.storedVersions", "FieldValueInvalid")]),
    ("empty_stored_version", crd(stored=[]), [("status.storedVersions", "FieldValueInvalid")]),
    ("mismatched name", crd([], name="plural.not.group.com", scope="", names={"plural": "plural"}, stored=[]),
     [("metadata.name", "FieldValueInvalid"), ("spec.scope", "FieldValueRequired"),
      ("spec.versions", "FieldValueInvalid"), ("spec.names.singular", "FieldValueRequired"),
      ("spec.names.kind", "FieldValueRequired"), ("spec.names.listKind", "FieldValueRequired"),
      ("status.storedVersions", "FieldValueInvalid")]),
    ("missing values", {"metadata": {"name": "plural.group.com"}},
     [("metadata.name", "FieldValueInvalid"), ("spec.group", "FieldValueRequired"),
      ("spec.scope", "FieldValueRequired"), ("spec.versions", "FieldValueInvalid"),
      ("spec.names.plural", "FieldValueRequired"), ("spec.names.singular", "FieldValueRequired"),
      ("spec.names.kind", "FieldValueRequired"), ("spec.names.listKind", "FieldValueRequired"),
      ("status.storedVersions", "FieldValueInvalid")]),
    ("bad names 01", crd([], name="plural.group", group="group", scope="foo", names=dict(BAD), stored=[],
                         accepted=dict(BAD)),
     [("metadata.name", "FieldValueInvalid"), ("spec.group", "FieldValueInvalid"),
      ("spec.scope", "FieldValueNotSupported"), ("spec.versions", "FieldValueInvalid"),
      ("spec.names.plural", "FieldValueInvalid"), ("spec.names.singular", "FieldValueInvalid"),
      ("spec.names.kind", "FieldValueInvalid"), ("spec.names.listKind", "FieldValueInvalid"),
      ("spec.names.listKind", "FieldValueInvalid"), ("status.acceptedNames.plural", "FieldValueInvalid"),
      ("status.acceptedNames.singular", "FieldValueInvalid"), ("status.acceptedNames.kind", "FieldValueInvalid"),
      ("status.acceptedNames.listKind", "FieldValueInvalid"), ("status.acceptedNames.listKind", "FieldValueInvalid"),
      ("status.storedVersions", "FieldValueInvalid")]),
    ("bad names 02", crd(name="plural.group", group="group.c(*&om", scope="", names=dict(MATCHING),
                         accepted=dict(MATCHING)),
     [("metadata.name", "FieldValueInvalid"), ("spec.group", "FieldValueInvalid"),
      ("spec.scope", "FieldValueRequired"), ("spec.names.listKind", "FieldValueInvalid"),
      ("status.acceptedNames.listKind", "FieldValueInvalid")]),
    ("additionalProperties and properties forbidden",
     crd([version(openapi={"type": "object", "properties": {"foo": {
         "type": "object", "properties": {"bar": OBJECT}, "additionalProperties": False}}})]),
     [(f"{SCHEMA}.properties[foo].additionalProperties", "FieldValueForbidden")]),
    ("additionalProperties without properties allowed (map[string]string)",
     crd([version(openapi={"type": "object", "properties": {"foo": {
         "type": "object", "additionalProperties": {"type": "string"}}}})]), []),
    ("x-kubernetes-preserve-unknown-field: false",
     crd([version(openapi={"x-kubernetes-preserve-unknown-fields": False})]),
     [(f"{SCHEMA}.x-kubernetes-preserve-unknown-fields", "FieldValueInvalid")]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), CASES, ids=[c[0] for c in CASES])
def test_validate_custom_resource_definition(name: str, obj: Obj, expected: list[tuple[str, str]]) -> None:
    got = sorted((c.field, c.reason) for c in definitions.validate(obj))
    assert got == sorted(expected)


# kubelite's v1 rules beyond the cases above, each with upstream's message
V1_CASES: list[tuple[str, Obj, list[str]]] = [
    ("a version without a schema (v1 requires one)", crd([version(openapi=None)]),
     [f"{SCHEMA}: Required value: schemas are required"]),
    ("a root without type", crd([version(openapi={"properties": {"spec": OBJECT}})]),
     [f"{SCHEMA}.type: Required value: must not be empty at the root"]),
    ("a field without type", crd([version(openapi={"type": "object", "properties": {"spec": {}}})]),
     [f"{SCHEMA}.properties[spec].type: Required value: must not be empty for specified object fields"]),
    ("array items without type", crd([version(openapi={"type": "object", "properties": {
        "xs": {"type": "array", "items": {}}}})]),
     [f"{SCHEMA}.properties[xs].items.type: Required value: must not be empty for specified array items"]),
    ("preserve-unknown-fields needs no type", crd([version(openapi={"type": "object", "properties": {
        "free": {"x-kubernetes-preserve-unknown-fields": True}}})]), []),
    ("int-or-string must have no type", crd([version(openapi={"type": "object", "properties": {
        "port": {"type": "string", "x-kubernetes-int-or-string": True}}})]),
     [f'{SCHEMA}.properties[port].type: Invalid value: "string": must be empty if x-kubernetes-int-or-string '
      "is true"]),
    ("metadata beyond name and generateName", crd([version(openapi={"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"labels": OBJECT}}}})]),
     [f"{SCHEMA}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, "
      "but metadata is implicitly specified"]),
    ("uniqueItems", crd([version(openapi={"type": "object", "properties": {
        "xs": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}})]),
     [f"{SCHEMA}.properties[xs].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime "
      "complexity becomes quadratic"]),
    ("a group without a dot", crd(name="plural.group", group="group"),
     ['spec.group: Invalid value: "group": should be a domain with at least one dot']),
    ("a protected group without approval", crd(name="plural.x.k8s.io", group="x.k8s.io"),
     ['metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval '
      'annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111']),
    ("a printer column of an unknown type", crd([version(additionalPrinterColumns=[
        {"name": "X", "type": "map", "jsonPath": ".spec.x"}])]),
     ['spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: "map": supported values: '
      '"boolean", "date", "integer", "number", "string"']),
    ("a pattern in RE2's syntax only is accepted", crd([version(openapi={"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^\\p{L}+$"}}})]), []),
    ("a pattern RE2 cannot compile", crd([version(openapi={"type": "object", "properties": {
        "name": {"type": "string", "pattern": "(abc"}}})]),
     [f'{SCHEMA}.properties[name].pattern: Invalid value: "(abc": must be a valid regular expression, but '
      "isn't: error parsing regexp: missing ): (abc"]),
    ("a schema nested deeper than the bound", crd([version(openapi=nested(64))]),
     [f"{SCHEMA}: Forbidden: must not be nested more than 128 levels deep"]),
    ("a schema nested as deep as the bound", crd([version(openapi=nested(63))]), []),
    ("a default of the wrong type", crd([version(openapi={"type": "object", "properties": {
        "count": {"type": "integer", "default": "notanint"}}})]),
     [f'{SCHEMA}.properties[count].default: Invalid value: "string": {SCHEMA}.properties[count].default in body '
      'must be of type integer: "string"']),
    ("a default breaking its nested schema", crd([version(openapi={"type": "object", "properties": {
        "spec": {"type": "object", "default": {"size": 0},
                 "properties": {"size": {"type": "integer", "minimum": 1}}}}})]),
     [f"{SCHEMA}.properties[spec].default.size: Invalid value: 0: {SCHEMA}.properties[spec].default.size in body "
      "should be greater than or equal to 1"]),
    ("a default with unknown fields", crd([version(openapi={"type": "object", "properties": {
        "spec": {"type": "object", "default": {"x": 1}, "properties": {"y": {"type": "integer"}}}}})]),
     [f'{SCHEMA}.properties[spec].default: Invalid value: {{"x":1}}: must not have '
      "unknown fields"]),
    ("defaults in items and maps are checked", crd([version(openapi={"type": "object", "properties": {
        "xs": {"type": "array", "items": {"type": "string", "default": "a", "enum": ["b"]}},
        "m": {"type": "object", "additionalProperties": {"type": "integer", "default": 3, "maximum": 2}}}})]),
     [f'{SCHEMA}.properties[xs].items.default: Unsupported value: "a": supported values: "b"',
      f"{SCHEMA}.properties[m].additionalProperties.default: Invalid value: 3: "
      f"{SCHEMA}.properties[m].additionalProperties.default in body should be less than or equal to 2"]),
    ("webhook conversion of several versions", crd([version(), version("version2", storage=False)],
                                                   conversion={"strategy": "Webhook"}),
     ["spec.conversion.strategy: Forbidden: kubelite does not call conversion webhooks: versions are converted "
      "with strategy None only"]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), V1_CASES, ids=[c[0] for c in V1_CASES])
def test_v1_rules(name: str, obj: Obj, expected: list[str]) -> None:
    assert [f"{c.field}: {c.message}" for c in definitions.validate(obj)] == expected


def test_update_keeps_group_plural_and_once_established_scope_and_kind() -> None:
    old = crd()
    old["status"]["conditions"] = [{"type": "Established", "status": "True"}]
    new = copy.deepcopy(old)
    new["spec"]["scope"] = "Namespaced"
    new["spec"]["names"]["kind"] = "Other"
    new["spec"]["group"] = "other.com"
    immutable = "Invalid value: field is immutable"
    fields = [c.field for c in definitions.validate_update(new, old) if c.message == immutable]
    assert fields == ["spec.group", "spec.scope", "spec.names.kind"]


def test_defaults_singular_list_kind_and_conversion() -> None:
    obj = {"spec": {"names": {"plural": "widgets", "kind": "Widget"}}}
    definitions.set_defaults(obj)
    assert obj["spec"] == {"names": {"plural": "widgets", "kind": "Widget", "singular": "widget",
                                     "listKind": "WidgetList"}, "conversion": {"strategy": "None"}}


# --- objects -------------------------------------------------------------------------------------------------------

WIDGET = {"type": "object", "properties": {
    "spec": {"type": "object", "required": ["size"], "properties": {
        "size": {"type": "string", "enum": ["S", "M"]},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "format": "int32"},
        "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "port": {"x-kubernetes-int-or-string": True},
        "note": {"type": "string", "nullable": True},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0}}}}}

OBJECT_CASES: list[tuple[str, Obj, list[str]]] = [
    ("valid", {"size": "S", "replicas": 3, "name": "abc", "tags": ["a"], "labels": {"a": "b"}, "port": "http",
               "note": None, "free": {"x": [1]}, "ratio": 0.5}, []),
    ("wrong type", {"size": "S", "replicas": "x"},
     ['spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"']),
    ("required", {}, ["spec.size: Required value"]),
    ("enum", {"size": "XL"}, ['spec.size: Unsupported value: "XL": supported values: "S", "M"']),
    ("minimum and maximum", {"size": "S", "replicas": 0},
     ["spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"]),
    ("maximum", {"size": "S", "replicas": 11},
     ["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"]),
    ("exclusive minimum", {"size": "S", "ratio": 0},
     ["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]),
    ("lengths and pattern", {"size": "S", "name": "toolong"},
     ["spec.name: Too long: may not be more than 5 bytes"]),
    ("pattern", {"size": "S", "name": "AB"}, ["spec.name: Invalid value: \"AB\": spec.name in body should match "
                                             "'^[a-z]+$'"]),
    ("min length", {"size": "S", "name": ""},
     ['spec.name: Invalid value: "": spec.name in body should be at least 1 chars long',
      "spec.name: Invalid value: \"\": spec.name in body should match '^[a-z]+$'"]),
    ("items", {"size": "S", "tags": ["a", 1, "c"]},
     ["spec.tags: Too many: 3: must have at most 2 items",
      'spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: "integer"']),
    ("min items", {"size": "S", "tags": []}, ["spec.tags: Invalid value: 0: spec.tags in body should have at "
                                              "least 1 items"]),
    ("additionalProperties", {"size": "S", "labels": {"a": 1}},
     ['spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer"']),
    ("int-or-string", {"size": "S", "port": True},
     ['spec.port: Invalid value: "boolean": spec.port in body must be of type integer/string: "boolean"']),
    ("not nullable", {"size": None},
     ['spec.size: Invalid value: "null": spec.size in body must be of type string: "null"']),
]


@pytest.mark.parametrize(("name", "spec", "expected"), OBJECT_CASES, ids=[c[0] for c in OBJECT_CASES])
def test_validate_object(name: str, spec: Obj, expected: list[str]) -> None:
    assert [f"{c.field}: {c.message}" for c in schema.validate({"spec": spec}, WIDGET)] == expected


def test_a_pattern_in_re2_syntax_only_is_enforced() -> None:
    s = {"type": "object", "properties": {"n": {"type": "string", "pattern": "^\\p{L}+$"}}}
    assert schema.validate({"n": "ünïcode"}, s) == []
    assert [c.message for c in schema.validate({"n": "123"}, s)] == \
        ['Invalid value: "123": n in body should match \'^\\p{L}+$\'']


def test_a_backtracking_pattern_runs_in_linear_time() -> None:
    """Python's re takes minutes on this (and blocks the server's event loop meanwhile); RE2 microseconds."""
    s = {"type": "object", "properties": {"n": {"type": "string", "pattern": "^(a+)+$"}}}
    started = time.perf_counter()
    causes = schema.validate({"n": "a" * 30 + "!"}, s)
    assert time.perf_counter() - started < 0.5
    assert [c.message for c in causes] == ["Invalid value: \"" + "a" * 30 + "!\": n in body should match '^(a+)+$'"]


MULTIPLE_OF_CASES: list[tuple[str, float, float, bool]] = [
    ("a decimal multiple of a factor below 1", 0.3, 0.1, True),
    ("a decimal that is not a multiple", 0.35, 0.1, False),
    ("an integer multiple", 12, 4, True),
    ("an integer that is not a multiple", 13, 4, False),
    ("a float multiple of an integer factor", 7.5, 2.5, True),
    ("an integer too large for a float64", 10**400, 3, False),
    ("a multiple beyond a JSON integer", 2.0**60, 0.5, False),
    ("an integer factor too large for a float64 (infinite, as Go holds it)", 3, 10**400, True),
]


@pytest.mark.parametrize(("name", "value", "factor", "ok"), MULTIPLE_OF_CASES, ids=[c[0] for c in MULTIPLE_OF_CASES])
def test_multiple_of_as_go_openapi(name: str, value: float, factor: float, ok: bool) -> None:
    s = {"type": "object", "properties": {"n": {"type": "number", "multipleOf": factor}}}
    causes = schema.validate({"n": value}, s)
    assert causes == [] if ok else [c.message.endswith(f"should be a multiple of {factor}") for c in causes] == [True]


def test_int32_format_bounds() -> None:
    s = {"type": "object", "properties": {"n": {"type": "integer", "format": "int32"}}}
    assert [c.message for c in schema.validate({"n": 2**31}, s)] == \
        ['Invalid value: 2147483648: n in body must be of type int32: "2147483648"']


OBJ: Obj = {"type": "object"}
PRESERVE: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
EMBEDDED_IN = {"apiVersion": "foo/v1", "kind": "Foo", "unspecified": "bar",
               "metadata": {"name": "instance", "unspecified": "bar"}, "spec": {"unspecified": "bar"}}
EMBEDDED_OUT = {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance", "unspecified": "bar"},
                "spec": {}}
EMBEDDED_SCHEMA: Obj = {"type": "object", "properties": {
    "pruned": {**OBJ, "x-kubernetes-embedded-resource": True, "properties": {"spec": OBJ}},
    "preserving": {**PRESERVE, "x-kubernetes-embedded-resource": True},
    "nested": {**OBJ, "x-kubernetes-embedded-resource": True, "properties": {"spec": {**OBJ, "properties": {
        "embedded": {**OBJ, "x-kubernetes-embedded-resource": True, "properties": {"spec": OBJ}}}}}}}}

# upstream's TestPrune (pkg/apiserver/schema/pruning/algorithm_test.go) by name, each pruned as a resource's root
# (`prune` always prunes a whole custom resource): its cases' objects sit under a root property here
PRUNE_CASES: list[tuple[str, Obj, Any, Any]] = [
    ("object array", {"items": {"properties": {"a": {}, "c": {}}}},
     [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}], [{"a": 1}, {}, {"a": 1, "c": 3}]),
    ("object array with nil schema", {"type": "array"},  # items without a schema
     [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}], [{}, {}, {}]),
    ("object array object", {"properties": {"array": {"items": {"properties": {"a": {}, "c": {}}}},
                                            "specified": {"properties": {"a": {}, "c": {}}}}},
     {"array": [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}], "unspecified": {"a": 1},
      "specified": {"a": 1, "b": 2, "c": 3}},
     {"array": [{"a": 1}, {}, {"a": 1, "c": 3}], "specified": {"a": 1, "c": 3}}),
    ("nested x-kubernetes-preserve-unknown-fields",
     {**PRESERVE, "properties": {
         "alpha": {"type": "string"}, "beta": {"type": "number"},
         "pruning": {**OBJ, "properties": {"preserving": PRESERVE, "pruning": OBJ}},
         "preserving": {**PRESERVE, "properties": {"preserving": PRESERVE, "pruning": OBJ}},
         "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
             **PRESERVE, "additionalProperties": {**OBJ, "properties": {"specified": OBJ}}},
         "preservingAdditionalPropertiesKeyPruneValues": {
             **OBJ, "additionalProperties": {**OBJ, "properties": {"specified": OBJ}}}}},
     {"unspecified": "bar", "alpha": "abc", "beta": 42.0, "unspecifiedObject": {"unspecified": "bar"},
      "pruning": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"}, "pruning": {"unspecified": "bar"},
                  "preserving": {"unspecified": "bar"}},
      "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                     "pruning": {"unspecified": "bar"}, "preserving": {"unspecified": "bar"}},
      "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
          "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}},
      "preservingAdditionalPropertiesKeyPruneValues": {
          "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}}},
     {"unspecified": "bar", "alpha": "abc", "beta": 42.0, "unspecifiedObject": {"unspecified": "bar"},
      "pruning": {"pruning": {}, "preserving": {"unspecified": "bar"}},
      "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"}, "pruning": {},
                     "preserving": {"unspecified": "bar"}},
      "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {"foo": {"specified": {}}},
      "preservingAdditionalPropertiesKeyPruneValues": {"foo": {"specified": {}}}}),
    ("additionalProperties with schema",
     {"properties": {"a": {}, "c": {"additionalProperties": {"type": "integer"}}}},
     {"a": 1, "b": 1, "c": {"a": 1, "b": 2, "c": {"a": 1}}}, {"a": 1, "c": {"a": 1, "b": 2, "c": {}}}),
    ("additionalProperties with bool",
     {"properties": {"a": {}, "c": {"additionalProperties": False}}},
     {"a": 1, "b": 1, "c": {"a": 1, "b": 2, "c": {"a": 1}}}, {"a": 1, "c": {"a": 1, "b": 2, "c": {}}}),
    ("x-kubernetes-embedded-resource", EMBEDDED_SCHEMA,
     {"unspecified": "bar", "pruned": copy.deepcopy(EMBEDDED_IN), "preserving": copy.deepcopy(EMBEDDED_IN),
      "nested": {**copy.deepcopy(EMBEDDED_IN),
                 "spec": {"unspecified": "bar", "embedded": copy.deepcopy(EMBEDDED_IN)}}},
     {"pruned": EMBEDDED_OUT, "preserving": EMBEDDED_IN,
      "nested": {**EMBEDDED_OUT, "spec": {"embedded": EMBEDDED_OUT}}}),
]


@pytest.mark.parametrize(("name", "s", "value", "expected"), PRUNE_CASES, ids=[c[0] for c in PRUNE_CASES])
def test_prune(name: str, s: Obj, value: Any, expected: Any) -> None:
    obj = {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance", "unspecified": "bar"},
           "x": copy.deepcopy(value)}
    schema.prune(obj, {"type": "object", "properties": {"x": s}})
    assert obj == {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance", "unspecified": "bar"},
                   "x": expected}


def test_prune_reports_the_paths_it_drops() -> None:
    obj = {"spec": {"a": 1, "b": {"c": 2}}, "extra": [1], "xs": [{"k": 1, "j": 2}]}
    s = {"type": "object", "properties": {"spec": {**OBJ, "properties": {"a": {"type": "integer"}}},
                                          "xs": {"type": "array", "items": {**OBJ, "properties": {"k": OBJ}}}}}
    assert schema.prune(obj, s) == ["spec.b", "extra", "xs[0].j"]


def defaulted(value: Any) -> Obj:
    return {"default": value}


# upstream's TestDefault (pkg/apiserver/schema/defaulting/algorithm_test.go) by name
DEFAULT_CASES: list[tuple[str, Obj, Any, Any]] = [
    ("scalar", defaulted("foo"), 4, 4),
    ("scalar array", {"items": defaulted("foo")}, [1, 2], [1, 2]),
    ("object array", {"items": {"properties": {"a": defaulted("A"), "b": defaulted("B"), "c": defaulted("C")}}},
     [{"a": 1}, {"b": 1}, {"c": 1}],
     [{"a": 1, "b": "B", "c": "C"}, {"a": "A", "b": 1, "c": "C"}, {"a": "A", "b": "B", "c": 1}]),
    ("object array object",
     {"properties": {"array": {"items": {"properties": {"a": defaulted("A"), "b": defaulted("B")}}},
                     "object": {"properties": {"a": defaulted("N"), "b": defaulted("O")}},
                     "additionalProperties": {"additionalProperties": {"properties": {
                         "a": defaulted("alpha"), "b": defaulted("beta")}}},
                     "foo": defaulted("bar")}},
     {"array": [{"a": 1}, {"b": 2}], "object": {"a": 1}, "additionalProperties": {"x": {"a": 1}, "y": {"b": 2}}},
     {"array": [{"a": 1, "b": "B"}, {"a": "A", "b": 2}], "object": {"a": 1, "b": "O"},
      "additionalProperties": {"x": {"a": 1, "b": "beta"}, "y": {"a": "alpha", "b": 2}}, "foo": "bar"}),
    ("empty and null", {"items": {"properties": {"a": defaulted("A")}}},
     [{}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": None}, {"a": []}, {"a": {}}],
     [{"a": "A"}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": "A"}, {"a": []}, {"a": {}}]),
    ("null in nullable list", {"nullable": True, "items": {"properties": {"a": defaulted("A")}}}, [None], [None]),
    ("null in non-nullable list", {"items": defaulted("A")}, [None], ["A"]),
    ("null in nullable object", {"properties": {"a": {"nullable": True, "default": "A"}}}, {"a": None}, {"a": None}),
    ("null in non-nullable object", {"properties": {"a": defaulted("A")}}, {"a": None}, {"a": "A"}),
    ("null in nullable object with additionalProperties",
     {"additionalProperties": {"nullable": True, "default": "A"}}, {"a": None}, {"a": None}),
    ("null in non-nullable object with additionalProperties", {"additionalProperties": defaulted("A")},
     {"a": None}, {"a": "A"}),
    ("null unknown field", {"additionalProperties": True}, {"a": None}, {"a": None}),
]


@pytest.mark.parametrize(("name", "s", "value", "expected"), DEFAULT_CASES, ids=[c[0] for c in DEFAULT_CASES])
def test_default(name: str, s: Obj, value: Any, expected: Any) -> None:
    """Each case's value under a root property (`default` defaults a whole custom resource)."""
    obj = {"x": copy.deepcopy(value)}
    schema.default(obj, {"type": "object", "properties": {"x": s}})
    assert obj == {"x": expected}


def test_a_defaulted_object_is_defaulted_inside() -> None:
    obj: Obj = {}
    schema.default(obj, {"type": "object", "properties": {"spec": {
        "type": "object", "default": {}, "properties": {"replicas": {"type": "integer", "default": 1}}}}})
    assert obj == {"spec": {"replicas": 1}}


def test_defaulted_copies_what_it_changes_and_shares_the_rest() -> None:
    """A read defaults the watch cache's objects: never in place."""
    s = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "integer", "default": 1}}}, "other": {"type": "object"}}}
    cached: Obj = {"spec": {}, "other": {"x": 1}}
    out = schema.defaulted(cached, s)
    assert out == {"spec": {"a": 1}, "other": {"x": 1}} and cached == {"spec": {}, "other": {"x": 1}}
    assert out["other"] is cached["other"]
    assert schema.defaulted(out, s) is out  # nothing missing: the object itself
