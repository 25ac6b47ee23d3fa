"""Node health bookkeeping: when did each node last show a sign of life, and what follows from silence.

A port of the pure parts of pkg/controller/nodelifecycle: `try_update_node_health`
(tryUpdateNodeHealth), the zone states (ComputeZoneState, GetZoneKey) and the per-zone token
bucket that paces NoExecute tainting (RateLimitedTimedQueue with flowcontrol's token bucket).
They take the time as an argument and touch no API, so the controller's table tests drive them
on a fake clock.

Liveness is judged by the controller's own clock: a node is alive when its Ready condition's
lastHeartbeatTime or its Lease's renewTime *changed* since the last look, never by comparing
those stamps with our clock, so a node whose clock is off is not declared dead.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kubelite.clock import parse_rfc3339, rfc3339
from kubelite.controllers import podcontrol as pc
from kubelite.controllers.taints import condition

Obj = dict[str, Any]

# Conditions set to Unknown when the node goes silent; NetworkUnavailable is the control plane's to manage.
SILENCED_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"
EXCLUDE_DISRUPTION_LABEL = "node.kubernetes.io/exclude-disruption"


@dataclass
class NodeHealth:
    """nodeHealthData: the last status and lease seen, and when (our clock) the node last probed in."""

    status: Obj
    probe_timestamp: float
    ready_transition_timestamp: float
    lease_renew_time: str | None = None


@dataclass
class HealthUpdate:
    health: NodeHealth
    observed_ready: Obj  # the Ready condition as the node last posted it (or a fake Unknown one)
    current_ready: Obj | None  # the Ready condition after this update
    write: Obj | None  # the node with its conditions set to Unknown, to PUT to nodes/status; None: no write


def _created(node: Obj) -> float:
    return parse_rfc3339(node["metadata"]["creationTimestamp"])


def try_update_node_health(node: Obj, lease: Obj | None, saved: NodeHealth | None, now: float,
                           grace: float, startup_grace: float) -> HealthUpdate:
    """tryUpdateNodeHealth: refresh the probe time on any sign of life, and past the grace period set
    Ready and the pressure conditions to Unknown (NodeStatusUnknown) on a copy of `node` to write.
    `node` itself is never changed (it is the informer's cached object)."""
    status: Obj = node.get("status") or {}  # read only: copied below if it is to change
    current = condition(node, "Ready")
    if current is None:
        # Never posted: judge from creation, with the (longer) startup grace period.
        observed = {"type": "Ready", "status": "Unknown", "lastHeartbeatTime": node["metadata"]["creationTimestamp"],
                    "lastTransitionTime": node["metadata"]["creationTimestamp"]}
        period = startup_grace
        if saved is not None:
            health = NodeHealth(status, saved.probe_timestamp, saved.ready_transition_timestamp,
                                saved.lease_renew_time)
        else:
            created = _created(node)
            health = NodeHealth(status, created, created)
    else:
        observed = dict(current)
        period = grace
        health = saved if saved is not None else NodeHealth(status, now, now)
    saved_ready = pc.condition({"status": saved.status}, "Ready") if saved is not None else None  # read only: no copy
    if saved is not None and (
            (saved_ready is None and current is not None) or (saved_ready is not None and current is None)):
        health = NodeHealth(status, now, now, saved.lease_renew_time)
    elif saved is not None:
        health = heartbeat_seen(saved, node, now) or health
    renew = ((lease or {}).get("spec") or {}).get("renewTime")
    if renew and (health.lease_renew_time is None or parse_rfc3339(health.lease_renew_time) < parse_rfc3339(renew)):
        health = NodeHealth(health.status, now, health.ready_transition_timestamp, renew)
    if now <= health.probe_timestamp + period:
        return HealthUpdate(health, observed, current, None)
    stamp = rfc3339(now)
    # Only the conditions change: copy those (a deep copy of every silent node on every pass was a
    # controller manager's largest cost with many dead nodes).
    conditions = [dict(c) for c in status.get("conditions") or []]
    status = {**status, "conditions": conditions}
    node = {**node, "status": status}
    for kind in SILENCED_CONDITIONS:
        existing = next((c for c in conditions if c.get("type") == kind), None)
        if existing is None:
            conditions.append({"type": kind, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                               "message": "Kubelet never posted node status.",
                               "lastHeartbeatTime": node["metadata"]["creationTimestamp"], "lastTransitionTime": stamp})
        elif existing.get("status") != "Unknown":
            existing.update(status="Unknown", reason="NodeStatusUnknown",
                            message="Kubelet stopped posting node status.", lastTransitionTime=stamp)
    now_ready = condition(node, "Ready")
    if now_ready == current:
        return HealthUpdate(health, observed, current, None)
    # After the write, the probe time stays (the node is still silent); the transition is now.
    written = NodeHealth(status, health.probe_timestamp, now, health.lease_renew_time)
    return HealthUpdate(written, observed, now_ready, node)


def heartbeat_seen(saved: NodeHealth, node: Obj, now: float) -> NodeHealth | None:
    """The health after a new Ready heartbeat on `node` (one that posted status before, as recorded in `saved`),
    seen `now`: the probe time is now, and so is the transition time if the condition transitioned. None: the
    heartbeat is the one `saved` has (or either side has no Ready condition, which only a pass judges)."""
    saved_ready = pc.condition({"status": saved.status}, "Ready")  # read only: no copy
    current = condition(node, "Ready")
    if saved_ready is None or current is None or saved_ready.get("lastHeartbeatTime") == current.get(
            "lastHeartbeatTime"):
        return None
    changed = saved_ready.get("lastTransitionTime") != current.get("lastTransitionTime")
    return NodeHealth(node.get("status") or {}, now, now if changed else saved.ready_transition_timestamp,
                      saved.lease_renew_time)


# --- zones ---------------------------------------------------------------------------------------

class ZoneState(Enum):
    INITIAL = "Initial"
    NORMAL = "Normal"
    FULL_DISRUPTION = "FullDisruption"
    PARTIAL_DISRUPTION = "PartialDisruption"


def zone_key(node: Obj) -> str:
    """nodetopology.GetZoneKey: region and zone, or "" for a node with neither label."""
    labels = node["metadata"].get("labels") or {}
    region, zone = labels.get(REGION_LABEL, ""), labels.get(ZONE_LABEL, "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


def excluded_from_disruption_checks(node: Obj) -> bool:
    return EXCLUDE_DISRUPTION_LABEL in (node["metadata"].get("labels") or {})


def compute_zone_state(ready_conditions: list[Obj | None], unhealthy_threshold: float) -> tuple[int, ZoneState]:
    """ComputeZoneState: no Ready node is a full disruption; more than two not-Ready nodes making up at
    least `unhealthy_threshold` of the zone a partial one; otherwise normal."""
    ready = sum(1 for c in ready_conditions if c is not None and c.get("status") == "True")
    not_ready = len(ready_conditions) - ready
    return not_ready, zone_state(ready, not_ready, unhealthy_threshold)


def zone_state(ready: int, not_ready: int, unhealthy_threshold: float) -> ZoneState:
    """ComputeZoneState from the counts alone (what ZoneCounts keeps)."""
    if ready == 0 and not_ready > 0:
        return ZoneState.FULL_DISRUPTION
    if not_ready > 2 and not_ready / (not_ready + ready) >= unhealthy_threshold:
        return ZoneState.PARTIAL_DISRUPTION
    return ZoneState.NORMAL


class ZoneCounts:
    """Ready and not-Ready nodes per zone, updated node by node as the monitor looks at them, so the zone
    states need no pass over every node. A node counts in its zone when it has a Ready condition and is not
    excluded from disruption checks (upstream's zoneToNodeConditions); a zone with no node counted is absent."""

    def __init__(self) -> None:
        self.zones: dict[str, list[int]] = {}  # zone -> [ready, not ready]
        self._of_node: dict[str, tuple[str, bool]] = {}  # node -> (zone, ready) as counted

    def set(self, name: str, zone: str | None, ready: bool = False) -> None:
        """Count `name` in `zone` (Ready or not), or nowhere when `zone` is None, instead of where it was."""
        old = self._of_node.pop(name, None)
        if old is not None:
            counts = self.zones[old[0]]
            counts[0 if old[1] else 1] -= 1
            if counts == [0, 0]:
                del self.zones[old[0]]
        if zone is not None:
            self._of_node[name] = (zone, ready)
            self.zones.setdefault(zone, [0, 0])[0 if ready else 1] += 1

    def size(self, zone: str) -> int:
        return sum(self.zones.get(zone, (0, 0)))

    def state(self, zone: str, unhealthy_threshold: float) -> ZoneState:
        ready, not_ready = self.zones[zone]
        return zone_state(ready, not_ready, unhealthy_threshold)


class DeadlineQueue:
    """When each node's grace period ends, earliest first, so a monitor pass finds the nodes whose grace ran
    out without looking at the others.

    Entries are lazy: a node's deadline (last probe + grace) only moves later as it renews, so a stored entry
    is at most the real one, and an entry is checked against `deadline_of` (the real deadline now, None for a
    node that is gone) only when it reaches the head — a renewal costs nothing here. After `pop_expired(now)`
    the head is exact and not before `now`.
    """

    def __init__(self, deadline_of: Callable[[str], float | None]) -> None:
        self._deadline_of = deadline_of
        self._heap: list[tuple[float, str]] = []
        self._queued: dict[str, float] = {}  # node -> the deadline of its live entry (others are stale)

    def schedule(self, name: str, deadline: float) -> None:
        """Make sure `name` is found by `deadline` (an entry already due no later stays as it is)."""
        queued = self._queued.get(name)
        if queued is None or deadline < queued:
            self._queued[name] = deadline
            heapq.heappush(self._heap, (deadline, name))

    def discard(self, name: str) -> None:
        self._queued.pop(name, None)  # its entry goes stale

    def pop_expired(self, now: float) -> list[str]:
        """Take out the nodes whose grace period has passed (real deadline < now), in deadline order."""
        expired: list[str] = []
        heap, queued = self._heap, self._queued
        while heap:
            deadline, name = heap[0]
            if queued.get(name) != deadline:
                heapq.heappop(heap)  # stale: the node was rescheduled earlier, or dropped
                continue
            actual = self._deadline_of(name)
            if actual == deadline and deadline >= now:
                break
            heapq.heappop(heap)
            del queued[name]
            if actual is None:
                continue
            if actual < now:
                expired.append(name)
            else:
                self.schedule(name, actual)
        return expired

    def earliest(self) -> float | None:
        """The head's deadline: exact after `pop_expired`."""
        return self._heap[0][0] if self._heap else None


def zone_rate(state: ZoneState, size: int, healthy_qps: float, secondary_qps: float,
              large_cluster_size_threshold: int) -> float:
    """setLimiterInZone: HealthyQPSFunc for normal and fully disrupted zones; ReducedQPSFunc for a partially
    disrupted one — the secondary rate in a zone of more than large-cluster-size-threshold nodes, else 0 (in
    a small zone a few more failures would take it all, so the controller waits instead). Shared by the node
    lifecycle controller (taint rate) and the fencing controller (fence rate)."""
    if state is ZoneState.PARTIAL_DISRUPTION:
        return secondary_qps if size > large_cluster_size_threshold else 0.0
    return healthy_qps


class TokenBucket:
    """flowcontrol.NewTokenBucketRateLimiter's TryAccept: `qps` tokens a second, at most `burst` saved.
    A rate of 0 accepts nothing (flowcontrol.NewFakeNeverRateLimiter, as SwapLimiter(0) installs)."""

    def __init__(self, qps: float, burst: int, now: float) -> None:
        self.qps = qps
        self.burst = burst
        self.tokens = float(burst)
        self.last = now

    def try_accept(self, now: float) -> bool:
        if self.qps <= 0:
            return False
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def swapped(old: TokenBucket | None, qps: float, burst: int, now: float) -> TokenBucket:
    """RateLimitedTimedQueue.SwapLimiter: a new bucket when the rate changes, drained if the old one had no token
    to give — so a zone leaving a paused state (rate 0, which never gives one) acts 1/rate later, not at once."""
    if old is not None and old.qps == qps:
        return old
    new = TokenBucket(qps, burst, now)
    if old is not None and not old.try_accept(now):
        new.try_accept(now)
    return new


class ZoneTainter:
    """One zone's RateLimitedTimedQueue: nodes waiting for a NoExecute taint, paced by a token bucket."""

    BURST = 1  # scheduler.EvictionRateLimiterBurst

    def __init__(self, qps: float, now: float) -> None:
        self.limiter = TokenBucket(qps, self.BURST, now)
        self.queue: OrderedDict[str, str] = OrderedDict()  # node name -> uid, in arrival order
        # Tainted already: kept out of the queue until removed (UniqueQueue keeps processed values in its set).
        self.done: set[str] = set()

    def add(self, name: str, uid: str) -> bool:
        if name in self.queue or name in self.done:
            return False
        self.queue[name] = uid
        return True

    def remove(self, name: str) -> bool:
        """Forget the node (queued or done), so that a later add queues it again."""
        was = name in self.queue or name in self.done
        self.queue.pop(name, None)
        self.done.discard(name)
        return was

    def swap_limiter(self, qps: float, now: float) -> None:
        """SwapLimiter: the zone's new rate (0 pauses it), see `swapped`."""
        self.limiter = swapped(self.limiter, qps, self.BURST, now)

    def due(self, now: float) -> list[str]:
        """The nodes the bucket lets through now, taken off the queue; the caller marks each done or
        puts it back."""
        out: list[str] = []
        while self.queue and self.limiter.try_accept(now):
            name, _ = self.queue.popitem(last=False)
            out.append(name)
        return out
