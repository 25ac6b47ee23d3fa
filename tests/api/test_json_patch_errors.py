"""A JSON patch that cannot apply, as endpoints/handlers/patch.go answers it: a patch that does not decode
(DecodePatch: not a list of objects) is 400 BadRequest with the decoder's text; an operation that fails in
patchObj.Apply (an unknown op, a failed `test`, a missing path) is NewGenericServerResponse(422): reason Invalid,
the generic message, no causes (isUnexpectedResponse false), and nothing stored. Real API server on SQLite."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kubelite.apiserver.patch import APPLY_FAILED
from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
CM = "/api/v1/namespaces/default/configmaps/c"
JSON_PATCH = "application/json-patch+json"


@pytest.mark.parametrize(("ops", "status", "reason", "message"), [
    pytest.param([{"op": "bogus", "path": "/data/k", "value": "x"}], 422, "Invalid", APPLY_FAILED,
                 id="an unknown op is 422 with the generic message"),
    pytest.param([{"op": "test", "path": "/data/k", "value": "other"}, {"op": "add", "path": "/data/n", "value": "1"}],
                 422, "Invalid", APPLY_FAILED, id="a failed test op is 422 and stops the patch"),
    pytest.param([{"op": "remove", "path": "/data/missing"}], 422, "Invalid", APPLY_FAILED,
                 id="removing a missing key is 422"),
    pytest.param([{"op": "replace", "path": "/metadata/labels/x", "value": "1"}], 422, "Invalid", APPLY_FAILED,
                 id="replacing under a missing parent is 422"),
    pytest.param([{"path": "/data/k", "value": "x"}], 422, "Invalid", APPLY_FAILED,
                 id="an operation without op is 422"),
    pytest.param(["add"], 400, "BadRequest", "invalid json patch operation: add",
                 id="an operation that is not an object does not decode: 400"),
    pytest.param({"op": "add"}, 400, "BadRequest", "json patch must be a list of operations",
                 id="a patch that is not a list does not decode: 400"),
])
async def test_json_patch_errors(api: Client, ops: Any, status: int, reason: str, message: str) -> None:
    created = await call(api, "POST", "/api/v1/namespaces/default/configmaps",
                         {"metadata": {"name": "c"}, "data": {"k": "v"}}, expect=201)
    out = await call(api, "PATCH", CM, ops, JSON_PATCH, expect=status)
    assert (out["reason"], out["message"]) == (reason, message)
    assert "causes" not in out.get("details", {})
    assert await call(api, "GET", CM, expect=200) == created  # nothing stored


async def test_json_patch_passing_test_applies(api: Client) -> None:
    await call(api, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}, "data": {"k": "v"}},
               expect=201)
    ops = [{"op": "test", "path": "/data/k", "value": "v"}, {"op": "add", "path": "/data/n", "value": "1"}]
    assert (await call(api, "PATCH", CM, ops, JSON_PATCH, expect=200))["data"] == {"k": "v", "n": "1"}
