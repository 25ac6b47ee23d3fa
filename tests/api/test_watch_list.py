"""WatchList (sendInitialEvents=true&resourceVersionMatch=NotOlderThan), as 1.32's watch cache serves it with the
gate on: the current state as ADDED events, then — with allowWatchBookmarks — one bookmark annotated
`k8s.io/initial-events-end: "true"` that tells the client its list is complete, then changes. With
sendInitialEvents=false, changes only. A watch from resourceVersion "" or "0" that chooses neither option is
defaulted to the first (SetListOptionsDefaults). Real API server on SQLite, over HTTP."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
CMS = "/api/v1/namespaces/default/configmaps"
END = {"k8s.io/initial-events-end": "true"}


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}


@pytest.mark.parametrize(("query", "want"), [
    pytest.param("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
                 [("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", END), ("ADDED", "c")],
                 id="initial events then the bookmark that ends them, then changes"),
    pytest.param("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
                 "&resourceVersion={rv_a}", [("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", END), ("ADDED", "c")],
                 id="from a resourceVersion: the state not older than it, not the changes since"),
    pytest.param("sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
                 [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")], id="without bookmarks: no end marker"),
    pytest.param("sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
                 [("ADDED", "c")], id="sendInitialEvents=false: changes only"),
    pytest.param("resourceVersion=0&allowWatchBookmarks=true",
                 [("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", END), ("ADDED", "c")],
                 id="a watch from 0 that chose nothing is defaulted to WatchList (SetListOptionsDefaults)"),
    pytest.param("allowWatchBookmarks=true", [("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", END), ("ADDED", "c")],
                 id="so is a watch from no resourceVersion"),
    pytest.param("resourceVersion={rv_a}&allowWatchBookmarks=true", [("ADDED", "b"), ("ADDED", "c")],
                 id="a watch from a resourceVersion is not: the changes after it"),
])
async def test_watch_list(api: Client, query: str, want: list[tuple[str, Any]]) -> None:
    rv_a = (await call(api, "POST", CMS, cm("a"), expect=201))["metadata"]["resourceVersion"]
    await call(api, "POST", CMS, cm("b"), expect=201)
    got: list[tuple[str, Any]] = []
    async with api.get(f"{CMS}?watch=true&timeoutSeconds=30&{query.replace('{rv_a}', rv_a)}") as resp:
        assert resp.status == 200, await resp.text()
        await call(api, "POST", CMS, cm("c"), expect=201)
        while len(got) < len(want):
            event = orjson.loads(await resp.content.readline())
            meta = event["object"]["metadata"]
            got.append((event["type"], meta.get("annotations") if event["type"] == "BOOKMARK" else meta["name"]))
    assert got == want
