"""The node's own objects: registering the Node, renewing its Lease, posting its status.

Kubelet's node status and NodeLease heartbeats. A failed call (server down, stalled, refusing)
is logged and tried again soon: nothing here ever touches a pod. A heartbeat that fails for want
of an answer also closes every connection of the agent's client (`close_connections`, kubelet's
closeAllConns): a half-open connection would otherwise blind the pod watch until its read timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import shutil
from collections.abc import Awaitable, Callable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import orjson

from kubelite.agent.eviction.node_status import (
    PressureState,
    no_pressure,
    node_event,
    pressure_conditions,
    reported_condition_events,
    status_event_message,
)
from kubelite.agent.loops import timed
from kubelite.agent.self_fence import ANNOTATION as SELF_FENCE_ANNOTATION
from kubelite.agent.self_fence import FenceGate
from kubelite.api.errors import ApiError, Unavailable
from kubelite.api.quantity import BINARY_SI, format_quantity
from kubelite.api.revision import revision
from kubelite.client.http import STRATEGIC_PATCH, resource_path
from kubelite.client.interface import Client
from kubelite.clock import Clock, micro_time, rfc3339

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]
LEASE_SECONDS = 40  # KubeletConfiguration nodeLeaseDurationSeconds' default
RENEW_FRACTION = 0.25  # kubelet's nodeLeaseRenewIntervalFraction: a 40 s Lease is renewed every 10 s
RETRY_DELAY = 1.0  # after a failed heartbeat, doubling up to the renew interval (the lease controller backs off)
STATUS_REPORT_INTERVAL = 300.0  # kubelet's nodeStatusReportFrequency: with leases, a full status every 5 min
LEASES = resource_path("leases", "kube-node-lease", group_version="coordination.k8s.io/v1")
NODE_FENCES = resource_path("nodefences", group_version="kubelite.io/v1alpha1")



# Where kubelet's machine info (cAdvisor) reads the host's identity; a file this agent may not read gives "".
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
MACHINE_ID = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
SYSTEM_UUID = Path("/sys/class/dmi/id/product_uuid")
OS_RELEASE = Path("/etc/os-release")


def go_arch(machine: str) -> str:
    """GOARCH for `platform.machine()`: what kubelet reports as the node's architecture and arch label."""
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x",
            "i686": "386"}.get(machine, machine)


def _read_id(*paths: Path) -> str:
    for path in paths:
        try:
            return path.read_text().strip()
        except OSError:
            continue
    return ""


def os_image(os_release: Path = OS_RELEASE) -> str:
    """cAdvisor's getOperatingSystem: os-release's PRETTY_NAME ("Debian GNU/Linux 12 (bookworm)"), else "Linux"."""
    try:
        lines = os_release.read_text().splitlines()
    except OSError:
        return "Linux"
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "PRETTY_NAME":
            return value.strip().strip('"').strip("'")
    return "Linux"


class Reclaimer(Protocol):
    """What a heartbeat asks of the node's volume reclaim (ClaimVolumes) with each Node it read."""

    def asked(self, node: Obj) -> bool:
        """Whether `node` asks anything of `reclaim` (checked first: most Node reads ask nothing)."""
        ...

    async def reclaim(self, node: Obj) -> None: ...


def host_capacity(data_dir: Path, max_pods: int) -> dict[str, str]:
    mem_kib = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    disk = shutil.disk_usage(data_dir).total  # a BinarySI quantity, as cAdvisor's (printed in Ki when it divides)
    return {"cpu": str(os.cpu_count() or 1), "memory": f"{mem_kib}Ki",
            "ephemeral-storage": format_quantity(Fraction(disk), BINARY_SI), "pods": str(max_pods)}


