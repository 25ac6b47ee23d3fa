"""A scripted `Client` for informer tests: each list and each watch answers the next scripted reply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kubelite.api.errors import ApiError

Obj = dict[str, Any]
Reply = Obj | ApiError  # a list body, or the error the call raises
WatchScript = list[Obj | ApiError]  # events, then optionally the error that cuts the stream


def pod(name: str, rv: int, ns: str = "default", node: str = "", owner: str = "", **extra: Any) -> Obj:
    meta: Obj = {"name": name, "namespace": ns, "resourceVersion": str(rv), "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}"}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, **extra}


def listing(rv: int, *items: Obj) -> Obj:
    return {"metadata": {"resourceVersion": str(rv)}, "items": list(items)}


class ScriptedClient:
    def __init__(self, lists: list[Reply], watches: list[WatchScript]) -> None:
        self.lists = lists
        self.watches = watches
        self.watch_params: list[dict[str, str]] = []
        self.exhausted = asyncio.Event()

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        if not self.lists:
            self.exhausted.set()
            await asyncio.Event().wait()
        reply = self.lists.pop(0)
        if isinstance(reply, ApiError):
            raise reply
        return reply

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        self.watch_params.append(dict(params))
        if not self.watches:
            self.exhausted.set()
            await asyncio.Event().wait()
        for item in self.watches.pop(0):
            if isinstance(item, ApiError):
                raise item
            yield item

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "",
                      params: Mapping[str, str] | None = None) -> Any:
        raise NotImplementedError("informers only list and watch")

    async def create(self, path: str, obj: Obj) -> Obj:
        raise NotImplementedError("informers only list and watch")

    async def patch(self, path: str, patch: Any, content_type: str = "") -> Obj:
        raise NotImplementedError("informers only list and watch")

    async def delete(self, path: str, options: Obj | None = None) -> Obj:
        raise NotImplementedError("informers only list and watch")

    async def close(self) -> None:
        return None
