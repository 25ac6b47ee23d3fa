"""The invariants a chaos run must keep, one checker per row of `CHECKERS`.

A checker is a pure function of `Observations` returning its violations; `needs` names the cluster
capability it needs (storage's VolumeAttachments for S5, the fencing controller's NodeFence objects for
fenced force deletion) — when the cluster lacks it, the row is reported as skipped, with the reason, rather
than silently passing. The storage and fencing work plug in by providing the capability and the
observations (`mounts`, `fences`) their rows read.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from kubelite.testing.chaos.observations import Observations, ProcSample, Window

# A process sampled alive at t was alive somewhere in (t - interval, t]; allow for the sampling period
# and for the 2 s minimum stop window (L12) when comparing against API times.
KILL_SLACK = 3.0
# A partitioned or stopped agent sees a deletion only once it is back: it then owes the kill within this
# (reconnect and relist; the node lifecycle controller's grace period is the same order) plus the grace.
RECONNECT_SLACK = 15.0
# A half-open link leaves the agent's side of its connections open and dead after the link heals: it learns
# only when a heartbeat goes unanswered (its 10 s Lease renewal interval + 10 s request timeout) and closes
# them all. So its disturbance lasts this long past its end (seed 8: a pod deleted 3 s after a half-open
# ended was seen 2 s later, after the heartbeat noticed, and killed 1.5 s past the plain deadline + slack).
HALF_OPEN_DETECTION = 20.0


@dataclass(frozen=True)
class Violation:
    invariant: str
    t: float
    message: str


@dataclass(frozen=True)
class Checker:
    name: str
    requirement: str
    what: str
    check: Callable[[Observations], list[Violation]]
    needs: str | None = None  # a capability name; None: always checkable
    skip_reason: str = ""


def _by_time(procs: list[ProcSample]) -> dict[float, list[ProcSample]]:
    out: dict[float, list[ProcSample]] = defaultdict(list)
    for p in procs:
        out[p.t].append(p)
    return out


def at_most_once_processes(obs: Observations) -> list[Violation]:
    """S1: at no sample are processes of two different pod objects alive for one StatefulSet identity."""
    out = []
    for t, procs in sorted(_by_time([p for p in obs.procs if p.stateful]).items()):
        uids: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for p in procs:
            uids[p.identity].add((p.pod_uid, p.node))
        out += [Violation("at-most-once-processes", t, f"{ident} alive as {len(seen)} pods at once: "
                          + ", ".join(f"uid {u[:8]} on {n}" for u, n in sorted(seen)))
                for ident, seen in sorted(uids.items()) if len({u for u, _ in seen}) > 1]
    return out


def at_most_once_files(obs: Observations) -> list[Violation]:
    """S1 from the data side: two instances of one identity never both wrote during the same interval
    (each instance's [first, last] write must not overlap another's)."""
    spans: dict[tuple[str, str], tuple[float, float, str]] = {}
    for r in obs.files:
        first, last, _ = spans.get((r.identity, r.pod_uid), (r.t, r.t, r.node))
        spans[(r.identity, r.pod_uid)] = (min(first, r.t), max(last, r.t), r.node)
    by_identity: dict[str, list[tuple[float, float, str, str]]] = defaultdict(list)
    for (ident, uid), (first, last, node) in spans.items():
        by_identity[ident].append((first, last, uid, node))
    out = []
    for ident, items in sorted(by_identity.items()):
        items.sort()
        for (_, l1, u1, n1), (f2, _, u2, n2) in itertools.pairwise(items):
            if f2 < l1:  # the times are the writers' own (EPOCHREALTIME): any overlap is two writers
                out.append(Violation("at-most-once-files", f2,
                                     f"{ident}: uid {u2[:8]} on {n2} wrote from t={f2:.1f} while uid {u1[:8]} "
                                     f"on {n1} was still writing until t={l1:.1f}"))
    return out


def acknowledged_writes_kept(obs: Observations) -> list[Violation]:
    """Nothing lost: every write the API server acknowledged is readable after recovery."""
    if obs.final_writes is None:
        return [Violation("acknowledged-writes-kept", 0.0, "the acknowledged writes could not be read back")]
    lost = sorted(obs.acked_writes - obs.final_writes)
    return [Violation("acknowledged-writes-kept", 0.0, f"{len(lost)} acknowledged writes lost: {', '.join(lost[:10])}")
            ] if lost else []


def grace_never_lengthened(obs: Observations) -> list[Violation]:
    """L13: once set, a pod's deletionGracePeriodSeconds only shrinks (and its deletionTimestamp never
    moves later)."""
    out = []
    last: dict[str, tuple[int, float]] = {}
    for s in sorted(obs.pods, key=lambda s: s.t):
        if s.grace is None or s.deletion_timestamp is None:
            continue
        prev = last.get(s.uid)
        if prev is not None and (s.grace > prev[0] or s.deletion_timestamp > prev[1] + 1.0):
            out.append(Violation("grace-never-lengthened", s.t,
                                 f"{s.name} (uid {s.uid[:8]}): grace {prev[0]}s -> {s.grace}s, deletion deadline "
                                 f"t={prev[1]:.1f} -> t={s.deletion_timestamp:.1f}"))
        last[s.uid] = (s.grace, s.deletion_timestamp) if prev is None else (min(prev[0], s.grace),
                                                                            min(prev[1], s.deletion_timestamp))
    return out


def _disturbed_until(w: Window) -> float:
    return w.end + (HALF_OPEN_DETECTION if w.kind == "half_open" else 0.0)


def _last_disturbance(obs: Observations, node: str, start: float, end: float) -> float | None:
    """When the last disturbance between `node`'s agent and the API server within [start, end] ended (a
    half-open link's lasts until the agent can have noticed it)."""
    ends = [_disturbed_until(w) for w in obs.faults
            if w.start <= end and _disturbed_until(w) >= start and w.target in (node, "server")]
    return max(ends) if ends else None


