"""Seeded fault schedules: the same seed and duration give the same faults at the same offsets, so a
violation is reproduced by rerunning its seed (`--seed S --schedules 1`)."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from typing import Any

LINK_FAULTS = ("cut", "drop", "up", "down", "half_open", "delay")
AGENT_FAULTS = ("agent_kill", "agent_stop")
SERVER_FAULTS = ("server_kill", "store_stall")
POD_DELETE = "pod_delete"  # a client deleting a pod, then deleting it again with another grace period
KINDS = (*LINK_FAULTS, *AGENT_FAULTS, *SERVER_FAULTS, POD_DELETE)
SERVER = "server"


@dataclass(frozen=True)
class Fault:
    """`kind` on `target` (a node name, or "server") from `at` for `duration` seconds after the start.

    Link faults heal after `duration`; agent_kill restarts the agent after it; agent_stop and store_stall
    (the server SIGSTOPped: no store write completes) SIGCONT after it; server_kill restarts the server.
    """

    at: float
    kind: str
    target: str
    duration: float
    delay: float = 0.0  # for "delay": how long each chunk is held
    graces: tuple[int, ...] = ()  # for pod_delete: the grace period of each DELETE, in order

    @property
    def end(self) -> float:
        return self.at + self.duration

    def describe(self) -> str:
        extra = f" ({self.delay:.1f}s per chunk)" if self.kind == "delay" else ""
        extra += f" (grace {', then '.join(map(str, self.graces))})" if self.graces else ""
        return f"t={self.at:6.1f}s {self.kind:<11} {self.target:<8} for {self.duration:4.1f}s{extra}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def shifted(self, offset: float) -> Fault:
        return replace(self, at=self.at + offset)


def _length(rng: random.Random, kind: str) -> float:
    """Server faults short; node faults mostly short, but a third long enough for the node to go Unknown
    and its pods to be evicted (cluster.NODE_MONITOR_GRACE + workload.TOLERATION_SECONDS, plus margin)."""
    if kind in SERVER_FAULTS:
        return rng.uniform(1.0, 4.0)
    return rng.uniform(20.0, 28.0) if rng.random() < 0.33 else rng.uniform(1.0, 12.0)


def generate(seed: int, duration: float, nodes: list[str], pods: list[str],
             exclude: frozenset[str] = frozenset()) -> list[Fault]:
    """Random faults over the duration but its first and last tenth (3 s at most): each target has at most
    one fault at a time, and the server at most one fault in the whole cluster at a time (two overlapping
    server faults would be one).
    `pods` are the targets of pod_delete (a pod name, or a workload name for "one of its pods"). Kinds in
    `exclude` are drawn as usual (so the rest of the schedule stays that of the seed) and then left out."""
    # A 60 s schedule: faults from 3 s to 57 s, 1-6 s apart; a short one (CI's) keeps that density of faults.
    settle = tail = min(3.0, duration / 10)
    max_gap = min(6.0, max(1.5, duration / 4))
    rng = random.Random(seed)
    busy: dict[str, float] = {}  # target -> when its current fault ends
    faults: list[Fault] = []
    t = settle + rng.uniform(0, settle)
    while t < duration - tail:
        at = round(t, 1)
        # Every draw happens whatever is kept, so that excluding a kind changes nothing else of the seed's.
        kind = rng.choice(LINK_FAULTS * 2 + AGENT_FAULTS + SERVER_FAULTS + (POD_DELETE,))
        target = SERVER if kind in SERVER_FAULTS else rng.choice(pods if kind == POD_DELETE else nodes)
        length = round(min(_length(rng, kind), max(1.0, duration - tail - at)), 1)
        delay = round(rng.uniform(0.2, 3.0), 1)
        # pod_delete: the second DELETE may ask for a longer grace period, which it must not get
        graces = (rng.randint(1, 8), rng.randint(1, 15))
        if kind == POD_DELETE and kind not in exclude:
            faults.append(Fault(at, kind, target, 1.0, graces=graces))
        elif kind not in exclude and busy.get(target, 0.0) <= at:
            faults.append(Fault(at, kind, target, length, delay if kind == "delay" else 0.0))
            busy[target] = faults[-1].end
        t += rng.uniform(1.0, max_gap)
    return faults
