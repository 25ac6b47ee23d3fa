"""The node agent: the wiring of kubelet's parts for one node.

It registers the Node and renews its Lease (node.py), watches the pods bound to the node and
hands each to the pod workers (pod_workers.py: sequencing only), whose work is pod sync
(pod_sync.py) against the node services this class provides (services.NodeServices: clock,
runtime, config, status manager, events). Pod status is written only by the status manager
(status_manager.py). The runtime is injected: real processes or hollow containers. No
long-running loop ends on an error (loops.py), and no API failure ever reaches a container.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from kubelite.agent import checkpoint, housekeeping, server
from kubelite.agent.config import NodeConfig, node_allocatable
from kubelite.agent.eviction import wiring as eviction
from kubelite.agent.eviction.host_stats import PodPaths
from kubelite.agent.loops import forever
from kubelite.agent.metrics import KubeletMetrics, census, metrics_routes, running_containers
from kubelite.agent.node import NodeReporter, host_capacity
from kubelite.agent.pod_sync import PodSync
from kubelite.agent.pod_workers import PodWorkers
from kubelite.agent.proxy.proxier import Proxier
from kubelite.agent.runtime.interface import Runtime
from kubelite.agent.self_fence import FencedRuntime, FenceGate
from kubelite.agent.service_env import NodeEnv
from kubelite.agent.stats import ResourceStats
from kubelite.agent.status_manager import StatusManager
from kubelite.agent.termination import MIN_STOP_WINDOW
from kubelite.agent.volumes.claims import ClaimVolumes
from kubelite.agent.volumes.manager import VolumeManager
from kubelite.agent.volumes.objects import ObjectWatcher, Ref
from kubelite.agent.volumes.tokens import TokenManager
from kubelite.api.podresources import pod_requests, quantity_units
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import ApiClient
from kubelite.client.informer import Handlers, Informer
from kubelite.client.interface import Client
from kubelite.clock import Clock, bounded

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]
COMPONENT = "kubelet"
TERMINAL = ("Succeeded", "Failed")


class Agent:
    def __init__(self, client: Client, clock: Clock, node_name: str, data_dir: Path, config: NodeConfig,
                 runtime: Runtime, host_ip: str = "127.0.0.1", port: int = 0, proxy: Proxier | None = None,
                 client_ca: bytes | None = None) -> None:
        self.client = client
        self.clock = clock
        self.node_name = node_name
        self.data_dir = data_dir
        self.config = config
        self.fence_gate = FenceGate(clock, config.self_fence_after)  # self-fencing and the Fenced condition
        self.runtime: Runtime = FencedRuntime(runtime, self.fence_gate)
        self.host_ip = host_ip
        self.port = port
        self.services = Informer(client, "/api/v1/services", clock)  # for service links (service_env)
        self.base_env = NodeEnv({"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": "/root"},
                                self.services.store.values)
        self.client_ca = client_ca  # who may call the agent's endpoint (server.py): the API server's CA
        self.capacity = host_capacity(data_dir, config.max_pods)
        self.allocatable = node_allocatable(config, self.capacity)  # refused beyond the capacity, as kubelet
        self.events = EventSink(client, clock)
        self.claim_volumes = ClaimVolumes(client, node_name, data_dir,  # persistentVolumeClaim volumes (S5)
                                          (data_dir, *config.protected_paths))
        self.node = NodeReporter(client, clock, node_name, host_ip, self.capacity, lambda: self.port,
                                 lambda: self.eviction.pressure(), self.fence_gate,
                                 client.close_connections if isinstance(client, ApiClient) else None,
                                 config.node_lease_duration, self.claim_volumes,
                                 self._retry_informers, self.events.post, self.allocatable.current)
        self.checkpoints = checkpoint.load_all(data_dir / "pods")  # a previous agent's pods, by uid
        self.pods = Informer(client, "/api/v1/pods", clock,
                             Handlers(self._pod_seen, lambda o, n: self._pod_seen(n), self._pod_gone),
                             params={"fieldSelector": f"spec.nodeName={node_name}"})
        self.status = StatusManager(client, clock, self.pods.get)
        self.objects = ObjectWatcher(client, clock, self._object_changed)
        self.volumes = VolumeManager(self.objects, TokenManager(client, clock), host_ip, self.allocatable)
        self.syncers: dict[str, PodSync] = {}  # every pod this agent ran, until its object is gone (logs)
        self.pod_workers = PodWorkers(clock, self._new_syncer, self._pod_finished)
        self.eviction = eviction.build(config.eviction, client, clock, node_name, data_dir, self.events.post,
                                       eviction.AgentPods(clock, self._active_pods, self.evict_pod,
                                                          self.pod_workers.could_have_running_containers,
                                                          self._pod_paths))
        self._background: set[asyncio.Future[Any]] = set()
        self.proxy = proxy  # the service proxy (kube-proxy's part), if this node runs one
        self.metrics = KubeletMetrics(clock, lambda: census(self.syncers,
                                                            self.pod_workers.could_have_running_containers))
        self.pod_workers.on_sync = self.metrics.pod_synced
        self.resource_stats = ResourceStats(clock, lambda: running_containers(self.runtime, self.syncers),
                                            getattr(runtime, "cgroups", None), node_name)

    # --- node services (services.NodeServices) -----------------------------------------------------

    def event(self, pod: Obj, reason: str, message: str, kind: str = "Normal", field_path: str = "") -> None:
        self.events.post(event_for(pod, reason, message, "Pod", COMPONENT, self.clock.now(), kind,
                                   host=self.node_name, field_path=field_path))

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- pods --------------------------------------------------------------------------------------

    def _new_syncer(self, pod: Obj, wake: Any) -> PodSync:
        saved = self.checkpoints.pop(pod["metadata"]["uid"], None)
        syncer = PodSync(self, pod, wake, saved[1] if saved else None, self.claim_volumes)
        self.syncers[pod["metadata"]["uid"]] = syncer
        return syncer

    def _object_changed(self, ref: Ref) -> None:
        """A ConfigMap or Secret some pods use changed (or appeared): their next sync rewrites volumes, retries env."""
        for uid in sorted(self.objects.users(ref)):  # pod workers wake in one order, whatever the hash seed
            syncer = self.syncers.get(uid)
            if syncer is not None:
                syncer.wake()

    def _pod_seen(self, pod: Obj) -> None:
        self.metrics.pod_seen(pod)
        uid = pod["metadata"]["uid"]
        self.status.object_changed(uid)  # its next resync compares the new object with what was acknowledged
        finished = self.pod_workers.is_finished(uid)  # ran to its end on this node: never started again
        if uid in self.pod_workers.pods and not finished:
            self.pod_workers.update_pod(pod)
            return
        if finished or (pod.get("status") or {}).get("phase") in TERMINAL:
            if pod["metadata"].get("deletionTimestamp"):
                self.status.delete_when_synced(pod)
            return
        if uid not in self.checkpoints:  # a new pod: node-side admission (a re-adopted one was admitted)
            refusal = self.admit(pod)
            if refusal is not None:
                self._refuse(pod, *refusal)
                return
        self.pod_workers.update_pod(pod)

    def _pod_gone(self, pod: Obj) -> None:
        uid = pod["metadata"].get("uid", "")
        self.metrics.pod_gone(uid)
        self.status.forget(uid)
        if self.pod_workers.could_have_running_containers(uid):
            self.pod_workers.remove_pod(uid)  # force-deleted: the processes still get stopped (short grace)
            return
        self._forget(uid)

    def _pod_finished(self, uid: str) -> None:
        """A pod's worker is done (every container stopped); forget it if the object is gone meanwhile."""
        syncer = self.syncers.get(uid)
        if syncer is None:
            return
        meta = syncer.pod["metadata"]
        current = self.pods.get(meta["namespace"], meta["name"])
        if current is None or current["metadata"].get("uid") != uid:
            self._forget(uid)

    def _forget(self, uid: str) -> None:
        """The pod object is gone and nothing of it runs: drop it and delete its directory."""
        self.pod_workers.forget(uid)
        syncer = self.syncers.pop(uid, None)
        if syncer is not None:
            syncer.release()
            housekeeping.remove_pod_dir(syncer.logs_dir)

    def admit(self, pod: Obj) -> tuple[str, str] | None:
        """Node-side admission: refuse pods that do not fit the node's allocatable (OutOfcpu, …; the message says
        "capacity" for it, as kubelet's)."""
        fenced = self.fence_gate.blocked()
        if fenced is not None:
            return "NodeFenced", f"Pod was rejected: {fenced}"
        refused = self.eviction.admit(pod)  # under node pressure (the eviction manager's admit handler)
        if refused is not None:
            return refused
        used: dict[str, int] = {}
        running = [s for uid, s in self.syncers.items() if self.pod_workers.could_have_running_containers(uid)]
        for s in running:
            if s.facts.init_failed:
                continue
            for r, v in pod_requests(s.pod["spec"]).items():
                used[r] = used.get(r, 0) + v
        allocatable = self.allocatable.current()
        if len(running) + 1 > int(allocatable["pods"]):
            return "OutOfpods", "Node didn't have enough resource: pods"
        for r, want in pod_requests(pod["spec"]).items():
            cap = quantity_units(r, allocatable[r]) if r in allocatable else 0
            if want > 0 and used.get(r, 0) + want > cap:
                return (f"OutOf{r}", f"Pod was rejected: Node didn't have enough resource: {r}, requested: {want}, "
                                     f"used: {used.get(r, 0)}, capacity: {cap}")
        return None

    def _refuse(self, pod: Obj, reason: str, message: str) -> None:
        self.event(pod, reason, message, "Warning")
        self.status.set_status(pod, {"phase": "Failed", "reason": reason, "message": message})
        if pod["metadata"].get("deletionTimestamp"):
            self.status.delete_when_synced(pod)

    def evict_pod(self, uid: str, grace: float, reason: str, message: str) -> bool:
        """The node-pressure eviction hook: stop this pod now with `grace` seconds, then mark it Failed with
        `reason` and `message` (pod sync records the event). False when no worker runs the pod."""
        return self.pod_workers.stop_pod(uid, grace, reason, message)

    def _active_pods(self) -> list[Obj]:
        """kubelet's GetActivePods: the pods running here that no one has decided to stop yet."""
        return [s.pod for uid, s in self.syncers.items()
                if self.pod_workers.could_have_running_containers(uid) and not self.pod_workers.is_terminating(uid)]

    def _pod_paths(self, pod: Obj) -> PodPaths:
        """Where the eviction manager finds a pod's usage: its emptyDirs and log directories, and for real
        processes their cgroups and process groups (hollow containers have neither: no memory to count)."""
        syncer = self.syncers.get(pod["metadata"]["uid"])
        if syncer is None:
            return PodPaths()
        cgroups = getattr(self.runtime, "cgroups", None)  # the process runtime's; the hollow one has none
        live = [(r.name, r.process) for r in syncer.records if r.process is not None and r.process.alive]
        real = hasattr(self.runtime, "cgroups")
        return PodPaths(
            volumes={v["name"]: syncer.logs_dir / "volumes" / v["name"]
                     for v in pod["spec"].get("volumes") or [] if "emptyDir" in v},
            logs={r.name: syncer.logs_dir / r.name for r in syncer.records},
            cgroups={name: cgroups.dirs["memory"] / str(getattr(p, "cgroup", "")) for name, p in live
                     if cgroups is not None and getattr(p, "cgroup", None)},
            process_groups={name: [p.pid] for name, p in live if real})

    async def _clean_up_orphans(self) -> None:
        """After the first list: stop the processes of checkpointed pods that are gone, remove stray dirs."""
        await self.pods.synced.wait()
        leftovers, self.checkpoints = self.checkpoints, {}
        try:
            await housekeeping.stop_orphans(self.runtime, self.clock, leftovers)
            known = {o["metadata"]["uid"] for o in self.pods.store.values()} | set(self.syncers)
            housekeeping.remove_orphan_dirs(self.data_dir / "pods", known)
        except OSError as exc:
            log.warning("cleaning up orphaned pods failed: %s", exc)

    # --- lifecycle ---------------------------------------------------------------------------------

    async def run(self, http: bool = True) -> None:
        """Run until cancelled. Without `http` (the hollow nodes of a simulation) no endpoint is served and no
        resource usage is sampled: nobody could read it, and it would read the real host."""
        endpoint: server.AgentServer | None = None
        if http:
            cert, key = server.ensure_serving_cert(self.data_dir / "pki", self.host_ip)
            routes = [*server.routes(self._running_pod, self.clock),
                      *(server.Route("GET", path, handler)
                        for path, handler in metrics_routes(self.metrics, self.resource_stats).items())]
            endpoint = server.AgentServer(routes, self.host_ip, self.port,
                                          server.tls_context(cert, key, self.client_ca))
            await endpoint.start()
            self.port = endpoint.port
        tasks: list[asyncio.Task[None]] = []
        try:
            await self.node.register()
            tasks = [asyncio.create_task(forever(self.clock, name, loop)) for name, loop in (
                ("node heartbeat", self.node.heartbeat), ("service informer", self.services.run),
                ("pod informer", self._pods_after_services),
                ("status manager", self.status.run), ("event sender", self.events.run),
                ("eviction manager", self.eviction.run),
                # without --self-fence-after the gate has nothing to time: no loop (the Fenced condition
                # still reaches it with each heartbeat)
                *([("self-fence", self.fence_gate.run)] if self.fence_gate.after else []),
                *([("resource stats", self.resource_stats.run)] if http else []))]
            tasks.append(asyncio.create_task(self._clean_up_orphans()))
            if self.proxy is not None:
                tasks.append(asyncio.create_task(forever(self.clock, "service proxy", self.proxy.run)))
            await asyncio.gather(*tasks)
        finally:
            if self.config.shutdown_grace_period > 0:  # graceful node shutdown: a decision to stop every pod
                workers = self.pod_workers.shut_down(self.config.shutdown_grace_period)
                if workers:
                    await bounded(self.clock, asyncio.wait(workers),
                                  self.config.shutdown_grace_period + MIN_STOP_WINDOW + 1)
            # Otherwise only the sequencing stops: the containers keep running for the next agent.
            await self.pod_workers.stop()
            # and what watched and probed them ends with this agent, as with its process (a simulation's next
            # agent, in this process, adopts the containers with watchers and probes of its own)
            for syncer in self.syncers.values():
                for r in syncer.records:
                    if r.prober is not None:
                        r.prober.stop()
            for work in list(self._background):
                work.cancel()
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            await self.status.close()
            if self.proxy is not None:
                await self.proxy.cleanup()
            await self.objects.close()
            if endpoint is not None:
                await endpoint.stop()

    def _retry_informers(self) -> None:
        """The heartbeat went through again: the pod and service watches reconnect now, not when their
        back-off (up to 30 s after a long outage) runs out — a pod deleted meanwhile is stopped at once."""
        for informer in (self.services, self.pods):
            informer.retry_now()

    async def _pods_after_services(self) -> None:
        """Pods start only once the Services are listed, so their service links are complete (as kubelet)."""
        await self.services.synced.wait()
        await self.pods.run()

    def _running_pod(self, namespace: str, name: str) -> PodSync | None:
        """The pod this agent runs (or ran: its logs stay readable until the object is gone)."""
        return next((s for s in self.syncers.values()
                     if s.pod["metadata"]["name"] == name and s.pod["metadata"]["namespace"] == namespace), None)
