"""Which unreachable nodes the fencing controller fences, and in what order (S4; seed 002's policy step).

Pure functions over informer contents, so the policy is table-tested without a cluster. A node
is a candidate when:
- its Ready condition has not been True for at least `delay` seconds (Unknown: silent; False: sick);
- a fencing pool matches its labels (no pool: never fenced — the safe default of seed 002);
- it holds a pod whose loss of identity matters: a StatefulSet's pod or a pod using a
  ReadWriteOnce(Pod) claim — other pods are replaced by their controllers without any fence.
Candidates are ordered by the highest priority among those pods (highest first), then by how many
PodDisruptionBudgets of the node's pods are already below their desired healthy count (most first:
the fence is what lets those workloads recover), then by how long they have been unreachable
(longest first), then by name.

PodDisruptionBudgets (`within_budgets`). A fence force deletes every pod on the node. The pods the
budgets no longer count healthy — on an unreachable node the node lifecycle controller has marked
them Ready=False (MarkPodsNotReady) — are an involuntary disruption that has already happened:
upstream's budgets do not govern those (they count against the budget, and only the eviction API,
for voluntary disruptions, consults it), and replacing them is what restores the budget, so a
budget never delays a fence for them — not even one at 0 allowed disruptions, which is the usual
state of a budget with a pod on a dead node. What a fence may still take away is a pod the budget
counts *healthy* (Ready per the API — a NotReady node whose pods still pass their probes, or
before they were marked): for those it is a voluntary disruption, and it spends the budget as an
eviction would. A candidate whose healthy pods exceed what their budgets allow — counting the
healthy pods of the fences already running — waits (`Held`, retried every pass) and the next
candidate may go instead. So two fences at once never break a budget that one alone would keep.

The zone brake (`ZoneBrake`): upstream's handleDisruption, applied to fences. Mass silence is more
likely a broken network than dead machines, and fencing — powering machines off — is harder to undo
than eviction, so the nodes are grouped by zone (topology.kubernetes.io/region + zone, as the node
lifecycle controller does: node_health.zone_key, compute_zone_state) and each zone gets a state and a
fence rate (a token bucket of burst 1 on the injectable clock, as RateLimitedTimedQueue):
- Normal: `fenceRate` fences a second (upstream --node-eviction-rate, 0.1: one every 10 s);
- PartialDisruption (more than 2 and at least `unhealthyZoneThreshold` of the zone not Ready): the
  secondary rate in a zone of more than `largeClusterSizeThreshold` nodes, none in a smaller one
  (upstream's ReducedQPSFunc);
- FullDisruption (no Ready node): none. Upstream still *evicts* in such a zone at the normal rate while
  other zones are healthy; a fence is harder to undo, so by default a fully disrupted zone is held —
  `fenceFullyDisruptedZones: true` restores upstream's rule (needed when every zone has one node);
- every zone FullDisruption: nothing anywhere — the control plane itself is the likely one cut off.
  When some node is Ready again the delay restarts for every node (upstream gives every node a fresh
  grace period), so nodes that have not yet reported back are not fenced for a silence nobody could see.
A held fence is reported with the reason (FenceHeldByZoneDisruption, FenceHeldByClusterDisruption,
FenceRateLimited) as FenceHeldByDisruptionBudget is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubelite.api import disruption
from kubelite.api import volumes as vu
from kubelite.clock import parse_rfc3339
from kubelite.controllers import node_health as nh
from kubelite.controllers import podcontrol as pc
from kubelite.controllers.attachdetach import FENCED_CONDITION
from kubelite.controllers.fencing_config import FencingConfig

Obj = dict[str, Any]
# A pod -> the budgets that count it, each as ("namespace/name", its current Budget).
BudgetsOf = Callable[[Obj], list[tuple[str, disruption.Budget]]]

# Why a fence is held (the Event reason on the Node).
HELD_BY_BUDGET = "FenceHeldByDisruptionBudget"
HELD_BY_ZONE = "FenceHeldByZoneDisruption"
HELD_BY_CLUSTER = "FenceHeldByClusterDisruption"
RATE_LIMITED = "FenceRateLimited"


@dataclass(frozen=True)
class Candidate:
    node: str
    priority: int
    unready_since: float
    breached: int = 0  # budgets of the node's pods below their desired healthy count
    zone: str = ""  # node_health.zone_key


@dataclass(frozen=True)
class Held:
    """A candidate not fenced this pass: `reason` (one of the HELD_* / RATE_LIMITED Event reasons) and why."""

    node: str
    reason: str
    message: str


def unready_since(node: Obj) -> float | None:
    """When the node's Ready condition last left True (None: it is Ready)."""
    ready = pc.condition(node, "Ready")
    if ready is not None and ready.get("status") == "True":
        return None
    stamp = (ready or {}).get("lastTransitionTime") or node["metadata"].get("creationTimestamp")
    return parse_rfc3339(stamp) if stamp else None


def is_fenced(node: Obj) -> bool:
    return (pc.condition(node, FENCED_CONDITION) or {}).get("status") == "True"


