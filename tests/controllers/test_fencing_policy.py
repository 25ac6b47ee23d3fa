"""The fencing policy (which unreachable nodes to fence, in what order, and which a PodDisruptionBudget holds)
as tables over plain objects."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.api.disruption import Budget
from kubelite.clock import rfc3339
from kubelite.controllers.fencing_policy import Candidate, candidates, within_budgets

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
