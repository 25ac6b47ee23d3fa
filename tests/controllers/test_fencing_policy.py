"""The fencing policy (which unreachable nodes to fence, in what order) as a table over plain objects."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.clock import rfc3339
from kubelite.controllers.fencing_policy import candidates

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
        phase: str = "Running") -> Obj:
    meta: Obj = {"name": name, "namespace": "default"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True}]
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    return {"metadata": meta, "spec": {"nodeName": node, "priority": priority, "volumes": volumes},
            "status": {"phase": phase}}


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
])
def test_candidates(name: str, nodes: list[Obj], pods: list[Obj], want: list[str]) -> None:
    chosen = candidates(nodes, lambda n: [p for p in pods if p["spec"]["nodeName"] == n],
                        lambda ns, c: CLAIMS.get(c), lambda n: n["metadata"]["labels"].get("fence") == "yes",
                        NOW, DELAY)
    assert [c.node for c in chosen] == want


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
