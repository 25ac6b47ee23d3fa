"""The preemption evaluator (P4-P9): mirrors pkg/scheduler/framework/preemption and the policy
of plugins/defaultpreemption (the PostFilter plugin itself is plugins/default_preemption.py).

When a pod fits nowhere: consider only nodes whose failure was Unschedulable (not
UnschedulableAndUnresolvable); on each, remove every lower-priority pod and check the pod
fits (P8); then reprieve as many victims as possible — PDB-violating ones first, most
important first — keeping the minimal set. Stop after numCandidates candidates, starting
at a random offset, and pick one node by upstream's criteria in order: fewest PDB
violations, lowest highest-victim priority, smallest priority sum, fewest victims, latest
start time of the highest-priority victims, then the first found. Dry runs ask the Filter
plugins' PreFilterExtensions on a cloned CycleState, or edit the node table and restore it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubelite.api import disruption
from kubelite.api.selectors import LabelSelector, compile_label_selector
from kubelite.scheduler.candidate import Candidate, PreemptionResult
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import FilterOutcome
from kubelite.scheduler.interface import PreFilterExtensions
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.podinfo import PodInfo
from kubelite.scheduler.runtime import DryRunPlugins, Framework

Obj = dict[str, Any]
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
MAX_INT32 = 2**31 - 1
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


def start_time(pod: PodInfo, now: float) -> float:
    """util.GetPodStartTime: status.startTime, else now (assumed or not yet started)."""
    return pod.started if pod.started is not None else now


def budgets(pdbs: list[Obj], all_pods: Callable[[str], list[Obj]]) -> list[int]:
    """Each PDB's disruptionsAllowed: its status, or computed from the pods when no controller wrote one."""
    allowed = []
    for pdb in pdbs:
        status = pdb.get("status") or {}
        if status.get("observedGeneration") is not None:
            allowed.append(int(status.get("disruptionsAllowed", 0)))
        else:
            allowed.append(disruption.compute(pdb, all_pods(pdb["metadata"].get("namespace", ""))).disruptions_allowed)
    return allowed


@dataclass(frozen=True)
class PreemptionBudget:
    """One PDB as preemption reads it: where it applies and how many disruptions it allows."""

    namespace: str
    selector: LabelSelector | None  # None: an empty or missing selector, which preemption ignores
    disrupted: frozenset[str]
    allowed: int

    @classmethod
    def of(cls, pdb: Obj, allowed: int) -> PreemptionBudget:
        selector = (pdb.get("spec") or {}).get("selector")
        return cls(pdb["metadata"].get("namespace", ""), compile_label_selector(selector) if selector else None,
                   frozenset((pdb.get("status") or {}).get("disruptedPods") or {}), allowed)

    def covers(self, pod: PodInfo) -> bool:
        return (self.selector is not None and pod.namespace == self.namespace and pod.name not in self.disrupted
                and self.selector.matches(pod.labels))


def split_by_pdb(pods: list[PodInfo], pdbs: list[PreemptionBudget]) -> tuple[list[PodInfo], list[PodInfo]]:
    """filterPodsWithPDBViolation: (violating, non-violating), spending a copy of each budget in order."""
    allowed = [b.allowed for b in pdbs]
    violating: list[PodInfo] = []
    ok: list[PodInfo] = []
    for pod in pods:
        bad = False
        for i, pdb in enumerate(pdbs):
            if not pdb.covers(pod):
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                bad = True
        (violating if bad else ok).append(pod)
    return violating, ok