def needs_fence(pod: Obj, claim: Callable[[str, str], Obj | None]) -> bool:
    """A pod that must not run twice: a StatefulSet's pod, or a user of a ReadWriteOnce(Pod) claim."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    if any(ref.get("kind") == "StatefulSet" and ref.get("controller")
           for ref in pod["metadata"].get("ownerReferences") or []):
        return True
    ns = pod["metadata"].get("namespace", "")
    return any((c := claim(ns, name)) is not None and vu.needs_attach(c) for name in vu.claim_names(pod))


def candidates(nodes: Iterable[Obj], pods_on: Callable[[str], list[Obj]], claim: Callable[[str, str], Obj | None],
               pooled: Callable[[Obj], bool], now: float, delay: float, budgets_of: BudgetsOf,
               resumed_at: float = float("-inf")) -> list[Candidate]:
    """The nodes to fence, best first. The delay counts from when the node left Ready, or from `resumed_at`
    (ZoneBrake: the end of the last spell with every zone down) if that is later."""
    out = []
    for node in nodes:
        since = unready_since(node)
        if since is None or now - max(since, resumed_at) < delay or is_fenced(node) or not pooled(node):
            continue
        pods = pods_on(node["metadata"]["name"])
        held = [p for p in pods if needs_fence(p, claim)]
        if held:
            breached = {key for p in pods for key, b in budgets_of(p) if b.current_healthy < b.desired_healthy}
            out.append(Candidate(node["metadata"]["name"], max(int(p["spec"].get("priority") or 0) for p in held),
                                 since, len(breached), nh.zone_key(node)))
    return sorted(out, key=lambda c: (-c.priority, -c.breached, c.unready_since, c.node))


def healthy_pods_taken(pods: list[Obj], budgets_of: BudgetsOf) -> Counter[str]:
    """Per budget, how many of `pods` it counts healthy (Ready, and counted by it: selected, not being
    deleted, not finished — `budgets_of` returns only the budgets that count a pod): what force deleting
    them all takes from it."""
    taken: Counter[str] = Counter()
    for pod in pods:
        if not disruption.pod_is_ready(pod):
            continue
        for key, _ in budgets_of(pod):
            taken[key] += 1
    return taken


def within_budgets(chosen: list[Candidate], running: Iterable[str], pods_on: Callable[[str], list[Obj]],
                   budgets_of: BudgetsOf, free: int,
                   gate: Callable[[Candidate], Held | None] = lambda _: None) -> tuple[list[Candidate], list[Held]]:
    """Up to `free` of `chosen`, in order, whose fences together with the `running` ones take no budget below
    its allowed disruptions and that `gate` lets through; the candidates skipped, with what holds each.
    `gate` is asked last, only for a candidate otherwise admitted, so it may spend something (a rate
    limiter's token) when it answers None."""
    allowed: dict[str, int] = {}

    def taken(node: str) -> Counter[str]:
        pods = pods_on(node)
        for pod in pods:
            for key, b in budgets_of(pod):
                allowed[key] = b.disruptions_allowed
        return healthy_pods_taken(pods, budgets_of)

    spent: Counter[str] = Counter()
    for node in running:
        spent += taken(node)
    admitted: list[Candidate] = []
    held: list[Held] = []
    for c in chosen:
        if len(admitted) >= free:
            break
        wants = taken(c.node)
        over = sorted(k for k, n in wants.items() if spent[k] + n > allowed[k])
        if over:
            held.append(Held(c.node, HELD_BY_BUDGET, "; ".join(
                f"PodDisruptionBudget {k} allows {max(0, allowed[k] - spent[k])} more disruption(s) and the fence "
                f"would take {wants[k]} of its healthy pods" for k in over)))
            continue
        if (gated := gate(c)) is not None:
            held.append(gated)
            continue
        spent += wants
        admitted.append(c)
    return admitted, held


# --- the zone brake ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Zone:
    size: int  # nodes counted: with a Ready condition, not labelled node.kubernetes.io/exclude-disruption
    not_ready: int
    state: nh.ZoneState


def zone_states(nodes: Iterable[Obj], unhealthy_threshold: float) -> dict[str, Zone]:
    """monitorNodeHealth's zoneToNodeConditions, then ComputeZoneState for each zone, over the Ready
    conditions the API holds (the node lifecycle controller turns a silent node's Unknown). A node that
    never posted a Ready condition is still starting and is not counted, as upstream skips it."""
    conditions: dict[str, list[Obj | None]] = {}
    for node in nodes:
        ready = pc.condition(node, "Ready")
        if ready is not None and not nh.excluded_from_disruption_checks(node):
            conditions.setdefault(nh.zone_key(node), []).append(ready)
    out = {}
    for zone, conds in conditions.items():
        not_ready, state = nh.compute_zone_state(conds, unhealthy_threshold)
        out[zone] = Zone(len(conds), not_ready, state)
    return out


def zone_name(zone: str) -> str:
    """A zone key (node_health.zone_key: region and zone joined by a NUL) as people write it: region/zone."""
    return zone.replace(":\x00:", "/") if zone else "(nodes without zone labels)"


class ZoneBrake:
    """handleDisruption and the per-zone RateLimitedTimedQueue limiters, for fences.

    `observe` (every pass) recomputes the zone states and swaps each zone's limiter for its state's
    rate; `stopped` says whether a zone's state forbids fences now; `take` spends a zone's token. Times:
    `now` is the wall clock (the nodes' Ready transitions are wall-clock stamps), `mono` the monotonic
    clock the buckets run on — both from the controller's injectable Clock."""

    BURST = 1  # scheduler.EvictionRateLimiterBurst

    def __init__(self, config: FencingConfig) -> None:
        self.config = config
        self.zones: dict[str, Zone] = {}
        self.buckets: dict[str, nh.TokenBucket] = {}
        self.all_down = False
        self.resumed_at = float("-inf")  # wall time the last all-zones-down spell ended

    def observe(self, nodes: Iterable[Obj], now: float, mono: float) -> None:
        self.zones = zone_states(nodes, self.config.unhealthy_zone_threshold)
        # With every node excluded (or none posted yet) there is no evidence of a cut-off control plane.
        all_down = bool(self.zones) and all(z.state is nh.ZoneState.FULL_DISRUPTION for z in self.zones.values())
        if self.all_down and not all_down:
            self.resumed_at = now
        self.all_down = all_down
        # Buckets are kept for zones whose nodes all left (few, and a zone may come back).
        for zone in self.zones.keys() | self.buckets.keys():
            self._swap(zone, self.rate(zone), mono)

    def rate(self, zone: str) -> float:
        """The zone's fence rate now: setLimiterInZone, with a fully disrupted zone held (unless configured
        as upstream's eviction) and everything held while every zone is fully disrupted."""
        if self.all_down:
            return 0.0
        z = self.zones.get(zone)
        if z is None:  # only excluded (or still starting) nodes: upstream leaves such a zone at the healthy rate
            return self.config.fence_rate
        if z.state is nh.ZoneState.FULL_DISRUPTION and not self.config.fence_fully_disrupted_zones:
            return 0.0
        return nh.zone_rate(z.state, z.size, self.config.fence_rate, self.config.secondary_fence_rate,
                            self.config.large_cluster_size_threshold)

    def _swap(self, zone: str, qps: float, mono: float) -> None:
        """SwapLimiter: a zone leaving a held state does not fence at once but after 1/rate."""
        self.buckets[zone] = nh.swapped(self.buckets.get(zone), qps, self.BURST, mono)

    def stopped(self, node: str, zone: str) -> Held | None:
        """Why the zone's state forbids fencing `node` now (None: its rate allows fences)."""
        if self.all_down:
            return Held(node, HELD_BY_CLUSTER, "every zone is fully disrupted (no node is Ready): the control plane "
                                               "itself is the likely one cut off, so no node is fenced until some "
                                               "node is Ready again")
        z = self.zones.get(zone)
        if z is None or self.rate(zone) > 0:
            return None
        if z.state is nh.ZoneState.FULL_DISRUPTION:
            return Held(node, HELD_BY_ZONE, f"zone {zone_name(zone)} is in FullDisruption (none of its {z.size} "
                                            f"node(s) Ready): a whole zone is not fenced")
        return Held(node, HELD_BY_ZONE, f"zone {zone_name(zone)} is in PartialDisruption ({z.not_ready} of "
                                        f"{z.size} nodes not Ready) and has no more than "
                                        f"largeClusterSizeThreshold={self.config.large_cluster_size_threshold} "
                                        f"nodes: no fences until it recovers")

    def take(self, c: Candidate, mono: float) -> Held | None:
        """The zone's token for `c`'s fence (None: taken, fence now), or why it must wait."""
        if (held := self.stopped(c.node, c.zone)) is not None:
            return held
        if c.zone not in self.buckets:  # a zone of uncounted nodes only, first seen: a full bucket, as upstream's
            self._swap(c.zone, self.rate(c.zone), mono)  # new zone
        bucket = self.buckets[c.zone]
        if bucket.try_accept(mono):
            return None
        state = self.zones[c.zone].state.value if c.zone in self.zones else nh.ZoneState.NORMAL.value
        return Held(c.node, RATE_LIMITED, f"zone {zone_name(c.zone)} ({state}) fences at most one node every "
                                          f"{1 / bucket.qps:g} s; this one waits its turn")


def admit(chosen: list[Candidate], running: Iterable[str], pods_on: Callable[[str], list[Obj]],
          budgets_of: BudgetsOf, free: int, brake: ZoneBrake, mono: float) -> tuple[list[Candidate], list[Held]]:
    """The fences to start now, and the candidates held with why: first the zone states (which stop whole
    zones), then the budgets, then each zone's rate (a token spent only by a fence that starts)."""
    stopped = [h for c in chosen if (h := brake.stopped(c.node, c.zone)) is not None]
    held_nodes = {h.node for h in stopped}
    admitted, held = within_budgets([c for c in chosen if c.node not in held_nodes], running, pods_on, budgets_of,
                                    free, lambda c: brake.take(c, mono))
    return admitted, stopped + held
