"""Upstream's texts where kubelite's said less: ValidateNoNewFinalizers names the finalizers added to an object
being deleted; IsQualifiedName's messages (a key with two '/', a name both too long and malformed); and a JSON
body's duplicate field, a Warning in fieldValidation=Warn (the default), as sigs.k8s.io/json's strict errors.
Real API server on SQLite, over HTTP."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient

from kubelite.api.validation import is_qualified_name
from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
CMS = "/api/v1/namespaces/default/configmaps"
REGEX = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
         "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
         "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


async def test_new_finalizer_on_a_deleting_object_is_named(api: Client) -> None:
    await call(api, "POST", CMS, {"metadata": {"name": "c", "finalizers": ["example.com/x"]}}, expect=201)
    await call(api, "DELETE", f"{CMS}/c", expect=200)
    out = await call(api, "PATCH", f"{CMS}/c", {"metadata": {"finalizers": ["example.com/x", "example.com/y"]}},
                     "application/merge-patch+json", expect=422)
    assert out["message"] == ('ConfigMap "c" is invalid: metadata.finalizers: Forbidden: no new finalizers can be '
                              'added if the object is being deleted, found new finalizers []string{"example.com/y"}')


@pytest.mark.parametrize(("key", "errors"), [
    pytest.param("a/b/c", [f"a qualified name {REGEX} with an optional DNS subdomain prefix and '/' "
                           "(e.g. 'example.com/MyName')"], id="two slashes: the whole form is said"),
    pytest.param("x/" + "_" * 64, ["name part must be no more than 63 characters", f"name part {REGEX}"],
                 id="a name both too long and malformed: both are said"),
    pytest.param("x/", ["name part must be non-empty", f"name part {REGEX}"], id="an empty name fails the pattern too"),
    pytest.param("/x", ["prefix part must be non-empty"], id="an empty prefix"),
    pytest.param("Bad_Prefix/x", ["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                                  "characters, '-' or '.', and must start and end with an alphanumeric character "
                                  "(e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                                  "(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"], id="a prefix that is no subdomain"),
    pytest.param("example.com/My.Name-1", [], id="a prefixed name"),
    pytest.param("a" * 63, [], id="a 63-character name"),
])
def test_is_qualified_name(key: str, errors: list[str]) -> None:
    assert is_qualified_name(key) == errors


async def test_qualified_name_message_over_http(api: Client) -> None:
    """`kubectl annotate cm c2 a/b/c=1`, as a patch."""
    await call(api, "POST", CMS, {"metadata": {"name": "c2"}}, expect=201)
    out = await call(api, "PATCH", f"{CMS}/c2", {"metadata": {"annotations": {"a/b/c": "1"}}},
                     "application/merge-patch+json", expect=422)
    assert out["message"] == (f'ConfigMap "c2" is invalid: metadata.annotations: Invalid value: "a/b/c": a qualified '
                              f"name {REGEX} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")


@pytest.mark.parametrize(("query", "status", "warnings"), [
    pytest.param("", 201, ['299 - "duplicate field \\"data\\""'], id="Warn by default: the duplicate is a warning"),
    pytest.param("?fieldValidation=Warn", 201, ['299 - "duplicate field \\"data\\""'], id="Warn: a warning"),
    pytest.param("?fieldValidation=Ignore", 201, [], id="Ignore: nothing said"),
    pytest.param("?fieldValidation=Strict", 400, [], id="Strict: refused"),
])
async def test_duplicate_json_field(api: Client, query: str, status: int, warnings: list[str]) -> None:
    body = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "data": {"a": "1"}, ' \
           b'"data": {"b": "2"}}'
    resp = await api.post(f"{CMS}{query}", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == status, await resp.text()
    assert resp.headers.getall("Warning", []) == warnings
    if status == 201:
        assert (await resp.json())["data"] == {"b": "2"}  # the last value wins, as Go's decoder


@pytest.mark.parametrize(("ctype", "body"), [
    pytest.param("application/merge-patch+json", b'{"data": {"a": "1"}, "data": {"b": "2"}}', id="merge patch"),
    pytest.param("application/strategic-merge-patch+json", b'{"data": {"a": "1"}, "data": {"b": "2"}}',
                 id="strategic merge patch"),
    pytest.param("application/json-patch+json", b'[{"op": "add", "path": "/data", "data": 1, "data": 2, '
                                                b'"value": {"b": "2"}}]', id="JSON patch"),
])
async def test_duplicate_field_in_a_patch_warns(api: Client, ctype: str, body: bytes) -> None:
    """The patcher's UnmarshalStrict of the patch: its duplicate fields are warnings in Warn mode too."""
    await call(api, "POST", CMS, {"metadata": {"name": "p"}}, expect=201)
    resp = await api.patch(f"{CMS}/p", data=body, headers={"Content-Type": ctype})
    assert resp.status == 200, await resp.text()
    assert resp.headers.getall("Warning", []) == ['299 - "duplicate field \\"data\\""']
    assert (await resp.json())["data"] == {"b": "2"}
