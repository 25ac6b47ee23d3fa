"""The watch cache: every object decoded once, kept current by one store watch.

As in kube-apiserver, gets and lists are served from memory, and watches fan out from
here: each change is decoded once and each wire encoding of it is made once, however
many watchers receive it. A bounded ring of recent events lets watches resume from a
resourceVersion; older ones get 410 Gone ("too old resource version"), as upstream.
Writes wait until the cache has seen their revision before they are acknowledged, so
a client always reads its own writes.

Indexed triggers (the cacher's `IndexedTrigger`, pods' `spec.nodeName`): a watch whose field
selector asks for one value of a resource's trigger field — every node agent's pod watch —
is offered only the events whose object (or previous object) has that value, so a pod event
costs the same with 5 nodes or 5,000, not one filter call per agent.

The ring keeps each event as the store's bytes in one tuple of atomic values: one object
for CPython's cyclic collector to walk instead of a tree of dicts and lists. Kept decoded,
50,000 pod events were 1.35 million tracked containers, and each full collection (which
stops every thread) took 1.1 s of CPU (RELIABILITY.md, "Fuzz suite"). Live watchers get
each event decoded as it happens; a watch that resumes from a resourceVersion decodes
the events it needs again. The ring is bounded by count and by bytes: upstream bounds its
cache by count and by time, but bytes are what bound memory and the cost of a resume here.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from kubelite.apiserver import gc_tuning, nesting
from kubelite.apiserver.registry.base import Obj, Resource
from kubelite.store.interface import Compacted, Event, EventType, KeyValue, Store

log = logging.getLogger("kubelite.apiserver")

RING_SIZE = 50_000  # events at most (upstream's upper bound is 102,400)
# Encoded bytes at most (object and previous object counted). This bounds memory and the worst resume: a watch
# from the ring's oldest revision decodes all of it on the event loop, at ~130 MB/s of CPU here (8.5 µs per 1 KB
# pod), so 32 MiB is ~0.25 s of CPU, about a second of wall time when the machine's load is 8 on 2 cores.
RING_BYTES = 32 << 20


def decode(kv: KeyValue) -> Obj:
    return decode_value(kv.value, kv.mod_revision)


UNREADABLE = (orjson.JSONDecodeError, KeyError, TypeError)  # a stored value that is no object


def _unreadable(kv: KeyValue, exc: Exception) -> None:
    """A stored value that does not read as an object (written before its fields were bounded, or by another writer
    of the store) is logged and left out of the cache: it must never stop the cache's start or its watch, which
    every read and write of the server waits on."""
    log.warning("watch cache: %s at revision %d is not readable (%s: %s); left out", kv.key, kv.mod_revision,
                type(exc).__name__, exc)


def decode_value(value: bytes, mod_revision: int) -> Obj:
    obj: Obj = orjson.loads(value)
    obj["metadata"]["resourceVersion"] = str(mod_revision)
    return obj


class Recorded(NamedTuple):
    """An event as the ring keeps it: atomic values only (str, int, bytes), so a full collection visits one
    object per event (50,000 events of 500 pods: 22 ms of CPU instead of 1.1 s as decoded objects)."""

    revision: int
    type: str  # ADDED, MODIFIED, DELETED
    key_prefix: str  # the resource's
    value: bytes
    mod_revision: int
    prev_value: bytes | None
    prev_mod_revision: int
    # The trigger field's values of the object and its previous one (cache.py's indexed triggers; empty for
    # resources without one): a resumed watch of one value skips the other events without decoding them.
    triggers: tuple[str, ...] = ()

    def size(self) -> int:
        return len(self.value) + len(self.prev_value or b"")


class Ring(deque[Recorded]):
    """The recent events, oldest first, within a count and a byte bound; `clear()` (a relist) empties both."""

    def __init__(self, count: int, size: int) -> None:
        super().__init__()
        self.limits = (count, size)
        self.bytes = 0

    def record(self, entry: Recorded) -> int | None:
        """Append, evicting the oldest events beyond the bounds; the revision of the last evicted, if any."""
        self.append(entry)
        self.bytes += entry.size()
        count, size = self.limits
        evicted = None
        while len(self) > count or (self.bytes > size and len(self) > 1):
            old = self.popleft()
            self.bytes -= old.size()
            evicted = old.revision
        return evicted

    def clear(self) -> None:
        super().clear()
        self.bytes = 0


@dataclass(slots=True)
class CachedEvent:
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj
    prev: Obj | None
    revision: int
    resource: Resource
    encoded: dict[Any, bytes] = field(default_factory=dict)


Filter = Callable[[Obj], bool]


class Watcher:
    """One watch request's mailbox: events are appended and the reading task woken (coalesced).

    The wake-up is one future per wait, made only when the reader has nothing to do, not an
    asyncio.Event (whose set/clear/wait cost a third of delivering an event to an in-process watcher).
    """

    __slots__ = ("_waiter", "bookmark_due", "closed", "filter", "namespace", "pending", "trigger")

    def __init__(self, namespace: str, filt: Filter | None, trigger: str | None = None) -> None:
        self.namespace = namespace
        self.filter = filt
        self.trigger = trigger  # the trigger field's value the filter requires (None: no index applies)
        self.pending: list[CachedEvent] = []
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.bookmark_due = False

    def offer(self, ev: CachedEvent) -> None:
        if self.namespace and ev.obj["metadata"].get("namespace") != self.namespace:
            return
        if self.filter is None:
            self.pending.append(ev)
        else:
            now = self.filter(ev.obj)
            before = ev.prev is not None and ev.type != "ADDED" and self.filter(ev.prev)
            if ev.type == "DELETED":
                if not (before or now):
                    return
                self.pending.append(ev)
            elif now and before:
                self.pending.append(ev)
            elif now:
                self.pending.append(CachedEvent("ADDED", ev.obj, None, ev.revision, ev.resource))
            elif before:
                self.pending.append(CachedEvent("DELETED", ev.obj, ev.prev, ev.revision, ev.resource))
            else:
                return
        self.wake()

    def close(self) -> None:
        self.closed = True
        self.wake()

    def wake(self) -> None:
        """Wake the reader, if it waits: something is pending, the watch closed, or a bookmark is due."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():  # cancelled with its reader
                waiter.set_result(None)

    def waiter(self) -> asyncio.Future[None] | None:
        """None if an event is pending, the watch is closed or a bookmark is due; else a future that the next
        `wake` resolves, for the reader to await. A plain future, not a coroutine around one: the reader's task
        resumes through one frame fewer per delivery (half of a simulation's deliveries are a bookmark apiece)."""
        if self.pending or self.closed or self.bookmark_due:
            return None
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        return waiter


