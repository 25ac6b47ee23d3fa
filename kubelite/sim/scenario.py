"""Scenario files: what a simulation runs (format documented in examples/sim/README.md).

Parsed with a YAML loader that keeps each mapping's line, so a bad value is reported as
`FILE:LINE: what is wrong` rather than a traceback.
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubelite.agent.config import NodeConfigError, duration
from kubelite.apiserver.event_ttl import DEFAULT_EVENT_TTL, parse_event_ttl

Obj = dict[str, Any]
KINDS = ("Pod", "Deployment", "StatefulSet", "Job")
FAULTS = ("nodeLost", "agentRestart", "drain", "pdb", "scale", "delete")


class ScenarioError(ValueError):
    pass


class _Marked(dict[str, Any]):
    """A mapping that remembers the line it and each of its keys started on (1-based)."""

    line = 0
    key_lines: dict[str, int]


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _Marked:
    out = _Marked({str(k): v for k, v in loader.construct_mapping(node, deep=True).items()})
    out.line = node.start_mark.line + 1
    out.key_lines = {str(k.value): k.start_mark.line + 1 for k, _ in node.value}
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


@dataclass
class _Ctx:
    """Where parsing is: the file, for error messages."""

    file: str

    def fail(self, where: Obj | None, key: str | None, message: str) -> ScenarioError:
        line = 0
        if isinstance(where, _Marked):
            line = where.key_lines.get(key, where.line) if key else where.line
        return ScenarioError(f"{self.file}:{line}: {message}" if line else f"{self.file}: {message}")

    def seconds(self, where: Obj, key: str, default: float | None = None) -> float:
        raw = where.get(key, default)
        if raw is None:
            raise self.fail(where, key, f"{key}: required (a duration such as 30s, 5m, 1h30m)")
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        try:
            return duration(str(raw))
        except NodeConfigError:
            raise self.fail(where, key, f"{key}: {raw!r} is not a duration (such as 30s, 5m, 1h30m)") from None

    def mapping(self, where: Obj, key: str, required: bool = False) -> Obj:
        raw = where.get(key)
        if raw is None:
            if required:
                raise self.fail(where, None, f"{key}: required")
            return {}
        if not isinstance(raw, dict):
            raise self.fail(where, key, f"{key}: must be a mapping")
        return raw

    def items(self, where: Obj, key: str) -> list[Obj]:
        raw = where.get(key) or []
        if not isinstance(raw, list) or not all(isinstance(i, dict) for i in raw):
            raise self.fail(where, key, f"{key}: must be a list of mappings")
        return raw

    def known(self, where: Obj, allowed: set[str], what: str) -> None:
        for k in where:
            if k not in allowed:
                raise self.fail(where, k, f"{what}: unknown field {k!r} (known: {', '.join(sorted(allowed))})")


@dataclass(frozen=True)
class Distribution:
    """A duration distribution: fixed, exponential (mean) or uniform — the hollow command's `--run` form."""

    kind: str
    a: float
    b: float = 0.0

    def draw(self, rng: random.Random) -> float:
        if self.kind == "exponential":
            return round(rng.expovariate(1.0 / self.a), 3) if self.a > 0 else 0.0
        return round(rng.uniform(self.a, self.b), 3) if self.kind == "uniform" else self.a

    def hollow(self) -> str:
        return {"fixed": f"{self.a:g}", "exponential": f"exp:{self.a:g}", "uniform": f"uniform:{self.a:g}:{self.b:g}"}[
            self.kind]


@dataclass(frozen=True)
class Behaviour:
    """How a workload's hollow containers behave (mapped to the hollow command's flags)."""

    run: Distribution | None = None  # None: runs until stopped
    exit_codes: tuple[int, ...] = (0,)
    startup: float = 0.0
    stop_after: float = 0.0  # on SIGTERM
    ignore_term: bool = False
    probes: tuple[tuple[str, float, float], ...] = ()  # (startup|liveness|readiness, succeedAfter, failAfter)

    def command(self, run: float | None = None) -> list[str]:
        argv = ["hollow"]
        if run is not None:
            argv += ["--run", f"{run:g}"]
        elif self.run is not None:
            argv += ["--run", self.run.hollow()]
        argv += ["--exits", ",".join(str(c) for c in self.exit_codes)]
        if self.startup:
            argv += ["--start-after", f"{self.startup:g}"]
        if self.ignore_term:
            argv.append("--ignore-term")
        elif self.stop_after:
            argv += ["--term-after", f"{self.stop_after:g}"]
        for kind, begin, end in self.probes:
            argv += ["--probe", f"{kind}={begin:g}" + (f":{end:g}" if end < math.inf else "")]
        return argv


@dataclass(frozen=True)
class Arrival:
    at: float
    overrides: Obj = field(default_factory=dict)  # a trace row's per-instance values (cpu, memory, run)


