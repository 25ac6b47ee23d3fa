"""Watches a chaos run from outside the cluster: samples the host's process table, lists pods, and keeps
writing small objects whose acknowledgements it records — all talking to the API server directly, not
through the agents' faulty links."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import ApiClient
from kubelite.clock import Clock, parse_rfc3339
from kubelite.testing.chaos import procs, workload
from kubelite.testing.chaos.observations import Observations, PodSample

log = logging.getLogger(__name__)

CALL_TIMEOUT = 3.0
WRITE_INTERVAL = 0.2
ACK_LABEL = "chaos.kubelite.io/ack"


def _ts(value: Any, started: float) -> float | None:
    if not value:
        return None
    return parse_rfc3339(str(value)) - started


class Observer:
    def __init__(self, client: ApiClient, run_id: str, clock: Clock) -> None:
        self.clock = clock
        self.client = client
        self.run_id = run_id
        self.started = clock.now()
        self.obs = Observations()
        self._written = 0
        self.unhealthy = "not looked at yet"  # the last successful look's reason, for the report
        self.health: list[tuple[float, bool]] = []  # (t, workload healthy) per successful look

    def now(self) -> float:
        return self.clock.now() - self.started

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        return await asyncio.wait_for(self.client.request(method, path, body), CALL_TIMEOUT)

    async def sample_procs(self) -> None:
        while True:
            t = self.now()
            found = procs.scan(self.run_id, t)
            self.obs.procs += found
            self.obs.mounts += procs.mounts(found)
            await self.clock.sleep(self.obs.sample_interval)

    async def _every(self, interval: float, step: Callable[[], Awaitable[None]]) -> None:
        """Run `step` every `interval` until cancelled. An unavailable or stalled server is what the run is
        about and says nothing; anything else is logged, and the loop carries on regardless."""
        while True:
            try:
                await step()
            except (ApiError, TimeoutError) as exc:
                log.debug("observer step %s: %r", step.__name__, exc)
            except Exception:
                log.exception("observer step failed")
            await self.clock.sleep(interval)

    async def list_pods(self) -> None:
        await self._every(self.obs.pod_list_interval, self._list_pods)

    async def _list_pods(self) -> None:
        t = self.now()
        pods = (await self._call("GET", f"/api/v1/namespaces/{workload.NAMESPACE}/pods"))["items"]
        self.obs.pod_list_times.append(t)
        for p in pods:
            meta = p["metadata"]
            self.obs.pods.append(PodSample(t, meta["uid"], meta["name"], p["spec"].get("nodeName", ""),
                                           _ts(meta.get("deletionTimestamp"), self.started),
                                           meta.get("deletionGracePeriodSeconds")))
        self.unhealthy = self._unhealthy(pods)
        self.health.append((t, not self.unhealthy))

    def _unhealthy(self, pods: list[dict[str, Any]]) -> str:
        """What keeps the workload from being healthy ("" when it is): every replica Ready in the API and
        exactly one live process per StatefulSet identity."""
        ready = {name: 0 for name in workload.REPLICAS}
        for p in pods:
            app = p["metadata"].get("labels", {}).get("app")
            conditions = (p.get("status") or {}).get("conditions") or []
            if app in ready and not p["metadata"].get("deletionTimestamp") and any(
                    c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                ready[app] += 1
        alive: dict[str, set[str]] = {}
        for s in procs.scan(self.run_id, 0.0):
            if s.stateful:
                alive.setdefault(s.identity, set()).add(s.pod_uid)
        wrong = [f"{name}: {ready[name]}/{want} Ready in the API" for name, want in workload.REPLICAS.items()
                 if ready[name] != want]
        wrong += [f"{ident}: {len(uids)} live pods' processes" for ident, uids in sorted(alive.items())
                  if len(uids) != 1]
        if len(alive) != workload.REPLICAS[workload.STATEFULSET]:
            wrong.append(f"{len(alive)} StatefulSet identities with live processes")
        return "; ".join(wrong)

    async def write_acknowledged(self) -> None:
        await self._every(WRITE_INTERVAL, self._write_one)

    async def _write_one(self) -> None:
        self._written += 1
        name = f"ack-{self._written:06d}"
        body = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"n": str(self._written)},
                "metadata": {"name": name, "labels": {ACK_LABEL: self.run_id}}}
        await self._call("POST", f"/api/v1/namespaces/{workload.NAMESPACE}/configmaps", body)
        self.obs.acked_writes.add(name)  # only an answered 201 counts; a timeout is not an acknowledgement

    async def read_back(self) -> None:
        """The acknowledged writes readable now (after recovery)."""
        path = f"/api/v1/namespaces/{workload.NAMESPACE}/configmaps?labelSelector={ACK_LABEL}%3D{self.run_id}"
        for _ in range(20):
            with contextlib.suppress(ApiError, TimeoutError):
                items = (await self._call("GET", path))["items"]
                self.obs.final_writes = {i["metadata"]["name"] for i in items}
                return
            await self.clock.sleep(1)

    async def capabilities(self) -> set[str]:
        """Which optional checkers' capabilities the cluster has (see invariants.STORAGE / FENCING)."""
        found = set()
        for group, resource in (("storage.k8s.io/v1", "volumeattachments"), ("kubelite.io/v1alpha1", "nodefences")):
            with contextlib.suppress(ApiError, TimeoutError):
                resources = (await self._call("GET", f"/apis/{group}"))["resources"]
                if any(r["name"] == resource for r in resources):
                    found.add(f"{group} {resource}")
        return found
