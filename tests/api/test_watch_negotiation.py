"""A watch's media type (NegotiateOutputMediaTypeStream): the type Accept ranks first must have a stream form.
YAML has none, so a watch that ranks YAML first is 406 NotAcceptable naming the stream types, even when JSON is
acceptable too; a clause asking YAML's stream (`;stream=watch`) is skipped, for any request. Real API server on
SQLite, over HTTP."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from aiohttp.test_utils import TestClient

from kubelite.apiserver.registry.config import CONFIG_MAPS
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import SHARED_LOOP, serving_server

Client = TestClient  # type: ignore[type-arg]
CMS = "/api/v1/namespaces/default/configmaps"
STREAM_TYPES = ("only the following media types are accepted: application/json;stream=watch, "
                "application/vnd.kubernetes.protobuf;stream=watch")
SERVED_TYPES = ("only the following media types are accepted: application/json, application/yaml, "
                "application/vnd.kubernetes.protobuf")


@SHARED_LOOP
@pytest.mark.parametrize(("query", "accept", "status", "message"), [
    pytest.param("?watch=1", "application/yaml", 406, STREAM_TYPES, id="watch accepting only YAML: 406"),
    pytest.param("?watch=1", "application/yaml, application/json;q=0.5", 406, STREAM_TYPES,
                 id="watch ranking YAML above JSON: 406"),
    pytest.param("?watch=1", "application/json;q=0.5, application/yaml", 406, STREAM_TYPES,
                 id="watch where q values rank YAML first: 406"),
    pytest.param("?watch=1", "application/yaml;stream=watch, application/json", 200, "",
                 id="watch asking YAML's stream skips it: JSON"),
    pytest.param("?watch=1", "application/json, application/yaml", 200, "", id="watch ranking JSON first: JSON"),
    pytest.param("?watch=1", "*/*", 200, "", id="watch accepting anything: JSON"),
    pytest.param("?watch=1&resourceVersion=x", "application/yaml", 400, "resourceVersion",
                 id="watch's bad resourceVersion is said before its 406"),
    pytest.param("", "application/yaml;stream=watch", 406, SERVED_TYPES,
                 id="list asking only YAML's stream: 406"),
    pytest.param("", "application/json;stream=other", 406, SERVED_TYPES,
                 id="list asking a stream other than watch: 406"),
    pytest.param("", "application/yaml", 200, "", id="list accepting only YAML: YAML"),
])
async def test_watch_media_type(shared_api: Client, query: str, accept: str, status: int, message: str) -> None:
    resp = await shared_api.get(f"{CMS}{query}{'&' if query else '?'}timeoutSeconds=1", headers={"Accept": accept})
    body = await resp.read()
    assert resp.status == status, body
    if status != 200:
        assert message in orjson.loads(body)["message"]
    elif query:
        assert resp.content_type == "application/json"
    else:
        assert resp.content_type == "application/yaml"


async def test_refused_watch_leaves_no_watcher(tmp_path: Path) -> None:
    """The 406 comes after the watch opened (serveWatchHandler negotiates after rw.Watch): the watch is closed."""
    async with serving_server(await SQLiteStore.open(tmp_path / "state.db")) as (server, api):
        resp = await api.get(f"{CMS}?watch=1", headers={"Accept": "application/yaml"})
        assert resp.status == 406
        assert not server.caches[CONFIG_MAPS].watchers
