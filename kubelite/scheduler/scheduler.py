"""The scheduler, wired: informers feed the node table and the queue; one loop runs scheduling cycles.

This module only connects the parts: the node table (the cache and its columnar snapshot), the
queue with its nominator, one framework per profile (profile.py), the scheduling cycle
(cycle.py) and the binder (binder.py). It is also the plugins' handle (framework.Handle):
namespace labels, owner selectors, PDBs and pods for preemption, the clock and the random source.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Coroutine, Mapping
from typing import Any

from kubelite.api.selectors import LabelSelector, compile_label_selector
from kubelite.client.events import EventSink
from kubelite.client.informer import NAMESPACE_INDEX, Handlers, Informer
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.scheduler.binder import Binder
from kubelite.scheduler.config import SchedulerConfig
from kubelite.scheduler.cycle import Attempt, SchedulingCycle
from kubelite.scheduler.metrics import SchedulerMetrics
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.plugins.volume_cache import VolumeCache
from kubelite.scheduler.podinfo import PodInfo, pod_info, status_start_time
from kubelite.scheduler.profile import build
from kubelite.scheduler.queue import Nominator, QueuedPod, SchedulingQueue
from kubelite.scheduler.runtime import Framework

log = logging.getLogger("kubelite.scheduler")

Obj = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")
OWNER_KINDS = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets"}
VOLUME_PATHS = ("/api/v1/persistentvolumeclaims", "/api/v1/persistentvolumes", "/apis/storage.k8s.io/v1/storageclasses")


class Scheduler:
    def __init__(self, client: Client, clock: Clock, config: SchedulerConfig | None = None,
                 seed: int | None = None, metrics: SchedulerMetrics | None = None) -> None:
        self.client = client
        self.clock = clock
        self.config = config or SchedulerConfig()
        self.rng = random.Random(seed)
        self.table = NodeTable()
        self.queue = SchedulingQueue(clock, self.config.initial_backoff, self.config.max_backoff)
        self._namespace_labels: dict[str, dict[str, str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.volume_informers = [Informer(client, path, clock, Handlers(lambda o: self.queue.move_all(),
                                                                         lambda o, n: self.queue.move_all()))
                                 for path in VOLUME_PATHS]  # claims, volumes, classes: the volume plugins' view
        self.volume_cache = VolumeCache(*(i.store for i in self.volume_informers))
        self.profiles: dict[str, Framework] = {p.scheduler_name: build(p, self) for p in self.config.profiles}
        self.events = EventSink(client, clock)
        self.binder = Binder(client, clock, self.table, self.queue, lambda coro: self._spawn(coro), self.events)
        self.pods = Informer(client, "/api/v1/pods", clock,
                             Handlers(self._pod_added, lambda old, new: self._pod_added(new), self._pod_deleted))
        self.nodes = Informer(client, "/api/v1/nodes", clock,
                              Handlers(self._node_changed, lambda old, new: self._node_changed(new),
                                       self._node_deleted))
        self.namespaces = Informer(client, "/api/v1/namespaces", clock,
                                   Handlers(self._namespace_changed, lambda o, n: self._namespace_changed(n)))
        self.owners = {kind: Informer(client, f"/apis/apps/v1/{plural}", clock)
                       for kind, plural in OWNER_KINDS.items()}
        self.pdbs = Informer(client, "/apis/policy/v1/poddisruptionbudgets", clock)
        self.cycle = SchedulingCycle(self.table, self.queue, self.profiles, self.binder, self.pods.get, self.rng,
                                     clock, self.config.percentage_of_nodes_to_score, metrics)
        self.cycle.metrics.watch_pending(self._pending_counts)

    # --- Handle (for plugins) --------------------------------------------------------------------

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]:
        return self._namespace_labels

    @property
    def nominator(self) -> Nominator:
        return self.queue.nominator

    def now(self) -> float:
        return self.clock.now()

    def owner_selector(self, pod: PodInfo) -> LabelSelector | None:
        """The selector of the controller owning the pod (for default spread constraints)."""
        for ref in pod.obj["metadata"].get("ownerReferences") or []:
            informer = self.owners.get(ref.get("kind", ""))
            if informer is not None and ref.get("controller"):
                owner = informer.get(pod.namespace, ref.get("name", ""))
                if owner is not None:
                    return compile_label_selector((owner.get("spec") or {}).get("selector"))
        return None

    def disruption_budgets(self) -> list[Obj]:
        return list(self.pdbs.store.values())

    def pods_in_namespace(self, namespace: str) -> list[Obj]:
        return self.pods.by_index(NAMESPACE_INDEX, namespace)

    # --- informer handlers -----------------------------------------------------------------------

    def _responsible(self, obj: Obj) -> bool:
        return (obj.get("spec") or {}).get("schedulerName", "default-scheduler") in self.profiles

    def _pod_added(self, obj: Obj) -> None:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        node = spec.get("nodeName")
        nominator = self.queue.nominator
        if node:
            uid = meta.get("uid", "")
            self.queue.done(uid)
            nominator.delete(uid)
            if phase in TERMINAL:
                if self.table.remove_pod(uid) is not None:
                    self.queue.move_all()
                return
            known = self.table.pod(uid)
            if known is not None and known.node_name == node and known.labels == (meta.get("labels") or {}) \
                    and known.terminating == bool(meta.get("deletionTimestamp")):
                # the binding confirmed the assumption, or a status write: nothing the table counts changed,
                # but preemption orders victims by the start time the agent writes (GetPodStartTime)
                known.obj = obj
                known.started = status_start_time(obj)
            else:
                self.table.add_pod(pod_info(obj))
            return
        info = pod_info(obj)
        nominated = (obj.get("status") or {}).get("nominatedNodeName")
        if nominated and not info.terminating:
            nominator.add(info, nominated)
        else:
            nominator.delete(info.uid)
        gated = bool(obj["spec"].get("schedulingGates"))
        if self._responsible(obj) and not info.terminating and phase not in TERMINAL and not gated:
            self.queue.add(info)
        else:
            self.queue.delete(info.uid)

    def _pod_deleted(self, obj: Obj) -> None:
        uid = obj["metadata"].get("uid", "")
        self.queue.delete(uid)
        self.binder.forget_reported(uid)
        self.queue.nominator.delete(uid)
        if self.table.remove_pod(uid) is not None:
            self.queue.move_all()

    def _node_changed(self, obj: Obj) -> None:
        self.table.upsert_node(obj)
        self.queue.move_all()

    def _node_deleted(self, obj: Obj) -> None:
        self.table.remove_node(obj["metadata"]["name"])

    def _namespace_changed(self, obj: Obj) -> None:
        self._namespace_labels[obj["metadata"]["name"]] = obj["metadata"].get("labels") or {}

    # --- the loop --------------------------------------------------------------------------------

    @property
    def informers(self) -> list[Informer]:
        """In start order: what plugins read first, pods last."""
        return [self.namespaces, *self.owners.values(), self.pdbs, *self.volume_informers, self.nodes, self.pods]

    async def run(self) -> None:
        runners = [asyncio.create_task(i.run(), name=f"informer {i.path}") for i in self.informers]
        runners.append(asyncio.create_task(self.events.run(), name="scheduler events"))
        try:
            for i in self.informers:
                await i.synced.wait()
            runners.append(asyncio.create_task(self._tick()))
            while True:
                qp = await self.queue.pop()
                started = self.clock.monotonic()
                try:
                    self.schedule_one(qp)
                except Exception:  # a bug in one cycle must not stop scheduling
                    log.exception("scheduling %s/%s", qp.info.namespace, qp.info.name)
                    self.queue.error(qp)
                    self.cycle.metrics.attempt("error", qp.info.spec.get("schedulerName", "default-scheduler"),
                                               self.clock.monotonic() - started)
                await self.clock.sleep(0)  # let binds and informers run between cycles
        finally:
            for t in runners:
                t.cancel()
            for t in list(self._tasks):
                t.cancel()

    async def _tick(self) -> None:
        """Wake the queue once a second so parked pods time out and backoffs expire."""
        while True:
            await self.clock.sleep(1.0)
            self.queue.flush()

    def _pending_counts(self) -> dict[str, int]:
        """scheduler_pending_pods: the queue's pods by where they wait, and the gated pods it never queues."""
        counts = {"active": 0, "backoff": 0, "unschedulable": 0}
        for qp in self.queue.pods.values():
            if qp.where in counts:
                counts[qp.where] += 1
        counts["gated"] = sum(1 for p in self.pods.store.values() if (p.get("spec") or {}).get("schedulingGates")
                              and not p["spec"].get("nodeName") and self._responsible(p))
        return counts

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- the cycle, for callers (`kubelite explain`, tests) --------------------------------------

    def schedule_one(self, qp: QueuedPod) -> str | None:
        return self.cycle.schedule_one(qp)

    def evaluate(self, fw: Framework, pod: PodInfo) -> Attempt:
        return self.cycle.evaluate(fw, pod)

    def explain(self, attempt: Attempt, fw: Framework) -> Obj:
        return self.cycle.explain(attempt, fw)
