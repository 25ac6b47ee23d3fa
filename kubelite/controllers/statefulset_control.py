"""One StatefulSet sync: create, replace, scale down and roll pods (pkg/controller/statefulset/stateful_set_control.go).

The decisions are upstream's `updateStatefulSet`: pods are split into replicas (ordinals in
range) and condemned ones; missing replicas are created at the right revision; with
`OrderedReady` ("monotonic") the sync stops at the first pod that is not yet Running and Ready
(or is terminating), so web-1 is created only once web-0 is Ready, and scale-down removes the
highest ordinal first, one at a time; `Parallel` does each step for all pods at once. A
RollingUpdate deletes pods not at the update revision from the highest ordinal down to
`partition`, as many at a time as `maxUnavailable` (default 1) leaves room for besides the pods
already unavailable; OnDelete leaves replacement to the user.

**At most one pod per identity (seed 002, S1).** A replica is (re)created only when no pod
object of that name exists: a pod that is terminating is waited for, never replaced, however
long its node is unreachable. Deletes are graceful requests; the object disappears only when
its agent confirmed the processes dead (or an administrator force-deletes it, or PodGC after
the node object is deleted), and only then does the API server accept a new pod of that name.
A failed or succeeded pod is deleted and recreated, as upstream: its processes are known dead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from kubelite.controllers import statefulset_utils as su

Obj = dict[str, Any]


class PodControl(Protocol):
    """StatefulPodControlInterface: the writes a sync makes."""

    async def create_pod(self, set_: Obj, pod: Obj) -> bool:
        """Create the pod's claims and the pod; False when a pod of that name still exists (nothing done)."""

    async def delete_pod(self, set_: Obj, pod: Obj) -> None: ...

    async def update_pod(self, set_: Obj, pod: Obj) -> None:
        """Fix the pod's identity labels and its claims' owner references."""

    def claims_match_policy(self, set_: Obj, pod: Obj) -> bool: ...

    async def update_claims_for_policy(self, set_: Obj, pod: Obj) -> None: ...

    def event(self, set_: Obj, kind: str, reason: str, message: str) -> None: ...


async def _run_for_all(items: Sequence[Obj | None], fn: Callable[[int], Awaitable[bool]], monotonic: bool) -> bool:
    """runForAll: in order, stopping at the first that says stop (monotonic); else all at once
    (slow-start batches, so a failing API is not hit by every pod). True when the sync must stop."""
    if monotonic:
        for i in range(len(items)):
            if await fn(i):
                return True
        return False
    batch, i = 1, 0
    while i < len(items):
        await asyncio.gather(*(fn(j) for j in range(i, min(i + batch, len(items)))))
        i += batch
        batch *= 2
    return False


def replica_status(pods: Sequence[Obj | None], min_ready: int, now: float, current: str, update: str) -> Obj:
    """computeReplicaStatus over the replicas and condemned pods."""
    status = {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0, "currentReplicas": 0, "updatedReplicas": 0}
    for pod in pods:
        if pod is None or not su.is_created(pod):
            continue
        status["replicas"] += 1
        if su.is_running_and_ready(pod):
            status["readyReplicas"] += 1
            if su.is_running_and_available(pod, min_ready, now):
                status["availableReplicas"] += 1
        if not su.is_terminating(pod):
            revision = su.pod_revision(pod)
            status["currentReplicas"] += revision == current
            status["updatedReplicas"] += revision == update
    return status


class StatefulSetControl:
    def __init__(self, control: PodControl) -> None:
        self.control = control

    async def update(self, set_: Obj, current_rev: Obj, update_rev: Obj, pods: list[Obj], now: float) -> Obj:
        """updateStatefulSet + the status it leaves (completeRollingUpdate applied)."""
        return await _Sync(self.control, set_, current_rev, update_rev, pods, now).run()


