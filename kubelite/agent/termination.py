"""How one pod is being stopped: kubelet's accumulated kill options, as facts that only move one way.

Termination starts once (`started`, pod_workers' terminatingAt) and its deadline can only move
earlier: a second DELETE with a shorter grace, an eviction or a force delete shortens it, nothing
lengthens it (kubelet's calculateEffectiveGracePeriod). The first stop decision's reason stays:
a pod stopped for a reason (DeadlineExceeded, Evicted, …) ends Failed with that reason and message.
Waiters on the deadline register a future that `shorten` resolves, so no change is ever missed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
MIN_STOP_WINDOW = 2.0  # every container gets at least this long after its stop signal
DEFAULT_GRACE = 30


def pod_grace(pod: Obj) -> float:
    """calculateEffectiveGracePeriod's input: the deletion's grace when deleted, else the spec's; at least 1 s."""
    grace = pod["metadata"].get("deletionGracePeriodSeconds")
    if grace is None:
        grace = pod["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE)
    return float(max(1, int(grace)))


@dataclass
class Termination:
    started: float  # when the stop was decided (clock.now())
    deadline: float  # started + the effective grace; only ever moves earlier
    reason: str = ""  # a stop decision's reason and message: the pod ends Failed with them
    message: str = ""
    gone: bool = False  # the object was removed (force delete): stop quickly, write nothing
    shutdown: bool = False  # node shutdown: write nothing, keep the checkpoint for the next agent
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)

    def shorten(self, grace: float) -> None:
        deadline = self.started + max(0.0, grace)
        if deadline < self.deadline:
            self.deadline = deadline
            self._notify()

    def remove(self, now: float) -> None:
        self.gone = True
        self.deadline = min(self.deadline, now + MIN_STOP_WINDOW)
        self._notify()

    def changed(self) -> asyncio.Future[None]:
        """A future resolved at the next change of the deadline."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
