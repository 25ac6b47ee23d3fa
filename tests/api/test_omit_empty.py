"""Empty omitempty fields are neither stored nor answered, as Go's encoding drops them: ObjectMeta's collections
and generateName, ConfigMap's data and binaryData, Secret's data and stringData (only those: a generic rule
needs every type's Go tags). A patch whose only change is such an empty field writes nothing. Real API server on
SQLite, over HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
NS = "/api/v1/namespaces/default"
MERGE = "application/merge-patch+json"
EMPTY_META = {"labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": [], "generateName": ""}


@pytest.mark.parametrize(("plural", "body", "dropped"), [
    pytest.param("configmaps", {"metadata": {"name": "c", **EMPTY_META}, "data": {}, "binaryData": {}},
                 ["data", "binaryData"], id="a ConfigMap's empty metadata maps, lists, data and binaryData"),
    pytest.param("secrets", {"metadata": {"name": "s", **EMPTY_META}, "data": {}, "stringData": {}},
                 ["data", "stringData"], id="a Secret's empty data and stringData"),
])
async def test_created_without_empty_fields(api: Client, plural: str, body: dict[str, Any],
                                            dropped: list[str]) -> None:
    created = await call(api, "POST", f"{NS}/{plural}", body, expect=201)
    stored = await call(api, "GET", f"{NS}/{plural}/{body['metadata']['name']}", expect=200)
    for out in (created, stored):
        assert not set(EMPTY_META) & set(out["metadata"]), out["metadata"]
        assert not set(dropped) & set(out), out


@pytest.mark.parametrize(("patch", "gone"), [
    pytest.param({"metadata": {"finalizers": []}}, "finalizers", id="a merge patch emptying finalizers drops them"),
    pytest.param({"metadata": {"ownerReferences": []}}, "ownerReferences",
                 id="emptying ownerReferences (the collector orphaning a dependent) drops them"),
    pytest.param({"metadata": {"labels": {"a": None}}}, "labels", id="removing the last label drops labels"),
    pytest.param({"data": {"k": None}}, "data", id="removing the last data key drops data"),
])
async def test_patched_to_empty_is_dropped(api: Client, patch: dict[str, Any], gone: str) -> None:
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "0000-o"}
    await call(api, "POST", f"{NS}/configmaps", {"metadata": {"name": "c", "labels": {"a": "1"},
                                                              "finalizers": ["example.com/x"],
                                                              "ownerReferences": [owner]}, "data": {"k": "v"}},
               expect=201)
    out = await call(api, "PATCH", f"{NS}/configmaps/c", patch, MERGE, expect=200)
    assert gone not in out["metadata"] and gone not in out, out


async def test_setting_only_an_empty_field_writes_nothing(api: Client) -> None:
    created = await call(api, "POST", f"{NS}/configmaps", {"metadata": {"name": "c"}}, expect=201)
    out = await call(api, "PATCH", f"{NS}/configmaps/c", {"metadata": {"labels": {}}, "data": {}}, MERGE, expect=200)
    assert out["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
