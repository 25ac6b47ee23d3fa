"""Informers: a local cache of one resource kept current by list + watch, with change handlers.

As client-go's reflector: list, then watch from the list's resourceVersion; when the
watch ends it resumes from the last version seen, and on 410 Gone it lists again and
reports the differences as adds, updates and deletes, so handlers never miss a change.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.interface import Client
from kubelite.clock import Clock

log = logging.getLogger("kubelite.client")

Obj = dict[str, Any]
Key = tuple[str, str]
RETRY_DELAY = 1.0


def key_of(obj: Obj) -> Key:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


@dataclass
class Handlers:
    on_add: Callable[[Obj], None] = lambda obj: None
    on_update: Callable[[Obj, Obj], None] = lambda old, new: None
    on_delete: Callable[[Obj], None] = lambda obj: None


@dataclass
class Informer:
    client: Client
    path: str  # the collection, e.g. /api/v1/pods
    clock: Clock
    handlers: Handlers = field(default_factory=Handlers)
    params: dict[str, str] = field(default_factory=dict)
    store: dict[Key, Obj] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    resource_version: str = ""

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.store.get((namespace, name))

    async def run(self) -> None:
        while True:
            try:
                if not self.resource_version:
                    await self._relist()
                await self._watch()
            except ApiError as exc:
                if exc.code == 410:
                    self.resource_version = ""  # too old: list again
                    continue
                log.warning("informer %s: %s", self.path, exc)  # Unavailable included: the client maps them all
                await self.clock.sleep(RETRY_DELAY)

    async def _relist(self) -> None:
        listed = await self.client.get(self.path, self.params)
        fresh = {key_of(o): o for o in listed["items"]}
        for key, gone in list(self.store.items()):
            if key not in fresh:
                del self.store[key]
                self.handlers.on_delete(gone)
        for key, obj in fresh.items():
            previous = self.store.get(key)
            self.store[key] = obj
            if previous is None:
                self.handlers.on_add(obj)
            elif previous["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                self.handlers.on_update(previous, obj)
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.synced.set()

    async def _watch(self) -> None:
        params = {**self.params, "resourceVersion": self.resource_version, "allowWatchBookmarks": "true"}
        async for event in self.client.watch(self.path, params):
            obj = event["object"]
            self.resource_version = obj["metadata"].get("resourceVersion", self.resource_version)
            kind = event["type"]
            if kind == "BOOKMARK":
                continue
            key = key_of(obj)
            if kind == "DELETED":
                self.store.pop(key, None)
                self.handlers.on_delete(obj)
                continue
            old = self.store.get(key)
            self.store[key] = obj
            if old is None:
                self.handlers.on_add(obj)
            else:
                self.handlers.on_update(old, obj)
