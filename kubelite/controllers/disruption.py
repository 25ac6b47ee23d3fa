"""The disruption controller: keeps every PodDisruptionBudget's status current (P7).

Mirrors pkg/controller/disruption for budgets over pods: expectedPods, currentHealthy,
desiredHealthy, disruptionsAllowed, observedGeneration and the DisruptionAllowed
condition, computed by `kubelite.api.disruption` (shared with the eviction API). Entries
in status.disruptedPods are dropped once the pod is gone or has been deleted, or after
two minutes (upstream's DeletionTimeout). Each PDB is reconciled when it or a pod it
may select changes; writes go through the status subresource and only when something
changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from kubelite.api import disruption
from kubelite.api.errors import ApiError
from kubelite.client.http import ApiClient, resource_path
from kubelite.client.informer import Handlers, Informer, Key, key_of
from kubelite.clock import Clock, parse_rfc3339, rfc3339

log = logging.getLogger("kubelite.controllers")

Obj = dict[str, Any]
DELETION_TIMEOUT = 120.0


def desired_status(pdb: Obj, pods: list[Obj], now: float) -> Obj:
    old = pdb.get("status") or {}
    alive = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    disrupted = {name: ts for name, ts in (old.get("disruptedPods") or {}).items()
                 if name in alive and now - parse_rfc3339(ts) < DELETION_TIMEOUT}
    budget = disruption.compute({**pdb, "status": {**old, "disruptedPods": disrupted}}, pods)
    allowed = budget.disruptions_allowed
    condition = {"type": "DisruptionAllowed", "status": "True" if allowed > 0 else "False",
                 "reason": "SufficientPods" if allowed > 0 else "InsufficientPods", "message": "",
                 "observedGeneration": pdb["metadata"].get("generation", 1)}
    previous = next((c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
    same = previous is not None and previous.get("status") == condition["status"]
    condition["lastTransitionTime"] = previous.get("lastTransitionTime") if same and previous else rfc3339(now)
    status: Obj = {"observedGeneration": pdb["metadata"].get("generation", 1),
                   "expectedPods": budget.expected_pods, "currentHealthy": budget.current_healthy,
                   "desiredHealthy": budget.desired_healthy, "disruptionsAllowed": allowed,
                   "conditions": [condition]}
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


class DisruptionController:
    def __init__(self, client: ApiClient, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.dirty: set[Key] = set()
        self.wake = asyncio.Event()
        self.pdbs = Informer(client, "/apis/policy/v1/poddisruptionbudgets", clock,
                             Handlers(self._pdb_changed, lambda o, n: self._pdb_changed(n), lambda o: None))
        self.pods = Informer(client, "/api/v1/pods", clock,
                             Handlers(self._pod_changed, lambda o, n: self._pod_changed(n), self._pod_changed))

    def _pdb_changed(self, pdb: Obj) -> None:
        self.dirty.add(key_of(pdb))
        self.wake.set()

    def _pod_changed(self, pod: Obj) -> None:
        ns = pod["metadata"].get("namespace", "")
        for key in self.pdbs.store:
            if key[0] == ns:
                self.dirty.add(key)
                self.wake.set()

    async def run(self) -> None:
        runners = [asyncio.create_task(i.run()) for i in (self.pdbs, self.pods)]
        try:
            await self.pdbs.synced.wait()
            await self.pods.synced.wait()
            ticker = asyncio.create_task(self._tick())
            runners.append(ticker)
            while True:
                await self.wake.wait()
                self.wake.clear()
                batch, self.dirty = self.dirty, set()
                for key in batch:
                    await self.reconcile(key)
        finally:
            for t in runners:
                t.cancel()

    async def _tick(self) -> None:
        """Re-check every budget periodically so expired disruptedPods entries are dropped."""
        while True:
            await self.clock.sleep(30.0)
            self.dirty.update(self.pdbs.store)
            self.wake.set()

    async def reconcile(self, key: Key) -> None:
        pdb = self.pdbs.store.get(key)
        if pdb is None:
            return
        pods = [p for (ns, _), p in self.pods.store.items() if ns == key[0]]
        status = desired_status(pdb, pods, self.clock.now())
        if status == (pdb.get("status") or {}):
            return
        body = {**pdb, "status": status}
        with contextlib.suppress(ApiError):  # a conflict means a newer version is on its way: reconciled again
            await self.client.request("PUT", resource_path("poddisruptionbudgets", key[0], key[1], "status",
                                                           group_version="policy/v1"), body)
