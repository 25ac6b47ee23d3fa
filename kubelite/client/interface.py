"""The client seam: what every component (scheduler, controllers, agent, explain) needs from the API.

Two transports implement it: `ApiClient` (HTTP(S)) and the in-process transport that calls the
API server's request handling directly (same admission, validation and watch cache; never the
store). Failures surface as `ApiError`; transport failures as its subclass `Unavailable`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

Obj = dict[str, Any]


class Client(Protocol):
    async def request(self, method: str, path: str, body: Any = None, content_type: str = ...,
                      params: Mapping[str, str] | None = None) -> Any: ...

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj: ...

    async def create(self, path: str, obj: Obj) -> Obj: ...

    async def patch(self, path: str, patch: Any, content_type: str = ...) -> Obj: ...

    async def delete(self, path: str, options: Obj | None = None) -> Obj: ...

    def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]: ...

    async def close(self) -> None: ...