def killed_within_grace(obs: Observations) -> list[Violation]:
    """L12/L13: a deleted pod's processes are dead by its deletionTimestamp (request + grace) plus the
    slack. An agent cut off from the API server meanwhile cannot see the deletion; it restarts the grace
    period when it does (seed 002), so its deadline moves to the fault's end + reconnect slack + grace."""
    deleted: dict[str, tuple[float, float, int, str, str]] = {}  # uid -> (first seen, deadline, grace, name, node)
    for s in sorted(obs.pods, key=lambda s: s.t):
        if s.deletion_timestamp is not None and s.grace is not None:
            seen, dl, grace, _, _ = deleted.get(s.uid, (s.t, s.deletion_timestamp, s.grace, s.name, s.node))
            deleted[s.uid] = (seen, min(dl, s.deletion_timestamp), min(grace, s.grace), s.name, s.node)
    last_alive: dict[str, float] = {}
    for p in obs.procs:
        last_alive[p.pod_uid] = max(last_alive.get(p.pod_uid, p.t), p.t)
    out = []
    late: set[str] = set()
    for p in sorted(obs.procs, key=lambda p: p.t):
        if p.pod_uid not in deleted or p.pod_uid in late:
            continue
        seen, dl, grace, name, node = deleted[p.pod_uid]
        healed = _last_disturbance(obs, node, dl - grace - obs.pod_list_interval, p.t)
        due = dl if healed is None else max(dl, healed + RECONNECT_SLACK + grace)
        if p.t > due + KILL_SLACK:
            late.add(p.pod_uid)
            why = "" if healed is None else f", {p.t - healed:.1f}s after its node's last fault ended"
            out.append(Violation("killed-within-grace", p.t, f"{name} (uid {p.pod_uid[:8]}) on {node}: pid {p.pid} "
                                 f"alive at t={p.t:.1f}, {p.t - dl:.1f}s past its deletion deadline t={dl:.1f}{why} "
                                 f"(last seen alive at t={last_alive[p.pod_uid]:.1f})"))
    return out


def removed_at(obs: Observations) -> dict[str, tuple[float, str, str]]:
    """uid -> (the first successful pod list after its last appearance that no longer had it, name, node)."""
    last_seen: dict[str, tuple[float, str, str]] = {}
    for s in obs.pods:
        if s.uid not in last_seen or s.t > last_seen[s.uid][0]:
            last_seen[s.uid] = (s.t, s.name, s.node)
    lists = sorted(obs.pod_list_times)
    out = {}
    for uid, (t, name, node) in last_seen.items():
        later = next((lt for lt in lists if lt > t), None)
        if later is not None:
            out[uid] = (later, name, node)
    return out


def removed_only_when_dead(obs: Observations) -> list[Violation]:
    """S1/S2: a pod object is gone only after its processes are confirmed dead — no process of a pod is
    alive after its object was listed as gone."""
    removed = removed_at(obs)
    out, reported = [], set()
    for p in sorted(obs.procs, key=lambda p: p.t):
        gone = removed.get(p.pod_uid)
        if gone is not None and p.t > gone[0] + obs.sample_interval and p.pod_uid not in reported:
            reported.add(p.pod_uid)
            out.append(Violation("removed-only-when-dead", p.t, f"{gone[1]} (uid {p.pod_uid[:8]}) on {gone[2]}: "
                                 f"object gone by t={gone[0]:.1f} but pid {p.pid} still alive at t={p.t:.1f}"))
    return out


