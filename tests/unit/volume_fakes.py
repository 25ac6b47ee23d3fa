"""Stand-ins for the node's object watcher and token manager, for pod-sync and projection tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubelite.agent.volumes.objects import Ref
from kubelite.agent.volumes.projection import MountError

Obj = dict[str, Any]


class StaticObjects:
    """ConfigMaps and Secrets held in a dict, always synced; records which pods registered which objects."""

    def __init__(self, *objects: tuple[str, Obj]) -> None:
        self.objects: dict[Ref, Obj] = {}
        self.registered: dict[str, set[Ref]] = {}
        for kind, obj in objects:
            self.put(kind, obj)

    def put(self, kind: str, obj: Obj) -> None:
        meta = obj["metadata"]
        self.objects[Ref(kind, meta.get("namespace", "default"), meta["name"])] = obj

    def register(self, uid: str, refs: Iterable[Ref]) -> None:
        self.registered[uid] = set(refs)

    def unregister(self, uid: str) -> None:
        self.registered.pop(uid, None)

    async def wait_synced(self, refs: Iterable[Ref]) -> None:
        return None

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.objects.get(Ref(kind, namespace, name))


class ScriptedTokens:
    """Hands out `token-N` valid until `refresh_at`, or fails as a missing TokenRequest API does."""

    def __init__(self, refresh_at: float = 1e12, missing: bool = False) -> None:
        self.refresh_at = refresh_at
        self.missing = missing
        self.calls: list[Obj] = []

    async def token(self, pod: Obj, source: Obj) -> tuple[str, float]:
        if self.missing:
            raise MountError("failed to fetch token: the server could not find the requested resource")
        self.calls.append(source)
        return f"token-{len(self.calls)}", self.refresh_at

    def forget(self, uid: str) -> None:
        return None