@dataclass
class Workload:
    name: str
    kind: str
    namespace: str
    replicas: int
    spec: Obj  # the pod spec fragment (resources, affinity, spread, priority, grace, restartPolicy)
    labels: dict[str, str]
    behaviour: Behaviour
    arrivals: list[Arrival]
    extra: Obj  # kind-specific fields (Job: completions, parallelism, backoffLimit)


@dataclass
class NodePool:
    name: str
    count: int
    capacity: dict[str, str]
    labels: dict[str, str]
    taints: list[Obj]


@dataclass
class Fault:
    at: float
    kind: str
    target: Any
    line: int


@dataclass
class Scenario:
    name: str
    file: Path
    duration: float
    sample: float
    pools: list[NodePool]
    workloads: list[Workload]
    faults: list[Fault]
    scheduler_configs: list[Path]
    timeline: list[str]  # pod names (prefixes) whose termination timeline the report draws
    priority_classes: list[Obj]
    node_config: Obj
    controller_manager: Obj = field(default_factory=dict)  # kube-controller-manager flags (camelCase), as given
    event_ttl: int = DEFAULT_EVENT_TTL  # apiServer.eventTTL (kube-apiserver's --event-ttl), whole seconds; 0: never

    def node_names(self) -> list[str]:
        return [f"{p.name}-{i}" for p in self.pools for i in range(p.count)]


def _distribution(ctx: _Ctx, where: Obj, key: str) -> Distribution | None:
    raw = where.get(key)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        return Distribution("fixed", ctx.seconds(where, key))
    ctx.known(raw, {"fixed", "exponential", "uniform"}, key)
    if len(raw) != 1:
        raise ctx.fail(raw, None, f"{key}: exactly one of fixed, exponential, uniform")
    (kind, value), = raw.items()
    if kind == "uniform":
        if not isinstance(value, list) or len(value) != 2:
            raise ctx.fail(raw, kind, f"{key}.uniform: a list [low, high]")
        lo, hi = (ctx.seconds({"v": v}, "v") for v in value)
        return Distribution("uniform", lo, hi)
    return Distribution(kind, ctx.seconds(raw, kind))


PROBES = {"startup": "startupProbe", "liveness": "livenessProbe", "readiness": "readinessProbe"}


def _behaviour(ctx: _Ctx, raw: Obj, spec: Obj) -> Behaviour:
    ctx.known(raw, {"run", "exitCodes", "startup", "stopAfter", "ignoreTerm", "probes"}, "behaviour")
    codes = raw.get("exitCodes", [0])
    if not isinstance(codes, list) or not codes or not all(isinstance(c, int) for c in codes):
        raise ctx.fail(raw, "exitCodes", "behaviour.exitCodes: a non-empty list of integers")
    return Behaviour(_distribution(ctx, raw, "run"), tuple(codes), ctx.seconds(raw, "startup", 0.0),
                     ctx.seconds(raw, "stopAfter", 0.0), bool(raw.get("ignoreTerm", False)),
                     _probes(ctx, ctx.mapping(raw, "probes"), spec))


def _probes(ctx: _Ctx, raw: Obj, spec: Obj) -> tuple[tuple[str, float, float], ...]:
    """behaviour.probes: when each probe of the hollow containers succeeds — from `succeedAfter` (default 0)
    until `failAfter` (default never), in seconds since the container (re)started. Each needs its probe in
    the spec: the agent's prober runs it (period, thresholds, restarts), the hollow runtime only answers."""
    ctx.known(raw, set(PROBES), "behaviour.probes")
    declared = {key for c in spec.get("containers") or [] if isinstance(c, dict) for key in PROBES.values() if key in c}
    out = []
    for kind, field_name in PROBES.items():
        if kind not in raw:
            continue
        window = raw[kind]
        if not isinstance(window, dict):
            raise ctx.fail(raw, kind, f"behaviour.probes.{kind}: a mapping {{succeedAfter, failAfter}}")
        ctx.known(window, {"succeedAfter", "failAfter"}, f"behaviour.probes.{kind}")
        if field_name not in declared:
            raise ctx.fail(raw, kind, f"behaviour.probes.{kind}: no container of the spec has a {field_name}")
        begin = ctx.seconds(window, "succeedAfter", 0.0)
        end = ctx.seconds(window, "failAfter") if "failAfter" in window else math.inf
        if end <= begin:
            raise ctx.fail(window, "failAfter", f"behaviour.probes.{kind}: failAfter must be after succeedAfter")
        out.append((kind, begin, end))
    return tuple(out)