class _Sync:
    def __init__(self, control: PodControl, set_: Obj, current_rev: Obj, update_rev: Obj, pods: list[Obj],
                 now: float) -> None:
        self.control = control
        self.set = set_
        self.spec: Obj = set_["spec"]
        self.current_name: str = current_rev["metadata"]["name"]
        self.update_name: str = update_rev["metadata"]["name"]
        self.current_set = su.apply_revision(set_, current_rev)
        self.update_set = su.apply_revision(set_, update_rev)
        self.now = now
        self.min_ready = int(self.spec.get("minReadySeconds", 0))
        self.monotonic: bool = self.spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        start, replicas = su.start_ordinal(set_), int(self.spec.get("replicas", 1))
        self.start = start
        self.replicas: list[Obj | None] = [None] * replicas
        self.condemned: list[Obj] = []
        for pod in pods:
            pod = {**pod, "metadata": dict(pod["metadata"])}  # marks below must not touch the informer's copy
            ordinal = su.get_ordinal(pod)
            if su.in_ordinal_range(pod, set_):
                self.replicas[ordinal - start] = pod
            elif ordinal >= 0:
                self.condemned.append(pod)
        self.condemned.sort(key=su.get_ordinal, reverse=True)
        for i in range(replicas):
            if self.replicas[i] is None:
                self.replicas[i] = self._new_pod(i)
        unhealthy = [p for p in self.replicas if p is not None and not su.is_healthy(p)]
        unhealthy += [p for p in reversed(self.condemned) if not su.is_healthy(p)]
        self.first_unhealthy = unhealthy[0] if unhealthy else None

    def _new_pod(self, i: int) -> Obj:
        return su.new_versioned_pod(self.current_set, self.update_set, self.current_name, self.update_name,
                                    i + self.start)

    def _status(self) -> Obj:
        status = replica_status([*self.replicas, *self.condemned], self.min_ready, self.now, self.current_name,
                                self.update_name)
        status.update(observedGeneration=self.set["metadata"].get("generation", 1),
                      currentRevision=self.current_name, updateRevision=self.update_name)
        old = self.set.get("status") or {}
        if old.get("collisionCount") is not None:
            status["collisionCount"] = old["collisionCount"]
        strategy = (self.spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
        wanted = int(self.spec.get("replicas", 1))
        if (strategy == "RollingUpdate" and status["updatedReplicas"] == status["replicas"] == wanted
                and status["readyReplicas"] == wanted):  # completeRollingUpdate
            status["currentRevision"] = self.update_name
            status["currentReplicas"] = status["updatedReplicas"]
        return status

    async def run(self) -> Obj:
        if self.set["metadata"].get("deletionTimestamp"):
            return self._status()
        if await _run_for_all(self.replicas, self._process_replica, self.monotonic):
            return self._status()
        if await _run_for_all(self.condemned, self._fix_claims, self.monotonic):
            return self._status()
        if await _run_for_all(self.condemned, self._process_condemned, self.monotonic):
            return self._status()
        strategy = self.spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") == "OnDelete":
            return self._status()
        await self._rolling_update(int((strategy.get("rollingUpdate") or {}).get("partition", 0)),
                                   su.max_unavailable(self.set))
        return self._status()

    async def _process_replica(self, i: int) -> bool:
        """processReplica; True when the sync must stop here."""
        pod = self.replicas[i]
        assert pod is not None
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Failed", "Succeeded") and not su.is_terminating(pod):
            name, set_name = pod["metadata"]["name"], self.set["metadata"]["name"]
            ns = self.set["metadata"].get("namespace", "")
            if phase == "Failed":
                self.control.event(self.set, "Warning", "RecreatingFailedPod",
                                   f"StatefulSet {ns}/{set_name} is recreating failed Pod {name}")
            else:
                self.control.event(self.set, "Normal", "RecreatingTerminatedPod",
                                   f"StatefulSet {ns}/{set_name} is recreating terminated Pod {name}")
            await self.control.delete_pod(self.set, pod)
            pod = self.replicas[i] = self._new_pod(i)
        if not su.is_created(pod):
            # S1: create_pod is a plain create; while any object named like this pod exists, the API server
            # refuses it (AlreadyExists) and nothing happens.
            if not await self.control.create_pod(self.set, pod):
                return True
            return self.monotonic
        if su.is_terminating(pod) and self.monotonic:
            return True  # wait for graceful deletion to complete; never replace a terminating pod
        if not su.is_running_and_ready(pod) and self.monotonic:
            return True
        if not su.is_running_and_available(pod, self.min_ready, self.now) and self.monotonic:
            return True
        if su.identity_matches(self.set, pod) and su.storage_matches(self.set, pod) and \
                self.control.claims_match_policy(self.update_set, pod):
            return False
        if not su.is_terminating(pod):
            await self.control.update_pod(self.update_set, pod)
        return False

    async def _fix_claims(self, i: int) -> bool:
        pod = self.condemned[i]
        if not self.control.claims_match_policy(self.update_set, pod):
            await self.control.update_claims_for_policy(self.update_set, pod)
        return False

    async def _process_condemned(self, i: int) -> bool:
        """processCondemned: scale down from the highest ordinal, waiting for predecessors when monotonic."""
        pod = self.condemned[i]
        if su.is_terminating(pod):
            return self.monotonic
        if not su.is_running_and_ready(pod) and self.monotonic and pod is not self.first_unhealthy:
            return True
        if not su.is_running_and_available(pod, self.min_ready, self.now) and self.monotonic and \
                pod is not self.first_unhealthy:
            return True
        await self.control.delete_pod(self.set, pod)
        return True

    async def _rolling_update(self, partition: int, max_unavailable: int) -> None:
        """updateStatefulSetAfterInvariantEstablished: count the unavailable replicas; delete old-revision pods from
        the highest ordinal down to the partition while fewer than maxUnavailable are unavailable. Under Parallel,
        old pods that are unavailable anyway go first and do not use up the budget (upstream's two phases), so a
        few broken pods at low ordinals cannot make the update take down many good ones."""
        unavailable = [p for p in self.replicas if p is not None and su.is_unavailable(p, self.min_ready, self.now)]
        old_and_unavailable = [p for p in unavailable if not self.monotonic and self._outdated(p)]
        if len(unavailable) >= max_unavailable and not old_and_unavailable:
            return
        # A pod created in this very sync is left alone (upstream would delete it again at once).
        targets = [p for p in reversed(self.replicas[partition:])
                   if p is not None and su.is_created(p) and self._outdated(p)]
        if not self.monotonic:
            for pod in targets:
                if not su.is_running_and_available(pod, self.min_ready, self.now):
                    await self._delete_for_update(pod)
            targets = [p for p in targets if su.is_running_and_available(p, self.min_ready, self.now)]
        for pod in targets[:max(0, max_unavailable - len(unavailable))]:
            await self._delete_for_update(pod)

    def _outdated(self, pod: Obj) -> bool:
        return su.pod_revision(pod) != self.update_name and not su.is_terminating(pod)

    async def _delete_for_update(self, pod: Obj) -> None:
        await self.control.delete_pod(self.set, pod)
        pod["metadata"]["deletionTimestamp"] = "requested"  # no longer current (status.currentReplicas--)
