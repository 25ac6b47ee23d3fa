"""The API test suite (tests/api) run again through each transport: HTTP, and in-process.

Every test of tests/api that takes the `api` fixture is collected here a second time, with `api`
parametrized: "http" is the real server over a loopback socket (as in tests/api), "in-process" is
the same server reached through `InProcessClient.exchange` — no socket, no authentication — with
responses read exactly as the HTTP tests read them. Passing both shows the in-process transport
keeps the server's routing, admission, validation, errors and watch semantics.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient, Reply
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore
from tests.api import test_admission, test_pod_lifecycle_api, test_rest


class _Response:
    """An in-process Reply read through the methods the API tests use on aiohttp's ClientResponse."""

    def __init__(self, reply: Reply) -> None:
        self._reply = reply
        self.status = reply.status
        self.headers = reply.headers
        self.content_type = reply.content_type
        self.content = reply  # .readline()

    async def read(self) -> bytes:
        return await self._reply.read()

    async def json(self) -> Any:
        return orjson.loads(await self._reply.read())

    async def text(self) -> str:
        return (await self._reply.read()).decode()

    def close(self) -> None:
        self._reply.close()


class InProcessHttp:
    """The request methods of aiohttp's TestClient, served by InProcessClient.exchange."""

    def __init__(self, client: InProcessClient) -> None:
        self.client = client

    async def request(self, method: str, path: str, data: bytes | None = None,
                      headers: dict[str, str] | None = None) -> _Response:
        return _Response(await self.client.exchange(method, path, data or b"", headers))

    async def get(self, path: str, headers: dict[str, str] | None = None) -> _Response:
        return await self.request("GET", path, None, headers)

    async def post(self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> _Response:
        return await self.request("POST", path, data, headers)

    async def put(self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> _Response:
        return await self.request("PUT", path, data, headers)

    async def patch(self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> _Response:
        return await self.request("PATCH", path, data, headers)

    async def delete(self, path: str, data: bytes | None = None,
                     headers: dict[str, str] | None = None) -> _Response:
        return await self.request("DELETE", path, data, headers)


@pytest.fixture(params=["http", "in-process"])
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    try:
        if request.param == "http":
            client = TestClient(TestServer(server.app()))
            await client.start_server()
            yield client
            await client.close()
        else:
            yield InProcessHttp(InProcessClient(server))
    finally:
        await server.stop()
        await store.close()


def _api_tests() -> dict[str, Any]:
    found = {}
    for module in (test_rest, test_admission, test_pod_lifecycle_api):
        for name, fn in vars(module).items():
            if name.startswith("test_") and inspect.iscoroutinefunction(fn) and \
                    "api" in inspect.signature(fn).parameters:
                found[f"{name}__{module.__name__.rsplit('.', 1)[1]}"] = fn
    return found


globals().update(_api_tests())