def _arrivals(ctx: _Ctx, raw: Obj, base: Path, rng: random.Random) -> list[Arrival]:
    if "at" in raw:
        return [Arrival(ctx.seconds(raw, "at"))]
    arr = ctx.mapping(raw, "arrivals")
    if not arr:
        return [Arrival(0.0)]
    ctx.known(arr, {"times", "poisson", "trace"}, "arrivals")
    if "times" in arr:
        times = arr["times"]
        if not isinstance(times, list):
            raise ctx.fail(arr, "times", "arrivals.times: a list of durations")
        return [Arrival(ctx.seconds({"t": t}, "t")) for t in times]
    if "poisson" in arr:
        p = ctx.mapping(arr, "poisson")
        ctx.known(p, {"perHour", "start", "until"}, "arrivals.poisson")
        rate = p.get("perHour")
        if not isinstance(rate, int | float) or rate <= 0:
            raise ctx.fail(p, "perHour", "arrivals.poisson.perHour: a positive number of arrivals per hour")
        t, until = ctx.seconds(p, "start", 0.0), ctx.seconds(p, "until")
        drawn: list[Arrival] = []
        while True:
            t += -math.log(1.0 - rng.random()) * 3600.0 / float(rate)
            if t >= until:
                return drawn
            drawn.append(Arrival(round(t, 3)))
    path = base / str(arr["trace"])
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise ctx.fail(arr, "trace", f"arrivals.trace: cannot read {path}: {exc}") from None
    out: list[Arrival] = []
    for i, row in enumerate(rows, start=2):
        try:
            at = duration(row["at"]) if not row["at"].replace(".", "", 1).isdigit() else float(row["at"])
            extra = {k: (duration(v) if k == "run" else v) for k, v in row.items() if k != "at" and v}
        except (KeyError, NodeConfigError, AttributeError):
            raise ScenarioError(f"{path}:{i}: a trace row needs `at` (seconds or a duration); "
                                f"optional cpu, memory, run") from None
        out.append(Arrival(at, extra))
    return out


