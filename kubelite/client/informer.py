"""Informers: a local cache of one resource kept current by list + watch, with indexes and change handlers.

As client-go's reflector: list, then watch from the list's resourceVersion; when the watch
ends it resumes from the last version seen, and on 410 Gone it lists again and reports the
differences as adds, updates and deletes, so handlers never miss a change. A failed list or
watch (the API server restarting, `Unavailable`) is retried with back-off, forever.

As client-go's indexer, the cache keeps secondary indexes (`add_index`, `by_index`): by
namespace always, by node name or owner uid when a component asks, so a component finds
"the pods on node n" without scanning every pod.

A handler that raises is logged, counted (`handler_errors`) and skipped: one bad object must
never stop the loop that every other object depends on (issue 10: it stopped all scheduling).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.interface import Client
from kubelite.client.retry import Backoff
from kubelite.clock import Clock, bounded

log = logging.getLogger("kubelite.client")

Obj = dict[str, Any]
Key = tuple[str, str]
IndexFunc = Callable[[Obj], list[str]]
# client-go's reflector back-off: 800 ms doubling to 30 s, with jitter.
RELIST_BACKOFF = Backoff(duration=0.8, factor=2.0, jitter=1.0, cap=30.0)

NAMESPACE_INDEX = "namespace"
NODE_NAME_INDEX = "spec.nodeName"
OWNER_UID_INDEX = "ownerUID"


def key_of(obj: Obj) -> Key:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def by_namespace(obj: Obj) -> list[str]:
    """cache.MetaNamespaceIndexFunc."""
    return [obj["metadata"].get("namespace", "")]


def by_node_name(obj: Obj) -> list[str]:
    """The node a pod is bound to; unbound pods are in no bucket."""
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


def by_owner_uid(obj: Obj) -> list[str]:
    """Every owner's uid (metadata.ownerReferences), as the garbage collector and controllers look dependents up."""
    return [ref["uid"] for ref in obj["metadata"].get("ownerReferences") or [] if ref.get("uid")]


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
    handler_errors: int = 0  # handler calls that raised (each logged and skipped)
    backoff: Backoff = RELIST_BACKOFF
    _indexers: dict[str, IndexFunc] = field(default_factory=dict, init=False)
    _indices: dict[str, dict[str, set[Key]]] = field(default_factory=dict, init=False)
    _progress: bool = field(default=False, init=False)  # a list or a watch event since the last failure
    _retry: asyncio.Event = field(default_factory=asyncio.Event, init=False)  # set: cut the back-off short

    def __post_init__(self) -> None:
        self.add_index(NAMESPACE_INDEX, by_namespace)

    # --- the indexed cache -----------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.store.get((namespace, name))

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """cache.Indexer.AddIndexers: index every cached object (now and from now on) under fn(obj)'s values."""
        if name in self._indexers:
            raise ValueError(f"indexer conflict: {name}")
        self._indexers[name] = fn
        self._indices[name] = {}
        for key, obj in self.store.items():
            self._index(name, key, obj)

    def by_index(self, name: str, value: str) -> list[Obj]:
        """cache.Indexer.ByIndex: the cached objects whose index `name` includes `value`."""
        return [self.store[k] for k in self.index_keys(name, value)]

    def index_keys(self, name: str, value: str) -> Iterator[Key]:
        if name not in self._indices:
            raise KeyError(f"index with name {name} does not exist")
        yield from sorted(self._indices[name].get(value, ()))

    def add(self, obj: Obj) -> Obj | None:
        """Put `obj` in the cache (indexes included) without calling handlers; returns what it replaced.

        An update re-files the key only in the index buckets whose values changed (a pod's namespace and node
        stay put, watch event after watch event): upkeep per event without a set made or emptied."""
        meta = obj["metadata"]
        key = meta.get("namespace", ""), meta["name"]  # key_of's, without a call: once per watch event
        store = self.store
        old = store.pop(key, None)
        store[key] = obj  # re-inserted: the cache iterates in the order of last change, as it always has
        for name, fn in self._indexers.items():
            index = self._indices[name]
            values = _values(fn, obj)
            if old is not None:
                before = _values(fn, old)
                if before == values:
                    continue
                _unfile(index, key, before)
            _file(index, key, values)
        return old

    def remove(self, key: Key) -> Obj | None:
        old = self.store.pop(key, None)
        if old is not None:
            for name, fn in self._indexers.items():
                _unfile(self._indices[name], key, _values(fn, old))
        return old

    def _index(self, name: str, key: Key, obj: Obj) -> None:
        _file(self._indices[name], key, _values(self._indexers[name], obj))

    # --- handlers --------------------------------------------------------------------------------

    def _notify(self, handler: Callable[..., None], *objs: Obj) -> None:
        try:
            handler(*objs)
        except Exception:
            self.handler_errors += 1
            meta = objs[-1].get("metadata") or {}
            log.exception("informer %s: handler %s failed on %s/%s; skipped", self.path,
                          getattr(handler, "__qualname__", handler), meta.get("namespace", ""), meta.get("name"))

    # --- list and watch --------------------------------------------------------------------------

    async def run(self) -> None:
        rng = random.Random(random.getrandbits(64))  # from the process's generator: a simulation seeds it
        delays = self.backoff.delays(rng)
        while True:
            self._progress = False
            try:
                if not self.resource_version:
                    await self.relist()
                await self._watch()
                if self._progress:
                    continue
                log.debug("informer %s: very short watch", self.path)  # ended at once, no event: back off
            except ApiError as exc:
                if exc.code == 410:
                    self.resource_version = ""  # too old: list again
                    continue
                log.warning("informer %s: %s", self.path, exc)  # Unavailable included: the client maps them all
            except Exception:  # a malformed reply: never let the loop die
                log.exception("informer %s: list/watch failed", self.path)
                self.resource_version = ""
            if self._progress:
                delays = self.backoff.delays(rng)  # the server was answering: start the back-off afresh
            woken, _ = await bounded(self.clock, self._retry.wait(), next(delays))
            if woken:
                self._retry.clear()
                delays = self.backoff.delays(rng)

    def retry_now(self) -> None:
        """The server answers again (the caller knows: the agent's heartbeat went through after failing):
        end the back-off now and start it afresh. After a long outage the back-off has grown to its 30 s cap
        (plus jitter), and a node agent whose link was back then saw a pod deleted meanwhile ~35 s late
        (chaos seed 20)."""
        self._retry.set()

    async def relist(self) -> None:
        """List the collection and report the differences from the cache; alone, a one-shot snapshot (explain)."""
        listed = await self.client.get(self.path, self.params)
        fresh = {key_of(o): o for o in listed["items"]}
        for key in [k for k in self.store if k not in fresh]:
            gone = self.remove(key)
            assert gone is not None
            self._notify(self.handlers.on_delete, gone)
        for obj in fresh.values():
            previous = self.add(obj)
            if previous is None:
                self._notify(self.handlers.on_add, obj)
            elif previous["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                self._notify(self.handlers.on_update, previous, obj)
        self.resource_version = listed["metadata"]["resourceVersion"]
        self._progress = True
        self.synced.set()

    async def _watch(self) -> None:
        params = {**self.params, "resourceVersion": self.resource_version, "allowWatchBookmarks": "true"}
        async for event in self.client.watch(self.path, params):
            self._progress = True
            obj = event["object"]
            self.resource_version = obj["metadata"].get("resourceVersion", self.resource_version)
            kind = event["type"]
            if kind == "BOOKMARK":
                continue
            if kind == "DELETED":
                self.remove(key_of(obj))
                self._notify(self.handlers.on_delete, obj)
                continue
            old = self.add(obj)
            if old is None:
                self._notify(self.handlers.on_add, obj)
            else:
                self._notify(self.handlers.on_update, old, obj)


def _file(index: dict[str, set[Key]], key: Key, values: list[str]) -> None:
    """Put `key` in the buckets of `values` (a bucket made only when it is new)."""
    for value in values:
        bucket = index.get(value)
        if bucket is None:
            index[value] = {key}
        else:
            bucket.add(key)


def _unfile(index: dict[str, set[Key]], key: Key, values: list[str]) -> None:
    """Take `key` out of the buckets of `values`, dropping a bucket it leaves empty."""
    for value in values:
        bucket = index.get(value)
        if bucket is not None:
            bucket.discard(key)
            if not bucket:
                del index[value]


def _values(fn: IndexFunc, obj: Obj) -> list[str]:
    """An index function that raises on an odd object leaves it out of that index rather than out of the cache."""
    try:
        return fn(obj)
    except Exception:
        log.exception("index function %s failed on %s", getattr(fn, "__qualname__", fn), obj.get("metadata"))
        return []