class NodeReporter:
    def __init__(self, client: Client, clock: Clock, name: str, host_ip: str, capacity: dict[str, str],
                 port: Callable[[], int], pressure: Callable[[], PressureState] | None = None,
                 gate: FenceGate | None = None,
                 close_connections: Callable[[], Awaitable[None]] | None = None,
                 lease_seconds: int = LEASE_SECONDS,
                 reclaim: Reclaimer | None = None,
                 reconnected: Callable[[], None] = lambda: None,
                 post_event: Callable[[Obj], None] = lambda event: None,
                 allocatable: Callable[[], Mapping[str, str]] | None = None) -> None:
        self.client = client
        self.clock = clock
        self.name = name
        self._node_path, self._lease_path = f"/api/v1/nodes/{name}", f"{LEASES}/{name}"  # formatted once
        self.host_ip = host_ip
        self.capacity = capacity
        self.port = port  # the agent's log endpoint, known once it listens
        self._since = rfc3339(clock.now())  # the conditions' transition time: they have held since start
        # the eviction manager's MemoryPressure, DiskPressure and PIDPressure conditions (without one: none)
        none = no_pressure(self._since)
        self.pressure = pressure or (lambda: none)
        # What the last Node found showing the agent's status was, and what that status was made of (see
        # `status_patch`): (its revision, port, pressure, a copy of capacity).
        self._shown: tuple[object, ...] | None = None
        self.gate = gate or FenceGate(clock, None)  # told of each accepted renewal and of the Node's Fenced condition
        self.lease_seconds = lease_seconds
        renew = lease_seconds * RENEW_FRACTION
        # a self-fencing node renews at least 4 times per D, so one slow renewal does not trip it
        self.renew_interval = min(renew, self.gate.after / 4) if self.gate.after else renew
        self._close_connections = close_connections  # the client's, when it has connections to close
        self.reclaim = reclaim  # local-path volumes' reclaim (ClaimVolumes), given each Node read
        self.reconnected = reconnected  # told when a heartbeat goes through after failing (informers retry now)
        self.post_event = post_event  # the agent's event sink: kubelet's events about its Node
        self.allocatable = allocatable or (lambda: self.capacity)  # made from the capacity (allocatable.py)
        # What the agent learns of its host once, at start (kubelet's machine info): not rebuilt per status.
        # (`capacity` is read live: a simulation sets its nodes' after building the agent.)
        arch = go_arch(platform.machine())
        self._labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": arch}
        self._host_status: Obj = {
            # The node's name as its Hostname, as kubelet's with --hostname-override (several agents on one host)
            "addresses": [{"type": "InternalIP", "address": host_ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"architecture": arch, "bootID": _read_id(BOOT_ID), "containerRuntimeVersion":
                         "kubelite-process://0.1", "kernelVersion": platform.release(), "kubeProxyVersion": "",
                         "kubeletVersion": "v1.32.0+kubelite", "machineID": _read_id(*MACHINE_ID),
                         "operatingSystem": "linux", "osImage": os_image(), "systemUUID": _read_id(SYSTEM_UUID)}}

    def node_object(self) -> Obj:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "annotations": {
            k: v for k, v in self.annotations().items() if v is not None}, "labels": dict(self._labels)},
            "spec": {}, "status": _detached(self._status())}

    def _status(self, pressure: PressureState | None = None, port: int | None = None) -> Obj:
        """The node status as the agent reports it: conditions with a heartbeat of now. It shares the host
        parts with the agent (callers copy what they hand on). `pressure`, `port`: as just asked for."""
        return {"capacity": self.capacity, "allocatable": self.allocatable(), **self._host_status,
                "conditions": self._conditions(self.pressure() if pressure is None else pressure),
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port() if port is None else port}}}

    def _conditions(self, pressure: PressureState) -> list[Obj]:
        now = rfc3339(self.clock.now())
        conditions = pressure_conditions(pressure, now)
        conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                           "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                           "lastTransitionTime": self._since})
        return conditions

    def status_patch(self, shown: Obj | None, report_due: bool) -> Obj | None:
        """kubelet's tryUpdateNodeStatus: the status patch to send, or None when the API's Node (`shown`, as just
        read; None: unreadable) shows the agent's status (heartbeat times aside: nodeStatusHasChanged) and
        no report is due (nodeStatusReportFrequency). As kubelet's two-way merge patch, it carries the
        conditions (fresh heartbeats) and only the other fields that differ.

        The comparison's answer depends only on the stored Node and on the agent's status heartbeat times
        aside, which is made of its pressure conditions, port and capacity (the rest is fixed at start). A Node
        has the same content as long as its uid and resourceVersion are the same (every write, the node
        lifecycle controller's included, changes the resourceVersion; a Node deleted and created again has
        another uid), so when both, and what the status is made of, are those of the last Node found showing
        the agent's status, so is this one: it is not compared again. (Once every renewal in a simulation, the
        comparison was a quarter of the heartbeat's own work: BENCHMARKS.md, Heartbeat, fourth pass.)"""
        pressure, port = self.pressure(), self.port()
        if shown is None:
            return _detached(self._status(pressure, port)) if report_due else None
        seen = revision(shown)
        key = (seen, port, pressure, self.capacity)
        if seen is not None and key == self._shown:  # shows the agent's status: nothing differs but heartbeat times
            # (conditions built afresh share nothing with the agent: no copy to make of them)
            return {"conditions": self._conditions(pressure)} if report_due else None
        status = self._status(pressure, port)
        stored: Obj = shown.get("status") or {}
        changed = {k: v for k, v in status.items() if k != "conditions" and stored.get(k) != v}
        if not changed and not report_due and _same_conditions(status["conditions"], stored.get("conditions") or []):
            if seen is not None:
                self._shown = (seen, port, pressure, dict(self.capacity))
            return None
        return _detached({**changed, "conditions": status["conditions"]})

    def annotations(self) -> dict[str, str | None]:
        """What this agent advertises on its Node: its self-fence promise (None removes an old one)."""
        return {SELF_FENCE_ANNOTATION: f"{self.gate.after:g}" if self.gate.after else None}

    def _event(self, reason: str, message: str) -> None:
        self.post_event(node_event(self.name, reason, message, "Normal", self.clock.now()))

    def _status_events(self, shown: Obj, reported: Obj) -> None:
        """Record the condition events of a status report (`reported`) that replaced `shown`'s, as kubelet's setters."""
        for event in reported_condition_events((shown.get("status") or {}).get("conditions") or [],
                                               reported.get("conditions") or []):
            self._event(event, status_event_message(self.name, event))

    async def register(self) -> None:
        """Create the Node (or post the status of an existing one), retried until the server answers. As kubelet,
        "Starting kubelet." and the events of the node status built for registration come first: its setters run
        on a fresh Node (initialNode), so NodeHasSufficientMemory, NodeHasNoDiskPressure and NodeHasSufficientPID
        are recorded at every start, before the Node is written; an existing Node's own conditions are compared
        as every later report's are (a Node left Unknown records them again, and NodeReady)."""
        self._event("Starting", "Starting kubelet.")
        self._status_events({}, self._status())
        delay = 1.0
        while True:
            node = self.node_object()
            try:
                try:
                    await timed(self.clock, self.client.create("/api/v1/nodes", node))
                except ApiError as exc:
                    if exc.code != 409:
                        raise
                    shown = await timed(self.clock, self.client.patch(
                        self._node_path, {"metadata": {"annotations": self.annotations()}}))
                    status = _detached(self._status())
                    await self.post_status(status)
                    self._status_events(shown, status)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # unreachable server, stall: keep trying (running pods are not affected)
                log.warning("registering node %s failed (%s); retrying in %.0f s", self.name, exc, delay)
            await self.clock.sleep(delay)
            delay = min(self.renew_interval, delay * 2)

    async def post_status(self, status: Obj) -> None:
        """Patch the node status with `status` (a patch from status_patch, or the whole of it)."""
        await timed(self.clock, self.client.patch(f"{self._node_path}/status", {"status": status}, STRATEGIC_PATCH))

    async def heartbeat(self) -> None:
        """Renew the node's Lease in kube-node-lease every quarter of its duration (10 s by default: NodeLease
        heartbeats) and report the node status when the stored one differs (the node lifecycle controller
        marked it Unknown, someone edited it) or every 5 minutes, as kubelet does when leases carry the
        liveness signal. The stored status is read with each renewal (kubelet: every nodeStatusUpdateFrequency,
        also 10 s by default)."""
        reported = self.clock.now()
        retry = RETRY_DELAY
        while True:
            delay = self.renew_interval
            try:
                shown = await self.read_node()  # always read: it also feeds the fence gate
                patch = self.status_patch(shown, self.clock.now() - reported >= STATUS_REPORT_INTERVAL)
                if patch is not None:
                    reported = self.clock.now()
                    await self.post_status(patch)
                    if shown is not None:
                        self._status_events(shown, patch)
                await self.renew_lease()
                if retry != RETRY_DELAY:  # the first heartbeat through after failures
                    self.reconnected()
                retry = RETRY_DELAY
                await self._reclaim(shown)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay, retry = min(retry, self.renew_interval), retry * 2
                log.warning("node heartbeat failed (%s: %s); trying again in %.0f s", type(exc).__name__, exc, delay)
                if isinstance(exc, Unavailable):
                    await self.reset_connections()
            # Let go of the Node read (and the patch made of it) before sleeping, while its objects are in the
            # CPU's caches: kept until the next heartbeat, freeing it took its cache misses there (py-spy had
            # charged them to the `read_node` line; at 5,000 nodes their Nodes are megabytes no cache holds).
            shown = patch = None
            await self.clock.sleep(delay)

    async def reset_connections(self) -> None:
        """Close every connection of the client after a heartbeat got no answer (kubelet's closeAllConns on a
        failed node status update): the watches on them fail at once and their informers resume, through
        their own back-off, on fresh connections, instead of waiting out their read timeouts."""
        if self._close_connections is None:
            return
        log.warning("node %s: the API server did not answer a heartbeat; closing every connection", self.name)
        try:
            await self._close_connections()
        except Exception as exc:  # closing is best effort: the retry opens fresh connections regardless
            log.warning("closing the client's connections failed (%s: %s)", type(exc).__name__, exc)

    async def read_node(self) -> Obj | None:
        """The Node as the API shows it (None: not readable now), to compare the status with (a node the node
        lifecycle controller marked Unknown posts its real status at once)."""
        asked = self.clock.monotonic()
        try:
            node = await timed(self.clock, self.client.get(self._node_path))
            phase = await self.fence_phase() if self.gate.needs_fence_state() else None
        except Unavailable:
            await self.reset_connections()  # the Lease renewal below goes ahead, on a fresh connection
            return None
        except ApiError:
            return None  # the Lease renewal below still goes ahead
        self.gate.node_seen(node, phase, asked)
        return node

    async def _reclaim(self, node: Obj | None) -> None:
        """Volume reclaims asked of this node (`node`: as this heartbeat read it), after the Lease renewal (which
        they must never delay or fail)."""
        if self.reclaim is None or node is None or not self.reclaim.asked(node):
            return
        try:
            await timed(self.clock, self.reclaim.reclaim(node))
        except Exception as exc:
            log.warning("reclaiming local-path volumes failed (%s: %s); trying again with the next heartbeat",
                        type(exc).__name__, exc)

    async def fence_phase(self) -> str | None:
        """The phase of this node's NodeFence (kubelite.io/v1alpha1), None when there is none."""
        try:
            fence = await timed(self.clock, self.client.get(f"{NODE_FENCES}/{self.name}"))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return str((fence.get("status") or {}).get("phase") or "Pending")

    async def renew_lease(self) -> None:
        """Patch the Lease's spec (create the Lease if there is none). One coroutine, the whole Lease only
        for its creation: this runs with every heartbeat of every node."""
        self.gate.check()  # an agent that was frozen past D keeps its promise before it renews (self_fence.py)
        sent = self.clock.monotonic()  # the self-fence counts from the send: the server saw it no earlier
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": self.lease_seconds,
                "renewTime": micro_time(self.clock.now())}
        try:
            await timed(self.clock, self.client.patch(self._lease_path, {"spec": spec}))
        except ApiError as exc:
            if exc.code != 404:
                raise
            await timed(self.clock, self.client.create(LEASES, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": "kube-node-lease"}, "spec": spec}))
        self.gate.renewed(sent)


def _detached(status: Obj) -> Obj:
    """A copy of each part of `status` (capacity and allocatable are one dict in the agent, two in the API).
    Through JSON, what the status is made of: ≈ 4.5 µs where copy.deepcopy of each part took ≈ 29 (every node's
    5-minute report makes one; BENCHMARKS.md, Idle agent, third pass)."""
    copied: Obj = orjson.loads(orjson.dumps(status))
    return copied


def _same_conditions(ours: list[Obj], stored: list[Obj]) -> bool:
    """Whether the stored conditions show each of ours, heartbeat time aside (conditions others own, such as
    kubelite.io/Fenced, are not compared)."""
    by_type = {c.get("type"): c for c in stored}
    for c in ours:  # loops, not all() over generators: this runs with every heartbeat of every node
        shown = by_type.get(c["type"])
        if shown is None:
            return False
        for k, v in c.items():
            if k != "lastHeartbeatTime" and shown.get(k) != v:
                return False
    return True