def _fenced(obs: Observations, node: str, t: float) -> bool:
    """Whether `node` had a confirmed fence at `t`, not cleared before then (a clear is seen up to one poll
    late)."""
    return any(f.node == node and f.t <= t and (f.cleared is None or f.cleared >= t - obs.pod_list_interval)
               for f in obs.fences)


def force_delete_needs_fence(obs: Observations) -> list[Violation]:
    """S4: no pod object is removed unconfirmed — its processes confirmed dead by its agent or its node
    confirmed fenced. The evidence is the pod's final state (its DELETED watch event): still reporting a
    container running, with no terminal phase, is a force delete nobody confirmed (the agent writes the
    terminal status before its own grace-0 DELETE; PodGC sets the phase Failed before its own). A pod
    bound to no node runs nowhere.

    The process table is not used here: a process seen just before a removal is what every prompt
    agent-confirmed removal looks like too (the first version of this check reported those), and one
    alive after its removal is `removed-only-when-dead`'s finding, fenced or not."""
    return [Violation("force-delete-needs-fence", r.t, f"{r.name} (uid {r.uid[:8]}) on {r.node} deleted (grace "
                      f"{r.grace}) at t={r.t:.1f} while the API still showed it running, with no confirmed "
                      f"fence of {r.node}")
            for r in sorted(obs.removals, key=lambda r: r.t) if r.running and r.node and not _fenced(obs, r.node, r.t)]


def rwo_single_node(obs: Observations) -> list[Violation]:
    """S5: at no sample is one ReadWriteOnce volume mounted by live processes on two nodes."""
    nodes: dict[tuple[float, str], set[str]] = defaultdict(set)
    for m in obs.mounts:
        nodes[(m.t, m.volume)].add(m.node)
    return [Violation("rwo-single-node", t, f"volume {vol} mounted on {', '.join(sorted(ns))} at once")
            for (t, vol), ns in sorted(nodes.items()) if len(ns) > 1]


STORAGE = "storage.k8s.io/v1 volumeattachments"
FENCING = "kubelite.io/v1alpha1 nodefences"

CHECKERS: list[Checker] = [
    Checker("at-most-once-processes", "S1", "two live processes for one StatefulSet identity (/proc)",
            at_most_once_processes),
    Checker("at-most-once-files", "S1", "two instances of one identity writing its file in overlapping spans",
            at_most_once_files),
    Checker("removed-only-when-dead", "S1/S2", "a pod object gone while its processes still run",
            removed_only_when_dead),
    Checker("acknowledged-writes-kept", "S8", "a write the API server acknowledged, missing after recovery",
            acknowledged_writes_kept),
    Checker("grace-never-lengthened", "L13", "a pod's deletionGracePeriodSeconds (or deadline) increased",
            grace_never_lengthened),
    Checker("killed-within-grace", "L12/L13", "a container alive past its deletion deadline on an undisturbed node",
            killed_within_grace),
    Checker("force-delete-needs-fence", "S4", "a running pod removed without a confirmed fence of its node",
            force_delete_needs_fence, needs=FENCING,
            skip_reason="the cluster serves no NodeFences; removed-only-when-dead covers the case"),
    Checker("rwo-single-node", "S5", "one ReadWriteOnce volume mounted on two nodes",
            rwo_single_node, needs=STORAGE,
            skip_reason="the cluster serves no VolumeAttachments"),
]


# Capabilities whose observations the observer collects: Observations.mounts for STORAGE (procs.mounts,
# from each workload process's mountinfo); .fences (Observer.list_fences) and .removals
# (Observer.watch_removals) for FENCING. A capability's row runs only when it is listed here: an empty
# list of observations nobody collected would otherwise look at nothing.
COLLECTED: frozenset[str] = frozenset({STORAGE, FENCING})


def run_checkers(obs: Observations, capabilities: set[str],
                 collected: frozenset[str] = COLLECTED) -> tuple[list[Violation], list[str]]:
    """All violations, and one line per checker skipped for a missing capability or collector."""
    violations: list[Violation] = []
    skipped = []
    for c in CHECKERS:
        if c.needs is not None and c.needs not in capabilities:
            skipped.append(f"{c.name} ({c.requirement}): skipped — {c.skip_reason}")
        elif c.needs is not None and c.needs not in collected:
            skipped.append(f"{c.name} ({c.requirement}): skipped — the cluster serves {c.needs}, but nothing "
                           "collects its observations yet (invariants.COLLECTED)")
        else:
            violations += c.check(obs)
    return violations, skipped
