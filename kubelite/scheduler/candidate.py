"""What preemption found: candidate nodes with their victims, and the chosen one (upstream's Candidate).

Kept apart from the evaluator so the PostFilter result, explanations and the binder can carry it
without depending on how it was found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubelite.scheduler.podinfo import PodInfo


@dataclass
class Candidate:
    node: str
    row: int
    victims: list[PodInfo]
    pdb_violations: int


@dataclass
class PreemptionResult:
    candidate: Candidate | None
    message: str  # upstream's PostFilter message ("" on success)
    candidates: list[Candidate] = field(default_factory=list)
    decided_by: str = ""