def _workload(ctx: _Ctx, raw: Obj, base: Path, rng: random.Random) -> Workload:
    ctx.known(raw, {"name", "kind", "namespace", "replicas", "at", "arrivals", "labels", "spec", "behaviour",
                    "completions", "parallelism", "backoffLimit"}, "workload")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ctx.fail(raw, None, "workload: name is required")
    kind = raw.get("kind", "Deployment")
    if kind not in KINDS:
        raise ctx.fail(raw, "kind", f"workload {name}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    replicas = raw.get("replicas", 1)
    if not isinstance(replicas, int) or replicas < 0:
        raise ctx.fail(raw, "replicas", f"workload {name}: replicas must be a non-negative integer")
    extra: Obj = {k: raw[k] for k in ("completions", "parallelism", "backoffLimit") if k in raw}
    labels = {str(k): str(v) for k, v in ctx.mapping(raw, "labels").items()} or {"app": name}
    spec = ctx.mapping(raw, "spec")
    behaviour = _behaviour(ctx, ctx.mapping(raw, "behaviour"), spec)
    arrivals = _arrivals(ctx, raw, base, rng)
    if kind == "Pod" and behaviour.run is not None and behaviour.run.kind != "fixed":
        # A bare pod's run time is drawn here, from the scenario's seed: the same pods run as long under every
        # scheduler config of an A/B comparison. (A controller's pods draw theirs in the hollow runtime of the
        # node they land on, so those can differ between configs.)
        arrivals = [a if "run" in a.overrides else Arrival(a.at, {**a.overrides, "run": behaviour.run.draw(rng)})
                    for a in arrivals]
    return Workload(name, kind, str(raw.get("namespace", "default")), replicas, dict(ctx.mapping(raw, "spec")),
                    labels, behaviour, arrivals, extra)


def _pool(ctx: _Ctx, raw: Obj) -> NodePool:
    ctx.known(raw, {"name", "count", "capacity", "labels", "taints"}, "nodePool")
    name, count = raw.get("name"), raw.get("count", 1)
    if not isinstance(name, str) or not name:
        raise ctx.fail(raw, None, "nodePool: name is required")
    if not isinstance(count, int) or count < 1:
        raise ctx.fail(raw, "count", f"nodePool {name}: count must be a positive integer")
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    capacity.update({str(k): str(v) for k, v in ctx.mapping(raw, "capacity").items()})
    return NodePool(name, count, capacity, {str(k): str(v) for k, v in ctx.mapping(raw, "labels").items()},
                    ctx.items(raw, "taints"))


def _fault(ctx: _Ctx, raw: Obj) -> Fault:
    kinds = [k for k in FAULTS if k in raw]
    ctx.known(raw, {"at", *FAULTS}, "fault")
    if len(kinds) != 1:
        raise ctx.fail(raw, None, f"fault: exactly one of {', '.join(FAULTS)}")
    return Fault(ctx.seconds(raw, "at"), kinds[0], raw[kinds[0]], raw.line if isinstance(raw, _Marked) else 0)


def _check_fault(ctx: _Ctx, raw: Obj, nodes: list[str], workloads: list[str]) -> None:
    """A fault names things that exist: a node (pool name + index), a workload, a PDB with a name."""
    for kind in ("nodeLost", "agentRestart", "drain"):
        if kind in raw and raw[kind] not in nodes:
            raise ctx.fail(raw, kind, f"fault {kind}: no node {raw[kind]!r} (nodes are named POOL-INDEX, "
                                      f"e.g. {nodes[0]})")
    if "scale" in raw:
        target = raw["scale"]
        if not isinstance(target, dict) or target.get("workload") not in workloads \
                or not isinstance(target.get("replicas"), int):
            raise ctx.fail(raw, "scale", "fault scale: {workload: NAME of a workload, replicas: N}")
    if "pdb" in raw and not (isinstance(raw["pdb"], dict) and raw["pdb"].get("name")):
        raise ctx.fail(raw, "pdb", "fault pdb: {name, matchLabels, minAvailable or maxUnavailable}")


def load(path: Path, seed: int = 0) -> Scenario:
    """Parse a scenario; Poisson arrivals are drawn from `seed`, so a seed fixes the whole run."""
    ctx = _Ctx(str(path))
    try:
        raw = yaml.load(path.read_text(), Loader=_Loader)
    except OSError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        raise ScenarioError(f"{path}:{line}: {exc.problem}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping (name, duration, nodePools, workloads, …)")
    ctx.known(raw, {"name", "duration", "sample", "nodePools", "workloads", "faults", "schedulerConfig",
                    "timeline", "priorityClasses", "nodeConfig", "controllerManager", "apiServer"},
              "scenario")
    rng = random.Random(seed)
    pools = [_pool(ctx, p) for p in ctx.items(raw, "nodePools")]
    if not pools:
        raise ctx.fail(raw, None, "nodePools: at least one pool")
    workloads = [_workload(ctx, w, path.parent, rng) for w in ctx.items(raw, "workloads")]
    names = [w.name for w in workloads]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ctx.fail(raw, "workloads", f"workloads: name {dup!r} used twice")
    nodes = [f"{p.name}-{i}" for p in pools for i in range(p.count)]
    for f in ctx.items(raw, "faults"):
        _check_fault(ctx, f, nodes, names)
    configs = raw.get("schedulerConfig") or []
    configs = [configs] if isinstance(configs, str) else configs
    return Scenario(str(raw.get("name", path.stem)), path, ctx.seconds(raw, "duration"),
                    ctx.seconds(raw, "sample", 60.0), pools, workloads,
                    sorted((_fault(ctx, f) for f in ctx.items(raw, "faults")), key=lambda f: f.at),
                    [path.parent / str(c) for c in configs], [str(t) for t in raw.get("timeline") or []],
                    ctx.items(raw, "priorityClasses"), ctx.mapping(raw, "nodeConfig"),
                    _controller_manager(ctx, ctx.mapping(raw, "controllerManager")),
                    _event_ttl(ctx, ctx.mapping(raw, "apiServer")))


def _event_ttl(ctx: _Ctx, raw: Obj) -> int:
    """kube-apiserver's --event-ttl: how long an Event lives after its last write (whole seconds, truncated as
    upstream's; 0 keeps Events forever). A long simulation's Events are most of its stored objects."""
    ctx.known(raw, {"eventTTL"}, "apiServer")
    ttl = raw.get("eventTTL", DEFAULT_EVENT_TTL)
    if isinstance(ttl, int) and not isinstance(ttl, bool):
        text = f"{ttl}s"  # a bare number is seconds, as elsewhere in a scenario
    elif isinstance(ttl, str):
        text = ttl
    else:
        raise ctx.fail(raw, "eventTTL", "apiServer.eventTTL: a duration such as 1h, 30m, 90s (0 keeps Events forever)")
    try:
        return parse_event_ttl(text)
    except ValueError as exc:
        raise ctx.fail(raw, "eventTTL", f"apiServer.eventTTL: {exc}") from None


CONTROLLER_MANAGER = ("nodeMonitorPeriod", "nodeMonitorGracePeriod", "nodeStartupGracePeriod")


def _controller_manager(ctx: _Ctx, raw: Obj) -> Obj:
    """kube-controller-manager's node lifecycle flags (--node-monitor-period, …) as durations in seconds."""
    ctx.known(raw, set(CONTROLLER_MANAGER), "controllerManager")
    out = {k: ctx.seconds(raw, k) for k in CONTROLLER_MANAGER if k in raw}
    for k, v in out.items():
        if v <= 0:
            raise ctx.fail(raw, k, f"controllerManager.{k}: must be positive")
    return out
