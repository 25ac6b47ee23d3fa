"""Scenario files: what a simulation runs (format documented in examples/sim/README.md).

Parsed with a YAML loader that keeps each mapping's line, so a bad value is reported as
`FILE:LINE: what is wrong` rather than a traceback. Everything a run would find wrong is found here, at load:
the scenario's own rules below, and what the API server would refuse of the objects the run creates
(checks.py, with the API server's own functions).
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
from kubelite.agent.config import parse as parse_node_config
from kubelite.api.validation import is_dns1123_label, is_dns1123_subdomain, is_qualified_name
from kubelite.apiserver.event_ttl import DEFAULT_EVENT_TTL, parse_event_ttl
from kubelite.scheduler.nodetable import BASE_RESOURCES

Obj = dict[str, Any]
KINDS = ("Pod", "Deployment", "StatefulSet", "Job")
FAULTS = ("nodeLost", "agentRestart", "drain", "pdb", "scale", "delete")
JOB_FIELDS = ("completions", "parallelism", "backoffLimit")
SCALABLE = ("Deployment", "StatefulSet")  # what has spec.replicas (a Job's parallelism is not scaled: kubectl neither)
# nodeConfig: the KubeletConfiguration fields a simulated node uses (kubelite.agent.config.parse reads them). The
# others would be ignored without a word — eviction thresholds among them, as node-pressure eviction is not
# simulated (hollow containers use no memory or disk) — so they are refused.
NODE_CONFIG = {"crashLoopBackOff": {"maxContainerRestartPeriod"}, "featureGates": None, "maxPods": None,
               "shutdownGracePeriod": None, "nodeLeaseDurationSeconds": None, "selfFenceAfter": None}
# Bounds on what a scenario makes at load, far above the scale target (5,000 nodes, 150,000 pods a day), so a
# slip of the pen (`sample: 1ms`, `perHour: 1e12`, a count with three zeros too many) is an error, not a machine
# whose memory fills before the run starts.
MAX_SAMPLES = 100_000  # samples per run (duration / sample): each is a point of every plot, held to the end
MAX_ARRIVALS = 1_000_000  # a Poisson process's expected arrivals (each is drawn and held at load)
MAX_NODES = 100_000


class ScenarioError(ValueError):
    pass


class Marked(dict[str, Any]):
    """A mapping that remembers the line it and each of its keys started on (1-based)."""

    line = 0
    key_lines: dict[str, int]


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> Marked:
    out = Marked({str(k): v for k, v in loader.construct_mapping(node, deep=True).items()})
    out.line = node.start_mark.line + 1
    out.key_lines = {str(k.value): k.start_mark.line + 1 for k, _ in node.value}
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(path: Path) -> Any:
    """A YAML file whose mappings know their lines (`Marked`); an unreadable file or a syntax error is a
    ScenarioError `FILE:LINE: problem` (PyYAML's own text names "<unicode string>" and repeats the line)."""
    try:
        return yaml.load(path.read_text(), Loader=_Loader)
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ScenarioError(f"{where}: YAML syntax: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: YAML syntax: {exc}") from None


def line_of(where: Any, key: str | None = None) -> int:
    """The line a mapping (or one of its keys) starts on; 0 when unknown (not a `Marked`)."""
    if not isinstance(where, Marked):
        return 0
    return where.key_lines.get(key, where.line) if key else where.line


@dataclass
class Ctx:
    """Where parsing is: the file, for error messages."""

    file: str

    def fail(self, where: Obj | None, key: str | None, message: str) -> ScenarioError:
        return self.error(line_of(where, key), message)

    def error(self, line: int, message: str) -> ScenarioError:
        return ScenarioError(f"{self.file}:{line}: {message}" if line else f"{self.file}: {message}")

    def seconds(self, where: Obj, key: str, default: float | None = None, positive: bool = False,
                name: str | None = None) -> float:
        """A duration field: `30s`, `5m`, `1h30m` or a number of seconds (see `duration`)."""
        raw = where.get(key, default)
        if raw is None:
            raise self.fail(where, key, f"{name or key}: required (a duration such as 30s, 5m, 1h30m)")
        return self.duration(raw, where, key, name or key, positive)

    def duration(self, raw: Any, where: Obj, key: str, name: str, positive: bool = False) -> float:
        """`raw` as seconds (`where`/`key`: its line): never negative, infinite or NaN, and with `positive` never 0
        (a sampling period or a span of 0 never ends). A number is held to the rules a string is: a negative
        `sample: -10` once reached the runner, which then scheduled samples without end."""
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            value = float(raw)
        else:
            try:
                value = duration(str(raw))
            except NodeConfigError:
                raise self.fail(where, key, f"{name}: {raw!r} is not a duration (such as 30s, 5m, 1h30m)") from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise self.fail(where, key, f"{name}: {raw!r} must be a {'positive' if positive else 'non-negative'} "
                                        "duration (such as 30s, 5m, 1h30m)")
        return value

    def integer(self, where: Obj, key: str, default: int | None, minimum: int, name: str) -> int:
        """A whole number of at least `minimum` (0 or 1); YAML's `true` is no number here (a bool is an int in
        Python, not in a scenario). No `default`: required."""
        raw = where.get(key, default)
        if raw is None:
            raise self.fail(where, key, f"{name}: required")
        if not isinstance(raw, int) or isinstance(raw, bool) or raw < minimum:
            raise self.fail(where, key, f"{name} must be a {'positive' if minimum else 'non-negative'} integer, "
                                        f"not {raw!r}")
        return raw

    def strings(self, where: Obj, key: str) -> list[str]:
        raw = where.get(key) or []
        if not isinstance(raw, list) or not all(isinstance(i, str) for i in raw):
            raise self.fail(where, key, f"{key}: must be a list of strings")
        return raw

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


def _distribution(ctx: Ctx, where: Obj, key: str) -> Distribution | None:
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
        lo, hi = (ctx.duration(v, raw, kind, f"{key}.uniform") for v in value)
        if lo > hi:
            raise ctx.fail(raw, kind, f"{key}.uniform: [{value[0]}, {value[1]}]: low must not be above high")
        return Distribution("uniform", lo, hi)
    # An exponential's mean must be positive: a mean of 0 is no distribution (`fixed: 0` says that).
    return Distribution(kind, ctx.seconds(raw, kind, positive=kind == "exponential", name=f"{key}.{kind}"))


PROBES = {"startup": "startupProbe", "liveness": "livenessProbe", "readiness": "readinessProbe"}


def _behaviour(ctx: Ctx, raw: Obj, spec: Obj) -> Behaviour:
    ctx.known(raw, {"run", "exitCodes", "startup", "stopAfter", "ignoreTerm", "probes"}, "behaviour")
    codes = raw.get("exitCodes", [0])
    if not isinstance(codes, list) or not codes or \
            not all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
        raise ctx.fail(raw, "exitCodes", "behaviour.exitCodes: a non-empty list of integers")
    ignore = raw.get("ignoreTerm", False)
    if not isinstance(ignore, bool):
        raise ctx.fail(raw, "ignoreTerm", f"behaviour.ignoreTerm: true or false, not {ignore!r}")
    return Behaviour(_distribution(ctx, raw, "run"), tuple(codes),
                     ctx.seconds(raw, "startup", 0.0, name="behaviour.startup"),
                     ctx.seconds(raw, "stopAfter", 0.0, name="behaviour.stopAfter"), ignore,
                     _probes(ctx, ctx.mapping(raw, "probes"), spec))


def _probes(ctx: Ctx, raw: Obj, spec: Obj) -> tuple[tuple[str, float, float], ...]:
    """behaviour.probes: when each probe of the hollow containers succeeds — from `succeedAfter` (default 0)
    until `failAfter` (default never), in seconds since the container (re)started. Each needs its probe in
    the spec: the agent's prober runs it (period, thresholds, restarts), the hollow runtime only answers."""
    ctx.known(raw, set(PROBES), "behaviour.probes")
    containers = spec.get("containers") or []
    declared = {key for c in (containers if isinstance(containers, list) else []) if isinstance(c, dict)
                for key in PROBES.values() if key in c}
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
        begin = ctx.seconds(window, "succeedAfter", 0.0, name=f"behaviour.probes.{kind}.succeedAfter")
        end = ctx.seconds(window, "failAfter", name=f"behaviour.probes.{kind}.failAfter") \
            if "failAfter" in window else math.inf
        if end <= begin:
            raise ctx.fail(window, "failAfter", f"behaviour.probes.{kind}: failAfter must be after succeedAfter")
        out.append((kind, begin, end))
    return tuple(out)


def _within(ctx: Ctx, where: Obj, key: str, at: float, span: float, what: str) -> float:
    """An explicit time (`at`, an entry of `times`) inside the run: the runner stops at `duration`, so anything
    later would never happen — an error, not a warning: nothing in such a scenario stands for what it says
    (a trace or a Poisson window may run past the end: those are cut, as a window of a longer record)."""
    if at > span:
        raise ctx.fail(where, key, f"{what}: {at:g} s is after the scenario's end (duration {span:g} s): "
                                   "it would never happen")
    return at


def _arrivals(ctx: Ctx, raw: Obj, base: Path, rng: random.Random, span: float) -> list[Arrival]:
    if "at" in raw:
        if "arrivals" in raw:
            raise ctx.fail(raw, "arrivals", f"workload {raw['name']}: `at` or `arrivals`, not both")
        return [Arrival(_within(ctx, raw, "at", ctx.seconds(raw, "at"), span, "at"))]
    arr = ctx.mapping(raw, "arrivals")
    if not arr:
        return [Arrival(0.0)]
    ctx.known(arr, {"times", "poisson", "trace"}, "arrivals")
    if len(arr) != 1:
        raise ctx.fail(arr, None, "arrivals: exactly one of times, poisson, trace")
    if "times" in arr:
        times = arr["times"]
        if not isinstance(times, list):
            raise ctx.fail(arr, "times", "arrivals.times: a list of durations")
        return [Arrival(_within(ctx, arr, "times", ctx.duration(t, arr, "times", "arrivals.times"), span,
                                "arrivals.times")) for t in times]
    if "poisson" in arr:
        p = ctx.mapping(arr, "poisson")
        ctx.known(p, {"perHour", "start", "until"}, "arrivals.poisson")
        rate = p.get("perHour")
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not 0 < rate < math.inf:
            raise ctx.fail(p, "perHour", "arrivals.poisson.perHour: a positive number of arrivals per hour")
        t = ctx.seconds(p, "start", 0.0, name="arrivals.poisson.start")
        until = ctx.seconds(p, "until", name="arrivals.poisson.until")
        if until <= t:
            raise ctx.fail(p, "until", f"arrivals.poisson: until ({until:g} s) must be after start ({t:g} s)")
        if rate * (until - t) / 3600.0 > MAX_ARRIVALS:
            raise ctx.fail(p, "perHour", f"arrivals.poisson: {rate:g} per hour for {until - t:g} s is more than "
                                         f"{MAX_ARRIVALS:,} arrivals")
        drawn: list[Arrival] = []
        while True:
            t += -math.log(1.0 - rng.random()) * 3600.0 / float(rate)
            if t >= until:
                return drawn
            drawn.append(Arrival(round(t, 3)))
    return _trace(ctx, arr, base)


def _trace(ctx: Ctx, arr: Obj, base: Path) -> list[Arrival]:
    """`arrivals: {trace: FILE.csv}`: one arrival a row (`at`; optional cpu, memory, run), errors as FILE:ROW."""
    path = base / str(arr["trace"])
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ctx.fail(arr, "trace", f"arrivals.trace: cannot read {path}: {exc}") from None
    out: list[Arrival] = []
    row_ctx = Ctx(str(path))
    for i, row in enumerate(rows, start=2):
        try:
            values = {k: v for k, v in row.items() if k is not None and v}  # None: cells beyond the header
            cell = Marked({k: float(v) if k in ("at", "run") and _number(v) else v for k, v in values.items()})
            cell.line = i
            cell.key_lines = {}
            at = row_ctx.seconds(cell, "at", name="at")
            extra = {k: (row_ctx.seconds(cell, k, name=k) if k == "run" else v) for k, v in cell.items() if k != "at"}
        except ScenarioError as exc:
            raise ScenarioError(f"{exc} (a trace row: `at` in seconds or a duration; optional cpu, memory, "
                                "run)") from None
        out.append(Arrival(at, extra))
    return out


def _number(text: str) -> bool:
    """A trace cell that is a plain number of seconds (`90`, `1.5`), not a duration (`90s`)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _workload(ctx: Ctx, raw: Obj, base: Path, rng: random.Random, span: float) -> Workload:
    ctx.known(raw, {"name", "kind", "namespace", "replicas", "at", "arrivals", "labels", "spec", "behaviour",
                    *JOB_FIELDS}, "workload")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ctx.fail(raw, None, "workload: name is required")
    kind = raw.get("kind", "Deployment")
    if kind not in KINDS:
        raise ctx.fail(raw, "kind", f"workload {name}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if kind == "Pod" and "replicas" in raw:
        raise ctx.fail(raw, "replicas", f"workload {name}: a Pod has no replicas (several pods: arrivals, or a "
                                        "Deployment)")
    replicas = ctx.integer(raw, "replicas", 1, 0, f"workload {name}: replicas")
    for key in JOB_FIELDS:
        if key in raw and kind != "Job":
            raise ctx.fail(raw, key, f"workload {name}: {key} is a Job's field, not a {kind}'s")
    extra: Obj = {k: ctx.integer(raw, k, 0, 0, f"workload {name}: {k}") for k in JOB_FIELDS if k in raw}
    namespace = raw.get("namespace", "default")
    if not isinstance(namespace, str):
        raise ctx.fail(raw, "namespace", f"workload {name}: namespace must be a string, not {namespace!r}")
    labels = {str(k): str(v) for k, v in ctx.mapping(raw, "labels").items()} or {"app": name}
    spec = ctx.mapping(raw, "spec")
    behaviour = _behaviour(ctx, ctx.mapping(raw, "behaviour"), spec)
    restart = spec.get("restartPolicy", "Never" if kind == "Job" else "Always")
    if restart == "Never" and len(behaviour.exit_codes) > 1:
        raise ctx.fail(ctx.mapping(raw, "behaviour"), "exitCodes",
                       f"workload {name}: behaviour.exitCodes: with restartPolicy Never a container runs once, so "
                       "only the first code is used (a Job's retry is a new pod, which starts from the first "
                       "again); restartPolicy OnFailure restarts it in its pod through the codes")
    arrivals = _arrivals(ctx, raw, base, rng, span)
    if kind == "Pod" and behaviour.run is not None and behaviour.run.kind != "fixed":
        # A bare pod's run time is drawn here, from the scenario's seed: the same pods run as long under every
        # scheduler config of an A/B comparison. (A controller's pods draw theirs in the hollow runtime of the
        # node they land on, so those can differ between configs.)
        arrivals = [a if "run" in a.overrides else Arrival(a.at, {**a.overrides, "run": behaviour.run.draw(rng)})
                    for a in arrivals]
    return Workload(name, kind, namespace, replicas, dict(spec), labels, behaviour, arrivals, extra)


def _resource_name(name: str) -> bool:
    """A node capacity key the scheduler accounts for: cpu, memory, ephemeral-storage, pods, hugepages-SIZE,
    or an extended resource `DOMAIN/NAME` outside kubernetes.io (upstream's IsExtendedResourceName). Any other
    name (`cpus`) would be carried on the Node and fit no pod's request."""
    if name in BASE_RESOURCES or name.startswith("hugepages-"):
        return True
    domain, slash, _ = name.partition("/")
    return bool(slash) and not is_qualified_name(name) and not domain.endswith("kubernetes.io") \
        and not name.startswith("requests.")


def _pool(ctx: Ctx, raw: Obj) -> NodePool:
    ctx.known(raw, {"name", "count", "capacity", "labels", "taints"}, "nodePool")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ctx.fail(raw, None, "nodePool: name is required")
    count = ctx.integer(raw, "count", 1, 1, f"nodePool {name}: count")
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    given = ctx.mapping(raw, "capacity")
    for key in given:
        if not _resource_name(str(key)):
            raise ctx.fail(given, key, f"nodePool {name}: capacity {key!r}: not a resource the scheduler knows "
                                       f"({', '.join(BASE_RESOURCES)}, hugepages-SIZE) nor an extended resource "
                                       "DOMAIN/NAME")
    capacity.update({str(k): str(v) for k, v in given.items()})
    return NodePool(name, count, capacity, {str(k): str(v) for k, v in ctx.mapping(raw, "labels").items()},
                    ctx.items(raw, "taints"))


def _fault(ctx: Ctx, raw: Obj, span: float) -> Fault:
    kinds = [k for k in FAULTS if k in raw]
    ctx.known(raw, {"at", *FAULTS}, "fault")
    if len(kinds) != 1:
        raise ctx.fail(raw, None, f"fault: exactly one of {', '.join(FAULTS)}")
    at = _within(ctx, raw, "at", ctx.seconds(raw, "at", name="fault at"), span, "fault at")
    return Fault(at, kinds[0], raw[kinds[0]], line_of(raw))


def _check_fault(ctx: Ctx, raw: Obj, nodes: list[str], workloads: dict[str, str]) -> None:
    """A fault names things that exist: a node (pool name + index), a workload that scales, a PDB with a name,
    a pod as NAMESPACE/NAME."""
    for kind in ("nodeLost", "agentRestart", "drain"):
        if kind in raw and raw[kind] not in nodes:
            raise ctx.fail(raw, kind, f"fault {kind}: no node {raw[kind]!r} (nodes are named POOL-INDEX, "
                                      f"e.g. {nodes[0]})")
    if "scale" in raw:
        target = raw["scale"]
        if not isinstance(target, dict) or target.get("workload") not in workloads:
            raise ctx.fail(raw, "scale", "fault scale: {workload: NAME of a workload, replicas: N}")
        ctx.known(target, {"workload", "replicas"}, "fault scale")
        ctx.integer(target, "replicas", None, 0, "fault scale: replicas")
        kind = workloads[target["workload"]]
        if kind not in SCALABLE:
            raise ctx.fail(raw, "scale", f"fault scale: {target['workload']} is a {kind}; only a "
                                         f"{' or '.join(SCALABLE)} has replicas to scale")
    if "pdb" in raw:
        pdb = raw["pdb"]
        if not (isinstance(pdb, dict) and pdb.get("name")):
            raise ctx.fail(raw, "pdb", "fault pdb: {name, matchLabels, minAvailable or maxUnavailable}")
        ctx.known(pdb, {"name", "namespace", "matchLabels", "minAvailable", "maxUnavailable"}, "fault pdb")
        ctx.mapping(pdb, "matchLabels")
    if "delete" in raw:
        namespace, slash, name = str(raw["delete"]).partition("/")
        if not isinstance(raw["delete"], str) or not slash or is_dns1123_label(namespace) or \
                is_dns1123_subdomain(name):
            raise ctx.fail(raw, "delete", f"fault delete: {raw['delete']!r} is not a pod as NAMESPACE/NAME "
                                          "(e.g. default/web-0)")


def _node_config(ctx: Ctx, raw: Obj) -> Obj:
    """nodeConfig: checked at load (unknown fields, values) as the node agents would read it."""
    for key, value in raw.items():
        if key not in NODE_CONFIG:
            raise ctx.fail(raw, key, f"nodeConfig: unknown or not simulated field {key!r} (known: "
                                     f"{', '.join(sorted(NODE_CONFIG))})")
        sub = NODE_CONFIG[key]
        if sub is not None:
            if not isinstance(value, dict):
                raise ctx.fail(raw, key, f"nodeConfig.{key}: must be a mapping")
            ctx.known(value, sub, f"nodeConfig.{key}")
    try:
        parse_node_config({"kind": "KubeletConfiguration", **raw})
    except (NodeConfigError, ValueError, TypeError, AttributeError) as exc:
        named = next((k for k in raw if str(exc).startswith(k)), None)  # the field its message starts with
        raise ctx.fail(raw, named, f"nodeConfig: {exc}") from None
    return raw


def _scheduler_configs(ctx: Ctx, raw: Obj, base: Path) -> list[Path]:
    """schedulerConfig: a file or a list of files, each read and checked now (kube-scheduler's strict decoding
    and validation), so a bad one is found before the cluster starts, with its own file and line."""
    from kubelite.sim import checks

    given = raw.get("schedulerConfig") or []
    names = [given] if isinstance(given, str) else given
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ctx.fail(raw, "schedulerConfig", "schedulerConfig: a file name or a list of file names")
    paths = [base / n for n in names]
    for path in paths:
        if not path.is_file():
            raise ctx.fail(raw, "schedulerConfig", f"schedulerConfig: no file {path}")
        checks.scheduler_config(path)
    return paths


def load(path: Path, seed: int = 0) -> Scenario:
    """Parse a scenario; Poisson arrivals are drawn from `seed`, so a seed fixes the whole run."""
    from kubelite.sim import checks  # checks builds the run's objects (workloads.py), which need this module

    ctx = Ctx(str(path))
    raw = parse_yaml(path)
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping (name, duration, nodePools, workloads, …)")
    ctx.known(raw, {"name", "duration", "sample", "nodePools", "workloads", "faults", "schedulerConfig",
                    "timeline", "priorityClasses", "nodeConfig", "controllerManager", "apiServer"},
              "scenario")
    span = ctx.seconds(raw, "duration", positive=True)
    sample = ctx.seconds(raw, "sample", 60.0, positive=True)
    if span / sample > MAX_SAMPLES:
        raise ctx.fail(raw, "sample", f"sample: {sample:g} s would take {span / sample:.0f} samples of a "
                                      f"{span:g} s run (at most {MAX_SAMPLES:,})")
    rng = random.Random(seed)
    raw_pools = ctx.items(raw, "nodePools")
    pools = [_pool(ctx, p) for p in raw_pools]
    if not pools:
        raise ctx.fail(raw, None, "nodePools: at least one pool")
    seen: dict[str, Obj] = {}
    for p, r in zip(pools, raw_pools, strict=True):
        if p.name in seen:
            raise ctx.fail(r, "name", f"nodePool {p.name}: name used twice (also line {line_of(seen[p.name])}): "
                                      "their nodes would have the same names")
        seen[p.name] = r
    raw_workloads = ctx.items(raw, "workloads")
    workloads = [_workload(ctx, w, path.parent, rng, span) for w in raw_workloads]
    names = [w.name for w in workloads]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ctx.fail(raw, "workloads", f"workloads: name {dup!r} used twice")
    if sum(p.count for p in pools) > MAX_NODES:
        raise ctx.fail(raw, "nodePools", f"nodePools: {sum(p.count for p in pools):,} nodes, more than "
                                         f"{MAX_NODES:,}")
    nodes = [f"{p.name}-{i}" for p in pools for i in range(p.count)]
    raw_faults = ctx.items(raw, "faults")
    for f in raw_faults:
        _check_fault(ctx, f, nodes, {w.name: w.kind for w in workloads})
    scn = Scenario(str(raw.get("name", path.stem)), path, span, sample, pools, workloads,
                   sorted((_fault(ctx, f, span) for f in raw_faults), key=lambda f: f.at),
                   _scheduler_configs(ctx, raw, path.parent), ctx.strings(raw, "timeline"),
                   ctx.items(raw, "priorityClasses"), _node_config(ctx, ctx.mapping(raw, "nodeConfig")),
                   _controller_manager(ctx, ctx.mapping(raw, "controllerManager")),
                   _event_ttl(ctx, ctx.mapping(raw, "apiServer")))
    checks.api_objects(ctx, scn, raw_pools, raw_workloads, raw_faults)
    return scn


def _event_ttl(ctx: Ctx, raw: Obj) -> int:
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


def _controller_manager(ctx: Ctx, raw: Obj) -> Obj:
    """kube-controller-manager's node lifecycle flags (--node-monitor-period, …) as durations in seconds."""
    ctx.known(raw, set(CONTROLLER_MANAGER), "controllerManager")
    return {k: ctx.seconds(raw, k, positive=True, name=f"controllerManager.{k}") for k in CONTROLLER_MANAGER
            if k in raw}
