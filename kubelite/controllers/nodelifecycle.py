"""The node lifecycle controller: notices silent nodes, says so on the node and its pods, and taints it (S3, L17).

A port of pkg/controller/nodelifecycle (the taint-based eviction mode, the only one upstream keeps):
- **Health.** Every node-monitor-period each node's last sign of life (a new Lease renewTime or
  Ready heartbeat) is checked; past node-monitor-grace-period (node-startup-grace-period for a
  node that never posted status) its Ready, MemoryPressure, DiskPressure and PIDPressure
  conditions become Unknown, reason NodeStatusUnknown. A NodeNotReady event is sent and the
  node's pods get Ready=False (MarkPodsNotReady).
- **NoExecute taints,** per zone and rate-limited: a not-Ready node gets
  `node.kubernetes.io/not-ready:NoExecute`, a silent one `node.kubernetes.io/unreachable:NoExecute`
  (swapped at once when one turns into the other), removed when it is Ready again. The taint
  eviction controller turns those taints into graceful deletions; this controller never deletes.
- **Zone states.** A zone with no Ready node is fully disrupted, one with more than two and at
  least unhealthy-zone-threshold not-Ready nodes partially. Partial disruption slows tainting to
  the secondary rate (stops it in zones of at most large-cluster-size-threshold nodes). When
  *every* zone is fully disrupted the problem is most likely the control plane's own network,
  so all NoExecute taints are removed and tainting stops until some node is Ready again.
- **NoSchedule taints** follow the node's conditions and spec.unschedulable at once, unpaced
  (doNoScheduleTaintingPass).

Beyond upstream, a sign of life counts from when the informer delivers it, not from the next pass
(upstream's probe time is the pass's), and the monitor also wakes when a node's grace period runs
out, when a node is added and when a node's Ready condition changes, so a lost node is tainted
within moments of its grace period rather than up to two monitor periods later. (Without the wake
on add, a node that registered after a pass had its first look, and its probe time, up to a period
later: one that went silent in its first seconds was tainted up to a period late.)

**Cost.** Upstream looks at every node on every pass; here a pass looks only at the nodes whose
outcome can differ from their last one, with the same result: those whose Node object was added,
changed or deleted since (as the shared informer's handlers report it), those whose grace period
has ended (a deadline heap, `node_health.DeadlineQueue`: a Lease renewal, the common event, moves
nothing), those not settled (not Ready, carrying a NoExecute taint of ours, queued for tainting or
for a pod retry: looked at every pass, as upstream), and those the tainting pass touched. The zone
states come from per-zone counts kept as nodes are looked at (`node_health.ZoneCounts`). An idle
pass over thousands of healthy nodes looks at none of them. One difference, on a real clock only: a grace
period that ends *during* a pass (milliseconds) is acted on at the next pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import STRATEGIC_PATCH, resource_path
from kubelite.client.informer import NODE_NAME_INDEX, Handlers, by_node_name, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_rfc3339, rfc3339
from kubelite.controllers import node_health as nh
from kubelite.controllers import podcontrol as pc
from kubelite.controllers import taints as tt
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.nodelifecycle")

Obj = dict[str, Any]
COMPONENT = "node-controller"
NO_EXECUTE_TAINTING_PERIOD = 0.1  # scheduler.NodeEvictionPeriod
# nodeConditionToTaintKeyStatusMap, and spec.unschedulable: the NoSchedule taints this controller owns.
CONDITION_TAINTS = {
    "Ready": {"False": tt.NOT_READY, "Unknown": tt.UNREACHABLE},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
}
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE_KEYS = {key for m in CONDITION_TAINTS.values() for key in m.values()} | {UNSCHEDULABLE}


@dataclass(frozen=True)
class NodeLifecycleOptions:
    """kube-controller-manager's NodeLifecycleControllerConfiguration, with upstream's defaults."""

    node_monitor_period: float = 5.0
    node_monitor_grace_period: float = 40.0
    node_startup_grace_period: float = 60.0
    node_eviction_rate: float = 0.1
    secondary_node_eviction_rate: float = 0.01
    large_cluster_size_threshold: int = 50
    unhealthy_zone_threshold: float = 0.55


class NodeLifecycleController:
    def __init__(self, client: Client, clock: Clock, options: NodeLifecycleOptions | None = None) -> None:
        self.client = client
        self.clock = clock
        self.options = options or NodeLifecycleOptions()
        self.events = EventSink(client, clock)
        self.health: dict[str, nh.NodeHealth] = {}
        self.known: dict[str, Obj] = {}
        self.zone_states: dict[str, nh.ZoneState] = {}
        self.tainters: dict[str, nh.ZoneTainter] = {}
        self.nodes_to_retry: set[str] = set()
        # What lets a pass skip nodes whose outcome cannot change (module doc, Cost).
        self._changed: set[str] = set()  # nodes whose object was added, changed or deleted since their last look
        self._unsettled: set[str] = set()  # looked at every pass
        self._recheck: set[str] = set()  # looked at next pass: grace ended, touched by tainting, pass failed
        self.deadlines = nh.DeadlineQueue(self._deadline)
        self.zone_counts = nh.ZoneCounts()
        self._kick = asyncio.Event()
        self.nodes = shared_informer(client, clock, "/api/v1/nodes", Handlers(
            self._node_added, self._node_updated, lambda n: self._changed.add(n["metadata"]["name"])))
        self.leases = shared_informer(client, clock, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                                      Handlers(self._lease_renewed, lambda old, new: self._lease_renewed(new)))
        self.pods = shared_informer(client, clock, "/api/v1/pods", Handlers(
            lambda p: self._pod_updated(None, p), self._pod_updated))
        self.pods.add_index(NODE_NAME_INDEX, by_node_name)
        self.no_schedule: Runner[str] = Runner("node-lifecycle-noschedule", self.reconcile_no_schedule, clock)
        self.pod_updates: Runner[tuple[str, str]] = Runner("node-lifecycle-pods", self.process_pod, clock)

    # --- informer handlers -----------------------------------------------------------------------

    def _node_added(self, node: Obj) -> None:
        self._changed.add(node["metadata"]["name"])
        self.no_schedule.enqueue(node["metadata"]["name"])
        self._kick.set()  # looked at now: until then its renewals are not recorded (no health yet)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        name = new["metadata"]["name"]
        self._changed.add(name)
        self.no_schedule.enqueue(name)
        health = self.health.get(name)
        seen = nh.heartbeat_seen(health, new, self.clock.now()) if health is not None else None
        if seen is not None:  # counted when seen, as a Lease renewal is (`_lease_renewed`)
            self.health[name] = seen
        if (tt.condition(old, "Ready") or {}).get("status") != (tt.condition(new, "Ready") or {}).get("status"):
            self._kick.set()

    def _lease_renewed(self, lease: Obj) -> None:
        """Record a renewal when it is seen, as the next monitor pass would (the probe time is when the
        controller saw the renewal), so that a node's grace period runs from its real last heartbeat and
        not from the first monitor pass after it."""
        health = self.health.get(lease["metadata"]["name"])
        renew = (lease.get("spec") or {}).get("renewTime")
        if health is not None and renew and (health.lease_renew_time is None
                                             or parse_rfc3339(health.lease_renew_time) < parse_rfc3339(renew)):
            health.lease_renew_time = renew
            health.probe_timestamp = self.clock.now()

    def _pod_updated(self, old: Obj | None, new: Obj) -> None:
        node = (new.get("spec") or {}).get("nodeName")
        if node and (old is None or node != (old.get("spec") or {}).get("nodeName")):
            self.pod_updates.enqueue(key_of(new))

    # --- running ---------------------------------------------------------------------------------

    async def run(self) -> None:
        await run_synced((self.nodes, self.leases, self.pods), (
            self.no_schedule.run, self.pod_updates.run,
            lambda: self._loop(self._monitor_once, "monitoring node health"),
            lambda: self._loop(self._taint_once, "NoExecute tainting"),
        ), alongside=(self.events.run,))

    async def _loop(self, step: Callable[[], Awaitable[None]], what: str) -> None:
        """Run `step` forever; a failed step is logged and the next one runs as usual."""
        while True:
            try:
                await step()
            except Exception:
                log.exception("node lifecycle: %s failed", what)
                await self.clock.sleep(self.options.node_monitor_period)

    async def _monitor_once(self) -> None:
        self._kick.clear()
        await self.monitor_node_health()
        await self._wait(self._next_wake())

    async def _taint_once(self) -> None:
        await self.do_no_execute_tainting_pass()
        await self.clock.sleep(NO_EXECUTE_TAINTING_PERIOD)

    def _next_wake(self) -> float:
        """Seconds to the next monitor pass: the period, or sooner when some node's grace period ends
        (a grace period that has already ended is left to the next pass)."""
        wake = self.options.node_monitor_period
        now = self.clock.now()
        self._recheck.update(self.deadlines.pop_expired(now))
        earliest = self.deadlines.earliest()
        if earliest is not None:
            wake = min(wake, earliest - now + 0.01)  # the grace period must have *passed*
        return wake

    def _deadline(self, name: str) -> float | None:
        """When the node's grace period ends (startup grace while it never posted status); None: not known.

        Asked for every node a pass looks at and for every deadline entry a Lease renewal made stale (see
        `node_health.DeadlineQueue`): thousands of times a minute at 5,000 nodes, so a plain loop, no generator."""
        health = self.health.get(name)
        if health is None:
            return None
        grace = self.options.node_startup_grace_period
        node = self.nodes.get("", name)
        if node is not None and pc.condition(node, "Ready") is not None:  # it posted status
            grace = self.options.node_monitor_grace_period
        return health.probe_timestamp + grace

    async def _wait(self, seconds: float) -> None:
        """Sleep `seconds` on the clock, or less when a node's Ready condition changes."""
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        kicked = asyncio.ensure_future(self._kick.wait())
        try:
            await asyncio.wait({sleeper, kicked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (sleeper, kicked):
                fut.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await fut

    # --- monitorNodeHealth -----------------------------------------------------------------------

    async def monitor_node_health(self) -> None:
        """One pass of monitorNodeHealth, over the nodes whose outcome can change (module doc, Cost) in name
        order: registrations, removals, each node's health and taints, then the zone states."""
        store = self.nodes.store
        self._recheck.update(self.deadlines.pop_expired(self.clock.now()))
        names = self._recheck | self._unsettled | self._changed
        self._recheck, self._changed = set(), set()
        nodes = [store[("", name)] for name in sorted(names) if ("", name) in store]
        try:
            for node in nodes:
                name = node["metadata"]["name"]
                self._add_zone(node)
                if name not in self.known:
                    self._node_event(node, "RegisteredNode", f"Node {name} event: Registered Node {name} in Controller")
                    self.known[name] = node
                    await self._mark_node_as_reachable(node)
            for name in sorted(n for n in names if n in self.known and ("", n) not in store):
                self._node_event(self.known.pop(name), "RemovingNode",  # RecordNodeEvent's "Node %s event: %s"
                                 f"Node {name} event: Removing Node {name} from Controller")
                self._forget(name)
            for node in nodes:
                self._looked_at(node, await self._update_node(node))
        except BaseException:  # a failed pass (logged by the loop): look at all of them again next time
            self._recheck.update(names)
            raise
        await self.handle_disruption()

    def _looked_at(self, node: Obj, current: Obj | None) -> None:
        """Record what the pass saw of `node` (its Ready condition now: `current`, None when it was skipped):
        its zone count, and whether the next passes may skip it until it changes or its grace period ends."""
        name = node["metadata"]["name"]
        counted = current is not None and not nh.excluded_from_disruption_checks(node)
        ready = current is not None and current.get("status") == "True"
        self.zone_counts.set(name, nh.zone_key(node) if counted else None, ready)
        deadline = self._deadline(name)
        if deadline is not None:
            self.deadlines.schedule(name, deadline)
        tainter = self.tainters.get(nh.zone_key(node))
        taints = tt.taints_of(node)
        settled = (ready and name not in self.nodes_to_retry
                   and not (tainter is not None and (name in tainter.queue or name in tainter.done))
                   and not tt.taint_exists(taints, tt.UNREACHABLE_NO_EXECUTE)
                   and not tt.taint_exists(taints, tt.NOT_READY_NO_EXECUTE))
        if settled:
            self._unsettled.discard(name)
        else:
            self._unsettled.add(name)

    def _forget(self, name: str) -> None:
        self.health.pop(name, None)
        self._unsettled.discard(name)
        self.deadlines.discard(name)
        self.zone_counts.set(name, None)

    async def _update_node(self, node: Obj) -> Obj | None:
        """One node's part of monitorNodeHealth; returns its current Ready condition (None: skipped)."""
        name = node["metadata"]["name"]
        update = nh.try_update_node_health(node, self.leases.get("kube-node-lease", name), self.health.get(name),
                                           self.clock.now(), self.options.node_monitor_grace_period,
                                           self.options.node_startup_grace_period)
        if update.write is not None:
            try:
                await self.client.request("PUT", resource_path("nodes", name=name, subresource="status"),
                                          update.write)
            except ApiError as exc:
                # Skipped this pass (the cache is behind, or the API is away); the next pass tries again.
                log.warning("updating the health of node %s failed: %s; no pods will be evicted", name, exc)
                return None
            node = update.write
        self.health[name] = update.health
        current, observed = update.current_ready, update.observed_ready
        if current is None:
            return None
        await self.process_taint_based_eviction(node, observed)
        became_not_ready = current.get("status") != "True" and observed.get("status") == "True"
        if became_not_ready:
            self._node_event(node, "NodeNotReady", f"Node {name} status is now: NodeNotReady")
        if became_not_ready or (name in self.nodes_to_retry and observed.get("status") != "True"):
            try:
                await self.mark_pods_not_ready(self.pods.by_index(NODE_NAME_INDEX, name))
            except ApiError as exc:
                log.warning("marking the pods on node %s not ready failed: %s; queued for retry", name, exc)
                self.nodes_to_retry.add(name)
                return current
        self.nodes_to_retry.discard(name)
        return current

    async def process_taint_based_eviction(self, node: Obj, observed: Obj) -> None:
        """processTaintBaseEviction: queue a not-Ready or silent node for its NoExecute taint (swapping
        the other one at once), and untaint a Ready one."""
        taints = tt.taints_of(node)
        status = observed.get("status")
        if status in ("False", "Unknown"):
            want, other = ((tt.NOT_READY_NO_EXECUTE, tt.UNREACHABLE_NO_EXECUTE) if status == "False"
                           else (tt.UNREACHABLE_NO_EXECUTE, tt.NOT_READY_NO_EXECUTE))
            if tt.taint_exists(taints, other):
                try:
                    await tt.swap_node_taints(self.client, node, [want], [other], self.clock.now())
                except ApiError as exc:
                    log.warning("swapping %s for %s on node %s failed: %s; next pass retries", other["key"],
                                want["key"], node["metadata"]["name"], exc)
                return
            tainter = self.tainters[nh.zone_key(node)]
            if not tt.taint_exists(taints, want):
                tainter.remove(node["metadata"]["name"])
            tainter.add(node["metadata"]["name"], node["metadata"].get("uid", ""))
        elif status == "True":
            with contextlib.suppress(ApiError):  # logged by the next pass's attempt, which retries it
                await self._mark_node_as_reachable(node)

    async def _mark_node_as_reachable(self, node: Obj) -> bool:
        """markNodeAsReachable: remove both NoExecute taints and forget the node's place in the queue."""
        await tt.swap_node_taints(self.client, node, [], [tt.UNREACHABLE_NO_EXECUTE, tt.NOT_READY_NO_EXECUTE],
                                  self.clock.now())
        tainter = self.tainters.get(nh.zone_key(node))
        return tainter.remove(node["metadata"]["name"]) if tainter is not None else False

    def _add_zone(self, node: Obj) -> None:
        zone = nh.zone_key(node)
        if zone not in self.zone_states:
            self.zone_states[zone] = nh.ZoneState.INITIAL
            self.tainters[zone] = nh.ZoneTainter(self.options.node_eviction_rate, self.clock.now())

    async def mark_pods_not_ready(self, pods: list[Obj]) -> None:
        """controllerutil.MarkPodsNotReady: each pod with a Ready condition gets Ready=False."""
        stamp = rfc3339(self.clock.now())
        for pod in pods:
            ready = tt.condition(pod, "Ready")
            if ready is None or ready.get("status") == "False":
                continue
            ns, name = key_of(pod)
            await self.client.patch(resource_path("pods", ns, name, "status"), {
                "metadata": {"uid": pod["metadata"]["uid"]},
                "status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": stamp}]}},
                STRATEGIC_PATCH)
            self.events.post(event_for(pod, "NodeNotReady", "Node is not ready", "Pod", COMPONENT,
                                       self.clock.now(), "Warning"))

    # --- zones -----------------------------------------------------------------------------------

    async def handle_disruption(self) -> None:
        """handleDisruption: new zone states, the limiters that go with them, and the all-zones-down rule."""
        new_states: dict[str, nh.ZoneState] = {}
        all_are_fully_disrupted = True
        counted = self.zone_counts
        for zone in counted.zones:
            state = counted.state(zone, self.options.unhealthy_zone_threshold)
            if state is not nh.ZoneState.FULL_DISRUPTION:
                all_are_fully_disrupted = False
            new_states[zone] = state
            self.zone_states.setdefault(zone, nh.ZoneState.INITIAL)
        for zone in [z for z in self.zone_states if z not in counted.zones]:
            del self.zone_states[zone]  # no node left in it
        all_were_fully_disrupted = all(s is nh.ZoneState.FULL_DISRUPTION for s in self.zone_states.values())
        if all_are_fully_disrupted and all_were_fully_disrupted:
            return
        now = self.clock.now()
        if all_are_fully_disrupted:
            log.info("every node is not Ready: entering master disruption mode (no NoExecute taints)")
            for node in self._every_node():
                try:
                    await self._mark_node_as_reachable(node)
                except ApiError as exc:
                    log.warning("removing the taints of node %s failed: %s", node["metadata"]["name"], exc)
            for zone in self.zone_states:
                self.tainters[zone].swap_limiter(0, now)
                self.zone_states[zone] = nh.ZoneState.FULL_DISRUPTION
            return
        if all_were_fully_disrupted:
            log.info("some nodes are Ready: leaving master disruption mode")
            for node in self._every_node():  # give every node a fresh grace period
                health = self.health.get(node["metadata"]["name"])
                if health is not None:
                    health.probe_timestamp = health.ready_transition_timestamp = now
        for zone, old in self.zone_states.items():
            new = new_states[zone]
            if old is new and not all_were_fully_disrupted:
                continue
            log.info("zone %r is now in state %s", zone, new.value)
            self.tainters[zone].swap_limiter(self._zone_rate(counted.size(zone), new), now)
            self.zone_states[zone] = new

    def _every_node(self) -> list[Obj]:
        """Every cached node in name order: for the rare transitions that touch them all."""
        return sorted(self.nodes.store.values(), key=lambda n: str(n["metadata"]["name"]))

    def _zone_rate(self, size: int, state: nh.ZoneState) -> float:
        return nh.zone_rate(state, size, self.options.node_eviction_rate, self.options.secondary_node_eviction_rate,
                            self.options.large_cluster_size_threshold)

    # --- tainting passes -------------------------------------------------------------------------

    async def do_no_execute_tainting_pass(self) -> None:
        """doNoExecuteTaintingPass: taint the queued nodes each zone's limiter lets through."""
        now = self.clock.now()
        for tainter in list(self.tainters.values()):
            for name in tainter.due(now):
                self._recheck.add(name)  # its tainter entry changes: the monitor's next pass looks again
                if await self._taint_no_execute(name):
                    tainter.done.add(name)
                else:
                    tainter.queue[name] = ""  # retried on a later pass

    async def _taint_no_execute(self, name: str) -> bool:
        node = self.nodes.get("", name)
        if node is None:
            return True
        ready = tt.condition(node, "Ready")
        if ready is None or ready.get("status") == "True":
            return True  # Ready again (or never posted): nothing to taint
        add, remove = ((tt.NOT_READY_NO_EXECUTE, tt.UNREACHABLE_NO_EXECUTE) if ready.get("status") == "False"
                       else (tt.UNREACHABLE_NO_EXECUTE, tt.NOT_READY_NO_EXECUTE))
        try:
            await tt.swap_node_taints(self.client, node, [add], [remove], self.clock.now())
        except ApiError as exc:
            log.warning("tainting node %s failed: %s", name, exc)
            return False
        return True

    async def reconcile_no_schedule(self, name: str) -> None:
        """doNoScheduleTaintingPass: the NoSchedule taints that match the node's conditions, no more, no less."""
        node = self.nodes.get("", name)
        if node is None:
            return
        wanted: list[Obj] = []
        for kind, by_status in CONDITION_TAINTS.items():
            key = by_status.get((tt.condition(node, kind) or {}).get("status", ""))
            if key is not None:
                wanted.append({"key": key, "effect": tt.NO_SCHEDULE})
        if (node.get("spec") or {}).get("unschedulable"):
            wanted.append({"key": UNSCHEDULABLE, "effect": tt.NO_SCHEDULE})
        have = [t for t in tt.taints_of(node) if t.get("effect") == tt.NO_SCHEDULE and t.get("key") in NO_SCHEDULE_KEYS]
        add = [t for t in wanted if not tt.taint_exists(have, t)]
        remove = [t for t in have if not tt.taint_exists(wanted, t)]
        if add or remove:
            await tt.swap_node_taints(self.client, node, add, remove, self.clock.now())

    async def process_pod(self, key: tuple[str, str]) -> None:
        """processPod: a pod newly bound to a node that is not Ready is marked not ready at once."""
        pod = self.pods.store.get(key)
        if pod is None:
            return
        node_name = pod["spec"].get("nodeName", "")
        health = self.health.get(node_name)
        if health is None or self.nodes.get("", node_name) is None:
            return
        ready = tt.condition({"status": health.status}, "Ready")
        if ready is not None and ready.get("status") != "True":
            await self.mark_pods_not_ready([pod])

    def _node_event(self, node: Obj, reason: str, message: str) -> None:
        self.events.post(event_for(node, reason, message, "Node", COMPONENT, self.clock.now()))
