"""One chaos run: start the cluster, deploy the workload, wait until it is healthy, play a seeded
schedule of faults while observing, heal, wait for recovery, read back, and check every invariant."""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelite.client.http import ApiClient
from kubelite.clock import RealClock
from kubelite.testing.chaos import workload
from kubelite.testing.chaos.cluster import NODE_MONITOR_GRACE, NODES, Cluster
from kubelite.testing.chaos.invariants import FENCING, STORAGE, Violation, removed_at, run_checkers
from kubelite.testing.chaos.observations import Fence, Window
from kubelite.testing.chaos.observer import Observer
from kubelite.testing.chaos.schedule import POD_DELETE, Fault, generate

log = logging.getLogger(__name__)

READY_TIMEOUT = 120.0
UNRECOVERED = "the workload did not recover"
RECOVERY_TIMEOUT = 90.0


@dataclass(frozen=True)
class Recovery:
    seconds: float | None  # fault end -> workload healthy again; None: never within the run
    disrupted: bool  # whether the workload was unhealthy at some point meanwhile
    overlapped: bool = False  # another fault was active at its end or began before recovery: not its own time


@dataclass
class RunReport:
    seed: int
    duration: float
    faults: list[Fault]
    violations: list[Violation] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)  # one per fault, in order
    episodes: list[Episode] = field(default_factory=list)  # runs of overlapping faults, and their recovery
    acked_writes: int = 0
    error: str = ""
    offset: float = 0.0  # when the schedule started, on the observations' clock (the workload's start)
    fences: int = 0  # confirmed fences (with --fencing)
    replacements: list[float] = field(default_factory=list)  # per fence: its fault's start -> healthy again

    @property
    def ok(self) -> bool:
        return not self.violations and not self.error

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "duration": self.duration, "faults": [f.to_json() for f in self.faults],
                "violations": [v.__dict__ for v in self.violations], "skipped": self.skipped,
                "recoveries": [r.__dict__ for r in self.recoveries],
                "episodes": [{"start": e.start, "end": e.end, **e.recovery.__dict__} for e in self.episodes],
                "acked_writes": self.acked_writes, "fences": self.fences, "replacements": self.replacements,
                "error": self.error, "offset": self.offset}

    def text(self) -> str:
        lines = [f"seed {self.seed}: {len(self.faults)} faults, {len(self.violations)} violations, "
                 f"{self.acked_writes} acknowledged writes" + (f", ERROR {self.error}" if self.error else "")]
        for f, r in zip(self.faults, self.recoveries, strict=False):
            healed = "never recovered" if r.seconds is None else f"healthy {r.seconds:.1f}s after its end"
            note = (" (workload undisturbed)" if not r.disrupted else "") + (" (overlapped)" if r.overlapped else "")
            lines.append(f"  {f.describe()}  {healed}{note}")
        for e in self.episodes:
            r = e.recovery
            healed = "never recovered" if r.seconds is None else f"healthy {r.seconds:.1f}s after"
            note = "" if r.disrupted else " (undisturbed)"
            lines.append(f"  episode t={e.start:.1f}-{e.end:.1f}s: {healed}{note}")
        if self.fences:
            lines.append(f"  {self.fences} confirmed fences; fault start -> replacement healthy: "
                         + ", ".join(f"{r:.1f}s" for r in self.replacements))
        if self.violations:  # the checkers' times count from the workload's creation
            lines.append(f"  (violation times below: fault time + {self.offset:.1f}s)")
        lines += [f"  VIOLATION {v.invariant} at t={v.t:.1f}s: {v.message}" for v in self.violations]
        lines += [f"  {s}" for s in self.skipped]
        return "\n".join(lines)


@dataclass(frozen=True)
class Episode:
    """A maximal run of overlapping faults: the workload's recovery is measured from its end, when nothing
    is broken any more (a fault's own end, inside an episode, says little)."""

    start: float
    end: float
    recovery: Recovery


def episodes(faults: list[Fault], health: list[tuple[float, bool]]) -> list[Episode]:
    spans: list[list[float]] = []
    for f in sorted(faults, key=lambda f: f.at):
        if spans and f.at <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], f.end)
        else:
            spans.append([f.at, f.end])
    merged = [Fault(start, "episode", "", end - start) for start, end in spans]
    return [Episode(round(f.at, 2), round(f.end, 2), r) for f, r in zip(merged, recovery_times(merged, health),
                                                                         strict=True)]


def recovery_times(faults: list[Fault], health: list[tuple[float, bool]]) -> list[Recovery]:
    """Per fault, the time from its end to the first healthy look at or after it (None: never), and
    whether the workload was unhealthy at all between its start and then."""
    out = []
    for f in faults:
        healed = next((t for t, ok in health if ok and t >= f.end), None)
        until = healed if healed is not None else float("inf")
        others = [g for g in faults if g is not f and g.at <= until and g.end >= f.end]
        out.append(Recovery(None if healed is None else round(healed - f.end, 2),
                            any(not ok for t, ok in health if f.at <= t <= until), bool(others)))
    return out


