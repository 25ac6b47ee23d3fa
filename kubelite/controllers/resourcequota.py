"""The resource quota controller: every ResourceQuota's `status.hard` and `status.used`, measured from the objects.

Mirrors pkg/controller/resourcequota. Quota admission raises `status.used` as objects are created;
this controller writes the truth: `status.hard` from `spec.hard`, and `used` as the sum of what every
object of the namespace in the quota's scopes costs (`kubelite.api.quota`, the evaluators admission
charges with). It recalculates a quota

- when the quota is added or its `spec.hard` changes (a new quota gets its first `used`, which
  admission waits for: `status unknown for quota`);
- when an object a quota tracks is deleted, or changes what it costs (a pod that Succeeded or Failed,
  a Service that became a LoadBalancer): upstream's replenishment, so the usage is released;
- every RESYNC_PERIOD for all quotas (upstream's `--resource-quota-sync-period`, 5 minutes), which
  also releases charges admission made for creates that then failed.

The tracked objects are every namespaced kind discovery lists (upstream's quota monitors, GetQuotableResources),
watched through the shared informers, so `count/<resource>.<group>` works for any served kind. A status
write carries the cached resourceVersion: a conflict (admission charged meanwhile) is retried from the newer copy.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kubelite.api import quota
from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.informer import NAMESPACE_INDEX, Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.discovery import ApiResource, deletable_resources
from kubelite.controllers.informers import SharedInformerHandle, shared_informer
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers")

Obj = dict[str, Any]
RESYNC_PERIOD = 300.0  # ResourceQuotaSyncPeriod
DISCOVERY_RETRY = 5.0
QUOTAS_PATH = "/api/v1/resourcequotas"


class ResourceQuotaController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[Key] = Runner("resourcequota", self.sync, clock)
        self.quotas = shared_informer(client, clock, QUOTAS_PATH,
                                      Handlers(self._quota_added, self._quota_updated))
        self.monitors: dict[tuple[str, str], SharedInformerHandle] = {}

    async def run(self) -> None:
        for r in await self._discover():
            target = (r.group, r.plural)
            if r.namespaced and target not in quota.IGNORED:
                self.monitors[target] = shared_informer(self.client, self.clock, r.collection(),
                                                        self._monitor(*target))
        await run_synced([self.quotas, *self.monitors.values()], (self._resync, self.runner.run))

    async def _discover(self) -> list[ApiResource]:
        while True:
            try:
                return await deletable_resources(self.client)
            except ApiError as exc:
                log.warning("resource quota controller: discovery failed (%s); retrying", exc)
                await self.clock.sleep(DISCOVERY_RETRY)

    # --- events -----------------------------------------------------------------------------------

    def _quota_added(self, rq: Obj) -> None:
        self.runner.enqueue(key_of(rq))

    def _quota_updated(self, old: Obj, new: Obj) -> None:
        """Only a change of intent (spec.hard) needs a recalculation; status writes are this controller's own."""
        if not quota.equals(quota.parse_list((old.get("spec") or {}).get("hard")),
                            quota.parse_list((new.get("spec") or {}).get("hard"))):
            self.runner.enqueue(key_of(new))

    def _monitor(self, group: str, resource: str) -> Handlers:
        """Replenishment: a deleted object, or one whose cost changed, sends its namespace's quotas that track
        its kind to be recalculated. A new object was charged by admission. (The cost is compared only where a
        quota tracks the kind: most namespaces have none, and pods change often.)"""
        evaluator = quota.evaluator_for(group, resource)

        def tracking(obj: Obj) -> list[Key]:
            return [key_of(rq) for rq in self.quotas.by_index(NAMESPACE_INDEX, obj["metadata"].get("namespace", ""))
                    if evaluator.matching_resources(((rq.get("status") or {}).get("hard")) or {})]

        def updated(old: Obj, new: Obj) -> None:
            keys = tracking(new)
            now = self.clock.now()
            if keys and not quota.equals(evaluator.usage(old, now), evaluator.usage(new, now)):
                self._enqueue(keys)

        return Handlers(on_update=updated, on_delete=lambda obj: self._enqueue(tracking(obj)))

    def _enqueue(self, keys: Iterable[Key]) -> None:
        for key in keys:
            self.runner.enqueue(key)

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(RESYNC_PERIOD)
            for key in list(self.quotas.store):
                self.runner.enqueue(key)

    # --- sync -------------------------------------------------------------------------------------

    def _objects(self, namespace: str) -> quota.Lister:
        def list_objects(group: str, resource: str) -> Iterable[Obj] | None:
            monitor = self.monitors.get((group, resource))
            return None if monitor is None else monitor.by_index(NAMESPACE_INDEX, namespace)

        return list_objects

    async def sync(self, key: Key) -> None:
        """syncResourceQuota: measure, and write the status when it differs from what is stored."""
        rq = self.quotas.store.get(key)
        if rq is None:
            return
        status = rq.get("status") or {}
        hard = quota.parse_list((rq.get("spec") or {}).get("hard"))
        previous = quota.parse_list(status.get("used"))
        used = {**previous, **quota.calculate_usage(rq, hard, self._objects(key[0]), self.clock.now())}
        used = quota.mask(used, hard)
        dirty = status.get("hard") is None or status.get("used") is None or \
            not quota.equals(hard, quota.parse_list(status.get("hard"))) or not quota.equals(used, previous)
        if not dirty:
            return
        body = {**rq, "status": {"hard": quota.to_wire(hard), "used": quota.to_wire(used)}}
        try:
            await self.client.request("PUT", resource_path("resourcequotas", key[0], key[1], "status"), body)
        except ApiError as exc:
            if exc.code == 404:
                return
            raise
