"""The ConfigMaps and Secrets pods on this node use, kept current by kubelet's watch-based manager.

Mirrors pkg/kubelet/util/manager/watch_based_manager.go: a pod registers the objects it
references (env, envFrom, volumes, projected sources); each referenced object gets one watch of
its own (a field selector on its name, so a missing object is watched too and its creation is
seen at once); the watch stops when no registered pod references the object any more. A read
waits up to a second for the object's first list, then fails as upstream does ("failed to sync
configmap cache: timed out waiting for the condition"). Every change calls `changed`, which the
agent uses to wake the pods that reference the object so their volumes are rewritten. Once a
read finds the object `immutable`, its watch stops and the cached copy is served from then on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kubelite.agent.container import ConfigError
from kubelite.agent.loops import forever
from kubelite.client.informer import Handlers, Informer
from kubelite.client.interface import Client
from kubelite.clock import Clock, bounded

Obj = dict[str, Any]
SYNC_TIMEOUT = 1.0
PLURALS = {"configmap": "configmaps", "secret": "secrets"}


class Ref(NamedTuple):
    kind: str  # "configmap" or "secret": upstream's words in its messages
    namespace: str
    name: str


def referenced_objects(pod: Obj) -> set[Ref]:
    """Every ConfigMap and Secret the pod's containers and volumes name (podutil.VisitPodConfigmapNames/Secrets)."""
    ns = pod["metadata"].get("namespace", "")
    spec = pod.get("spec") or {}
    refs: set[Ref] = set()

    def add(kind: str, source: Obj | None) -> None:
        if source and source.get("name"):
            refs.add(Ref(kind, ns, str(source["name"])))

    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for item in c.get("envFrom") or []:
            add("configmap", item.get("configMapRef"))
            add("secret", item.get("secretRef"))
        for item in c.get("env") or []:
            source = item.get("valueFrom") or {}
            add("configmap", source.get("configMapKeyRef"))
            add("secret", source.get("secretKeyRef"))
    for vol in spec.get("volumes") or []:
        add("configmap", vol.get("configMap"))
        if vol.get("secret"):
            refs.add(Ref("secret", ns, str(vol["secret"].get("secretName", ""))))
        for source in (vol.get("projected") or {}).get("sources") or []:
            add("configmap", source.get("configMap"))
            add("secret", source.get("secret"))
    return {r for r in refs if r.name}


@dataclass
class _Watch:
    informer: Informer
    task: asyncio.Task[None]
    users: set[str] = field(default_factory=set)  # pod uids


class ObjectWatcher:
    """Single-object watches, reference-counted by the pods that use them; lookups read their caches."""

    def __init__(self, client: Client, clock: Clock, changed: Callable[[Ref], None]) -> None:
        self.client = client
        self.clock = clock
        self.changed = changed
        self._watches: dict[Ref, _Watch] = {}
        self._by_pod: dict[str, set[Ref]] = {}

    def register(self, uid: str, refs: Iterable[Ref]) -> None:
        """The pod `uid` now references `refs` (and no longer what it referenced before)."""
        new, old = set(refs), self._by_pod.get(uid, set())
        self._by_pod[uid] = new
        for ref in sorted(new - old):  # watches start in one order, whatever the strings' hash seed
            watch = self._watches.get(ref) or self._start(ref)
            watch.users.add(uid)
        for ref in sorted(old - new):
            self._release(ref, uid)

    def unregister(self, uid: str) -> None:
        for ref in sorted(self._by_pod.pop(uid, set())):
            self._release(ref, uid)

    def users(self, ref: Ref) -> set[str]:
        watch = self._watches.get(ref)
        return set(watch.users) if watch is not None else set()

    def _start(self, ref: Ref) -> _Watch:
        def notify(*_: Obj) -> None:
            self.changed(ref)

        informer = Informer(self.client, f"/api/v1/namespaces/{ref.namespace}/{PLURALS[ref.kind]}", self.clock,
                            Handlers(notify, notify, notify), params={"fieldSelector": f"metadata.name={ref.name}"})
        task = asyncio.ensure_future(forever(self.clock, f"{ref.kind} {ref.namespace}/{ref.name} watch",
                                             informer.run))
        watch = self._watches[ref] = _Watch(informer, task)
        return watch

    def _release(self, ref: Ref, uid: str) -> None:
        watch = self._watches.get(ref)
        if watch is None:
            return
        watch.users.discard(uid)
        if not watch.users:
            watch.task.cancel()
            del self._watches[ref]

    async def wait_synced(self, refs: Iterable[Ref]) -> None:
        """Wait (a second at most) for the first list of each watch; those still unsynced then fail their reads."""
        watches = [w for r in sorted(refs) if (w := self._watches.get(r)) is not None]
        pending = [w.informer.synced.wait() for w in watches if not w.informer.synced.is_set()]
        if pending:
            await bounded(self.clock, asyncio.gather(*pending), SYNC_TIMEOUT)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """The object, or None when it does not exist; ConfigError while its watch has not listed yet."""
        watch = self._watches.get(Ref(kind, namespace, name))
        if watch is None or not watch.informer.synced.is_set():
            raise ConfigError(f"failed to sync {kind} cache: timed out waiting for the condition")
        obj = watch.informer.get(namespace, name)
        if obj is not None and obj.get("immutable"):
            watch.task.cancel()  # upstream stops watching an immutable object: it can only be deleted and recreated
        return obj

    async def close(self) -> None:
        for watch in self._watches.values():
            watch.task.cancel()
        await asyncio.gather(*(w.task for w in self._watches.values()), return_exceptions=True)
        self._watches.clear()