def replacement_times(faults: list[Fault], fences: list[Fence], health: list[tuple[float, bool]]) -> list[float]:
    """Per confirmed fence, from the start of the fault that cut its node off — the last one on that node
    to start at least the node monitor grace before the fence (a node is declared lost no sooner) — to the
    first healthy look after the fence: S4's "partition -> replacement running"."""
    out = []
    for fence in fences:
        cause = max((f for f in faults if f.target == fence.node and f.at <= fence.t - NODE_MONITOR_GRACE),
                    key=lambda f: f.at, default=None)
        healed = next((t for t, ok in health if ok and t >= fence.t), None)
        if cause is not None and healed is not None:
            out.append(round(healed - cause.at, 2))
    return out


async def _wait_healthy(observer: Observer, timeout: float) -> bool:
    start = observer.now()
    while observer.now() - start < timeout:
        if observer.health and observer.health[-1][1] and observer.health[-1][0] > start:
            return True
        await observer.clock.sleep(0.5)
    return False


async def run_one(seed: int, duration: float, workdir: Path, exclude: frozenset[str] = frozenset(),
                  recovery_timeout: float = RECOVERY_TIMEOUT, fencing: bool = False) -> RunReport:
    faults = generate(seed, duration, NODES, workload.DELETE_TARGETS, exclude=exclude)
    report = RunReport(seed, duration, faults)
    clock = RealClock()
    run_id = f"chaos-{seed}-{int(clock.now())}"
    cluster = Cluster(workdir, run_id, clock=clock, fencing=fencing)
    tasks: list[asyncio.Task[None]] = []
    client: ApiClient | None = None
    observer: Observer | None = None
    try:
        await cluster.start()
        client = ApiClient.from_kubeconfig(cluster.kubeconfig)
        observer = Observer(client, run_id, cluster.clock)
        tasks = [asyncio.create_task(c) for c in (observer.sample_procs(), observer.list_pods(),
                                                  observer.list_fences(), observer.watch_removals())]
        for path, obj in workload.manifests(run_id, cluster.shared):
            await client.request("POST", path, obj)
        if not await _wait_healthy(observer, READY_TIMEOUT):
            report.error = f"the workload never became healthy before the faults (logs in {workdir})"
            return report
        # The schedule's times count from here: the workload is up, the faults start.
        offset = report.offset = round(observer.now(), 1)
        tasks.append(asyncio.create_task(observer.write_acknowledged()))
        shifted = [f.shifted(offset) for f in faults]
        observer.obs.faults = [Window(f.at, f.end, f.kind, f.target) for f in shifted if f.kind != POD_DELETE]
        injections = [asyncio.create_task(_at(observer, f.at, _inject(cluster, client, f))) for f in shifted]
        await clock.sleep(max(0.0, offset + duration - observer.now()))
        await asyncio.gather(*injections)
        await observer.stop_writing(tasks.pop())  # what was acknowledged must survive
        cluster.heal()
        if fencing:
            await cluster.power_on(client)
        if not await _wait_healthy(observer, recovery_timeout):
            report.error = (f"{UNRECOVERED} within {recovery_timeout:.0f} s of the last fault "
                            f"(last look: {observer.unhealthy})")
        await observer.read_back()
        observer.obs.files = workload.read_records(cluster.shared, observer.started)
        capabilities = await observer.capabilities()
        report.violations, report.skipped = run_checkers(observer.obs, capabilities)
        report.error = report.error or _missing_evidence(observer, capabilities)
        report.recoveries = recovery_times(shifted, observer.health)
        report.episodes = episodes(shifted, observer.health)
        report.acked_writes = len(observer.obs.acked_writes)
        report.fences = len(observer.obs.fences)
        report.replacements = replacement_times(shifted, observer.obs.fences, observer.health)
        return report
    finally:
        if observer is not None:
            observer.stopped.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if client is not None:
            await client.close()
        await cluster.stop()
        (workdir / "report.json").write_text(json.dumps(report.to_json(), indent=1))


def _missing_evidence(observer: Observer, capabilities: set[str]) -> str:
    """A run that saw nothing proves nothing: say so rather than pass it."""
    obs = observer.obs
    needed: list[tuple[str, object]] = [
        ("workload processes in /proc", obs.procs), ("file records", obs.files),
        ("acknowledged writes", obs.acked_writes), ("pod lists", obs.pod_list_times)]
    if STORAGE in capabilities:
        needed.append(("volume mounts", obs.mounts))
    if FENCING in capabilities and removed_at(obs):  # the pod lists saw removals: the watch must have too
        needed.append(("pod deletions on the watch", obs.removals))
    missing = [what for what, seen in needed if not seen]
    return f"no {', no '.join(missing)} observed" if missing else ""


async def _inject(cluster: Cluster, client: ApiClient, fault: Fault) -> None:
    if fault.kind == POD_DELETE:
        log.info("fault (run time): %s", fault.describe())
        await workload.delete_twice(client, cluster.clock, fault.target, fault.graces)
    else:
        await cluster.inject(fault)


async def _at(observer: Observer, when: float, action: Any) -> None:
    await observer.clock.sleep(max(0.0, when - observer.now()))
    try:
        await action
    except Exception:  # one failed injection must not end the run; the report still checks the rest
        log.exception("fault injection failed")


def percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
