"""Resource usage of the node and of each running container: what kubelet gets from cAdvisor.

Served as kubelet serves it, for metrics-server and for kubelite's API server (the
`metrics.k8s.io` API): `/stats/summary` (JSON: CPU in nanocores and cumulative core-seconds,
memory working set) and `/metrics/resource` (Prometheus text with sample timestamps:
`node_cpu_usage_seconds_total`, `container_memory_working_set_bytes`, …).

- **CPU** is cumulative CPU time, read from the container's cgroup where the agent gave it
  one (cpu.stat / cpuacct.usage), else summed over its process tree from /proc/<pid>/stat
  (utime + stime + the reaped children's cutime + cstime of every process in the
  container's process group and their descendants). The usage in nanocores is the rate
  between two samples, as cAdvisor computes it; a container seen for the first time is
  measured from its start (when it had used nothing). A counter that went back (a process of
  the tree ended without being reaped inside it) gives no rate until the next sample.
- **Memory** is the working set: the cgroup's usage - inactive_file, else the resident set
  of the process tree (/proc/<pid>/stat's rss; there is no per-process working set).
- **Node**: CPU time from /proc/stat (all but idle and iowait), memory working set as the
  eviction manager computes it (host_stats.node_memory).

Samples are taken every `interval` seconds (cAdvisor's housekeeping) and on demand when the
latest is older than `min_window` or a container started or stopped since, so a rate covers a
recent window and a new container is measured as soon as it runs. Reading /proc is blocking I/O: it runs in a thread.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kubelite.agent.cgroups import Cgroups
from kubelite.agent.eviction.host_stats import PAGE_SIZE, cgroup_working_set, meminfo, node_memory
from kubelite.clock import Clock, rfc3339

Obj = dict[str, Any]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
INTERVAL = 10.0  # cAdvisor's default housekeeping interval
MIN_WINDOW = 1.0


@dataclass(frozen=True)
class Sample:
    """One reading of a cumulative CPU counter and a memory gauge."""

    at: float  # clock.monotonic()
    cpu: float | None  # cumulative CPU seconds
    memory: int | None = None  # working set bytes


def cpu_rate(previous: Sample | None, current: Sample) -> int | None:
    """Nanocores used between two samples; None without a usable earlier sample or when the counter went back."""
    if previous is None or previous.cpu is None or current.cpu is None or current.at <= previous.at:
        return None
    used = current.cpu - previous.cpu
    if used < 0:
        return None
    return round(used / (current.at - previous.at) * 1e9)


@dataclass(frozen=True)
class ContainerRef:
    """A running container instance and where its usage is found."""

    namespace: str
    pod: str
    uid: str
    name: str
    started: float  # clock.now() when this instance started
    pid: int  # the leader of its process group (0: no process on this host, e.g. hollow)
    cgroup: str = ""  # its cgroup's name, when it has one

    @property
    def key(self) -> tuple[str, str, int, float]:
        return self.uid, self.name, self.pid, self.started


@dataclass(frozen=True)
class Proc:
    ppid: int
    pgrp: int
    cpu_ticks: int  # utime + stime + cutime + cstime
    rss: int  # pages


def read_processes(proc: Path = Path("/proc")) -> dict[int, Proc]:
    """Every process, from one pass over /proc/<pid>/stat."""
    out: dict[int, Proc] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            out[int(entry.name)] = Proc(int(fields[1]), int(fields[2]), sum(int(f) for f in fields[11:15]),
                                        int(fields[21]))
        except (OSError, ValueError, IndexError):
            continue
    return out


def process_tree(procs: dict[int, Proc], group: int) -> set[int]:
    """The processes of process group `group` and all their descendants (which may have left the group)."""
    children: dict[int, list[int]] = {}
    for pid, p in procs.items():
        children.setdefault(p.ppid, []).append(pid)
    members = {pid for pid, p in procs.items() if p.pgrp == group}
    stack = list(members)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in members:
                members.add(child)
                stack.append(child)
    return members


def tree_usage(procs: dict[int, Proc], group: int) -> tuple[float, int] | None:
    """(CPU seconds, resident bytes) summed over the process tree of `group`; None when nothing of it runs."""
    members = process_tree(procs, group)
    if not members:
        return None
    return (sum(procs[p].cpu_ticks for p in members) / CLOCK_TICKS, sum(procs[p].rss for p in members) * PAGE_SIZE)


def node_cpu_seconds(proc: Path = Path("/proc")) -> float | None:
    """CPU time the node has used: /proc/stat's cpu line without idle and iowait."""
    try:
        line = (proc / "stat").read_text().splitlines()[0].split()
        ticks = [int(v) for v in line[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError, IndexError):
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / CLOCK_TICKS


@dataclass
class Usage:
    """The two latest samples of one container (or the node); the rate is taken between them."""

    ref: ContainerRef | None
    current: Sample
    previous: Sample | None = None

    @property
    def nanocores(self) -> int | None:
        return cpu_rate(self.previous, self.current)


@dataclass
class Snapshot:
    wall: float  # clock.now() of the latest sample
    node: Usage | None = None
    containers: dict[tuple[str, str, int, float], Usage] = field(default_factory=dict)


class ResourceStats:
    """Samples node and container usage; `summary()` and `collector()` present the latest samples."""

    def __init__(self, clock: Clock, containers: Callable[[], Sequence[ContainerRef]], cgroups: Cgroups | None,
                 node_name: str, proc: Path = Path("/proc"), interval: float = INTERVAL,
                 min_window: float = MIN_WINDOW) -> None:
        self.clock = clock
        self.containers = containers
        self.cgroups = cgroups
        self.node_name = node_name
        self.proc = proc
        self.interval = interval
        self.min_window = min_window
        self.snapshot = Snapshot(0.0)
        self._lock = asyncio.Lock()

    async def run(self) -> None:
        while True:
            await self.refresh()
            await self.clock.sleep(self.interval)

    async def refresh(self) -> Snapshot:
        """A fresh sample, unless the latest is younger than `min_window` and saw the same containers."""
        async with self._lock:
            node = self.snapshot.node
            refs = list(self.containers())
            if node is None or self.clock.monotonic() - node.current.at >= self.min_window or \
                    {r.key for r in refs} != set(self.snapshot.containers):  # a container started or stopped
                readings = await asyncio.to_thread(self.read, refs)
                self.record(refs, *readings)
        return self.snapshot

    def read(self, refs: Sequence[ContainerRef]) -> tuple[Sample, list[Sample]]:
        """Read the node's and each container's counters now (blocking)."""
        at = self.clock.monotonic()
        memory = node_memory(meminfo(self.proc / "meminfo"))
        node = Sample(at, node_cpu_seconds(self.proc), memory[1] if memory else None)
        procs = read_processes(self.proc) if any(not r.cgroup and r.pid for r in refs) else {}
        return node, [self._container(at, r, procs) for r in refs]

    def _container(self, at: float, ref: ContainerRef, procs: dict[int, Proc]) -> Sample:
        if ref.cgroup and self.cgroups is not None:
            cpu = self.cgroups.cpu_seconds(ref.cgroup)
            memory = cgroup_working_set(self.cgroups.memory_dir(ref.cgroup))
            if cpu is not None:
                return Sample(at, cpu, memory)
        usage = tree_usage(procs, ref.pid) if ref.pid else None
        return Sample(at, usage[0], usage[1]) if usage else Sample(at, None)

    def record(self, refs: Sequence[ContainerRef], node: Sample, samples: Sequence[Sample]) -> None:
        """Keep each counter's two latest samples; a new container's earlier sample is its start (zero CPU)."""
        old = self.snapshot
        wall = self.clock.now()
        snap = Snapshot(wall, Usage(None, node, self._earlier(old.node, node)))
        for ref, sample in zip(refs, samples, strict=True):
            seen = old.containers.get(ref.key)
            start = Sample(sample.at - max(0.0, wall - ref.started), 0.0)
            snap.containers[ref.key] = Usage(ref, sample, self._earlier(seen, sample) if seen else start)
        self.snapshot = snap

    def _earlier(self, seen: Usage | None, sample: Sample) -> Sample | None:
        """The sample a new rate starts from: the latest one, unless that is younger than `min_window` (a
        resample for a new container) and an older one exists, so that no rate covers a sliver of time."""
        if seen is None:
            return None
        if sample.at - seen.current.at >= self.min_window or seen.previous is None:
            return seen.current
        return seen.previous

    # --- presentation ------------------------------------------------------------------------------

    def summary(self) -> Obj:
        """kubelet's /stats/summary, reduced to CPU and memory (its `only_cpu_and_memory=true` form)."""
        snap = self.snapshot
        time = rfc3339(snap.wall)
        pods: dict[str, Obj] = {}
        for usage in snap.containers.values():
            ref = usage.ref
            assert ref is not None
            pod = pods.setdefault(ref.uid, {"podRef": {"name": ref.pod, "namespace": ref.namespace, "uid": ref.uid},
                                            "startTime": rfc3339(ref.started), "containers": []})
            pod["startTime"] = min(pod["startTime"], rfc3339(ref.started))
            pod["containers"].append({"name": ref.name, "startTime": rfc3339(ref.started),
                                      "cpu": _cpu(time, usage), "memory": _memory(time, usage.current)})
        for pod in pods.values():
            pod["cpu"] = _sum_cpu(time, [c["cpu"] for c in pod["containers"]])
            pod["memory"] = {"time": time, "workingSetBytes": sum(c["memory"].get("workingSetBytes", 0)
                                                                  for c in pod["containers"])}
        node: Obj = {"nodeName": self.node_name}
        if snap.node is not None:
            node["cpu"], node["memory"] = _cpu(time, snap.node), _memory(time, snap.node.current)
        return {"node": node, "pods": list(pods.values())}

    def registry(self) -> CollectorRegistry:
        """A registry serving kubelet's /metrics/resource from the latest samples."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_ResourceCollector(self))
        return registry


def _cpu(time: str, usage: Usage) -> Obj:
    out: Obj = {"time": time}
    if usage.nanocores is not None:
        out["usageNanoCores"] = usage.nanocores
    if usage.current.cpu is not None:
        out["usageCoreNanoSeconds"] = round(usage.current.cpu * 1e9)
    return out


def _sum_cpu(time: str, parts: Iterable[Obj]) -> Obj:
    out: Obj = {"time": time}
    for key in ("usageNanoCores", "usageCoreNanoSeconds"):
        values = [p[key] for p in parts if key in p]
        if values:
            out[key] = sum(values)
    return out


def _memory(time: str, sample: Sample) -> Obj:
    return {"time": time} if sample.memory is None else {"time": time, "workingSetBytes": sample.memory}


class _ResourceCollector(Collector):
    """kubelet's resource metrics (pkg/kubelet/metrics/collectors/resource_metrics.go), timestamped."""

    def __init__(self, stats: ResourceStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        snap = self.stats.snapshot
        ts = snap.wall
        node_cpu = CounterMetricFamily("node_cpu_usage_seconds_total",
                                       "Cumulative cpu time consumed by the node in core-seconds")
        node_mem = GaugeMetricFamily("node_memory_working_set_bytes", "Current working set of the node in bytes")
        if snap.node is not None:
            if snap.node.current.cpu is not None:
                node_cpu.add_metric([], snap.node.current.cpu, timestamp=ts)
            if snap.node.current.memory is not None:
                node_mem.add_metric([], snap.node.current.memory, timestamp=ts)
        labels = ["container", "pod", "namespace"]
        cpu = CounterMetricFamily("container_cpu_usage_seconds_total",
                                  "Cumulative cpu time consumed by the container in core-seconds", labels=labels)
        mem = GaugeMetricFamily("container_memory_working_set_bytes",
                                "Current working set of the container in bytes", labels=labels)
        start = GaugeMetricFamily("container_start_time_seconds", "Start time of the container since unix epoch "
                                  "in seconds", labels=labels)
        pod_cpu = CounterMetricFamily("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in "
                                      "core-seconds", labels=["pod", "namespace"])
        pod_mem = GaugeMetricFamily("pod_memory_working_set_bytes", "Current working set of the pod in bytes",
                                    labels=["pod", "namespace"])
        pods: dict[tuple[str, str], list[Sample]] = {}
        for usage in snap.containers.values():
            ref = usage.ref
            assert ref is not None
            values = [ref.name, ref.pod, ref.namespace]
            start.add_metric(values, ref.started, timestamp=ts)
            if usage.current.cpu is not None:
                cpu.add_metric(values, usage.current.cpu, timestamp=ts)
            if usage.current.memory is not None:
                mem.add_metric(values, usage.current.memory, timestamp=ts)
            pods.setdefault((ref.pod, ref.namespace), []).append(usage.current)
        for key, samples in pods.items():
            cpus = [s.cpu for s in samples if s.cpu is not None]
            if cpus:
                pod_cpu.add_metric(list(key), sum(cpus), timestamp=ts)
            pod_mem.add_metric(list(key), sum(s.memory or 0 for s in samples), timestamp=ts)
        scrape_error = GaugeMetricFamily("scrape_error", "1 if there was an error while getting container metrics, "
                                         "0 otherwise", value=0 if snap.node is not None else 1)
        yield from (node_cpu, node_mem, cpu, mem, start, pod_cpu, pod_mem, scrape_error)


def refs_of(containers: Iterable[tuple[Obj, str, Any]]) -> list[ContainerRef]:
    """ContainerRefs from (pod, container name, runtime handle) triples (handles of the process runtime carry
    the cgroup name)."""
    out = []
    for pod, name, handle in containers:
        meta = pod["metadata"]
        out.append(ContainerRef(meta["namespace"], meta["name"], meta["uid"], name, float(handle.started),
                                int(handle.pid), str(getattr(handle, "cgroup", "") or "")))
    return out
