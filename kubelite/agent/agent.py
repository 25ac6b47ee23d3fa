"""The node agent: registers its Node, renews its Lease, runs one worker per pod, serves logs.

It is a client of the API server like every other component: it watches the pods bound to
its node, writes their status through the status subresource, and deletes a pod object
(grace 0) only after its processes are confirmed dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import shutil
import signal
import socket
from pathlib import Path
from typing import Any

from aiohttp import web

from kubelite.agent import checkpoint, logs
from kubelite.agent.cgroups import Cgroups
from kubelite.agent.config import NodeConfig
from kubelite.agent.runtime import ProcessRuntime
from kubelite.agent.worker import MIN_STOP_WINDOW, PodWorker
from kubelite.api.errors import ApiError
from kubelite.api.podresources import pod_requests, quantity_units
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import STRATEGIC_PATCH, ApiClient, resource_path
from kubelite.client.informer import Handlers, Informer
from kubelite.clock import Clock, bounded, rfc3339

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]
LEASE_SECONDS = 40
RENEW_INTERVAL = 10.0
STATUS_REPORT_INTERVAL = 300.0  # kubelet's nodeStatusReportFrequency: with leases, a full status every 5 min
COMPONENT = "kubelet"


def host_capacity(data_dir: Path, max_pods: int) -> dict[str, str]:
    mem_kib = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    disk = shutil.disk_usage(data_dir).total
    return {"cpu": str(os.cpu_count() or 1), "memory": f"{mem_kib}Ki", "ephemeral-storage": str(disk),
            "pods": str(max_pods)}


class Agent:
    def __init__(self, client: ApiClient, clock: Clock, node_name: str, data_dir: Path, config: NodeConfig,
                 host_ip: str = "127.0.0.1", port: int = 0) -> None:
        self.client = client
        self.clock = clock
        self.node_name = node_name
        self.data_dir = data_dir
        self.config = config
        self.host_ip = host_ip
        self.port = port
        self.runtime = ProcessRuntime(clock, Cgroups.detect())
        self.checkpoints = checkpoint.load_all(data_dir / "pods")  # a previous agent's pods, by uid
        self.workers: dict[str, PodWorker] = {}
        self.finished: dict[str, PodWorker] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.base_env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": "/root"}
        self.capacity = host_capacity(data_dir, config.max_pods)
        self.pods = Informer(client, "/api/v1/pods", clock, Handlers(self._pod_seen, lambda o, n: self._pod_seen(n),
                                                                     self._pod_gone),
                             params={"fieldSelector": f"spec.nodeName={node_name}"})
        self._background: set[asyncio.Task[Any]] = set()
        self.events = EventSink(client)
        self._since = rfc3339(clock.now())  # the conditions' transition time: they have held since start

    # --- node ------------------------------------------------------------------------------------

    def node_object(self) -> Obj:
        now = rfc3339(self.clock.now())
        conditions = [{"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": now,
                       "lastTransitionTime": self._since} for t, s, r, m in (
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status"))]
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node_name, "labels": {
            "kubernetes.io/hostname": self.node_name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(),
                                                                              platform.machine())}},
            "spec": {},
            "status": {"capacity": dict(self.capacity), "allocatable": dict(self.capacity), "conditions": conditions,
                       "addresses": [{"type": "InternalIP", "address": self.host_ip},
                                     {"type": "Hostname", "address": socket.gethostname()}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
                       "nodeInfo": {"architecture": platform.machine(), "bootID": "", "containerRuntimeVersion":
                                    "kubelite-process://0.1", "kernelVersion": platform.release(),
                                    "kubeProxyVersion": "", "kubeletVersion": "v1.32.0+kubelite", "machineID": "",
                                    "operatingSystem": "linux", "osImage": platform.platform(), "systemUUID": ""}}}

    async def register(self) -> None:
        node = self.node_object()
        try:
            await self.client.create("/api/v1/nodes", node)
        except ApiError as exc:
            if exc.code != 409:
                raise
            await self.client.patch(f"/api/v1/nodes/{self.node_name}/status", {"status": node["status"]},
                                    STRATEGIC_PATCH)

    async def heartbeat(self) -> None:
        """Renew the node's Lease in kube-node-lease every 10 s (NodeLease heartbeats) and post the full
        node status every 5 minutes, as kubelet does when leases carry the liveness signal."""
        path = resource_path("leases", "kube-node-lease", group_version="coordination.k8s.io/v1")
        reported = self.clock.now()
        while True:
            if self.clock.now() - reported >= STATUS_REPORT_INTERVAL or await self._marked_not_ready():
                reported = self.clock.now()
                with contextlib.suppress(ApiError):
                    await self.client.patch(f"/api/v1/nodes/{self.node_name}/status",
                                            {"status": self.node_object()["status"]}, STRATEGIC_PATCH)
            now = self.clock.now()
            stamp = rfc3339(now).replace("Z", ".000000Z")
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": self.node_name, "namespace": "kube-node-lease"},
                     "spec": {"holderIdentity": self.node_name, "leaseDurationSeconds": LEASE_SECONDS,
                              "renewTime": stamp}}
            try:
                await self.client.patch(f"{path}/{self.node_name}", {"spec": lease["spec"]})
            except ApiError as exc:
                if exc.code == 404:
                    with contextlib.suppress(ApiError):
                        await self.client.create(path, lease)
            await self.clock.sleep(RENEW_INTERVAL)

    async def _marked_not_ready(self) -> bool:
        """Whether the API shows this node not Ready (the node lifecycle controller marks a silent node
        Unknown): then the real status is posted at once, as kubelet posts when the stored status differs."""
        try:
            node = await self.client.get(f"/api/v1/nodes/{self.node_name}")
        except ApiError:
            return False
        ready: Obj = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
                          {})
        return ready.get("status") != "True"

    # --- pods ------------------------------------------------------------------------------------

    def _pod_seen(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        worker = self.workers.get(uid)
        if worker is not None:
            worker.update(pod)
            return
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            if pod["metadata"].get("deletionTimestamp"):
                self._spawn(self.delete_pod(pod))
            return
        saved = self.checkpoints.pop(uid, None)
        worker = PodWorker(self, pod, saved[1] if saved else None)
        self.workers[uid] = worker
        task = asyncio.create_task(worker.run(), name=f"pod {pod['metadata']['name']}")
        self.tasks[uid] = task
        task.add_done_callback(self._worker_done)

    def _worker_done(self, task: asyncio.Task[None]) -> None:
        """A worker's pod is finished (terminal, removed or force-deleted): forget it."""
        for uid, t in list(self.tasks.items()):
            if t is task:
                del self.tasks[uid]
                worker = self.workers.pop(uid, None)
                if worker is not None and not worker.gone:
                    self.finished[uid] = worker  # keeps its logs readable until the object goes

    async def _stop_orphans(self) -> None:
        """After the first list: stop the processes of checkpointed pods this node no longer runs.

        Their objects were deleted (or finished) while no agent watched; the processes get the
        stop signal and SIGKILL after the 2 s minimum window, as for a force-deleted pod.
        """
        await self.pods.synced.wait()
        leftovers, self.checkpoints = self.checkpoints, {}
        for directory, saved in leftovers.values():
            handles = [checkpoint.recover(self.runtime, c) for c in (saved.get("containers") or {}).values()]
            live = [h for h in handles if h is not None and h.alive]
            for h in live:
                self.runtime.signal(h, signal.SIGTERM)
            if live:
                log.info("stopping %d process(es) of pod %s/%s, which is gone", len(live), saved.get("namespace"),
                         saved.get("name"))
                await bounded(self.clock, asyncio.gather(*(h.exited() for h in live)), MIN_STOP_WINDOW)
                for h in live:
                    self.runtime.kill(h)
                await asyncio.gather(*(h.exited() for h in live))
            checkpoint.remove(directory)

    def _pod_gone(self, pod: Obj) -> None:
        self.finished.pop(pod["metadata"].get("uid", ""), None)
        worker = self.workers.get(pod["metadata"].get("uid", ""))
        if worker is not None:
            worker.removed()  # force-deleted: the processes still get stopped (short grace)

    def admit(self, pod: Obj) -> tuple[str, str] | None:
        """Node-side admission: refuse pods that do not fit the node's allocatable (OutOfcpu, …)."""
        used: dict[str, int] = {}
        for uid, w in self.workers.items():
            if uid == pod["metadata"]["uid"] or w.init_failed:
                continue
            for r, v in pod_requests(w.pod["spec"]).items():
                used[r] = used.get(r, 0) + v
        if len(self.workers) > int(self.capacity["pods"]):
            return "OutOfpods", "Node didn't have enough resource: pods"
        for r, want in pod_requests(pod["spec"]).items():
            cap = quantity_units(r, self.capacity[r]) if r in self.capacity else 0
            if want > 0 and used.get(r, 0) + want > cap:
                return (f"OutOf{r}", f"Pod was rejected: Node didn't have enough resource: {r}, requested: {want}, "
                                     f"used: {used.get(r, 0)}, capacity: {cap}")
        return None

    async def write_status(self, pod: Obj, status: Obj) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            await self.client.patch(resource_path("pods", meta["namespace"], meta["name"], "status"),
                                    {"metadata": {"uid": meta["uid"]}, "status": status}, STRATEGIC_PATCH)

    async def delete_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            await self.client.delete(resource_path("pods", meta["namespace"], meta["name"]),
                                     {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})

    def event(self, pod: Obj, reason: str, message: str, kind: str = "Normal") -> None:
        self.events.post(event_for(pod, reason, message, "Pod", COMPONENT, self.clock.now(), kind,
                                   host=self.node_name))

    def watch(self, coro: Any) -> None:
        """Run a container's exit watcher in the background (held so it is not collected)."""
        self._spawn(coro)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- lifecycle -------------------------------------------------------------------------------

    async def run(self) -> None:
        app = web.Application()
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        app.router.add_get("/healthz", self._healthz)
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host_ip, self.port)
        await site.start()
        if not self.port:
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        await self.register()
        tasks = [asyncio.create_task(self.heartbeat()), asyncio.create_task(self.pods.run()),
                 asyncio.create_task(self._stop_orphans()), asyncio.create_task(self.events.run())]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            for t in list(self.tasks.values()):
                t.cancel()
            for t in list(self.tasks.values()):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            await runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        ns, name, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        worker = next((w for w in [*self.workers.values(), *self.finished.values()]
                       if w.pod["metadata"]["name"] == name and w.pod["metadata"]["namespace"] == ns), None)
        if worker is None:
            return web.json_response(ApiError(404, "NotFound", f'pod "{name}" not found on this node').status(),
                                     status=404)
        return await logs.serve(request, worker, container, self.clock)
