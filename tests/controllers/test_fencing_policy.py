"""The fencing policy (which unreachable nodes to fence, in what order, and which a PodDisruptionBudget holds)
as tables over plain objects."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.api.disruption import Budget
from kubelite.clock import rfc3339
from kubelite.controllers.fencing_config import parse
from kubelite.controllers.fencing_policy import (
    HELD_BY_BUDGET,
    HELD_BY_CLUSTER,
    HELD_BY_ZONE,
    RATE_LIMITED,
    Candidate,
    Held,
    ZoneBrake,
    admit,
    candidates,
    within_budgets,
)
from kubelite.controllers.node_health import ZoneState, zone_key

Obj = dict[str, Any]
NOW = 1_700_000_000.0
DELAY = 30.0


def node(name: str, ready: str = "Unknown", unready_for: float = 60.0, pool: bool = True,
         fenced: bool = False) -> Obj:
    conditions = [{"type": "Ready", "status": ready, "lastTransitionTime": rfc3339(NOW - unready_for)}]
    if fenced:
        conditions.append({"type": "kubelite.io/Fenced", "status": "True"})
    return {"metadata": {"name": name, "labels": {"fence": "yes"} if pool else {}},
            "status": {"conditions": conditions}}


def pod(name: str, node: str, owner: str = "StatefulSet", claim: str = "", priority: int = 0,
        phase: str = "Running", ready: bool = False, app: str = "db") -> Obj:
    """A pod; not Ready by default, as the node lifecycle controller leaves the pods of an unready node."""
    meta: Obj = {"name": name, "namespace": "default", "labels": {"app": app}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True}]
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    return {"metadata": meta, "spec": {"nodeName": node, "priority": priority, "volumes": volumes},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def budgets(**by_app: Budget) -> Any:
    """budgets_of over one budget per app label (its key "default/<app>")."""
    return lambda p: [(f"default/{a}", b) for a, b in by_app.items() if p["metadata"]["labels"]["app"] == a]


def allowing(n: int, healthy: int = 3, desired: int = 2) -> Budget:
    return Budget(3, healthy, desired, n)


CLAIMS = {"rwo": {"spec": {"accessModes": ["ReadWriteOnce"]}},
          "rwop": {"spec": {"accessModes": ["ReadWriteOncePod"]}},
          "rwx": {"spec": {"accessModes": ["ReadWriteMany"]}}}


@pytest.mark.parametrize("name,nodes,pods,want", [
    ("a Ready node is never fenced", [node("a", ready="True")], [pod("p", "a")], []),
    ("an Unknown node holding a StatefulSet pod is fenced", [node("a")], [pod("p", "a")], ["a"]),
    ("a NotReady (False) node is fenced as an Unknown one", [node("a", ready="False")], [pod("p", "a")], ["a"]),
    ("a node unreachable for less than the delay is not fenced yet", [node("a", unready_for=DELAY - 1)],
     [pod("p", "a")], []),
    ("a node holding only a ReplicaSet's pod is not fenced (its pods are replaced without a fence)",
     [node("a")], [pod("p", "a", owner="ReplicaSet")], []),
    ("a node holding a ReadWriteOnce claim's user is fenced", [node("a")],
     [pod("p", "a", owner="ReplicaSet", claim="rwo")], ["a"]),
    ("a node holding a ReadWriteOncePod claim's user is fenced", [node("a")],
     [pod("p", "a", owner="", claim="rwop")], ["a"]),
    ("a ReadWriteMany claim's user needs no fence", [node("a")], [pod("p", "a", owner="", claim="rwx")], []),
    ("a finished StatefulSet pod needs no fence", [node("a")], [pod("p", "a", phase="Succeeded")], []),
    ("a node matched by no pool is never fenced (the safe default)", [node("a", pool=False)],
     [pod("p", "a")], []),
    ("a node already fenced is not fenced again", [node("a", fenced=True)], [pod("p", "a")], []),
    ("the node holding the higher-priority pod is fenced first", [node("a"), node("b")],
     [pod("p", "a", priority=10), pod("q", "b", priority=1000)], ["b", "a"]),
    ("at equal priority the node unreachable longest goes first",
     [node("a", unready_for=40), node("b", unready_for=90)], [pod("p", "a"), pod("q", "b")], ["b", "a"]),
    ("a node's priority is its highest pod's", [node("a"), node("b")],
     [pod("p", "a", priority=5), pod("p2", "a", priority=500), pod("q", "b", priority=100)], ["a", "b"]),
    ("at equal priority a node holding pods of a budget below its desired count goes first (it restores it)",
     [node("a", unready_for=90), node("b", unready_for=40)], [pod("p", "a", app="web"), pod("q", "b", app="db")],
     ["b", "a"]),
    ("a breached budget does not outrank priority", [node("a"), node("b")],
     [pod("p", "a", app="web", priority=100), pod("q", "b", app="db")], ["a", "b"]),
])
def test_candidates(name: str, nodes: list[Obj], pods: list[Obj], want: list[str]) -> None:
    chosen = candidates(nodes, lambda n: [p for p in pods if p["spec"]["nodeName"] == n],
                        lambda ns, c: CLAIMS.get(c), lambda n: n["metadata"]["labels"].get("fence") == "yes",
                        NOW, DELAY, budgets(db=allowing(0, healthy=1), web=allowing(1)))
    assert [c.node for c in chosen] == want


def cand(name: str) -> Candidate:
    return Candidate(name, 0, NOW - 60)


@pytest.mark.parametrize("name,chosen,running,pods,by_app,free,want,want_held", [
    ("a budget at 0 allowed never holds a fence of pods it already counts unhealthy (the outage happened)",
     ["a"], [], [pod("p", "a")], {"db": allowing(0, healthy=2, desired=3)}, 1, ["a"], []),
    ("a fence that takes a healthy pod spends one allowed disruption", ["a"], [],
     [pod("p", "a", ready=True)], {"db": allowing(1)}, 1, ["a"], []),
    ("a fence that would take a healthy pod from a budget allowing 0 is held", ["a"], [],
     [pod("p", "a", ready=True)], {"db": allowing(0, healthy=2)}, 1, [], ["a"]),
    ("two fences may not spend one allowed disruption twice: the second waits", ["a", "b"], [],
     [pod("p", "a", ready=True), pod("q", "b", ready=True)], {"db": allowing(1)}, 2, ["a"], ["b"]),
    ("a running fence's healthy pods count against the budget", ["b"], ["a"],
     [pod("p", "a", ready=True), pod("q", "b", ready=True)], {"db": allowing(1)}, 1, [], ["b"]),
    ("a held candidate lets the next one go", ["a", "b"], [],
     [pod("p", "a", ready=True), pod("q", "b", app="web")], {"db": allowing(0, healthy=2)}, 1, ["b"], ["a"]),
    ("every pod on the node counts, not only those that need the fence", ["a"], [],
     [pod("p", "a"), pod("w", "a", owner="ReplicaSet", app="web", ready=True)], {"web": allowing(0, healthy=2)}, 1,
     [], ["a"]),
    ("pods no budget selects never hold a fence", ["a"], [], [pod("p", "a", ready=True)], {}, 1, ["a"], []),
    ("no more than the free slots", ["a", "b"], [], [pod("p", "a"), pod("q", "b")], {}, 1, ["a"], []),
])
def test_within_budgets(name: str, chosen: list[str], running: list[str], pods: list[Obj], by_app: dict[str, Budget],
                        free: int, want: list[str], want_held: list[str]) -> None:
    admitted, held = within_budgets([cand(n) for n in chosen], running,
                                    lambda n: [p for p in pods if p["spec"]["nodeName"] == n], budgets(**by_app), free)
    assert [c.node for c in admitted] == want
    assert [h.node for h in held] == want_held
    assert all(h.reason == "FenceHeldByDisruptionBudget" and "PodDisruptionBudget default/" in h.message
               for h in held)


@pytest.mark.parametrize("name,renewed_at,want_fenced,want_done_at", [
    ("no renewal after the last one: confirmed exactly at D + margin after it", None, True, 10.0 + 8.0 + 2.0),
    ("a renewal during the wait: not confirmed", 5.0, False, 10.0 + 8.0 + 2.0),
])
async def test_self_agent_waits_d_plus_margin_from_the_last_renewal_seen(
        name: str, renewed_at: float | None, want_fenced: bool, want_done_at: float) -> None:
    import asyncio

    from kubelite.clock import FakeClock
    from kubelite.controllers.fencing_agents import SelfFenceAgent, Target

    clock = FakeClock()
    base = clock.monotonic()
    seen = {"a": base + 10.0}
    agent = SelfFenceAgent(clock, 2.0, seen.get)
    target = Target("a", "", "a", {"metadata": {"name": "a", "annotations": {"kubelite.io/self-fence-after": "8"}}})
    await clock.advance(11.0)
    task = asyncio.ensure_future(agent.fence(target))
    if renewed_at is not None:
        await clock.advance(renewed_at)
        seen["a"] = clock.monotonic()
    while not task.done():
        await clock.advance(0.25)
        if clock.monotonic() - base > 60:
            break
    outcome = task.result()
    assert outcome.fenced is want_fenced
    assert clock.monotonic() - base == pytest.approx(want_done_at, abs=0.3)


# --- the zone brake ---------------------------------------------------------------------------------

Z1 = ("region1", "zone1")
Z2 = ("region1", "zone2")
Z2_OTHER_REGION = ("region2", "zone2")
FULL, PARTIAL, NORMAL = ZoneState.FULL_DISRUPTION, ZoneState.PARTIAL_DISRUPTION, ZoneState.NORMAL
ZONE, CLUSTER, RATE, BUDGET = HELD_BY_ZONE, HELD_BY_CLUSTER, RATE_LIMITED, HELD_BY_BUDGET


def zoned(name: str, where: tuple[str, str], ready: str | None, excluded: bool = False) -> Obj:
    """A node in `where` (region, zone), Ready `ready` (None: never posted) for the last hour."""
    labels = {"topology.kubernetes.io/region": where[0], "topology.kubernetes.io/zone": where[1]}
    if excluded:
        labels["node.kubernetes.io/exclude-disruption"] = ""
    conditions = [] if ready is None else [
        {"type": "Ready", "status": ready, "lastTransitionTime": rfc3339(NOW - 3600)}]
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": conditions}}


def key(where: tuple[str, str]) -> str:
    return zone_key({"metadata": {"labels": {"topology.kubernetes.io/region": where[0],
                                             "topology.kubernetes.io/zone": where[1]}}})


def brake_over(nodes: list[Obj], mono: float = 0.0, **config: Any) -> ZoneBrake:
    brake = ZoneBrake(parse({"kind": "FencingConfiguration", **config}))
    brake.observe(nodes, NOW, mono)
    return brake


def cand_in(node: Obj) -> Candidate:
    return Candidate(node["metadata"]["name"], 0, NOW - 3600, 0, zone_key(node))


# TestMonitorNodeHealthEvictPodsWithDisruption, by name: nodes (name, zone, Ready) first, then each node's
# Ready an hour later; the zone states after each look; whether node0 (holding the pod) is fenced — None —
# or else the reason it is held. Upstream retries doEviction for up to a minute because a limiter swapped
# in from 0 starts drained; here the token is tried for 1/rate of fake time.
UPSTREAM_NAMED = [
    ("Network Disruption: Only zone is down - eviction shouldn't take place.",
     [("node0", Z1, "Unknown"), ("node1", Z1, "Unknown")], ["Unknown", "Unknown"],
     {Z1: FULL}, {Z1: FULL}, {}, CLUSTER),
    ("Network Disruption: Both zones down - eviction shouldn't take place.",
     [("node0", Z1, "Unknown"), ("node1", Z2_OTHER_REGION, "Unknown")], ["Unknown", "Unknown"],
     {Z1: FULL, Z2_OTHER_REGION: FULL}, {Z1: FULL, Z2_OTHER_REGION: FULL}, {}, CLUSTER),
    ("Network Disruption: One zone is down - eviction should take place. (fenceFullyDisruptedZones: upstream's rule)",
     [("node0", Z1, "Unknown"), ("node1", Z2, "True")], ["Unknown", "True"],
     {Z1: FULL, Z2: NORMAL}, {Z1: FULL, Z2: NORMAL}, {"fenceFullyDisruptedZones": True}, None),
    ("Network Disruption: One zone is down - by default the zone is not fenced (a fence is harder to undo)",
     [("node0", Z1, "Unknown"), ("node1", Z2, "True")], ["Unknown", "True"],
     {Z1: FULL, Z2: NORMAL}, {Z1: FULL, Z2: NORMAL}, {}, ZONE),
    # upstream excludes the master by its name (legacy); kubelite by the exclude-disruption label
    ("NetworkDisruption: eviction should stop, only -master Node is healthy",
     [("node0", Z1, "Unknown"), ("node-master", Z1, "True")], ["Unknown", "True"],
     {Z1: FULL}, {Z1: FULL}, {}, CLUSTER),
    ("Initially both zones down, one comes back - eviction should take place (fenceFullyDisruptedZones)",
     [("node0", Z1, "Unknown"), ("node1", Z2, "Unknown")], ["Unknown", "True"],
     {Z1: FULL, Z2: FULL}, {Z1: FULL, Z2: NORMAL}, {"fenceFullyDisruptedZones": True}, None),
    ("Initially both zones down, one comes back - by default the still-down zone is not fenced",
     [("node0", Z1, "Unknown"), ("node1", Z2, "Unknown")], ["Unknown", "True"],
     {Z1: FULL, Z2: FULL}, {Z1: FULL, Z2: NORMAL}, {}, ZONE),
    # upstream's test forces the partial-disruption rate to the healthy one; the same here is a zone larger
    # than largeClusterSizeThreshold (its secondary rate)
    ("Zone is partially disrupted - eviction should take place. (a zone above largeClusterSizeThreshold)",
     [("node0", Z1, "Unknown"), ("node1", Z1, "Unknown"), ("node2", Z1, "Unknown"), ("node3", Z1, "True"),
      ("node4", Z1, "True")], ["Unknown", "Unknown", "Unknown", "True", "True"],
     {Z1: PARTIAL}, {Z1: PARTIAL}, {"largeClusterSizeThreshold": 4}, None),
    ("Zone is partially disrupted - a zone of no more than largeClusterSizeThreshold nodes is not fenced",
     [("node0", Z1, "Unknown"), ("node1", Z1, "Unknown"), ("node2", Z1, "Unknown"), ("node3", Z1, "True"),
      ("node4", Z1, "True")], ["Unknown", "Unknown", "Unknown", "True", "True"],
     {Z1: PARTIAL}, {Z1: PARTIAL}, {}, ZONE),
]


@pytest.mark.parametrize("name,nodes,following,initial,after,config,want_held", UPSTREAM_NAMED,
                         ids=[c[0] for c in UPSTREAM_NAMED])
def test_zone_brake_upstream_disruption_cases(
        name: str, nodes: list[tuple[str, tuple[str, str], str]], following: list[str],
        initial: dict[tuple[str, str], ZoneState], after: dict[tuple[str, str], ZoneState], config: Obj,
        want_held: str | None) -> None:
    def objs(statuses: list[str]) -> list[Obj]:
        return [zoned(n, z, s, excluded=n == "node-master") for (n, z, _), s in zip(nodes, statuses, strict=True)]

    brake = brake_over(objs([s for _, _, s in nodes]), **config)
    assert {k: z.state for k, z in brake.zones.items()} == {key(z): s for z, s in initial.items()}
    brake.observe(objs(following), NOW + 3600, 3600.0)
    assert {k: z.state for k, z in brake.zones.items()} == {key(z): s for z, s in after.items()}
    node0 = cand_in(objs(following)[0])
    tries = [brake.take(node0, 3600.0 + t) for t in range(0, 101)]  # 1/secondaryFenceRate = 100 s
    fenced = any(t is None for t in tries)
    assert (None if fenced else tries[0] and tries[0].reason) == want_held


def held_pairs(held: list[Held]) -> list[tuple[str, str]]:
    return [(h.node, h.reason) for h in held]


def many(prefix: str, n: int, where: tuple[str, str], ready: str) -> list[Obj]:
    return [zoned(f"{prefix}{i}", where, ready) for i in range(n)]


@pytest.mark.parametrize("name,nodes,chosen,pods,by_app,free,config,want,want_held", [
    ("a single lost node in a healthy zone is fenced",
     [zoned("a", Z1, "Unknown"), zoned("b", Z1, "True"), zoned("c", Z1, "True")], ["a"], [], {}, 1, {}, ["a"], []),
    ("two lost nodes of a normal zone: one fence now, the other waits for the zone's rate",
     [zoned("a", Z1, "Unknown"), zoned("b", Z1, "Unknown"), *many("r", 3, Z1, "True")], ["a", "b"], [], {}, 2, {},
     ["a"], [("b", RATE)]),
    ("each zone has its own rate: lost nodes in two zones are fenced at once",
     [zoned("a", Z1, "Unknown"), zoned("r1", Z1, "True"), zoned("b", Z2, "Unknown"), zoned("r2", Z2, "True")],
     ["a", "b"], [], {}, 2, {}, ["a", "b"], []),
    ("a fully disrupted zone is held and takes no slot: the healthy zone's lost node goes",
     [zoned("a", Z1, "Unknown"), zoned("b", Z2, "Unknown"), zoned("r", Z2, "True")], ["a", "b"], [], {}, 1, {},
     ["b"], [("a", ZONE)]),
    ("every zone fully disrupted: nothing is fenced anywhere",
     [zoned("a", Z1, "Unknown"), zoned("b", Z2, "False")], ["a", "b"], [], {}, 2, {}, [],
     [("a", CLUSTER), ("b", CLUSTER)]),
    ("a partially disrupted zone of no more than largeClusterSizeThreshold nodes is held",
     [*many("d", 3, Z1, "Unknown"), *many("r", 2, Z1, "True")], ["d0", "d1"], [], {}, 2, {}, [],
     [("d0", ZONE), ("d1", ZONE)]),
    ("a partially disrupted zone of more nodes fences at the secondary rate",
     [*many("d", 30, Z1, "Unknown"), *many("r", 21, Z1, "True")], ["d0", "d1"], [], {}, 2, {}, ["d0"],
     [("d1", RATE)]),
    ("a budget-held candidate spends no token: the next candidate of its zone goes",
     [zoned("a", Z1, "Unknown"), zoned("b", Z1, "Unknown"), *many("r", 4, Z1, "True")], ["a", "b"],
     [pod("p", "a", ready=True), pod("q", "b", app="web")], {"db": allowing(0, healthy=2)}, 1, {}, ["b"],
     [("a", BUDGET)]),
    ("a Ready node excluded from disruption checks does not make its zone look healthy",
     [zoned("a", Z1, "Unknown"), zoned("w", Z1, "True", excluded=True)], ["a"], [], {}, 1, {}, [],
     [("a", CLUSTER)]),
    ("a node that never posted status is not counted (it is starting, not down)",
     [zoned("a", Z1, "Unknown"), zoned("new", Z1, None), zoned("r", Z2, "True")], ["a"], [], {}, 1, {}, [],
     [("a", ZONE)]),
    ("fenceFullyDisruptedZones: a fully disrupted zone fences at fenceRate while another is healthy",
     [zoned("a", Z1, "Unknown"), zoned("r", Z2, "True")], ["a"], [], {}, 1, {"fenceFullyDisruptedZones": True},
     ["a"], []),
    ("fenceFullyDisruptedZones still fences nothing while every zone is down",
     [zoned("a", Z1, "Unknown"), zoned("b", Z2, "Unknown")], ["a"], [], {}, 1, {"fenceFullyDisruptedZones": True},
     [], [("a", CLUSTER)]),
])
def test_admit_applies_the_zone_brake(name: str, nodes: list[Obj], chosen: list[str], pods: list[Obj],
                                      by_app: dict[str, Budget], free: int, config: Obj, want: list[str],
                                      want_held: list[tuple[str, str]]) -> None:
    brake = brake_over(nodes, **config)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    admitted, held = admit([cand_in(by_name[n]) for n in chosen], [],
                           lambda n: [p for p in pods if p["spec"]["nodeName"] == n], budgets(**by_app), free,
                           brake, 0.0)
    assert [c.node for c in admitted] == want
    assert held_pairs(held) == want_held


def test_a_zone_fences_at_most_fence_rate_and_says_so() -> None:
    nodes = [zoned("a", Z1, "Unknown"), zoned("b", Z1, "Unknown"), *many("r", 3, Z1, "True")]
    brake = brake_over(nodes, fenceRate=0.1)
    a, b = cand_in(nodes[0]), cand_in(nodes[1])
    assert brake.take(a, 0.0) is None
    held = brake.take(b, 9.9)
    assert held is not None and held.reason == RATE
    assert held.message == "zone region1/zone1 (Normal) fences at most one node every 10 s; this one waits its turn"
    assert brake.take(b, 10.0) is None


def test_leaving_every_zone_down_restarts_the_delay_and_drains_the_limiter() -> None:
    """handleDisruption leaving master disruption mode: every node gets a fresh grace period (here: the
    fence delay counts again from then), and the limiter swapped in from 0 starts drained (SwapLimiter)."""
    down = [zoned("a", Z1, "Unknown"), zoned("b", Z1, "Unknown"), zoned("c", Z1, "Unknown")]
    brake = brake_over(down)
    assert brake.all_down and brake.rate(key(Z1)) == 0
    back = [*down[:2], zoned("c", Z1, "True")]
    brake.observe(back, NOW + 100, 100.0)
    assert not brake.all_down and brake.resumed_at == NOW + 100
    pool = {"fence": "yes"}
    for n in back:
        n["metadata"]["labels"].update(pool)

    def chosen(now: float) -> list[str]:
        return [c.node for c in candidates(back, lambda n: [pod("p", n)], lambda ns, c: None,
                                           lambda n: n["metadata"]["labels"].get("fence") == "yes", now, DELAY,
                                           budgets(), brake.resumed_at)]

    assert chosen(NOW + 100 + DELAY - 1) == [], "fenced for a silence the cut-off control plane could not see"
    assert chosen(NOW + 100 + DELAY) == ["a", "b"]
    a = cand_in(back[0])
    held = brake.take(a, 100.0)
    assert held is not None and held.reason == RATE, "the limiter swapped in from 0 must start drained"
    assert brake.take(a, 110.0) is None
