"""Pod garbage collection (L18): removes pods nobody else will, the one controller allowed to force delete.

A port of pkg/controller/podgc. Every gc-check-period (20 s) it deletes, with grace 0:
- **terminated pods** (Succeeded or Failed) beyond terminated-pod-gc-threshold (12,500; 0 turns
  this off), evicted ones first, then oldest first;
- **terminating pods on out-of-service nodes**: the node is not Ready and an administrator put
  the `node.kubernetes.io/out-of-service` taint on it, declaring its processes gone;
- **orphaned pods**, bound to a node that no longer exists: a node missing from the cache is
  quarantined for 40 s and then looked up in the API itself before its pods go, so a node that
  is merely new to the cache is never mistaken for a deleted one. They get a `DisruptionTarget`
  condition (reason DeletionByPodGC);
- **unscheduled terminating pods**, which no agent will ever finish.

Seed 002 (S2) allows these force deletions and no others: node deletion is the signal that a
node is permanently gone, and the other cases have no running processes or an administrator's
explicit word. A pod not yet terminal is first set Failed, so its owner and users see an end
state rather than a pod that vanished while Running.

Upstream lists every pod each pass; here the pod handlers keep the candidates of each case (terminal
pods, terminating pods, pods by node) so that a pass costs what it may delete and the number of nodes,
not the number of pods (a simulation of thousands of pods per minute ran all four scans every 20 s).
The terminal pods are also kept in deletion order (a heap), so that a cluster holding more than the
threshold — every pass deletes a few of 12,500 — does not sort all of them every 20 s (13 % of a 5,000-node
simulation's CPU once its finished pods reached the threshold).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import STRATEGIC_PATCH, resource_path
from kubelite.client.informer import Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, rfc3339
from kubelite.controllers import taints as tt
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import run_synced

log = logging.getLogger("kubelite.controllers.podgc")

Obj = dict[str, Any]
ORPHAN_CONDITION = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                    "message": "PodGC: node no longer exists"}


@dataclass(frozen=True)
class PodGCOptions:
    terminated_pod_gc_threshold: int = 12_500
    gc_check_period: float = 20.0
    quarantine_time: float = 40.0


def is_terminated(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


Order = tuple[bool, str, str]


def eviction_and_creation_order(pod: Obj) -> Order:
    """byEvictionAndCreationTimestamp: evicted pods first, then the oldest, then by name."""
    status = pod.get("status") or {}
    evicted = status.get("phase") == "Failed" and status.get("reason") == "Evicted"
    return not evicted, pod["metadata"].get("creationTimestamp", ""), pod["metadata"]["name"]


class PodGCController:
    def __init__(self, client: Client, clock: Clock, options: PodGCOptions | None = None) -> None:
        self.client = client
        self.clock = clock
        self.options = options or PodGCOptions()
        self.pods = shared_informer(client, clock, "/api/v1/pods",
                                    Handlers(self._pod_seen, lambda old, new: self._pod_seen(new), self._pod_gone))
        self.nodes = shared_informer(client, clock, "/api/v1/nodes", Handlers())
        self.quarantine: dict[str, float] = {}  # missing node -> when (monotonic) to look it up
        self._terminated: dict[Key, Order] = {}  # Succeeded or Failed -> its place in deletion order
        self._deletion_order: list[tuple[Order, Key]] = []  # a heap of them (and stale entries: _first_terminated)
        self._terminating: set[Key] = set()  # with a deletionTimestamp
        self._bound: dict[str, set[Key]] = {}  # node name -> the pods bound to it
        self._node_of: dict[Key, str] = {}

    # --- the candidates, kept by the pod handlers ---------------------------------------------------------

    def _pod_seen(self, pod: Obj) -> None:
        key = key_of(pod)
        if is_terminated(pod):
            order = eviction_and_creation_order(pod)
            if self._terminated.get(key) != order:
                self._terminated[key] = order
                heapq.heappush(self._deletion_order, (order, key))
        else:
            self._terminated.pop(key, None)
        _mark(self._terminating, key, bool(pod["metadata"].get("deletionTimestamp")))
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if self._node_of.get(key, "") != node:
            self._unbind(key)
            if node:
                self._node_of[key] = node
                self._bound.setdefault(node, set()).add(key)

    def _pod_gone(self, pod: Obj) -> None:
        key = key_of(pod)
        self._terminated.pop(key, None)
        self._terminating.discard(key)
        self._unbind(key)

    def _unbind(self, key: Key) -> None:
        node = self._node_of.pop(key, None)
        if node is not None:
            bound = self._bound[node]
            bound.discard(key)
            if not bound:
                del self._bound[node]

    def _first_terminated(self, count: int) -> list[Key]:
        """The first `count` terminated pods in deletion order. Entries of pods no longer terminated (or gone, or
        re-ordered) are dropped as they surface; the heap is rebuilt when those outnumber the live ones. The
        pods returned stay in it: they are terminated until their deletion reaches the cache."""
        heap = self._deletion_order
        if len(heap) > 2 * len(self._terminated) + 64:
            heap[:] = [(order, key) for key, order in self._terminated.items()]
            heapq.heapify(heap)
        first: list[tuple[Order, Key]] = []
        while heap and len(first) < count:
            order, key = entry = heapq.heappop(heap)
            if self._terminated.get(key) == order:
                first.append(entry)
        for entry in first:
            heapq.heappush(heap, entry)
        return [key for _, key in first]

    def _cached(self, keys: Iterable[Key]) -> list[Obj]:
        """The cached pods of `keys`, in key order (a pass acts in the same order on every run)."""
        store = self.pods.store
        return [store[k] for k in sorted(keys) if k in store]

    async def run(self) -> None:
        await run_synced((self.pods, self.nodes), (self._loop,))

    async def _loop(self) -> None:
        while True:
            try:
                await self.gc()
            except Exception:
                log.exception("pod GC pass failed; the next pass tries again")
            await self.clock.sleep(self.options.gc_check_period)

    async def gc(self) -> None:
        """One pass; each case is handed its candidates (each still checks every pod it is given)."""
        threshold = self.options.terminated_pod_gc_threshold
        if 0 < threshold < len(self._terminated):
            await self.gc_terminated(len(self._terminated) - threshold)
        terminating = self._cached(self._terminating)
        await self.gc_terminating(terminating)
        # A node's presence is one lookup in the cache's dict (keyed ("", name)): no set of every node's name made
        # per pass, and no call per node (at 5,000 nodes, ≈ 1 % of a simulation's CPU went to this line's calls).
        nodes = self.nodes.store
        missing = [node for node in self._bound if ("", node) not in nodes]
        await self.gc_orphaned(self._cached(k for node in missing for k in self._bound[node]))
        await self.gc_unscheduled_terminating(terminating)

    async def gc_terminated(self, excess: int) -> None:
        """gcTerminated: the `excess` terminated pods beyond the threshold, first in byEvictionAndCreationTimestamp
        order, are deleted."""
        log.info("garbage collecting %d terminated pods", excess)
        store = self.pods.store
        for key in self._first_terminated(excess):
            pod = store.get(key)
            if pod is not None and is_terminated(pod):
                await self._delete(pod)

    async def gc_terminating(self, pods: list[Obj]) -> None:
        doomed = []
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                continue
            node = self.nodes.get("", (pod.get("spec") or {}).get("nodeName", ""))
            if node is None:
                continue
            ready = (tt.condition(node, "Ready") or {}).get("status") == "True"
            if not ready and any(t.get("key") == tt.OUT_OF_SERVICE for t in tt.taints_of(node)):
                doomed.append(pod)
        for pod in sorted(doomed, key=eviction_and_creation_order):
            await self._delete(pod)

    async def gc_orphaned(self, pods: list[Obj]) -> None:
        now = self.clock.monotonic()
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and self.nodes.get("", node) is None:
                self.quarantine.setdefault(node, now + self.options.quarantine_time)
        deleted = await self._discover_deleted_nodes(now)
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") in deleted:
                log.info("pod %s/%s is bound to deleted node %s: force deleting it", *key_of(pod),
                         pod["spec"]["nodeName"])
                await self._delete(pod, ORPHAN_CONDITION)

    async def _discover_deleted_nodes(self, now: float) -> set[str]:
        """Nodes past their quarantine that the API itself (not only the cache) no longer has."""
        deleted: set[str] = set()
        due = [name for name, when in self.quarantine.items() if when <= now]
        # Upstream's existingNodeNames: the cache as the pass found it, before the lookups below let it move on.
        cached = {name for name in due if self.nodes.get("", name) is not None}
        for name in due:
            del self.quarantine[name]
            if name in cached:
                continue
            try:
                await self.client.get(resource_path("nodes", name=name))
            except ApiError as exc:
                if exc.code == 404:
                    deleted.add(name)
                else:  # unknown: the node is quarantined again by the next pass if still missing
                    log.warning("looking up node %s failed: %s", name, exc)
        return deleted

    async def gc_unscheduled_terminating(self, pods: list[Obj]) -> None:
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
                await self._delete(pod)

    async def _delete(self, pod: Obj, condition: Obj | None = None) -> None:
        """markFailedAndDeletePodWithCondition: set Failed (with `condition`) unless terminal, then delete
        with grace 0. A failure is logged and left to the next pass."""
        ns, name = key_of(pod)
        uid = pod["metadata"]["uid"]
        try:
            if not is_terminated(pod):
                status: Obj = {"phase": "Failed"}
                if condition is not None:
                    status["conditions"] = [{**condition, "lastTransitionTime": rfc3339(self.clock.now())}]
                await self.client.patch(resource_path("pods", ns, name, "status"),
                                        {"metadata": {"uid": uid}, "status": status}, STRATEGIC_PATCH)
            await self.client.delete(resource_path("pods", ns, name),
                                     {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except ApiError as exc:
            if exc.code != 404:
                log.warning("pod GC: deleting %s/%s failed: %s", ns, name, exc)


def _mark(keys: set[Key], key: Key, member: bool) -> None:
    if member:
        keys.add(key)
    else:
        keys.discard(key)
