"""core/v1 ConfigMaps and Secrets through the API: validation (TestValidateConfigMap, TestValidateSecret and
their Update forms in pkg/apis/core/validation/validation_test.go), stringData folding, Tables, field selectors."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
CMS = "/api/v1/namespaces/default/configmaps"
SECRETS = "/api/v1/namespaces/default/secrets"
MERGE = "application/merge-patch+json"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def cm(name: str = "c", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **fields}


def secret(name: str = "s", type_: str | None = None, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, **fields}
    if type_ is not None:
        body["type"] = type_
    return body


def _causes(out: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c.get("field", ""), c["message"]) for c in out["details"]["causes"]]


# TestValidateConfigMap's cases (validation_test.go), by upstream's names.
CONFIG_MAP_VALID = [
    pytest.param(cm(data={"key": "value"}), id="valid"),
    pytest.param(cm(data={".dot-leading": "v"}), id="valid leading dot key"),
    pytest.param(cm(data={"k": "x" * (1024 * 1024)}), id="valid at max size"),
    pytest.param(cm(binaryData={"bin": b64("\x00\x01")}), id="valid binaryData"),
]


@pytest.mark.parametrize("body", CONFIG_MAP_VALID)
async def test_config_map_valid(api: Client, body: dict[str, Any]) -> None:
    await call(api, "POST", CMS, body, expect=201)


CONFIG_MAP_INVALID = [
    pytest.param(cm("NoUppercase", data={"k": "v"}), "metadata.name", "RFC 1123 subdomain", id="invalid name"),
    pytest.param(cm(data={"a b": "v"}), "data[a b]", "a valid config key must consist of alphanumeric characters",
                 id="invalid key"),
    pytest.param(cm(data={".": "v"}), "data[.]", "must not be '.'", id="dot key"),
    pytest.param(cm(data={"..": "v"}), "data[..]", "must not be '..'", id="double dot key"),
    pytest.param(cm(data={"..data": "v"}), "data[..data]", "must not start with '..'", id="leading double dot key"),
    pytest.param(cm(data={"k" * 254: "v"}), f"data[{'k' * 254}]", "must be no more than 253 characters",
                 id="overMaxKeyLength"),
    pytest.param(cm(data={"k": "x" * (1024 * 1024 + 1)}), "", "Too long: may not be more than 1048576 bytes",
                 id="overMaxSize"),
    pytest.param(cm(data={"a": "x" * (600 * 1024)}, binaryData={"b": b64("y" * (600 * 1024))}), "",
                 "Too long: may not be more than 1048576 bytes", id="overMaxSize across data and binaryData"),
    pytest.param(cm(data={"k": "v"}, binaryData={"k": b64("v")}), "data[k]",
                 "duplicate of key present in binaryData", id="duplicate key"),
    pytest.param(cm(binaryData={"a b": b64("v")}), "binaryData[a b]", "a valid config key", id="invalid binary key"),
]


@pytest.mark.parametrize("body,field,message", CONFIG_MAP_INVALID)
async def test_config_map_invalid(api: Client, body: dict[str, Any], field: str, message: str) -> None:
    out = await call(api, "POST", CMS, body, expect=422)
    assert out["reason"] == "Invalid"
    assert any(f == field and message in m for f, m in _causes(out)), _causes(out)


async def test_whole_object_error_message_as_go_prints_it(api: Client) -> None:
    """The size limit's path is "" (the whole object): Go's field.Error still prints "<path>: ", so the message reads
    `is invalid: : Too long…` — what kubectl shows against a real API server."""
    out = await call(api, "POST", CMS, cm("big", data={"k": "x" * (1024 * 1024 + 1)}), expect=422)
    assert out["message"] == 'ConfigMap "big" is invalid: : Too long: may not be more than 1048576 bytes'


# TestValidateSecret's cases plus TestValidateTLSSecret / TestValidateDockerConfigSecret / basic-auth / ssh-auth.
SECRET_VALID = [
    pytest.param(secret(data={"key": b64("v")}), id="valid"),
    pytest.param(secret(data={".dot": b64("v")}), id="valid leading dot key"),
    pytest.param(secret(type_="kubernetes.io/tls", data={"tls.crt": b64("c"), "tls.key": b64("k")}), id="valid tls"),
    pytest.param(secret(type_="kubernetes.io/dockerconfigjson", data={".dockerconfigjson": b64('{"auths":{}}')}),
                 id="valid dockerconfigjson"),
    pytest.param(secret(type_="kubernetes.io/dockercfg", data={".dockercfg": b64("{}")}), id="valid dockercfg"),
    pytest.param(secret(type_="kubernetes.io/basic-auth", data={"username": b64("u")}), id="valid basic auth"),
    pytest.param(secret(type_="kubernetes.io/ssh-auth", data={"ssh-privatekey": b64("k")}), id="valid ssh auth"),
    pytest.param(secret(type_="kubernetes.io/service-account-token",
                        metadata={"name": "s", "annotations": {"kubernetes.io/service-account.name": "default"}}),
                 id="valid service-account-token"),
    pytest.param(secret(type_="bootstrap.kubernetes.io/token", data={"token-id": b64("abcdef")}),
                 id="valid bootstrap token"),
    pytest.param(secret(type_="example.com/custom", data={"x": b64("y")}), id="valid user-defined type"),
]


@pytest.mark.parametrize("body", SECRET_VALID)
async def test_secret_valid(api: Client, body: dict[str, Any]) -> None:
    out = await call(api, "POST", SECRETS, body, expect=201)
    assert out["type"] == body.get("type", "Opaque")


SECRET_INVALID = [
    pytest.param(secret("Bad_Name"), "metadata.name", "RFC 1123 subdomain", id="invalid name"),
    pytest.param(secret(data={"a/b": b64("v")}), "data[a/b]", "a valid config key", id="invalid key"),
    pytest.param(secret(data={".": b64("v")}), "data[.]", "must not be '.'", id="invalid dot key"),
    pytest.param(secret(data={"..": b64("v")}), "data[..]", "must not be '..'", id="invalid double dot key"),
    pytest.param(secret(data={"k": b64("x" * (1024 * 1024 + 1))}), "data",
                 "Too long: may not be more than 1048576 bytes", id="over max size"),
    pytest.param(secret(type_="kubernetes.io/tls", data={"tls.key": b64("k")}), "data[tls.crt]", "Required value",
                 id="missing tls.crt"),
    pytest.param(secret(type_="kubernetes.io/tls", data={"tls.crt": b64("c")}), "data[tls.key]", "Required value",
                 id="missing tls.key"),
    pytest.param(secret(type_="kubernetes.io/dockerconfigjson"), "data[.dockerconfigjson]", "Required value",
                 id="missing dockerconfigjson"),
    pytest.param(secret(type_="kubernetes.io/dockerconfigjson", data={".dockerconfigjson": b64("{not json")}),
                 "data[.dockerconfigjson]", 'Invalid value: "<secret contents redacted>": invalid character',
                 id="invalid dockerconfigjson"),
    pytest.param(secret(type_="kubernetes.io/dockercfg", data={".dockercfg": b64("")}), "data[.dockercfg]",
                 "unexpected end of JSON input", id="invalid dockercfg"),
    pytest.param(secret(type_="kubernetes.io/basic-auth", data={"other": b64("x")}), "data[username]",
                 "Required value", id="missing username or password"),
    pytest.param(secret(type_="kubernetes.io/ssh-auth", data={"ssh-privatekey": ""}), "data[ssh-privatekey]",
                 "Required value", id="missing ssh-privatekey"),
    pytest.param(secret(type_="kubernetes.io/service-account-token"),
                 "metadata.annotations[kubernetes.io/service-account.name]", "Required value",
                 id="missing service account name annotation"),
]


@pytest.mark.parametrize("body,field,message", SECRET_INVALID)
async def test_secret_invalid(api: Client, body: dict[str, Any], field: str, message: str) -> None:
    out = await call(api, "POST", SECRETS, body, expect=422)
    assert any(f == field and message in m for f, m in _causes(out)), _causes(out)


BAD_BASE64 = [
    pytest.param("abc", 0, id="incomplete quantum"),
    pytest.param("ab!d", 2, id="illegal character"),
    pytest.param("YQ=", 3, id="missing second padding"),
    pytest.param("YQ==YQ==", 4, id="data after padding"),
]


@pytest.mark.parametrize("value,offset", BAD_BASE64)
async def test_secret_data_must_be_base64(api: Client, value: str, offset: int) -> None:
    out = await call(api, "POST", SECRETS, secret(data={"k": value}), expect=400)
    assert out["message"] == ('Secret in version "v1" cannot be handled as a Secret: '
                              f"illegal base64 data at input byte {offset}")
    assert out["details"]["causes"][0]["field"] == "data[k]"


async def test_config_map_binary_data_must_be_base64(api: Client) -> None:
    out = await call(api, "POST", CMS, cm(binaryData={"b": "ab!d"}), expect=400)
    assert out["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                              "illegal base64 data at input byte 2")
    assert out["details"]["causes"][0]["field"] == "binaryData[b]"


async def test_string_data_is_folded_into_data_and_not_stored(api: Client) -> None:
    out = await call(api, "POST", SECRETS, secret(data={"a": b64("old"), "b": b64("kept")},
                                                  stringData={"a": "new", "c": "plain"}), expect=201)
    assert "stringData" not in out
    assert out["data"] == {"a": b64("new"), "b": b64("kept"), "c": b64("plain")}
    got = await call(api, "GET", f"{SECRETS}/s", expect=200)
    assert "stringData" not in got and got["data"] == out["data"]
    patched = await call(api, "PATCH", f"{SECRETS}/s", {"stringData": {"b": "changed"}}, MERGE, expect=200)
    assert patched["data"]["b"] == b64("changed") and "stringData" not in patched


# TestValidateConfigMapUpdate / TestValidateSecretUpdate: immutability and the immutable type.
IMMUTABLE_CASES = [
    pytest.param(CMS, cm(data={"k": "v"}, immutable=True), cm(data={"k": "v2"}, immutable=True), "data",
                 id="configmap: change data of immutable configmap"),
    pytest.param(CMS, cm(data={"k": "v"}, immutable=True), cm(data={"k": "v"}, immutable=False), "immutable",
                 id="configmap: make immutable configmap mutable"),
    pytest.param(CMS, cm(binaryData={"k": b64("v")}, immutable=True), cm(immutable=True), "binaryData",
                 id="configmap: remove binaryData from immutable configmap"),
    pytest.param(SECRETS, secret(data={"k": b64("v")}, immutable=True),
                 secret(data={"k": b64("v"), "k2": b64("x")}, immutable=True), "data",
                 id="secret: add data in immutable secret"),
    pytest.param(SECRETS, secret(data={"k": b64("v")}, immutable=True), secret(data={"k": b64("v")}), "immutable",
                 id="secret: make immutable secret mutable"),
    pytest.param(SECRETS, secret(data={"k": b64("v")}, immutable=True),
                 secret(stringData={"k": "changed"}, immutable=True), "data",
                 id="secret: stringData cannot change an immutable secret"),
]


@pytest.mark.parametrize("path,old,new,field", IMMUTABLE_CASES)
async def test_immutable_refuses_changes(api: Client, path: str, old: dict[str, Any], new: dict[str, Any],
                                         field: str) -> None:
    await call(api, "POST", path, old, expect=201)
    out = await call(api, "PUT", f"{path}/{old['metadata']['name']}", new, expect=422)
    assert (field, "Forbidden: field is immutable when `immutable` is set") in _causes(out)


MUTABLE_CASES = [
    pytest.param(CMS, cm(data={"k": "v"}), cm(data={"k": "v"}, immutable=True), id="configmap: make immutable"),
    pytest.param(CMS, cm(data={"k": "v"}, immutable=True),
                 cm(metadata={"name": "c", "labels": {"a": "b"}}, data={"k": "v"}, immutable=True),
                 id="configmap: labels of an immutable configmap may change"),
    pytest.param(SECRETS, secret(data={"k": b64("v")}), secret(data={"k": b64("w")}), id="secret: change data"),
]


@pytest.mark.parametrize("path,old,new", MUTABLE_CASES)
async def test_allowed_updates(api: Client, path: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    await call(api, "POST", path, old, expect=201)
    await call(api, "PUT", f"{path}/{old['metadata']['name']}", new, expect=200)


async def test_secret_type_is_immutable(api: Client) -> None:
    await call(api, "POST", SECRETS, secret(data={"tls.crt": b64("c"), "tls.key": b64("k")}), expect=201)
    out = await call(api, "PUT", f"{SECRETS}/s", secret(type_="kubernetes.io/tls",
                                                        data={"tls.crt": b64("c"), "tls.key": b64("k")}), expect=422)
    assert ("type", 'Invalid value: "kubernetes.io/tls": field is immutable') in _causes(out)
    kept = await call(api, "PUT", f"{SECRETS}/s", secret(data={"x": b64("y")}), expect=200)
    assert kept["type"] == "Opaque"  # an omitted type defaults, which is no change


async def test_tables_columns(api: Client) -> None:
    await call(api, "POST", CMS, cm(data={"a": "1", "b": "2"}, binaryData={"c": b64("3")}), expect=201)
    await call(api, "POST", SECRETS, secret(type_="kubernetes.io/tls",
                                            data={"tls.crt": b64("c"), "tls.key": b64("k")}), expect=201)
    resp = await api.get(CMS, headers={"Accept": TABLE})
    tbl = await resp.json()
    assert [c["name"] for c in tbl["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert tbl["rows"][0]["cells"][:2] == ["c", 3]
    resp = await api.get(SECRETS, headers={"Accept": TABLE})
    tbl = await resp.json()
    assert [c["name"] for c in tbl["columnDefinitions"]] == ["Name", "Type", "Data", "Age"]
    assert tbl["rows"][0]["cells"][:3] == ["s", "kubernetes.io/tls", 2]


async def test_secret_type_field_selector(api: Client) -> None:
    await call(api, "POST", SECRETS, secret("plain", data={"k": b64("v")}), expect=201)
    await call(api, "POST", SECRETS, secret("tls", type_="kubernetes.io/tls",
                                            data={"tls.crt": b64("c"), "tls.key": b64("k")}), expect=201)
    out = await call(api, "GET", f"{SECRETS}?fieldSelector=type%3Dkubernetes.io/tls", expect=200)
    assert [i["metadata"]["name"] for i in out["items"]] == ["tls"]
