"""The garbage collector: deletes objects whose owners are all gone, and carries out propagation policies.

A port of pkg/controller/garbagecollector (graph_builder.go, garbagecollector.go) over
indexed informers of every deletable resource (discovery.py):
- **The graph**: each object's uid, where it lives, its ownerReferences, and the reverse map
  owner uid → dependent uids. Only changes to references, deletion state or finalizers wake
  the collector; a pod's status updates cost a dictionary lookup.
- **attemptToDelete**: an object's owners are *solid* (present), *dangling* (absent: confirmed
  by a live read, so a lagging informer never causes a deletion) or *waiting* (being deleted
  in the foreground). With a solid owner, references to the others are removed; with none,
  the object is deleted — in the foreground if it has dependents and an owner is waiting for
  it, else with the policy its own finalizers ask for (Background by default). Deletes carry a
  uid precondition, and pods are deleted gracefully — never forced (seed 002).
- **Orphan**: an object being deleted with the `orphan` finalizer has the references to it
  removed from its dependents, then the finalizer.
- **Foreground**: an object being deleted with `foregroundDeletion` has its dependents deleted;
  its finalizer is removed once no dependent that blocks it (`blockOwnerDeletion`) is left.
An owner kind the API does not serve counts as solid: the collector deletes nothing it cannot
check.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.informer import Handlers
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.discovery import ApiResource, deletable_resources
from kubelite.controllers.informers import SharedInformerHandle, shared_informer
from kubelite.controllers.ownership import STRATEGIC, remove_refs_patch
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.garbagecollector")

Obj = dict[str, Any]
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
IGNORED = frozenset({"events"})  # upstream's ignoredResources: never owners or dependents worth watching
DISCOVERY_RETRY = 2.0
RESYNC_PERIOD = 30.0  # kube-controller-manager's garbage collector re-reads discovery every 30 s
WORKERS = 5  # --concurrent-gc-syncs is 20; kubelite's API is one process


@dataclass
class Node:
    uid: str
    resource: ApiResource
    namespace: str
    name: str
    owners: list[Obj]
    deleting: bool
    finalizers: list[str]
    resource_version: str = ""

    @property
    def path(self) -> str:
        return self.resource.path(self.namespace, self.name)

    def deleting_dependents(self) -> bool:
        return self.deleting and FOREGROUND in self.finalizers


def _node(resource: ApiResource, obj: Obj) -> Node:
    meta = obj["metadata"]
    return Node(meta["uid"], resource, meta.get("namespace", ""), meta["name"],
                [r for r in meta.get("ownerReferences") or [] if r.get("uid")], bool(meta.get("deletionTimestamp")),
                list(meta.get("finalizers") or []), meta.get("resourceVersion", ""))


class GarbageCollector:
    def __init__(self, client: Client, clock: Clock, workers: int = WORKERS) -> None:
        self.client = client
        self.clock = clock
        self.nodes: dict[str, Node] = {}
        self.dependents: dict[str, set[str]] = {}  # owner uid → dependents (the owner may not exist)
        self.kinds: dict[tuple[str, str], ApiResource] = {}  # (apiVersion, kind) → resource
        self.informers: list[SharedInformerHandle] = []
        self.runner: Runner[str] = Runner("garbagecollector", self.process, clock, workers)

    async def run(self) -> None:
        for r in await self._discover():
            self.informers.append(self._monitor(r))
        await run_synced(self.informers, (self._collect,), alongside=(self._resync,))

    def _monitor(self, r: ApiResource) -> SharedInformerHandle:
        self.kinds[(r.group_version, r.kind)] = r
        return shared_informer(self.client, self.clock, r.collection(), self._handlers(r))

    async def _resync(self) -> None:
        """GarbageCollector.Sync: discovery again every period, monitors started for resources served since (the
        resources of a CustomResourceDefinition created later) and stopped for those no longer served. A failed
        discovery changes nothing until the next period."""
        added: dict[tuple[str, str], asyncio.Task[None]] = {}
        async with asyncio.TaskGroup() as tasks:
            while True:
                await self.clock.sleep(RESYNC_PERIOD)
                try:
                    found = {(r.group_version, r.kind): r for r in await deletable_resources(self.client)
                             if r.plural not in IGNORED}
                except ApiError as exc:
                    log.warning("garbage collector: discovery failed (%s); monitors unchanged", exc)
                    continue
                for key, r in found.items():
                    if key not in self.kinds:
                        log.info("garbage collector: monitoring %s", r.gvr())
                        added[key] = tasks.create_task(self._monitor(r).run())
                for key in [k for k in added if k not in found]:
                    log.info("garbage collector: no longer monitoring %s", self.kinds[key].gvr())
                    added.pop(key).cancel()
                    del self.kinds[key]

    async def _collect(self) -> None:
        """Process whatever happened while nobody was collecting, then every change as it comes."""
        for uid, node in list(self.nodes.items()):
            if node.owners or node.deleting:
                self.runner.enqueue(uid)
        await self.runner.run()

    async def _discover(self) -> list[ApiResource]:
        while True:
            try:
                return [r for r in await deletable_resources(self.client) if r.plural not in IGNORED]
            except ApiError as exc:
                log.warning("garbage collector: discovery failed (%s); retrying", exc)
                await self.clock.sleep(DISCOVERY_RETRY)

    # --- the graph -------------------------------------------------------------------------------

    def _handlers(self, resource: ApiResource) -> Handlers:
        return Handlers(lambda obj: self.observe(resource, None, obj),
                        lambda old, new: self.observe(resource, old, new),
                        lambda obj: self.forget(obj))

    def observe(self, resource: ApiResource, old: Obj | None, obj: Obj) -> None:
        """processGraphChanges for an add or update."""
        node = _node(resource, obj)
        previous = self.nodes.get(node.uid)
        self.nodes[node.uid] = node
        before = {r["uid"] for r in previous.owners} if previous else set()
        after = {r["uid"] for r in node.owners}
        for gone in before - after:
            self._unlink(gone, node.uid)
        for owner in after - before:
            self.dependents.setdefault(owner, set()).add(node.uid)
        refs_changed = previous is None or previous.owners != node.owners
        policy_pending = node.deleting and (ORPHAN in node.finalizers or FOREGROUND in node.finalizers)
        worth_a_look = refs_changed and node.owners and (previous is not None or self._doubtful_owners(node))
        if policy_pending or worth_a_look:
            self.runner.enqueue(node.uid)

    def _doubtful_owners(self, node: Node) -> bool:
        """A new object is worth a look only if an owner is unknown to the graph or being deleted."""
        return any(self.nodes.get(r["uid"]) is None or self.nodes[r["uid"]].deleting for r in node.owners)

    def _unlink(self, owner: str, dependent: str) -> None:
        deps = self.dependents.get(owner)
        if deps is not None:
            deps.discard(dependent)
            if not deps and owner not in self.nodes:
                del self.dependents[owner]

    def forget(self, obj: Obj) -> None:
        """processGraphChanges for a delete: its dependents may now be garbage; owners deleting in the
        foreground may now be free of blocking dependents."""
        uid = obj["metadata"].get("uid", "")
        node = self.nodes.pop(uid, None)
        if node is None:
            return
        for ref in node.owners:
            self._unlink(ref["uid"], uid)
            owner = self.nodes.get(ref["uid"])
            if owner is not None and owner.deleting_dependents():
                self.runner.enqueue(owner.uid)
        for dep in sorted(self.dependents.get(uid, ())):  # sorted: a set of strings iterates by hash seed
            self.runner.enqueue(dep)
        if not self.dependents.get(uid):
            self.dependents.pop(uid, None)

    # --- work ------------------------------------------------------------------------------------

    async def process(self, uid: str) -> None:
        node = self.nodes.get(uid)
        if node is None:
            return
        if node.deleting:
            if ORPHAN in node.finalizers:
                await self.orphan_dependents(node)
            elif FOREGROUND in node.finalizers:
                await self.process_deleting_dependents(node)
            return
        if node.owners:
            await self.attempt_to_delete(node)

    async def attempt_to_delete(self, node: Node) -> None:
        solid: list[str] = []
        dangling: list[str] = []
        waiting: list[str] = []
        for ref in node.owners:
            state = await self._owner_state(node, ref)
            {"solid": solid, "dangling": dangling, "waiting": waiting}[state].append(ref["uid"])
        if solid:
            if dangling or waiting:
                await self._patch(node, remove_refs_patch(node.uid, dangling + waiting))
            return
        if waiting and self.dependents.get(node.uid):
            policy = "Foreground"
        elif ORPHAN in node.finalizers:
            policy = "Orphan"
        elif FOREGROUND in node.finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        log.info("garbage collector: deleting %s (%s) with propagation %s: its owners are gone", node.path,
                 node.uid, policy)
        try:
            await self.client.delete(node.path, {"propagationPolicy": policy, "preconditions": {"uid": node.uid}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    async def _owner_state(self, node: Node, ref: Obj) -> str:
        owner = self.nodes.get(ref["uid"])
        if owner is not None:
            return "waiting" if owner.deleting_dependents() else "solid"
        resource = self.kinds.get((ref.get("apiVersion", ""), ref.get("kind", "")))
        if resource is None:
            return "solid"  # a kind the API does not serve: never delete on a guess
        if resource.namespaced and not node.namespace:
            return "dangling"  # a cluster-scoped object cannot be owned by a namespaced one
        try:
            live = await self.client.get(resource.path(node.namespace, ref.get("name", "")))
        except ApiError as exc:
            if exc.code == 404:
                return "dangling"
            raise
        if live["metadata"].get("uid") != ref["uid"]:
            return "dangling"
        meta = live["metadata"]
        return "waiting" if meta.get("deletionTimestamp") and FOREGROUND in (meta.get("finalizers") or []) \
            else "solid"

    async def orphan_dependents(self, node: Node) -> None:
        for dep_uid in sorted(self.dependents.get(node.uid, ())):
            dep = self.nodes.get(dep_uid)
            if dep is not None:
                await self._patch(dep, remove_refs_patch(dep.uid, [node.uid]))
        await self._remove_finalizer(node, ORPHAN)

    async def process_deleting_dependents(self, node: Node) -> None:
        blocking = []
        for dep_uid in sorted(self.dependents.get(node.uid, ())):
            dep = self.nodes.get(dep_uid)
            if dep is None:
                continue
            ref = next((r for r in dep.owners if r["uid"] == node.uid), {})
            if ref.get("blockOwnerDeletion"):
                blocking.append(dep)
            if not dep.deleting:
                self.runner.enqueue(dep.uid)
        if not blocking:
            await self._remove_finalizer(node, FOREGROUND)

    async def _remove_finalizer(self, node: Node, finalizer: str) -> None:
        remaining = [f for f in node.finalizers if f != finalizer]
        body = {"metadata": {"finalizers": remaining or None, "resourceVersion": node.resource_version}}
        try:
            await self.client.patch(node.path, body, "application/merge-patch+json")
        except ApiError as exc:
            if exc.code != 404:
                raise  # a conflict: the runner retries from the informer's newer copy

    async def _patch(self, node: Node, body: Obj) -> None:
        try:
            await self.client.patch(node.path, body, STRATEGIC)
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
