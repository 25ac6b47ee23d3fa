"""Shared informers: one cache and one watch per collection for every controller on a client, as
client-go's SharedInformerFactory gives kube-controller-manager.

Nine controllers watch pods (the garbage collector included). Each with its own informer, every
pod write reached the controller manager nine times — nine watch events decoded, nine caches and
their indexes updated — which was a quarter of the server's CPU when a ReplicaSet scaled to
thousands of pods (BENCHMARKS.md).

`shared_informer(client, clock, path, handlers)` returns a `SharedInformerHandle`: the controller's
view of the one informer for `path` on that client. It reads the shared cache (`store`, `get`,
`by_index`), adds indexes to it (an index already there is kept: names are shared constants), and
its handlers are called for every change, each isolated from the others' failures.

Lifecycle, as AddEventHandler: a handle made before the shared cache is synced receives the
initial list like any change; one made after it (a controller restarted by the manager) is
replayed the cached objects as adds when it starts running. The watch runs while at least one
handle runs; a handle that stops (its controller failed or was cancelled) unsubscribes, so a dead
controller's handlers are never called again.

Handlers and callers must treat cached objects as read-only: they are shared by every controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Iterator
from typing import cast

from kubelite.client.informer import Handlers, IndexFunc, Informer, Key, Obj
from kubelite.client.interface import Client
from kubelite.clock import Clock

log = logging.getLogger("kubelite.controllers")


class _Shared:
    """One informer for one collection and the handles subscribed to its changes."""

    def __init__(self, client: Client, path: str, clock: Clock) -> None:
        # A weak proxy: the registry is keyed weakly by the client, and a strong reference from here would
        # keep every client (and its server, in tests) alive for good.
        self.informer = Informer(cast(Client, weakref.proxy(client)), path, clock,
                                 Handlers(self._added, self._updated, self._deleted))
        # Weak: a handle lives as long as its controller holds it (or its run() is going), so a controller
        # that is dropped — or never ran — leaves nothing behind that keeps it or its client alive.
        # Keys of a weak dict rather than a WeakSet: handlers hear each change in the order they subscribed,
        # not in the order of their objects' addresses (which differs from run to run: a simulation's replay).
        self.subscribers: weakref.WeakKeyDictionary[SharedInformerHandle, None] = weakref.WeakKeyDictionary()
        self.running = 0
        self.task: asyncio.Task[None] | None = None

    def _each(self, call: Callable[[Handlers], None], obj: Obj) -> None:
        for handle in list(self.subscribers):
            try:
                call(handle.handlers)
            except Exception:  # one controller's bug must not keep the change from the others
                meta = obj.get("metadata") or {}
                log.exception("shared informer %s: a handler failed on %s/%s; skipped", self.informer.path,
                              meta.get("namespace", ""), meta.get("name"))

    def _added(self, obj: Obj) -> None:
        self._each(lambda h: h.on_add(obj), obj)

    def _updated(self, old: Obj, new: Obj) -> None:
        self._each(lambda h: h.on_update(old, new), new)

    def _deleted(self, obj: Obj) -> None:
        self._each(lambda h: h.on_delete(obj), obj)

    def start(self) -> None:
        self.running += 1
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self.informer.run(), name=f"shared informer {self.informer.path}")

    def stop(self) -> None:
        self.running -= 1
        if self.running == 0 and self.task is not None:
            self.task.cancel()  # the cache stays; a later start resumes the watch from its resourceVersion
            self.task = None


class SharedInformerHandle:
    """A controller's view of a shared informer (the Informer calls controllers make)."""

    def __init__(self, shared: _Shared, handlers: Handlers) -> None:
        self._shared = shared
        self.handlers = handlers
        self.synced = asyncio.Event()
        # Made after the initial list: the cached objects are replayed to it as adds once it runs.
        self._replay = shared.informer.synced.is_set()
        if not self._replay:
            shared.subscribers[self] = None

    @property
    def path(self) -> str:
        return self._shared.informer.path

    @property
    def store(self) -> dict[Key, Obj]:
        return self._shared.informer.store

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._shared.informer.get(namespace, name)

    def by_index(self, name: str, value: str) -> list[Obj]:
        return self._shared.informer.by_index(name, value)

    def index_keys(self, name: str, value: str) -> Iterator[Key]:
        return self._shared.informer.index_keys(name, value)

    def add_index(self, name: str, fn: IndexFunc) -> None:
        with contextlib.suppress(ValueError):  # another controller added it already
            self._shared.informer.add_index(name, fn)

    def add(self, obj: Obj) -> Obj | None:
        """Put `obj` in the shared cache without calling handlers: tests stand in for a watch event, and the
        PV controller stores its own writes (storeObjectUpdate) ahead of theirs."""
        return self._shared.informer.add(obj)

    def remove(self, key: Key) -> Obj | None:
        """Drop an object from the shared cache without calling handlers (tests stand in for a watch event)."""
        return self._shared.informer.remove(key)

    async def relist(self) -> None:
        """List now and report the differences to every subscriber (tests use it to catch the cache up)."""
        await self._shared.informer.relist()

    async def run(self) -> None:
        """Keep the shared watch going for as long as this runs; set `synced` once the cache is."""
        shared = self._shared
        if self._replay:
            self._replay = False
            shared.subscribers[self] = None
            for obj in list(shared.informer.store.values()):
                self._replay_one(obj)
        shared.start()
        try:
            await shared.informer.synced.wait()
            self.synced.set()
            await asyncio.Event().wait()
        finally:
            shared.subscribers.pop(self, None)
            shared.stop()

    def _replay_one(self, obj: Obj) -> None:
        try:
            self.handlers.on_add(obj)
        except Exception:
            log.exception("shared informer %s: a handler failed replaying %s; skipped", self.path,
                          obj["metadata"].get("name"))


_factories: weakref.WeakKeyDictionary[Client, dict[str, _Shared]] = weakref.WeakKeyDictionary()


def shared_informer(client: Client, clock: Clock, path: str, handlers: Handlers | None = None
                    ) -> SharedInformerHandle:
    """A handle on the one informer for `path` that the controllers using `client` share."""
    by_path = _factories.setdefault(client, {})
    shared = by_path.get(path)
    if shared is None:
        shared = by_path[path] = _Shared(client, path, clock)
    return SharedInformerHandle(shared, handlers or Handlers())
