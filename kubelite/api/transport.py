"""What both transports of the client seam share: the REST verbs over `request`, and errors from Status bodies.

The HTTP client (kubelite.client.http) and the in-process client (kubelite.apiserver.inprocess)
live in stacks that may not import each other, so the little they have in common lives here, below
both: each implements `request` (and `watch`); the verbs and the reading of a Status are one code.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from kubelite.api.errors import ApiError, Unavailable

Obj = dict[str, Any]
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"


class RestVerbs(ABC):
    @abstractmethod
    async def request(self, method: str, path: str, body: Any = None, content_type: str = JSON,
                      params: Mapping[str, str] | None = None) -> Any: ...

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


def status_error(code: int, body: Any) -> ApiError:
    """The ApiError a response (or a watch ERROR event) carries; a 503 — the server, or a proxy in front
    of it, cannot serve — is Unavailable."""
    kind = Unavailable if code == 503 else ApiError
    if isinstance(body, dict) and body.get("kind") == "Status":
        return kind(code, body.get("reason", ""), body.get("message", ""), body.get("details") or {})
    return kind(code, "ServiceUnavailable" if code == 503 else "Unknown", f"unexpected response {code}: {body!r:.200}")