class AllOf:
    """Several plugins' PreFilterExtensions as one: every plugin hears of each pod; the node fits if all agree."""

    def __init__(self, extensions: list[PreFilterExtensions]) -> None:
        self.extensions = extensions

    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, table: NodeTable, row: int) -> None:
        for e in self.extensions:
            e.add_pod(state, pod, added, table, row)

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: PodInfo, table: NodeTable, row: int) -> None:
        for e in self.extensions:
            e.remove_pod(state, pod, removed, table, row)

    def filter_node(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> bool:
        return all(e.filter_node(state, pod, table, row) for e in self.extensions)


class Evaluator:
    """framework/preemption.Evaluator: finds candidate nodes and victims by dry runs, and picks one node.

    A dry run on a node asks the Filter plugins' PreFilterExtensions (RemovePod/AddPod on a cloned
    CycleState, then the verdict on that node) when every plugin with a verdict for the pod has them;
    otherwise it edits the node table and runs the Filters over it, always restoring the table.
    """

    def __init__(self, table: NodeTable, framework: Framework, rng: random.Random, now: Callable[[], float],
                 pdbs: Callable[[], list[Obj]], pods_in: Callable[[str], list[Obj]]) -> None:
        self.table = table
        self.framework = framework
        self.rng = rng
        self.now = now
        self.pdbs = pdbs
        self.pods_in = pods_in
        self._pdb_budgets: list[PreemptionBudget] | None = None

    def _budgets(self) -> list[PreemptionBudget]:
        """The PDBs and their budgets, read once per preemption (not once per candidate node)."""
        if self._pdb_budgets is None:
            pdbs = self.pdbs()
            allowed = budgets(pdbs, self.pods_in)
            self._pdb_budgets = [PreemptionBudget.of(pdb, n) for pdb, n in zip(pdbs, allowed, strict=True)]
        return self._pdb_budgets

    def select_victims(self, state: CycleState, pod: PodInfo, row: int,
                       extensions: DryRunPlugins | None) -> Candidate | None:
        """SelectVictimsOnNode: the minimal set of lower-priority pods to remove so `pod` fits on `row`.

        Remove every lower-priority pod; if `pod` then fits, add them back one by one, PDB-violating
        ones first, each in importance order, keeping each that still lets `pod` fit.
        """
        lower = [p for p in self.table.pods[row].values() if p.priority < pod.priority]
        if extensions is not None:
            if not extensions.fixed_ok[row]:
                return None  # a node-only verdict no pod removal changes
            return self._select_with_extensions(state.clone(), pod, row, lower, extensions.changing)
        table = self.table

        def fits() -> bool:
            return bool(self.framework.run_filters(CycleState(), pod, table).feasible[row])

        def keep(p: PodInfo) -> bool:
            table.add_pod(p)
            if fits():
                return True
            table.remove_pod(p.uid)
            return False

        for p in lower:
            table.remove_pod(p.uid)
        try:
            return self._reprieve(pod, row, lower, keep) if fits() else None
        finally:
            for p in lower:
                if table.pod(p.uid) is None:
                    table.add_pod(p)

    def _select_with_extensions(self, trial: CycleState, pod: PodInfo, row: int, lower: list[PodInfo],
                                extensions: list[PreFilterExtensions]) -> Candidate | None:
        table = self.table
        ext = extensions[0] if len(extensions) == 1 else AllOf(extensions)  # one plugin (Fit) is the usual case
        add, remove, verdict = ext.add_pod, ext.remove_pod, ext.filter_node

        def keep(p: PodInfo) -> bool:
            add(trial, pod, p, table, row)
            if verdict(trial, pod, table, row):
                return True
            remove(trial, pod, p, table, row)
            return False

        for p in lower:
            remove(trial, pod, p, table, row)
        return self._reprieve(pod, row, lower, keep) if verdict(trial, pod, table, row) else None

    def _reprieve(self, pod: PodInfo, row: int, lower: list[PodInfo], keep: Callable[[PodInfo], bool]) -> Candidate:
        now = self.now()
        lower.sort(key=lambda p: (-p.priority, start_time(p, now)))  # util.MoreImportantPod order
        violating, non_violating = split_by_pdb(lower, self._budgets())
        victims: list[PodInfo] = []
        violations = 0
        for group, counts in ((violating, True), (non_violating, False)):
            for p in group:
                if not keep(p):
                    victims.append(p)
                    violations += 1 if counts else 0
        victims.sort(key=lambda p: (-p.priority, start_time(p, now)))
        return Candidate(self.table.names[row], row, victims, violations)

    def preempt(self, state: CycleState, pod: PodInfo, outcome: FilterOutcome) -> PreemptionResult:
        """findCandidates + SelectCandidate: dry runs from a random offset, numCandidates at most."""
        n = self.table.n
        extensions = self.framework.dry_run_extensions(outcome)
        unresolvable = outcome.unresolvable()
        potential = np.flatnonzero(~outcome.feasible & ~unresolvable)
        reasons: Counter[str] = Counter({NOT_HELPFUL: int(np.count_nonzero(unresolvable))})
        candidates: list[Candidate] = []
        if len(potential):
            want = max(MIN_CANDIDATE_NODES_ABSOLUTE, len(potential) * MIN_CANDIDATE_NODES_PERCENTAGE // 100)
            want = min(want, len(potential))
            offset = self.rng.randrange(len(potential))
            for i in range(len(potential)):
                row = int(potential[(offset + i) % len(potential)])
                c = self.select_victims(state, pod, row, extensions)
                if c is None:
                    reasons[NO_VICTIMS] += 1
                    continue
                candidates.append(c)
                if len(candidates) >= want:
                    break
        if not candidates:
            parts = sorted(f"{count} {reason}" for reason, count in reasons.items() if count)
            return PreemptionResult(None, f"preemption: 0/{n} nodes are available: {', '.join(parts)}.")
        best, criterion = pick_one(candidates, self.now())
        return PreemptionResult(best, "", candidates, criterion)


CRITERIA: list[tuple[str, Callable[[Candidate, float], float]]] = [
    ("fewest PDB violations", lambda c, now: -c.pdb_violations),
    ("lowest highest-victim priority", lambda c, now: -c.victims[0].priority),
    ("smallest sum of victim priorities", lambda c, now: -sum(v.priority + MAX_INT32 + 1 for v in c.victims)),
    ("fewest victims", lambda c, now: -len(c.victims)),
    ("latest start time of the highest-priority victims",
     lambda c, now: min(start_time(v, now) for v in c.victims if v.priority == c.victims[0].priority)),
]


def pick_one(candidates: list[Candidate], now: float) -> tuple[Candidate, str]:
    """pickOneNodeForPreemption: apply each criterion in turn to the survivors of the previous one."""
    for c in candidates:
        if not c.victims:
            return c, "no victims needed"
    if len(candidates) == 1:
        return candidates[0], "only candidate"
    survivors = candidates
    for name, score in CRITERIA:
        best = max(score(c, now) for c in survivors)
        narrowed = [c for c in survivors if score(c, now) == best]
        if len(narrowed) == 1:
            return narrowed[0], name
        survivors = narrowed
    return survivors[0], "first candidate"
