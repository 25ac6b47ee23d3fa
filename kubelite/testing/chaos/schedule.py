"""Seeded fault schedules: the same seed and duration give the same faults at the same offsets, so a
violation is reproduced by rerunning its seed (`--seed S --schedules 1`)."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

LINK_FAULTS = ("cut", "drop", "up", "down", "half_open", "delay")
AGENT_FAULTS = ("agent_kill", "agent_stop")
SERVER_FAULTS = ("server_kill", "store_stall")
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

    @property
    def end(self) -> float:
        return self.at + self.duration

    def describe(self) -> str:
        extra = f" ({self.delay:.1f}s per chunk)" if self.kind == "delay" else ""
        return f"t={self.at:6.1f}s {self.kind:<11} {self.target:<8} for {self.duration:4.1f}s{extra}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def generate(seed: int, duration: float, nodes: list[str], settle: float = 8.0, tail: float = 5.0) -> list[Fault]:
    """Random faults in [settle, duration - tail): each target has at most one fault at a time, and the
    server at most one fault in the whole cluster at a time (two overlapping server faults would be one)."""
    rng = random.Random(seed)
    busy: dict[str, float] = {}  # target -> when its current fault ends
    faults: list[Fault] = []
    t = settle + rng.uniform(0, 3)
    while t < duration - tail:
        kind = rng.choice(LINK_FAULTS * 2 + AGENT_FAULTS + SERVER_FAULTS)
        target = SERVER if kind in SERVER_FAULTS else rng.choice(nodes)
        length = round(rng.uniform(1.0, 4.0) if kind in SERVER_FAULTS else rng.uniform(1.0, 12.0), 1)
        length = min(length, max(1.0, duration - tail - t))
        if busy.get(target, 0.0) <= t:
            delay = round(rng.uniform(0.2, 3.0), 1) if kind == "delay" else 0.0
            faults.append(Fault(round(t, 1), kind, target, length, delay))
            busy[target] = t + length
        t += rng.uniform(1.0, 6.0)
    return faults
