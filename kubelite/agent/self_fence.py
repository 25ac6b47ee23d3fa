"""Self-fencing (issue 13 item 5, S4): an agent cut off from the API server kills its containers itself.

With `--self-fence-after D` (or `selfFenceAfter` in the node config) the agent promises: once it
has not renewed its Lease for D seconds — measured on its monotonic clock from the moment it
*sent* the last renewal the server accepted — it SIGKILLs every container it runs and starts
none until it is back in contact. It advertises D on its Node (`kubelite.io/self-fence-after`), so
the fencing controller's `self` agent may count "no renewal seen for D + margin" as a confirmed
fence with no fence device (kubelite/controllers/fencing_agents.py; README, Fencing).

The gate also refuses starts while the Node carries `kubelite.io/Fenced` = True: a fenced node's
pods were force deleted and may run elsewhere, so it runs nothing until an administrator clears
the fence (`kubectl delete nodefence NODE`).

`FencedRuntime` wraps the node's runtime: every start is checked against the gate, and every
instance started, adopted or found is remembered so that the trip can kill them all.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kubelite.agent.cgroups import Limits
from kubelite.agent.runtime.interface import Exit, Handle, Runtime
from kubelite.api.revision import revision
from kubelite.clock import Clock

log = logging.getLogger("kubelite.agent.self_fence")

Obj = dict[str, Any]
ANNOTATION = "kubelite.io/self-fence-after"
FENCED_CONDITION = "kubelite.io/Fenced"  # set by the fencing controller (kubelite/controllers/attachdetach.py)
# A NodeFence in these phases may end (or has ended) in this node's pods being force deleted and run elsewhere.
FENCE_ACTIVE = ("Pending", "Running", "Succeeded")


class FenceGate:
    """Whether this node may start containers, and the self-fence trip when its Lease went unrenewed."""

    def __init__(self, clock: Clock, after: float | None) -> None:
        self.clock = clock
        self.after = after if after and after > 0 else None
        self.last_renewal = clock.monotonic()  # the agent's start counts as contact
        self.tripped_at: float | None = None  # wall time of the last trip, for the log and tests
        self.self_fenced = False
        self.node_fenced = False
        self._seen: tuple[object, object] | None = None  # the revision of the Node node_fenced was read from
        self.contact_at: float | None = None  # monotonic time a renewal was last answered since the trip
        self.runtime: FencedRuntime | None = None

    def check_interval(self) -> float:
        """How often the Lease age is checked: a small fraction of D, so the kill is at most that late."""
        return min(1.0, self.after / 20) if self.after else 1.0

    def renewed(self, sent_at: float) -> None:
        """A Lease renewal sent at monotonic `sent_at` was accepted (now): back in contact — but a tripped gate
        opens only once `node_seen` reports, from a read sent after this answer, that no fence is under way."""
        self.last_renewal = max(self.last_renewal, sent_at)
        self.contact_at = self.clock.monotonic()

    def needs_fence_state(self) -> bool:
        """Whether the agent must read its NodeFence: only a tripped gate waits for it."""
        return self.self_fenced

    def node_seen(self, node: Obj, fence_phase: str | None, asked_at: float) -> None:
        """The Node and its NodeFence's phase (None: there is none) as read by requests sent at `asked_at`.

        Why a tripped gate waits for this read: the controller's `self` agent writes its NodeFence Running
        *before* it decides, so a read sent after our renewal was accepted either sees that fence (and we stay
        down: it may already have decided our pods' fate) or proves that no decision can be based on a
        silence that has ended.

        A Node with the uid and resourceVersion of the last one is the same object: its conditions are not
        looked through again (every heartbeat of every node reads one, most often unchanged)."""
        seen = revision(node)
        if seen is None or seen != self._seen:
            self.node_fenced, self._seen = _fenced(node), seen
        if (self.self_fenced and self.contact_at is not None and asked_at >= self.contact_at
                and not self.node_fenced and fence_phase not in FENCE_ACTIVE):
            log.warning("back in contact and not fenced: containers may start again")
            self.self_fenced = False

    def blocked(self) -> str | None:
        if self.self_fenced:
            return f"self-fenced: the node's Lease was not renewed for {self.after:g} s"
        if self.node_fenced:
            return "the node is fenced (condition kubelite.io/Fenced); delete its NodeFence to clear it"
        return None

    def check(self) -> bool:
        """Trip when the Lease is older than D: from then on no start, and every container SIGKILLed now."""
        if self.after is None or self.clock.monotonic() - self.last_renewal < self.after:
            return False
        if not self.self_fenced:
            self.self_fenced, self.tripped_at, self.contact_at = True, self.clock.now(), None
            log.error("no Lease renewal for %.1f s (self-fence after %g s): killing every container",
                      self.clock.monotonic() - self.last_renewal, self.after)
        if self.runtime is not None:
            self.runtime.kill_all()  # again on every check while tripped: nothing may survive a race
        return True

    async def run(self) -> None:
        while True:
            self.check()
            await self.clock.sleep(self.check_interval())


def _fenced(node: Obj) -> bool:
    """Whether the Node carries kubelite.io/Fenced = True. A loop, not any() over a generator: this runs with
    every heartbeat of every node."""
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == FENCED_CONDITION and c.get("status") == "True":
            return True
    return False


class FencedRuntime:
    """The node's runtime behind the fence gate; it remembers the instances so that they can all be killed."""

    def __init__(self, inner: Runtime, gate: FenceGate) -> None:
        self.inner = inner
        self.gate = gate
        self.sandboxed = inner.sandboxed
        self.handles: list[Handle] = []
        gate.runtime = self

    def __getattr__(self, name: str) -> Any:  # cgroups and the like: the wrapped runtime's
        return getattr(self.inner, name)

    def _track(self, p: Handle) -> Handle:
        self.handles = [h for h in self.handles if h.alive]
        self.handles.append(p)
        return p

    async def start(self, argv: list[str], env: dict[str, str], cwd: str | None, log_path: Path,
                    limits: Limits | None = None, stdin: bool = False, tty: bool = False) -> Handle:
        refusal = self.gate.blocked()
        if refusal is not None:
            raise OSError(f"not starting: {refusal}")
        return self._track(await self.inner.start(argv, env, cwd, log_path, limits, stdin, tty))

    def signal(self, p: Handle, sig: int) -> None:
        self.inner.signal(p, sig)

    def kill(self, p: Handle) -> None:
        self.inner.kill(p)

    async def wait(self, p: Handle) -> Exit:
        """The instance's exit; once it has exited it is no longer tracked (the agent waits on every instance it
        starts: a finished pod's handles — its process, its log paths — are not kept until the next start)."""
        result = await self.inner.wait(p)
        self.handles = [h for h in self.handles if h is not p]
        return result

    def adopt(self, checkpoint: dict[str, Any]) -> Handle:
        return self._track(self.inner.adopt(checkpoint))

    def find(self, log_path: Path) -> Handle | None:
        found = self.inner.find(log_path)
        return self._track(found) if found is not None else None

    def kill_all(self) -> None:
        for p in self.handles:
            if p.alive:
                try:
                    self.inner.kill(p)
                except OSError as exc:
                    log.warning("killing a container failed: %s", exc)
