"""The disruption controller: keeps every PodDisruptionBudget's status current (P7).

Mirrors pkg/controller/disruption for budgets over pods: expectedPods, currentHealthy,
desiredHealthy, disruptionsAllowed, observedGeneration and the DisruptionAllowed
condition, computed by `kubelite.api.disruption` (shared with the eviction API). Entries
in status.disruptedPods are dropped once the pod is gone or has been deleted, or after
two minutes (upstream's DeletionTimeout). Each PDB is reconciled when it or a pod it
may select changes, by the shared reconciler runner (a work queue keyed by PDB, failed
reconciles retried with back-off); writes go through the status subresource and only when
something changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubelite.api import disruption
from kubelite.client.http import resource_path
from kubelite.client.informer import NAMESPACE_INDEX, Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_rfc3339, rfc3339
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers")

Obj = dict[str, Any]
DELETION_TIMEOUT = 120.0
RESYNC_PERIOD = 30.0


def desired_status(pdb: Obj, pods: list[Obj], now: float) -> Obj:
    """The status for `pdb` over `pods` (its namespace's pods), from scratch."""
    alive = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    return status_for(pdb, disruption.members(pdb, pods), alive.__contains__, now)


def status_for(pdb: Obj, expected: Mapping[str, bool], alive: Callable[[str], bool], now: float) -> Obj:
    """The status for `pdb` given its expected pods (name → ready) and which pod names still exist
    undeleted (entries of disruptedPods for other pods are dropped, as are those past the timeout)."""
    old = pdb.get("status") or {}
    disrupted = {name: ts for name, ts in (old.get("disruptedPods") or {}).items()
                 if alive(name) and now - parse_rfc3339(ts) < DELETION_TIMEOUT}
    allowed = disruption.budget({**pdb, "status": {**old, "disruptedPods": disrupted}}, expected)
    condition = {"type": "DisruptionAllowed", "status": "True" if allowed.disruptions_allowed > 0 else "False",
                 "reason": "SufficientPods" if allowed.disruptions_allowed > 0 else "InsufficientPods",
                 "message": "", "observedGeneration": pdb["metadata"].get("generation", 1)}
    previous = next((c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
    same = previous is not None and previous.get("status") == condition["status"]
    condition["lastTransitionTime"] = previous.get("lastTransitionTime") if same and previous else rfc3339(now)
    status: Obj = {"observedGeneration": pdb["metadata"].get("generation", 1),
                   "expectedPods": allowed.expected_pods, "currentHealthy": allowed.current_healthy,
                   "desiredHealthy": allowed.desired_healthy, "disruptionsAllowed": allowed.disruptions_allowed,
                   "conditions": [condition]}
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


class DisruptionController:
    """Reconciles a PDB when it changes or when one of its expected pods comes, goes or changes readiness.

    Each PDB's expected pods are indexed (name → ready) and kept current from pod events, so a
    reconcile costs the size of its budget, not of the namespace, and a pod event costs one
    selector match per PDB of its namespace.
    """

    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[Key] = Runner("disruption", self.reconcile, clock)
        self.expected: dict[Key, dict[str, bool]] = {}  # PDB → its expected pods → ready
        self.selectors: dict[Key, Any] = {}  # PDB → the selector `expected` was built with
        self.pdbs = shared_informer(client, clock, "/apis/policy/v1/poddisruptionbudgets",
                                    Handlers(self._pdb_changed, lambda o, n: self._pdb_changed(n), self._pdb_deleted))
        self.pods = shared_informer(client, clock, "/api/v1/pods",
                                    Handlers(lambda p: self._pod_changed(None, p), self._pod_changed,
                                      lambda p: self._pod_changed(p, None)))

    def _mark(self, key: Key) -> None:
        self.runner.enqueue(key)

    def _pdb_changed(self, pdb: Obj) -> None:
        key = key_of(pdb)
        selector = (pdb.get("spec") or {}).get("selector")
        if key not in self.expected or self.selectors.get(key) != selector:
            ns_pods = self.pods.by_index(NAMESPACE_INDEX, key[0])
            self.expected[key] = disruption.members(pdb, ns_pods)
            self.selectors[key] = selector
        self._mark(key)

    def _pdb_deleted(self, pdb: Obj) -> None:
        self.expected.pop(key_of(pdb), None)
        self.selectors.pop(key_of(pdb), None)

    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        pod = new if new is not None else old
        assert pod is not None
        ns, name = pod["metadata"].get("namespace", ""), pod["metadata"]["name"]
        for pdb in self.pdbs.by_index(NAMESPACE_INDEX, ns):
            key = key_of(pdb)
            expected = self.expected.setdefault(key, {})
            was = expected.get(name)
            now = disruption.pod_is_ready(new) if new is not None and disruption.counts(pdb, new) else None
            if now is None:
                expected.pop(name, None)
            else:
                expected[name] = now
            disrupted = name in ((pdb.get("status") or {}).get("disruptedPods") or {})
            if was != now or disrupted:
                self._mark(key)

    def _alive(self, namespace: str) -> Callable[[str], bool]:
        def alive(name: str) -> bool:
            pod = self.pods.store.get((namespace, name))
            return pod is not None and not pod["metadata"].get("deletionTimestamp")
        return alive

    async def run(self) -> None:
        await run_synced((self.pdbs, self.pods), (self._resync, self.runner.run))

    async def _resync(self) -> None:
        """Re-check every budget periodically so expired disruptedPods entries are dropped."""
        while True:
            await self.clock.sleep(RESYNC_PERIOD)
            for key in list(self.pdbs.store):
                self._mark(key)

    async def reconcile(self, key: Key) -> None:
        pdb = self.pdbs.store.get(key)
        if pdb is None:
            return
        status = status_for(pdb, self.expected.get(key, {}), self._alive(key[0]), self.clock.now())
        if status == (pdb.get("status") or {}):
            return
        body = {**pdb, "status": status}
        # An error (the API unavailable; a conflict, the cache behind a newer version) raises: the runner
        # retries this key with back-off, and the next attempt starts from the informer's newer copy.
        await self.client.request("PUT", resource_path("poddisruptionbudgets", key[0], key[1], "status",
                                                       group_version="policy/v1"), body)
