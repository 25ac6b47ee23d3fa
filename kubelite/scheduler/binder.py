"""The binding cycle and every write the scheduler makes besides it (events, conditions, nominations,
victims, explanations).

runBindingCycle in schedule_one.go: PreBind, Bind (the profile's Bind plugins: DefaultBinder
posts pods/binding), then PostBind's `Scheduled` event; on failure the assumed pod is forgotten
and Reserve undone, and the pod is retried after backoff, or dropped when it is gone or already
bound. Writes about unschedulable pods are deduplicated: the same verdict twice writes nothing.
Events go through the scheduler's `EventSink`, as upstream's recorder: correlated (a repeated
FailedScheduling becomes a count on one event, many differing ones are combined, a spamming
pod is rate limited) and sent in the background, in order per pod. No write failure escapes:
every one is logged or ignored, so the scheduling loop never stops.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import STRATEGIC_PATCH, resource_path
from kubelite.client.interface import Client
from kubelite.clock import Clock, rfc3339
from kubelite.scheduler import explain
from kubelite.scheduler.candidate import Candidate
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.podinfo import PodInfo
from kubelite.scheduler.queue import QueuedPod, SchedulingQueue
from kubelite.scheduler.runtime import Framework

log = logging.getLogger("kubelite.scheduler")
Obj = dict[str, Any]
Spawn = Callable[[Coroutine[Any, Any, Any]], None]


class Binder:
    def __init__(self, client: Client, clock: Clock, table: NodeTable, queue: SchedulingQueue, spawn: Spawn,
                 events: EventSink) -> None:
        self.client = client
        self.events = events
        self.clock = clock
        self.table = table
        self.queue = queue
        self.spawn = spawn
        self._reported: dict[str, str] = {}  # uid → the last unschedulable message written

    # --- the binding cycle -----------------------------------------------------------------------

    async def binding_cycle(self, fw: Framework, state: CycleState, qp: QueuedPod, pod: Obj, node: str) -> bool:
        """PreBind and Bind; True once the pod is bound."""
        info = qp.info
        try:
            status = await fw.run_pre_bind(state, info, node)
            if status.ok:
                status = await fw.run_bind(state, info, node)
        except ApiError as exc:
            self._forget(fw, state, info, node)
            if exc.code == 404 or (exc.code == 409 and "already assigned" in exc.message):
                self.queue.delete(info.uid)
            else:
                log.info("binding %s/%s to %s failed: %s", info.namespace, info.name, node, exc)
                self.queue.error(qp)
            return False
        except Exception:  # a transport or plugin bug: forget and retry after backoff
            self._forget(fw, state, info, node)
            self.queue.error(qp)
            log.exception("binding %s/%s", info.namespace, info.name)
            return False
        if not status.ok:
            self._forget(fw, state, info, node)
            log.info("binding %s/%s to %s: %s", info.namespace, info.name, node, "; ".join(status.reasons))
            self.queue.error(qp)
            return False
        self.queue.done(info.uid)
        self._reported.pop(info.uid, None)
        self.event(pod, "Scheduled", f"Successfully assigned {info.namespace}/{info.name} to {node}",
                         "Normal", "Binding")
        return True

    def _forget(self, fw: Framework, state: CycleState, pod: PodInfo, node: str) -> None:
        """ForgetPod and Unreserve: the assumed pod no longer counts on the node."""
        fw.run_unreserve(state, pod, node)
        self.table.remove_pod(pod.uid)

    def forget_reported(self, uid: str) -> None:
        self._reported.pop(uid, None)

    def was_reported(self, uid: str) -> bool:
        return uid in self._reported

    # --- unschedulable pods ----------------------------------------------------------------------

    def unschedulable(self, pod: Obj, message: str, explanation: Callable[[], Obj]) -> None:
        """FailedScheduling event, PodScheduled=False condition and the stored explanation, once per verdict."""
        uid = pod["metadata"]["uid"]
        if self._reported.get(uid) == message:
            return
        self._reported[uid] = message
        self.event(pod, "FailedScheduling", message, "Warning", "Scheduling")
        self.spawn(self._condition(pod, message))
        self.spawn(self.record(explanation()))

    async def record(self, body: Obj) -> None:
        """Store an explanation (replace, or create on first write) where `kubectl get --raw` can read it."""
        meta = body["metadata"]
        path = resource_path("schedulingexplanations", meta["namespace"], group_version=explain.API_VERSION)
        try:
            await self.client.request("PUT", f"{path}/{meta['name']}", body)
        except ApiError as exc:
            if exc.code != 404:
                return
            with contextlib.suppress(ApiError):
                await self.client.create(path, body)

    async def _condition(self, pod: Obj, message: str) -> None:
        meta = pod["metadata"]
        patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": message, "lastProbeTime": None,
                                            "lastTransitionTime": rfc3339(self.clock.now())}]}}
        with contextlib.suppress(ApiError):
            await self.client.patch(resource_path("pods", meta["namespace"], meta["name"], "status"), patch,
                                    STRATEGIC_PATCH)

    def event(self, pod: Obj, reason: str, message: str, kind: str, action: str) -> None:
        name = (pod.get("spec") or {}).get("schedulerName", "default-scheduler")
        self.events.post(event_for(pod, reason, message, "Pod", name, self.clock.now(), kind, action=action))

    # --- preemption (P4, P5) ---------------------------------------------------------------------

    async def set_nomination(self, pod: Obj, node: str | None) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            await self.client.patch(resource_path("pods", meta["namespace"], meta["name"], "status"),
                                    {"status": {"nominatedNodeName": node}})

    def preempt(self, preemptor: Obj, candidate: Candidate) -> None:
        """prepareCandidate: each victim gets the DisruptionTarget condition, a Preempted event, a graceful delete."""
        for victim in candidate.victims:
            self.spawn(self._preempt_victim(victim, preemptor, candidate.node))

    async def _preempt_victim(self, victim: PodInfo, preemptor: Obj, node: str) -> None:
        meta, pmeta = victim.obj["metadata"], preemptor["metadata"]
        scheduler_name = preemptor["spec"].get("schedulerName", "default-scheduler")
        path = resource_path("pods", meta["namespace"], meta["name"])
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                     "message": f"{scheduler_name}: preempting to accommodate a higher priority pod "
                                f"({pmeta['namespace']}/{pmeta['name']})",
                     "lastTransitionTime": rfc3339(self.clock.now())}
        try:
            await self.client.patch(f"{path}/status", {"status": {"conditions": [condition]}}, STRATEGIC_PATCH)
            self.event(victim.obj, "Preempted", f"Preempted by pod {pmeta['namespace']}/{pmeta['name']} "
                                                f"({pmeta['uid']}) on node {node}", "Normal", "Preempting")
            await self.client.delete(path, {"preconditions": {"uid": meta["uid"]}})
        except ApiError as exc:
            if exc.code != 404:
                log.info("preempting %s/%s: %s", meta["namespace"], meta["name"], exc)