# Upstream's indexed trigger fields (pkg/registry/core/pod/storage: NodeNameTriggerFunc): (group, plural) -> field.
TRIGGER_FIELDS = {("", "pods"): "spec.nodeName"}


class ResourceCache:
    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self.by_ns: dict[str, dict[str, Obj]] = {}
        # Insertion-ordered (a dict, not a set of id-hashed objects): watchers hear each event in the
        # order they started, the same from run to run (a simulation's replay depends on it). `watchers`
        # holds every open watch; for dispatch, those with a trigger value are also filed by value (and
        # hear an event after the unindexed ones, in `plain`).
        self.watchers: dict[Watcher, None] = {}
        self.plain: dict[Watcher, None] = {}
        self.triggered: dict[str, dict[Watcher, None]] = {}
        self.trigger_field = TRIGGER_FIELDS.get((resource.group, resource.plural))
        self._trigger_of = resource.fields[self.trigger_field] if self.trigger_field else None

    def add(self, w: Watcher) -> None:
        self.watchers[w] = None
        if w.trigger is None:
            self.plain[w] = None
        else:
            self.triggered.setdefault(w.trigger, {})[w] = None

    def discard(self, w: Watcher) -> None:
        self.watchers.pop(w, None)
        if w.trigger is None:
            self.plain.pop(w, None)
            return
        group = self.triggered.get(w.trigger, {})
        group.pop(w, None)
        if not group:
            self.triggered.pop(w.trigger, None)

    def triggers(self, ev: CachedEvent) -> tuple[str, ...]:
        """The distinct trigger values of `ev`'s object and previous object (none without a trigger field)."""
        if self._trigger_of is None:
            return ()
        now = self._trigger_of(ev.obj)
        if ev.prev is None or (before := self._trigger_of(ev.prev)) == now:
            return (now,)
        return (now, before)

    def offer(self, ev: CachedEvent, triggers: tuple[str, ...]) -> None:
        """Every watcher that may want `ev`: the unindexed ones, then those of its `triggers` (`triggers(ev)`)."""
        for w in self.plain:
            w.offer(ev)
        if not self.triggered:
            return
        for value in triggers:
            for w in self.triggered.get(value, ()):
                w.offer(ev)

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.by_ns.get(namespace, {}).get(name)

    def list(self, namespace: str = "") -> list[Obj]:
        if namespace or not self.resource.namespaced:
            items = self.by_ns.get(namespace, {})
            return [items[n] for n in sorted(items)]
        return [self.by_ns[ns][n] for ns in sorted(self.by_ns) for n in sorted(self.by_ns[ns])]

    def count(self) -> int:
        return sum(len(v) for v in self.by_ns.values())

    def put(self, obj: Obj) -> Obj | None:
        meta = obj["metadata"]
        items = self.by_ns.setdefault(meta.get("namespace", ""), {})
        prev = items.get(meta["name"])
        items[meta["name"]] = obj
        return prev

    def remove(self, obj: Obj) -> None:
        meta = obj["metadata"]
        items = self.by_ns.get(meta.get("namespace", ""), {})
        items.pop(meta["name"], None)


