"""The taint eviction controller: pods that do not tolerate a node's NoExecute taints are deleted, gracefully.

A port of pkg/controller/tainteviction (the "taint manager"). For a pod bound to a node with
NoExecute taints:
- a taint the pod does not tolerate → deleted at once;
- every taint tolerated, some for a limited `tolerationSeconds` → deleted when the shortest runs
  out, counted from when the eviction was first scheduled (a pod update cannot lengthen it:
  upstream's "lengthening toleration shouldn't work");
- tolerated forever, or the taints gone → any scheduled eviction is cancelled (an event says so).

A deletion is always **graceful** (S2): the pod first gets a `DisruptionTarget` condition (reason
DeletionByTaintManager) so its owner and users can see why, then a DELETE without a grace period,
so the pod's own terminationGracePeriodSeconds applies and the object stays until its agent
confirms the processes dead. A pod on an unreachable node therefore stays Terminating until the
node returns (or the node object is deleted, which pod GC takes as confirmed loss).

Evictions are reconciles on the shared runner, keyed by pod: a scheduled one is a delayed add,
and every reconcile re-reads the pod and its node's taints, so a stale timer does nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import STRATEGIC_PATCH, resource_path
from kubelite.client.informer import NODE_NAME_INDEX, Handlers, Key, by_node_name, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, rfc3339
from kubelite.controllers import taints as tt
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.tainteviction")

Obj = dict[str, Any]
COMPONENT = "taint-eviction-controller"
WORKERS = 8  # UpdateWorkerSize
DISRUPTION_TARGET = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                     "message": "Taint manager: deleting due to NoExecute taint"}


@dataclass(frozen=True)
class Scheduled:
    created: float
    fire_at: float


class TaintEvictionController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.events = EventSink(client, clock)
        self.tainted: dict[str, list[Obj]] = {}  # node → its NoExecute taints (taintedNodes)
        self.scheduled: dict[Key, Scheduled] = {}  # pods waiting out a tolerationSeconds
        self.runner: Runner[Key] = Runner("taint-eviction", self.reconcile, clock, workers=WORKERS)
        self.nodes = shared_informer(client, clock, "/api/v1/nodes", Handlers(
            lambda n: self.node_updated(None, n), self.node_updated, lambda n: self.node_updated(n, None)))
        self.pods = shared_informer(client, clock, "/api/v1/pods", Handlers(
            self._pod_changed, lambda old, new: self._pod_changed(new), self._pod_changed))
        self.pods.add_index(NODE_NAME_INDEX, by_node_name)

    async def run(self) -> None:
        await run_synced((self.nodes, self.pods), (self.runner.run,), alongside=(self.events.run,))

    # --- informer handlers (handleNodeUpdate / handlePodUpdate) -----------------------------------

    def node_updated(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            assert old is not None
            self.tainted.pop(old["metadata"]["name"], None)
            return
        name = new["metadata"]["name"]
        taints = tt.no_execute(tt.taints_of(new))
        if old is not None and taints == tt.no_execute(tt.taints_of(old)) and name in self.tainted:
            return
        if taints:
            self.tainted[name] = taints
        elif self.tainted.pop(name, None) is None and old is not None:
            return  # untainted before and after
        for key in self.pods.index_keys(NODE_NAME_INDEX, name):
            self.runner.enqueue(key)

    def _pod_changed(self, pod: Obj) -> None:
        self.runner.enqueue(key_of(pod))

    # --- processPodOnNode ------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        pod = self.pods.store.get(key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            self.scheduled.pop(key, None)  # gone, or already being deleted: nothing left to do
            return
        node = (pod.get("spec") or {}).get("nodeName", "")
        taints = self.tainted.get(node) if node else None
        if not taints:
            self._cancel(pod)
            return
        tolerated, used = tt.matching_tolerations(taints, (pod.get("spec") or {}).get("tolerations") or [])
        if not tolerated:
            await self._evict(pod)
            return
        seconds = tt.min_toleration_seconds(used)
        if seconds is None:
            self._cancel(pod)  # tolerated forever
            return
        now = self.clock.now()
        scheduled = self.scheduled.get(key)
        if scheduled is None:
            scheduled = self.scheduled[key] = Scheduled(now, now + seconds)
        if now >= scheduled.fire_at:
            await self._evict(pod)
        else:
            self.runner.queue.add_after(key, scheduled.fire_at - now)

    def _cancel(self, pod: Obj) -> None:
        if self.scheduled.pop(key_of(pod), None) is not None:
            ns, name = key_of(pod)
            self._event(pod, f"Cancelling deletion of Pod {ns}/{name}")

    async def _evict(self, pod: Obj) -> None:
        """addConditionAndDeletePod: the DisruptionTarget condition, then a graceful delete (never grace 0)."""
        ns, name = key_of(pod)
        uid = pod["metadata"]["uid"]
        self._event(pod, f"Marking for deletion Pod {ns}/{name}")
        try:
            if tt.condition(pod, "DisruptionTarget") is None:
                condition = {**DISRUPTION_TARGET, "lastTransitionTime": rfc3339(self.clock.now())}
                await self.client.patch(resource_path("pods", ns, name, "status"),
                                        {"metadata": {"uid": uid}, "status": {"conditions": [condition]}},
                                        STRATEGIC_PATCH)
            await self.client.delete(resource_path("pods", ns, name), {"preconditions": {"uid": uid}})
        except ApiError as exc:
            if exc.code not in (404, 409):  # gone, or replaced by a namesake: nothing to evict
                raise
        self.scheduled.pop((ns, name), None)

    def _event(self, pod: Obj, message: str) -> None:
        self.events.post(event_for(pod, "TaintManagerEviction", message, "Pod", COMPONENT, self.clock.now()))
