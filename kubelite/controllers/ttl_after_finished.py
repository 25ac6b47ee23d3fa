"""The TTL-after-finished controller: deletes a finished Job `ttlSecondsAfterFinished` after it finished.

Mirrors pkg/controller/ttlafterfinished: the clock starts at the Complete or Failed condition's
lastTransitionTime; when it runs out the Job is read afresh from the API (the TTL may have
been changed or removed since the cache saw it) and deleted with `propagationPolicy:
Foreground` and a uid precondition, so its pods go first and a re-created namesake is never hit.
"""

from __future__ import annotations

from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.informer import Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_rfc3339
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.job import finish_condition
from kubelite.controllers.runner import Runner, run_synced

Obj = dict[str, Any]


def expires_at(job: Obj) -> float | None:
    """When `job` is due for deletion, or None if it is not finished, has no TTL or is already being deleted."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    finished = finish_condition(job)
    if ttl is None or finished is None or job["metadata"].get("deletionTimestamp"):
        return None
    stamp = finished.get("lastTransitionTime") or (job.get("status") or {}).get("completionTime")
    return parse_rfc3339(stamp) + ttl if stamp else None


class TTLAfterFinishedController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[Key] = Runner("ttl-after-finished", self.reconcile, clock)
        self.jobs = shared_informer(client, clock, "/apis/batch/v1/jobs",
                                    Handlers(self._changed, lambda o, n: self._changed(n)))

    def _changed(self, job: Obj) -> None:
        if expires_at(job) is not None:
            self.runner.enqueue(key_of(job))

    async def run(self) -> None:
        await run_synced((self.jobs,), (self.runner.run,))

    async def reconcile(self, key: Key) -> None:
        cached = self.jobs.store.get(key)
        if cached is None or expires_at(cached) is None:
            return
        path = resource_path("jobs", key[0], key[1], group_version="batch/v1")
        try:
            fresh = await self.client.get(path)
        except ApiError as exc:
            if exc.code == 404:
                return
            raise
        due = expires_at(fresh)
        if due is None:
            return
        now = self.clock.now()
        if now < due:
            self.runner.queue.add_after(key, due - now)
            return
        try:
            await self.client.delete(path, {"propagationPolicy": "Foreground",
                                            "preconditions": {"uid": fresh["metadata"]["uid"]}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
