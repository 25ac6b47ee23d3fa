"""Watches a chaos run from outside the cluster: samples the host's process table, lists pods, and keeps
writing small objects whose acknowledgements it records — all talking to the API server directly, not
through the agents' faulty links."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import ApiClient
from kubelite.clock import Clock, parse_rfc3339
from kubelite.controllers.fencing import fences_path
from kubelite.testing.chaos import procs, workload
from kubelite.testing.chaos.observations import Fence, Observations, PodSample, Removal

log = logging.getLogger(__name__)

CALL_TIMEOUT = 3.0
WRITE_INTERVAL = 0.2
ACK_LABEL = "chaos.kubelite.io/ack"
PODS = f"/api/v1/namespaces/{workload.NAMESPACE}/pods"
TERMINAL_PHASES = ("Succeeded", "Failed")


def _ts(value: Any, started: float) -> float | None:
    if not value:
        return None
    return parse_rfc3339(str(value)) - started


def removal(t: float, pod: Any) -> Removal:
    """A pod's final state (a DELETED watch event's object) as the fence checker reads it."""
    meta, status = pod["metadata"], pod.get("status") or {}
    containers = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    running = status.get("phase") not in TERMINAL_PHASES and any("running" in (c.get("state") or {})
                                                                 for c in containers)
    return Removal(t, meta["uid"], meta["name"], (pod.get("spec") or {}).get("nodeName") or "",
                   meta.get("deletionGracePeriodSeconds"), running)


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
        self._fence_index: dict[str, int] = {}  # a Succeeded NodeFence's uid -> its place in obs.fences
        self._pods_version = ""  # where the pod watch resumes ("": list first)
        self.stopped = asyncio.Event()  # set: every loop ends (see _every)
        self._stop_writing = asyncio.Event()

    def now(self) -> float:
        return self.clock.now() - self.started

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        return await asyncio.wait_for(self.client.request(method, path, body), CALL_TIMEOUT)

    async def sample_procs(self) -> None:
        while not self.stopped.is_set():
            t = self.now()
            found = procs.scan(self.run_id, t)
            self.obs.procs += found
            self.obs.mounts += procs.mounts(found)
            await self.clock.sleep(self.obs.sample_interval)

    async def _every(self, interval: float, step: Callable[[], Awaitable[None]],
                     stop: asyncio.Event | None = None) -> None:
        """Run `step` every `interval` until `stop` (or `stopped`) is set, or cancelled. An unavailable or
        stalled server is what the run is about and says nothing; anything else is logged, and the loop
        carries on regardless.

        The events, not only cancellation, end the loops: on Python 3.11 `asyncio.wait_for` swallows a
        cancellation that arrives as its call completes (CPython gh-86296, fixed in 3.12), and the loop
        then carried on — in seed 2 the writer kept writing after the read-back, which reported its last
        write lost though the store had it."""
        while not self.stopped.is_set() and not (stop is not None and stop.is_set()):
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

    async def list_fences(self) -> None:
        await self._every(self.obs.pod_list_interval, self._list_fences)

    async def _list_fences(self) -> None:
        """Record each fence once confirmed (NodeFence phase Succeeded, at its fencedTime) and when it is
        cleared (its NodeFence gone). Polled, not watched: a missed poll only delays `cleared`, and the
        confirmation time comes from the object itself."""
        t = self.now()
        items = (await self._call("GET", fences_path()))["items"]
        for f in items:
            status, uid = f.get("status") or {}, f["metadata"]["uid"]
            if status.get("phase") == "Succeeded" and uid not in self._fence_index:
                self._fence_index[uid] = len(self.obs.fences)
                fenced = _ts(status.get("fencedTime"), self.started)
                self.obs.fences.append(Fence(t if fenced is None else fenced, f["spec"]["nodeName"]))
        present = {f["metadata"]["uid"] for f in items}
        for uid, i in self._fence_index.items():
            if uid not in present and self.obs.fences[i].cleared is None:
                self.obs.fences[i] = dataclasses.replace(self.obs.fences[i], cleared=t)

    async def watch_removals(self) -> None:
        await self._every(self.obs.pod_list_interval, self._watch_pods)

    async def _watch_pods(self) -> None:
        """Record every pod deletion's final state. The watch resumes where it broke (the server restarted),
        so no deletion is missed unless the version is too old (410: listed afresh, deletions in between
        lost — removed-only-when-dead still sees any process that outlived its pod object)."""
        if not self._pods_version:
            self._pods_version = (await self._call("GET", PODS))["metadata"]["resourceVersion"]
        try:
            async for event in self.client.watch(PODS, {"resourceVersion": self._pods_version,
                                                        "allowWatchBookmarks": "true"}):
                obj = event["object"]
                self._pods_version = obj["metadata"].get("resourceVersion") or self._pods_version
                if event["type"] == "DELETED":
                    self.obs.removals.append(removal(self.now(), obj))
        except ApiError as exc:
            if exc.code == 410:
                self._pods_version = ""
            raise

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
        await self._every(WRITE_INTERVAL, self._write_one, self._stop_writing)

    async def stop_writing(self, writer: asyncio.Task[None]) -> None:
        """End `write_acknowledged` (running as `writer`) for good: no write is acknowledged after this
        returns, so the read-back that follows sees every acknowledged one."""
        self._stop_writing.set()
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)

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
