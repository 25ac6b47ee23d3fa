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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubelite.api import disruption
from kubelite.api import volumes as vu
from kubelite.clock import parse_rfc3339
from kubelite.controllers.attachdetach import FENCED_CONDITION

Obj = dict[str, Any]
# A pod -> the budgets that count it, each as ("namespace/name", its current Budget).
BudgetsOf = Callable[[Obj], list[tuple[str, disruption.Budget]]]


@dataclass(frozen=True)
class Candidate:
    node: str
    priority: int
    unready_since: float
    breached: int = 0  # budgets of the node's pods below their desired healthy count


@dataclass(frozen=True)
class Held:
    """A candidate whose fence would break a PodDisruptionBudget now, and why."""

    node: str
    reason: str


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
               pooled: Callable[[Obj], bool], now: float, delay: float, budgets_of: BudgetsOf) -> list[Candidate]:
    out = []
    for node in nodes:
        since = unready_since(node)
        if since is None or now - since < delay or is_fenced(node) or not pooled(node):
            continue
        pods = pods_on(node["metadata"]["name"])
        held = [p for p in pods if needs_fence(p, claim)]
        if held:
            breached = {key for p in pods for key, b in budgets_of(p) if b.current_healthy < b.desired_healthy}
            out.append(Candidate(node["metadata"]["name"], max(int(p["spec"].get("priority") or 0) for p in held),
                                 since, len(breached)))
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
                   budgets_of: BudgetsOf, free: int) -> tuple[list[Candidate], list[Held]]:
    """Up to `free` of `chosen`, in order, whose fences together with the `running` ones take no budget below
    its allowed disruptions; the candidates skipped for that, with the budget that holds each."""
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
            held.append(Held(c.node, "; ".join(
                f"PodDisruptionBudget {k} allows {max(0, allowed[k] - spent[k])} more disruption(s) and the fence "
                f"would take {wants[k]} of its healthy pods" for k in over)))
            continue
        spent += wants
        admitted.append(c)
    return admitted, held
