"""Pure pod-lifecycle decisions, shared by the pod worker and its tests.

Phases follow kubelet's getPhase; restart decisions follow container restartPolicy and
restartPolicyRules (first matching rule wins, else the container's policy, else the pod's);
the backoff follows kubelet: the first restart is immediate, then 10 s doubling up to the
node's maximum (300 s by default), reset after 10 minutes of running.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
INITIAL_BACKOFF = 10.0
MAX_BACKOFF = 300.0
BACKOFF_RESET_AFTER = 600.0


def should_restart(pod_policy: str, container: Obj, exit_code: int) -> bool:
    for rule in container.get("restartPolicyRules") or []:
        cond = rule.get("exitCodes") or {}
        values = set(cond.get("values") or [])
        hit = exit_code in values if cond.get("operator") == "In" else exit_code not in values
        if hit:
            return bool(rule.get("action") == "Restart")
    policy = container.get("restartPolicy") or pod_policy
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


@dataclass
class Backoff:
    """Per-container restart backoff (kubelet's flowcontrol.Backoff with its CrashLoopBackOff use)."""

    maximum: float = MAX_BACKOFF
    initial: float = INITIAL_BACKOFF
    delay: float = 0.0  # the delay applied before the next restart

    def next_restart(self, finished_at: float, ran_for: float) -> float:
        """When the container that just finished may start again."""
        if ran_for >= BACKOFF_RESET_AFTER:
            self.delay = 0.0
        wait = self.delay
        self.delay = min(self.maximum, max(self.initial, self.delay * 2)) if self.delay else min(self.initial,
                                                                                                 self.maximum)
        return finished_at + wait


@dataclass
class ContainerView:
    """What the phase computation needs to know about one app container."""

    running: bool = False
    terminated_code: int | None = None  # set when its current state is Terminated
    waiting_after_exit: bool = False  # Waiting with a last termination (restarting / CrashLoopBackOff)
    will_restart: bool = False
    extra: Obj = field(default_factory=dict)


def phase(init_failed: bool, initializing: bool, apps: list[ContainerView]) -> str:
    """kubelet getPhase for the app containers."""
    if init_failed:
        return "Failed"
    if initializing:
        return "Pending"
    running = sum(1 for c in apps if c.running)
    stopped = sum(1 for c in apps if c.terminated_code is not None or c.waiting_after_exit)
    waiting = sum(1 for c in apps if not c.running and c.terminated_code is None and not c.waiting_after_exit)
    succeeded = sum(1 for c in apps if c.terminated_code == 0)
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if stopped:
        if any(c.will_restart or c.waiting_after_exit for c in apps):
            return "Running"
        return "Succeeded" if succeeded == stopped else "Failed"
    return "Pending"
