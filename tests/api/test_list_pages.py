"""A paged list's metadata.remainingItemCount (etcd3 store.go GetList): with a continue token, how many items follow
the page; not given on the last page, nor with a label or field selector (upstream counts keys, which a selector
would make inexact). Real API server on SQLite, over HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
NS = "/api/v1/namespaces/paged"
CMS = f"{NS}/configmaps"
TABLE = "application/json;as=Table;v=1;g=meta.k8s.io"


async def _seed(api: Client) -> None:
    await call(api, "POST", "/api/v1/namespaces", {"metadata": {"name": "paged"}}, expect=201)
    for i in range(5):
        await call(api, "POST", CMS, {"metadata": {"name": f"c{i}", "labels": {"n": str(i)}}}, expect=201)


async def _list(api: Client, query: str, accept: str = "application/json") -> Any:
    resp = await api.get(f"{CMS}?{query}", headers={"Accept": accept})
    assert resp.status == 200, await resp.text()
    return await resp.json()


@pytest.mark.parametrize(("pages", "accept", "remaining"), [
    pytest.param(["limit=2"], "application/json", 3, id="a first page counts the items after it"),
    pytest.param(["limit=2", "limit=2"], "application/json", 1, id="a later page counts the items after it"),
    pytest.param(["limit=2", "limit=3"], "application/json", None, id="the last page has no count"),
    pytest.param(["limit=2&labelSelector=n"], "application/json", None, id="a label selector: no count"),
    pytest.param(["limit=2&fieldSelector=metadata.name!=c9"], "application/json", None,
                 id="a field selector: no count"),
    pytest.param(["limit=2"], TABLE, 3, id="a Table page counts too"),
])
async def test_remaining_item_count(api: Client, pages: list[str], accept: str, remaining: int | None) -> None:
    await _seed(api)
    token = ""
    for query in pages:
        out = await _list(api, query + (f"&continue={token}" if token else ""), accept)
        token = out["metadata"].get("continue", "")
    assert out["metadata"].get("remainingItemCount") == remaining, out["metadata"]