class Caches:
    """All resource caches, fed in revision order by one watch on the store."""

    def __init__(self, store: Store, resources: tuple[Resource, ...]) -> None:
        self.store = store
        self.by_resource = {r: ResourceCache(r) for r in resources}
        self._by_prefix = {r.key_prefix: c for r, c in self.by_resource.items()}  # each /registry/GROUP/PLURAL/
        self._builtin = frozenset(self._by_prefix)  # never served by `register`
        self.ring = Ring(RING_SIZE, RING_BYTES)
        # Watches from this revision on are served from the ring: the start, then the last event evicted.
        self.start_revision = 0
        self.revision = 0
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}
        # The revisions waited for, smallest first: each event wakes its waiters without scanning every pending
        # revision (with hundreds of writes in flight, that scan was an eighth of a create's cost).
        self._waited: list[int] = []
        self._task: asyncio.Task[None] | None = None
        # Store key → (value, object) of a write this server is making (`adopt`): its event is put in the cache as
        # that object instead of decoding the value again.
        self._adopted: dict[str, tuple[bytes, Obj]] = {}

    def __getitem__(self, resource: Resource) -> ResourceCache:
        return self.by_resource[resource]

    async def start(self) -> None:
        listed = await self.store.list("/registry/")
        for kv in listed.items:
            cache = self._route(kv.key)
            if cache is not None:
                try:
                    cache.put(decode(kv))
                except UNREADABLE as exc:
                    _unreadable(kv, exc)
        self.start_revision = self.revision = listed.revision
        self._task = asyncio.create_task(self._run(listed.revision), name="watch-cache")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for cache in self._by_prefix.values():
            for w in list(cache.watchers):
                w.close()

    def _route(self, key: str) -> ResourceCache | None:
        """The cache whose key prefix (three segments: /registry/GROUP/PLURAL/) begins `key`. A prefix no served
        resource has (a custom resource's, before its CRD is served) gets a cache of its own, kept current like
        the others: serving it later (`register`) needs no list of the store, and no race with this watch."""
        parts = key.split("/", 4)
        if len(parts) != 5:
            return None
        prefix = f"/{parts[1]}/{parts[2]}/{parts[3]}/"
        cache = self._by_prefix.get(prefix)
        if cache is None:
            unserved = Resource(parts[2], "", parts[3], "", "", "/" in parts[4], "")
            cache = self._by_prefix[prefix] = ResourceCache(unserved)
        return cache

    def register(self, resource: Resource) -> None:
        """Serve `resource` (a version of a custom resource) from the cache of its key prefix; several versions
        share one cache, as they share their objects. A built-in resource's prefix is refused: a custom resource
        serving it would read and write the built-in's objects unvalidated."""
        if resource.key_prefix in self._builtin:
            raise ValueError(f"{resource.key_prefix} holds a built-in resource's objects")
        cache = self._by_prefix.get(resource.key_prefix)
        if cache is None:
            cache = self._by_prefix[resource.key_prefix] = ResourceCache(resource)
        cache.resource = resource
        self.by_resource[resource] = cache

    def unregister(self, resource: Resource) -> None:
        """Stop serving `resource`; once no version is served from its cache, its watches end (their clients
        find it gone when they watch again). The objects stay cached, as their keys stay in the store."""
        cache = self.by_resource.pop(resource, None)
        if cache is not None and all(c is not cache for c in self.by_resource.values()):
            for w in list(cache.watchers):
                w.close()

    async def _run(self, from_revision: int) -> None:
        """Follow the store; when the watch's resume point was compacted away (etcd compacted while the stream
        was broken), relist instead of stopping, as upstream's reflector does on 410."""
        revision = from_revision
        while True:
            try:
                async for ev in self.store.watch("/registry/", revision, progress=True):
                    self.apply(ev)
                return
            except Compacted as exc:
                log.warning("watch cache: %s; relisting", exc)
                revision = await self._relist()

    async def _relist(self) -> int:
        """Replace every cache with a fresh list (watchCache.Replace). The events in between are unknown, so the
        ring is emptied and the open watches are ended (Cacher.terminateAllWatchers): their clients watch again
        from their resourceVersion, and get 410 Gone if it is older than this list."""
        listed = await self.store.list("/registry/")
        for cache in self._by_prefix.values():
            cache.by_ns.clear()
            for w in list(cache.watchers):
                w.close()
        for kv in listed.items:
            target = self._route(kv.key)
            if target is not None:
                try:
                    target.put(decode(kv))
                except UNREADABLE as exc:
                    _unreadable(kv, exc)
        self.ring.clear()
        self.start_revision = listed.revision
        self._advance(listed.revision)
        return listed.revision

    def adopt(self, key: str, value: bytes, obj: Obj) -> None:
        """The registry is writing `value` (the encoding of `obj`, which nothing changes hereafter but its
        resourceVersion) at `key`: when the store's event carries that very value, the cache keeps `obj`
        itself instead of decoding the value into an equal copy (a decode per write: 2 µs for a Lease, 8 for a pod).
        The writer calls `forget` once its write is acknowledged and seen, or failed."""
        self._adopted[key] = (value, obj)

    def forget(self, key: str, value: bytes) -> None:
        entry = self._adopted.get(key)
        if entry is not None and entry[0] is value:
            del self._adopted[key]

    def _object(self, kv: KeyValue) -> Obj:
        """The event's object: the writer's own (`adopt`) when the event carries its value, else decoded."""
        entry = self._adopted.get(kv.key)
        if entry is None or entry[0] is not kv.value:  # identity: the store handed back the bytes it was given
            return decode(kv)
        obj = entry[1]
        obj["metadata"]["resourceVersion"] = str(kv.mod_revision)
        return obj

    def apply(self, ev: Event) -> None:
        if ev.type is EventType.PROGRESS:  # a bookmark: the cache is current up to its revision
            self._advance(ev.revision)
            return
        cache = self._route(ev.kv.key)
        if cache is not None:
            try:
                if ev.type is EventType.DELETE:
                    obj = decode(ev.kv)
                    cache.remove(obj)
                    prev = decode(ev.prev) if ev.prev is not None else None
                    cev = CachedEvent("DELETED", obj, prev, ev.revision, cache.resource)
                else:
                    obj = self._object(ev.kv)
                    prev = cache.put(obj)
                    cev = CachedEvent("MODIFIED" if prev is not None else "ADDED", obj, prev, ev.revision,
                                      cache.resource)
            except UNREADABLE as exc:
                _unreadable(ev.kv, exc)
            else:
                triggers = cache.triggers(cev)
                self._record(ev, cev, triggers)
                cache.offer(cev, triggers)
        self._advance(ev.revision)

    def _advance(self, revision: int) -> None:
        """The cache is current up to `revision`: wake who waits for it."""
        self.revision = max(self.revision, revision)
        while self._waited and self._waited[0] <= revision:
            for fut in self._waiters.pop(heapq.heappop(self._waited)):
                if not fut.done():
                    fut.set_result(None)

    def _record(self, ev: Event, cev: CachedEvent, triggers: tuple[str, ...]) -> None:
        """Append to the ring as bytes (the previous object re-encoded only when the store did not send it)."""
        prev_value, prev_mod = None, 0
        if ev.prev is not None:
            prev_value, prev_mod = ev.prev.value, ev.prev.mod_revision
        elif cev.prev is not None:
            prev_value, prev_mod = nesting.dumps_kept(cev.prev), int(cev.prev["metadata"]["resourceVersion"])
        entry = Recorded(ev.revision, cev.type, cev.resource.key_prefix, ev.kv.value, ev.kv.mod_revision,
                         prev_value, prev_mod, triggers)
        evicted = self.ring.record(entry)
        if evicted is not None:
            self.start_revision = evicted

    async def wait_for(self, revision: int) -> None:
        if revision <= self.revision:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if revision not in self._waiters:
            heapq.heappush(self._waited, revision)
        self._waiters.setdefault(revision, []).append(fut)
        await fut

    def events_since(self, resource: Resource, revision: int, trigger: str | None = None) -> list[CachedEvent] | None:
        """Events of `resource` after `revision`, decoded again, or None when the ring no longer reaches back that
        far (every event after `start_revision` is in the ring). With `trigger` (a watch of one value of the
        resource's trigger field), only the events whose object or previous object has that value: the others
        cannot pass the watch's filter, and decoding them was the cost of every node agent's pod watch resuming
        (all the cluster's pod events since its last bookmark, for each of thousands of agents)."""
        if revision < self.start_revision:
            return None
        held: list[Recorded] = []
        prefix = resource.key_prefix
        for rec in reversed(self.ring):
            if rec.revision <= revision:
                break
            if rec.key_prefix == prefix and (trigger is None or trigger in rec.triggers):
                held.append(rec)
        held.reverse()
        with gc_tuning.paused():
            return [CachedEvent(rec.type, decode_value(rec.value, rec.mod_revision),
                                None if rec.prev_value is None else decode_value(rec.prev_value, rec.prev_mod_revision),
                                rec.revision, resource) for rec in held]
