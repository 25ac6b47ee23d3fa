"""Which unreachable nodes the fencing controller fences, and in what order (S4; seed 002's policy step).

Pure functions over informer contents, so the policy is table-tested without a cluster. A node
is a candidate when:
- its Ready condition has not been True for at least `delay` seconds (Unknown: silent; False: sick);
- a fencing pool matches its labels (no pool: never fenced — the safe default of seed 002);
- it holds a pod whose loss of identity matters: a StatefulSet's pod or a pod using a
  ReadWriteOnce(Pod) claim — other pods are replaced by their controllers without any fence.
Candidates are ordered by the highest priority among those pods (highest first), then by how
long they have been unreachable (longest first), then by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubelite.api import volumes as vu
from kubelite.clock import parse_rfc3339
from kubelite.controllers.attachdetach import FENCED_CONDITION

Obj = dict[str, Any]


@dataclass(frozen=True)
class Candidate:
    node: str
    priority: int
    unready_since: float


def condition(node: Obj, kind: str) -> Obj | None:
    return next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def unready_since(node: Obj) -> float | None:
    """When the node's Ready condition last left True (None: it is Ready)."""
    ready = condition(node, "Ready")
    if ready is not None and ready.get("status") == "True":
        return None
    stamp = (ready or {}).get("lastTransitionTime") or node["metadata"].get("creationTimestamp")
    return parse_rfc3339(stamp) if stamp else None


def is_fenced(node: Obj) -> bool:
    return (condition(node, FENCED_CONDITION) or {}).get("status") == "True"


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
               pooled: Callable[[Obj], bool], now: float, delay: float) -> list[Candidate]:
    out = []
    for node in nodes:
        since = unready_since(node)
        if since is None or now - since < delay or is_fenced(node) or not pooled(node):
            continue
        held = [p for p in pods_on(node["metadata"]["name"]) if needs_fence(p, claim)]
        if held:
            out.append(Candidate(node["metadata"]["name"], max(int(p["spec"].get("priority") or 0) for p in held),
                                 since))
    return sorted(out, key=lambda c: (-c.priority, c.unready_since, c.node))
