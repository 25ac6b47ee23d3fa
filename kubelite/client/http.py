"""The API client every component uses: HTTP(S) + bearer token, Status errors mapped back to ApiError.

Components never read another component's memory; they talk to the API server
through this client only (DESIGN.md), whether they run in the server's process or not.
"""

from __future__ import annotations

import base64
import ssl
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from kubelite.api.errors import ApiError

Obj = dict[str, Any]
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


def resource_path(plural: str, namespace: str = "", name: str = "", subresource: str = "",
                  group_version: str = "v1") -> str:
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


class ApiClient:
    def __init__(self, server: str, token: str | None = None, ca_data: bytes | None = None,
                 connections: int = 100) -> None:
        self.server = server.rstrip("/")
        self._headers = {"Accept": JSON}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._ssl: ssl.SSLContext | bool = False
        if ca_data:
            with tempfile.NamedTemporaryFile(suffix=".crt") as f:
                f.write(ca_data)
                f.flush()
                self._ssl = ssl.create_default_context(cafile=f.name)
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_kubeconfig(cls, path: Path | str, connections: int = 100) -> ApiClient:
        config = yaml.safe_load(Path(path).read_text())
        ctx_name = config.get("current-context")
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user: dict[str, Any] = next((u["user"] for u in config.get("users", []) if u["name"] == ctx.get("user")),
                                    {})
        ca = cluster.get("certificate-authority-data")
        ca_data = base64.b64decode(ca) if ca else None
        if ca_data is None and cluster.get("certificate-authority"):
            ca_data = Path(cluster["certificate-authority"]).read_bytes()
        return cls(cluster["server"], user.get("token"), ca_data, connections)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=self._headers, connector=aiohttp.TCPConnector(limit=self._connections, ssl=self._ssl),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, body: Any = None, content_type: str = JSON,
                      params: Mapping[str, str] | None = None) -> Any:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else None
        async with self.session.request(method, self.server + path, data=data, headers=headers,
                                        params=params) as resp:
            payload = await resp.read()
            out = orjson.loads(payload) if payload and resp.content_type == JSON else payload
            if resp.status >= 400:
                raise _error(resp.status, out)
            return out

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        out: Obj = await self.request("GET", path, params=params)
        return out

    async def create(self, path: str, obj: Obj) -> Obj:
        out: Obj = await self.request("POST", path, obj)
        return out

    async def patch(self, path: str, patch: Any, content_type: str = MERGE_PATCH) -> Obj:
        out: Obj = await self.request("PATCH", path, patch, content_type)
        return out

    async def delete(self, path: str, options: Obj | None = None) -> Obj:
        out: Obj = await self.request("DELETE", path, options or {})
        return out

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        """Yield watch events until the server ends the stream; an ERROR event raises its Status."""
        query = {**params, "watch": "true"}
        async with self.session.get(self.server + path, params=query) as resp:
            if resp.status >= 400:
                raise _error(resp.status, orjson.loads(await resp.read() or b"{}"))
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line:
                        continue
                    event: Obj = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        raise _error(int(event["object"].get("code", 500)), event["object"])
                    yield event


def _error(code: int, body: Any) -> ApiError:
    if isinstance(body, dict) and body.get("kind") == "Status":
        return ApiError(code, body.get("reason", ""), body.get("message", ""), body.get("details") or {})
    return ApiError(code, "Unknown", f"unexpected response {code}: {body!r:.200}")
