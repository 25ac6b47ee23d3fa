"""scheduler_perf-style benchmark: upstream's workloads, end to end through the API server.

A real `kubelite server` (SQLite store, scheduler disabled) and a real `kubelite scheduler`
run as separate processes; this process creates the nodes and pods through the API and
watches the bindings. Throughput is measured as upstream's SchedulingThroughput Average:
measured pods bound divided by the time from the first measured create to the last bind.
Latency is create → bind observed by watch, per pod.

    python -m benchmarks.scheduler [--workloads NAME,...] [--scale 1.0]

`--scale 0.1` shrinks every count (for a quick look); figures in BENCHMARKS.md use 1.0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import store as store_option
from tests.conftest import start_server

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(name: str, labels: Obj | None = None, taints: list[Obj] | None = None, pods: str = "110",
         cpu: str = "4", memory: str = "32Gi") -> Obj:
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    out: Obj = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {HOST: name, **(labels or {})}},
                "spec": {"taints": taints} if taints else {},
                "status": {"capacity": capacity, "allocatable": dict(capacity),
                           "conditions": [{"type": "Ready", "status": "True"}]}}
    return out


def pod(labels: Obj | None = None, **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "pod-", "labels": labels or {}},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10", "resources": {
                "requests": {"cpu": "100m", "memory": "500Mi"}, "limits": {"cpu": "100m", "memory": "500Mi"}}}],
                     "terminationGracePeriodSeconds": 0, **spec}}  # no node agent here: deleted pods go at once


def _selector(labels: Obj) -> Obj:
    return {"matchLabels": labels}


SPREAD = pod({"color": "blue"}, topologySpreadConstraints=[
    {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": _selector(
        {"color": "blue"})}])
PREFERRED_SPREAD = pod({"color": "blue"}, topologySpreadConstraints=[
    {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": _selector(
        {"color": "blue"})}])
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
ANTI_AFFINITY = pod({"color": "green"}, affinity={"podAntiAffinity": {REQUIRED: [
    {"labelSelector": _selector({"color": "green"}), "topologyKey": HOST}]}})
AFFINITY = pod({"color": "blue"}, affinity={"podAffinity": {REQUIRED: [
    {"labelSelector": _selector({"color": "blue"}), "topologyKey": ZONE}]}})
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
PREFERRED_AFFINITY = pod({"color": "red"}, affinity={"podAffinity": {PREFERRED: [
    {"weight": 1, "podAffinityTerm": {"labelSelector": _selector({"color": "red"}), "topologyKey": HOST}}]}})
PREFERRED_ANTI = pod({"color": "yellow"}, affinity={"podAntiAffinity": {
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"labelSelector": _selector({"color": "yellow"}), "topologyKey": HOST}}]}})
NODE_AFFINITY = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone1"]}]}]}}})
INCLUSION = pod({"foo": ""}, topologySpreadConstraints=[
    {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor",
     "nodeAffinityPolicy": "Honor", "labelSelector": _selector({"foo": ""})}])
UNSCHEDULABLE = pod()
UNSCHEDULABLE["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "9"}, "limits": {"cpu": "9"}}
GATED = pod(schedulingGates=[{"name": "test.k8s/hold"}])


def _sized(template: Obj, cpu: str, priority_class: str, labels: Obj | None = None) -> Obj:
    out = copy.deepcopy(template)
    out["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "500Mi"},
                                                 "limits": {"cpu": cpu, "memory": "500Mi"}}
    out["spec"]["priorityClassName"] = priority_class
    if labels:
        out["metadata"]["labels"] = labels
    return out


LOW = _sized(pod(), "900m", "low")
LOW_PROTECTED = _sized(pod(), "900m", "low", {"app": "protected"})
HIGH = _sized(pod(), "3", "high")
PRIORITY_CLASSES = [
    ("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "low"}, "value": 10}),
    ("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "high"}, "value": 1000}),
]
PROTECTING_PDB = ("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                  {"metadata": {"name": "protected"},
                   "spec": {"minAvailable": "90%", "selector": {"matchLabels": {"app": "protected"}}}})


@dataclass
class Workload:
    name: str
    nodes: Callable[[int], Obj]
    node_count: int
    init: list[tuple[Obj, int]]
    measured: tuple[Obj, int]
    inject: tuple[Obj, float] | None = None  # pods created at a rate while measuring
    extra_nodes: list[tuple[Callable[[int], Obj], int]] = field(default_factory=list)
    setup: list[tuple[str, Obj]] = field(default_factory=list)  # objects created before anything else


def _zone_nodes(zones: list[str]) -> Callable[[int], Obj]:
    return lambda i: node(f"node-{i}", {ZONE: zones[i % len(zones)]})


MOON = ["moon-1", "moon-2", "moon-3"]
WORKLOADS = [
    Workload("SchedulingBasic/5000Nodes_10000Pods", lambda i: node(f"node-{i}"), 5000, [(pod(), 1000)],
             (pod(), 10000)),
    Workload("SchedulingNodeAffinity/5000Nodes_10000Pods", _zone_nodes(["zone1"]), 5000, [(pod(), 5000)],
             (NODE_AFFINITY, 10000)),
    Workload("TopologySpreading/5000Nodes_5000Pods", _zone_nodes(MOON), 5000, [(pod(), 5000)], (SPREAD, 5000)),
    Workload("PreferredTopologySpreading/5000Nodes_5000Pods", _zone_nodes(MOON), 5000, [(pod(), 5000)],
             (PREFERRED_SPREAD, 5000)),
    Workload("SchedulingPodAntiAffinity/5000Nodes_2000Pods", lambda i: node(f"node-{i}"), 5000,
             [(ANTI_AFFINITY, 1000)], (ANTI_AFFINITY, 2000)),
    Workload("SchedulingPodAffinity/5000Nodes_5000Pods", _zone_nodes(["zone1"]), 5000, [(AFFINITY, 5000)],
             (AFFINITY, 5000)),
    Workload("SchedulingWithNodeInclusionPolicy/5000Nodes", lambda i: node(f"node-{i}"), 4000, [],
             (INCLUSION, 4000), extra_nodes=[(lambda i: node(f"tainted-{i}", taints=[
                 {"key": "foo", "value": "", "effect": "NoSchedule"}]), 1000)]),
    Workload("Unschedulable/5kNodes/100Init/10kPods", lambda i: node(f"node-{i}"), 5000, [(pod(), 100)],
             (pod(), 10000), inject=(UNSCHEDULABLE, 5.0)),
    # One node big enough for every measured pod (upstream frees room by deleting pods instead).
    Workload("SchedulingWhileGated/1Node_10000GatedPods",
             lambda i: node(f"node-{i}", pods="30000", cpu="2000", memory="8Ti"), 1, [(GATED, 10000)],
             (pod(), 10000)),
    Workload("MixedSchedulingBasePod/5000Nodes_5000Pods", _zone_nodes(["zone1"]), 5000,
             [(pod(), 2000), (AFFINITY, 2000), (ANTI_AFFINITY, 2000), (PREFERRED_AFFINITY, 2000),
              (PREFERRED_ANTI, 2000)], (pod(), 5000)),
    # Issue 4: every measured pod must preempt three 900m victims on a node filled to 3.6 of 4 CPU.
    Workload("PreemptionBasic/500Nodes", lambda i: node(f"node-{i}"), 500, [(LOW, 2000)], (HIGH, 500),
             setup=PRIORITY_CLASSES),
    # Normal pods measured while high-priority preemptors arrive at 5/s.
    Workload("PreemptionAsync/5000Nodes", lambda i: node(f"node-{i}"), 5000, [(LOW, 20000)], (pod(), 5000),
             inject=(HIGH, 5.0), setup=PRIORITY_CLASSES),
    # Ours: half the victims are under a PodDisruptionBudget (minAvailable 90%) that preemption should spare.
    Workload("PreemptionWithPDB/5000Nodes", lambda i: node(f"node-{i}"), 5000,
             [(LOW, 10000), (LOW_PROTECTED, 10000)], (HIGH, 500), setup=[*PRIORITY_CLASSES, PROTECTING_PDB]),
]


class Cluster:
    def __init__(self, session: aiohttp.ClientSession, clients: int = 40) -> None:
        self.session = session
        self.clients = clients
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.deleted: set[str] = set()  # pods gone before they were seen bound (preempted while assumed)

    async def create_all(self, path: str, objs: list[Obj], record: bool = False) -> None:
        it = iter(objs)

        async def worker() -> None:
            for obj in it:
                start = time.perf_counter()
                async with self.session.post(path, data=orjson.dumps(obj)) as resp:
                    body = await resp.read()
                    if resp.status != 201:
                        raise RuntimeError(f"create failed {resp.status}: {body[:300]!r}")
                if record:
                    self.created[orjson.loads(body)["metadata"]["name"]] = start

        await asyncio.gather(*(worker() for _ in range(self.clients)))

    async def watch_binds(self, rv: str, stop: asyncio.Event) -> None:
        """Record when each pod is first seen bound."""
        async with contextlib.aclosing(pod_events(self.session, rv, stop)) as events:
            async for now, kind, obj in events:
                name = obj["metadata"]["name"]
                if kind == "DELETED" and name not in self.bound:
                    self.deleted.add(name)
                if obj.get("spec", {}).get("nodeName") and name not in self.bound:
                    self.bound[name] = now


async def pod_events(session: aiohttp.ClientSession, rv: str,
                     stop: asyncio.Event) -> AsyncGenerator[tuple[float, str, Obj], None]:
    """(arrival time, event type, pod) for every watch event in `default` but bookmarks, until `stop` is set
    (checked after each chunk); a watch that ends early is resumed where it stopped."""
    while not stop.is_set():
        url = f"/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as resp:
            buffer = b""
            async for chunk in resp.content.iter_any():
                now = time.perf_counter()
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    obj = event["object"]
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if event["type"] != "BOOKMARK":
                        yield now, event["type"], obj
                if stop.is_set():
                    return
        print(f"  (watch ended at resourceVersion {rv}; resuming)", flush=True)


def _named(template: Obj, count: int, prefix: str) -> list[Obj]:
    out = []
    for i in range(count):
        p = copy.deepcopy(template)
        p["metadata"] = {**p["metadata"], "name": f"{prefix}-{i}"}
        p["metadata"].pop("generateName", None)
        out.append(p)
    return out


async def _wait_unbound(session: aiohttp.ClientSession, allowed: int, timeout: float) -> int:
    """Wait until at most `allowed` pods (the gated ones) are still unbound; returns how many are."""
    deadline = time.monotonic() + timeout
    table = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    unbound = -1
    while time.monotonic() < deadline:
        async with session.get("/api/v1/pods?fieldSelector=spec.nodeName%3D&includeObject=None",
                               headers=table) as resp:
            unbound = len((await resp.json())["rows"])
        if unbound <= allowed:
            return unbound
        await asyncio.sleep(0.5)
    return unbound


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def run(w: Workload, scale: float, session: aiohttp.ClientSession, pids: tuple[int, int]) -> str:
    c = Cluster(session)

    def scaled(n: int) -> int:
        return max(1, int(n * scale))

    for path, obj in w.setup:
        await c.create_all(path, [obj])
    nodes = [w.nodes(i) for i in range(scaled(w.node_count) if w.node_count > 1 else 1)]
    for make, count in w.extra_nodes:
        nodes += [make(i) for i in range(scaled(count))]
    await c.create_all("/api/v1/nodes", nodes)
    gated = 0
    for k, (template, count) in enumerate(w.init):
        await c.create_all("/api/v1/namespaces/default/pods", _named(template, scaled(count), f"init{k}"))
        if template["spec"].get("schedulingGates"):
            gated += scaled(count)
    unbound = await _wait_unbound(session, gated, 600)
    if unbound > gated:
        return f"{w.name}: init pods not scheduled ({unbound - gated} left)"
    async with session.get("/api/v1/namespaces/default/pods?limit=1") as resp:
        rv = (await resp.json())["metadata"]["resourceVersion"]
    stop = asyncio.Event()
    watcher = asyncio.create_task(c.watch_binds(rv, stop))
    template, count = w.measured
    measured = _named(template, scaled(count), "m")
    injector = None
    if w.inject is not None:
        inject_template, rate = w.inject

        async def inject() -> None:
            i = 0
            while not stop.is_set():
                await c.create_all("/api/v1/namespaces/default/pods", _named(inject_template, 1, f"u{i}"))
                i += 1
                await asyncio.sleep(1 / rate)

        injector = asyncio.create_task(inject())
    await asyncio.sleep(0.5)
    cpu_before = [cpu_seconds(pid) for pid in pids]
    start = time.perf_counter()
    await c.create_all("/api/v1/namespaces/default/pods", measured, record=True)
    names = {p["metadata"]["name"] for p in measured}
    deadline = time.perf_counter() + 600
    # A measured pod can be preempted while assumed (a victim before its bind lands): it will never be
    # bound, so waiting for it ran to the deadline with the injector making preemptors all along, and
    # the CPU figures counted ten minutes of that (120 s of scheduler CPU instead of ~15).
    while time.perf_counter() < deadline and sum(1 for n in names if n in c.bound or n in c.deleted) < len(names):
        await asyncio.sleep(0.2)
    cpu = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
    stop.set()
    if injector:
        injector.cancel()
    watcher.cancel()
    done = [n for n in names if n in c.bound]
    if not done:
        return f"{w.name}: no measured pod was scheduled"
    elapsed = max(c.bound[n] for n in done) - start
    lat = [c.bound[n] - c.created[n] for n in done if n in c.created]
    gone = f", {len(names & c.deleted)} preempted before bound" if names & c.deleted else ""
    return (f"{w.name}: {len(done) / elapsed:,.0f} pods/s "
            f"({len(done)}/{len(names)} scheduled in {elapsed:.1f} s{gone}), "
            f"latency p50 {pct(lat, 0.5) * 1000:.0f} ms p99 {pct(lat, 0.99) * 1000:.0f} ms; "
            f"CPU seconds: apiserver {cpu[0]:.1f}, scheduler {cpu[1]:.1f}")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="", help="comma-separated name prefixes (default: all)")
    p.add_argument("--scale", type=float, default=1.0)
    store_option.add_argument(p)
    args = p.parse_args()
    wanted = [w for w in WORKLOADS if not args.workloads or any(w.name.startswith(x)
                                                                  for x in args.workloads.split(","))]
    for w in wanted:
        with tempfile.TemporaryDirectory() as tmp, store_option.server_args(args.store, Path(tmp)) as store_extra:
            # Bare nodes have no agent to renew their Leases: a day's grace keeps the node lifecycle controller
            # from declaring them lost mid-run (upstream's scheduler_perf runs no controller manager at all).
            server = start_server(Path(tmp) / "data", Path(tmp) / "home", insecure=True,
                                  extra=["--disable", "scheduler", "--node-monitor-grace-period", "86400",
                                         *store_extra])
            kubeconfig = Path(tmp) / "data" / "kubeconfig"
            profile = ["-m", "cProfile", "-o", os.environ["PROFILE_SCHEDULER"]] \
                if os.environ.get("PROFILE_SCHEDULER") else []
            sched = subprocess.Popen([sys.executable, *profile, "-m", "kubelite.cli.main", "scheduler",
                                      "--kubeconfig", str(kubeconfig), "--seed", "1"], env=os.environ.copy())
            try:
                base = f"http://127.0.0.1:{server.port}"
                connector = aiohttp.TCPConnector(limit=100)
                async with aiohttp.ClientSession(base, connector=connector,
                                                 headers={"Content-Type": "application/json"}) as session:
                    print(await run(w, args.scale, session, (server.proc.pid, sched.pid)), flush=True)
            finally:
                sched.terminate()
                sched.wait(10)
                server.stop()


if __name__ == "__main__":
    asyncio.run(main())
