"""One simulation: the control plane and hollow agents on a virtual-time loop, driven by a scenario.

The wiring is `kubelite server`'s (cli/serve.py) with three seams changed, as DESIGN.md says: the
store commits inline in a temporary database (store.py), components talk through the in-process
transport, and the loop's clock is virtual (clock.py). Each node is a real `Agent` with the hollow
runtime and no HTTP endpoint. Everything random is seeded from the run's seed: the scenario's
arrivals, the scheduler's tie-breaks, generated names and uids, each node's hollow durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import random
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from kubelite.agent.agent import Agent
from kubelite.agent.config import NodeConfig, NodeConfigError
from kubelite.agent.config import parse as parse_node_config
from kubelite.agent.eviction.thresholds import eviction_config
from kubelite.agent.runtime.hollow import HollowRuntime
from kubelite.api.errors import ApiError
from kubelite.apiserver import pki
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.client.interface import Client
from kubelite.controllers import registry
from kubelite.controllers.manager import keep_running
from kubelite.controllers.nodelifecycle import NodeLifecycleController, NodeLifecycleOptions
from kubelite.scheduler import config as scheduler_config
from kubelite.scheduler.scheduler import Scheduler
from kubelite.sim import control, workloads
from kubelite.sim.clock import ControlledLoop, VirtualClock, VirtualTimeLoop
from kubelite.sim.recorder import Recorder
from kubelite.sim.scenario import Arrival, Fault, NodePool, Scenario, ScenarioError, Workload
from kubelite.store.memory import MemoryStore

SETTLE = 30.0  # virtual seconds for nodes to register and components to sync before the scenario starts
Progress = Callable[[float, float], None]  # (simulated seconds done, total)
# Controllers a simulation does not run. The fencing controller (kubelite's own, S4) fences only nodes in
# the pools of a FencingConfiguration, which a scenario cannot give, and hollow nodes have no fence device:
# it could never act, yet it would check every node every second (a tenth of a 1,000-node run's time).
NOT_RUN = ("fencing",)
MEMORY_FS = Path("/dev/shm")  # a RAM-backed filesystem on Linux (tmpfs), where the machine has one


@contextlib.contextmanager
def node_dirs() -> Iterator[Path]:
    """A temporary directory for the hollow nodes' data dirs, in memory where the machine offers it. Each pod
    start writes its agent's checkpoint (a new file renamed over the old, 2-3 times per pod) and each pod's
    end removes it and its directory, exactly as on a real node; on a disk filesystem (ext4 here) each such
    rename or unlink waited about 2 ms for the disk with the whole one-threaded simulation stopped: 11 ms
    of wall time per pod lifetime against 0.5 ms on tmpfs. Nothing of it outlives the run."""
    memory = MEMORY_FS.is_dir() and os.access(MEMORY_FS, os.W_OK)
    with tempfile.TemporaryDirectory(prefix="kubelite-sim-nodes-", dir=MEMORY_FS if memory else None) as work:
        yield Path(work)


# The cyclic garbage collector's thresholds during a run (CPython's default: 700, 10, 10). See _collector.
GC_THRESHOLDS = (2_000_000, 10, 100)


@dataclass(frozen=True)
class Serve:
    """`kubelite sim serve`: the simulation behind the HTTP API (insecure, loopback), at `speed`x real time
    or paused, controlled at /simulation (control.py)."""

    port: int
    speed: float
    kubeconfig: Path
    bind: str = "127.0.0.1"
    paused: bool = False


class Interrupted(Exception):
    """A served simulation was ended (SIGINT/SIGTERM) before its scenario began: there is nothing to report."""


@dataclass
class Outcome:
    scenario: Scenario
    seed: int
    config: str  # the scheduler configuration's file name, or "default"
    recorder: Recorder

    @property
    def failed_actions(self) -> int:
        """Scenario actions the API refused (or a fault that could not be injected): the run went on without
        them; each is in events.log (`"action": "failed"`) and was said on stderr (see _finished)."""
        return self.recorder.failed_actions


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """The process's random generator and uuid4 from `seed` for the run (the simulation owns the process)."""
    ids = random.Random(seed ^ 0x5EED)
    original = uuid.uuid4
    random.seed(seed)
    uuid.uuid4 = lambda: uuid.UUID(int=ids.getrandbits(128), version=4)
    try:
        yield
    finally:
        uuid.uuid4 = original
        random.seed()


def run(scn: Scenario, seed: int, config: Path | None, work_dir: Path, progress: Progress | None = None,
        serve: Serve | None = None) -> Outcome:
    """Run `scn` to its end on a fresh virtual-time loop; `work_dir` holds the hollow nodes' data dirs.
    With `serve`, on a loop paced to real time instead, serving HTTP, until interrupted (SIGINT/SIGTERM)."""
    sched = scheduler_config.load(config)
    loop: asyncio.AbstractEventLoop = ControlledLoop(serve.speed, serve.paused) if serve else VirtualTimeLoop()
    try:
        with seeded(seed), _collector():
            recorder = loop.run_until_complete(_simulate(loop, scn, seed, sched, work_dir, progress, serve))
    finally:
        _cancel_leftovers(loop)
        loop.close()
    return Outcome(scn, seed, config.name if config else "default", recorder)


@contextlib.contextmanager
def _collector() -> Iterator[None]:
    """The cyclic garbage collector tuned for a simulation's heap (the simulation owns the process): a run holds
    millions of long-lived objects (every node's agent, informer caches, the watch cache), and each full
    collection walked them all — a quarter of a 300-node run's CPU. Collections start after GC_THRESHOLDS[0]
    allocations instead of 700 (the older generations are walked less often too), and what the cluster's
    start-up left is frozen (`_settled`: never walked again, freed by reference counting as ever) — at 1,000
    idle nodes collection had been half of a run's CPU (BENCHMARKS.md, Idle node cost). The young threshold is
    high because a young collection walks every object made since the last one that is still alive, far more
    than the net count that triggers it (a pod update's new decoded copies cancel the count of the old ones
    they replace) — and a simulation makes almost no cyclic garbage (a 200-node run: 6,639 objects in 30
    simulated minutes, mostly the cancelled tasks of its end), so collecting rarely frees nothing later: in
    the target's first hour at 5,000 nodes, 50,000 spent 71 of 281 CPU-s collecting, 2,000,000 13 of 210, with
    the same peak memory. Nothing the simulation does depends on when cycles are collected."""
    threshold = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _settled() -> None:
    """The nodes have registered and the recorder has their list: what exists now lives until the end (see
    _collector)."""
    gc.collect()
    gc.freeze()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """As asyncio.run does: what the components left behind (a stopped pod worker's watchers) is cancelled."""
    left = asyncio.all_tasks(loop)
    if not left:  # gather() of nothing would make its future on another loop (asyncio's default one)
        return
    for task in left:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


def controller_factories(scn: Scenario, node: NodeConfig) -> dict[str, registry.Factory]:
    """The node lifecycle controller with the scenario's `controllerManager` flags. Its grace period
    defaults to the nodes' Lease duration — upstream's 40 s for both — so a scenario that lengthens the
    Lease (and with it the renew interval) does not see its nodes go Unknown between renewals."""
    cm = scn.controller_manager
    grace = cm.get("nodeMonitorGracePeriod", float(node.node_lease_duration))
    options = NodeLifecycleOptions(node_monitor_period=cm.get("nodeMonitorPeriod", 5.0),
                                   node_monitor_grace_period=grace,
                                   node_startup_grace_period=cm.get("nodeStartupGracePeriod", max(60.0, grace)))
    return {"nodelifecycle": functools.partial(NodeLifecycleController, options=options)}


def node_config(scn: Scenario) -> NodeConfig:
    try:
        cfg = parse_node_config({"kind": "KubeletConfiguration", **scn.node_config}) if scn.node_config \
            else NodeConfig()
    except NodeConfigError as exc:
        raise ScenarioError(f"{scn.file}: nodeConfig: {exc}") from None
    # Hollow containers use no memory or disk: node-pressure eviction has nothing to observe (not simulated).
    cfg.eviction = eviction_config({"evictionHard": {}, "enforceNodeAllocatable": []})
    return cfg


class _Cluster:
    """The running components and hollow agents of one simulation."""

    def __init__(self, client: Client, clock: VirtualClock, scn: Scenario, seed: int, work_dir: Path) -> None:
        self.client = client
        self.clock = clock
        self.scn = scn
        self.seed = seed
        self.work_dir = work_dir
        self.node_config = node_config(scn)
        self.tasks: list[asyncio.Task[None]] = []
        self.agents: dict[str, asyncio.Task[None]] = {}
        self.runtimes: dict[str, HollowRuntime] = {}
        self.recorder: Recorder | None = None  # from when it starts watching (_play)

    def spawn(self, name: str, work: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
        task = asyncio.create_task(keep_running(name, work, self.clock), name=name)
        self.tasks.append(task)
        return task

    def _agent(self, name: str, index: int) -> Agent:
        runtime = self.runtimes.setdefault(name, HollowRuntime(self.clock,
                                                               random.Random(self.seed * 100_003 + index)))
        (self.work_dir / name).mkdir(parents=True, exist_ok=True)
        agent = Agent(self.client, self.clock, name, self.work_dir / name, self.node_config, runtime,
                      host_ip=f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}")
        agent.eviction.manager.interval = self.scn.duration + SETTLE  # see node_config: one round, at start
        return agent

    async def add_node(self, pool: NodePool, name: str, index: int) -> None:
        """Register the Node as kubelet's --node-labels and --register-with-taints would, then start its agent."""
        agent = self._agent(name, index)
        agent.capacity.clear()
        agent.capacity.update(pool.capacity)
        node = agent.node.node_object()
        node["metadata"].setdefault("labels", {}).update(pool.labels)
        if pool.taints:
            node.setdefault("spec", {})["taints"] = pool.taints
        await self.client.create("/api/v1/nodes", node)
        self.start_agent(name, agent)

    def start_agent(self, name: str, agent: Agent) -> None:
        self.agents[name] = asyncio.create_task(agent.run(http=False), name=f"agent {name}")

    async def stop_agent(self, name: str) -> None:
        task = self.agents.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def stop(self) -> None:
        for name in sorted(self.agents):
            await self.stop_agent(name)
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _simulate(loop: asyncio.AbstractEventLoop, scn: Scenario, seed: int,
                    sched: scheduler_config.SchedulerConfig, work_dir: Path, progress: Progress | None,
                    serve: Serve | None) -> Recorder:
    clock = VirtualClock(loop)
    store = MemoryStore()
    server = ApiServer(store, clock, server_address=f"127.0.0.1:{serve.port}" if serve else "127.0.0.1:6443",
                       event_ttl=scn.event_ttl)
    http = await _listen(server, serve, clock) if serve else None
    client = InProcessClient(server)
    cluster = _Cluster(client, clock, scn, seed, work_dir)
    try:
        await server.start()
        play = _play(cluster, sched, progress, served=serve is not None)
        if serve is None:
            await play
        # Served: the scenario plays out as in `sim run` (a signal ends it, from its first step), then the cluster
        # keeps running for kubectl until interrupted.
        elif await (interrupt := _announce(serve)).during(play):
            await interrupt.asked.wait()
        if cluster.recorder is None:
            raise Interrupted("interrupted before the scenario began: nothing to report")
        return cluster.recorder
    finally:
        if http is not None:
            await _close(http)
        await cluster.stop()
        await server.stop()
        await store.close()


async def _play(cluster: _Cluster, sched: scheduler_config.SchedulerConfig, progress: Progress | None,
                served: bool) -> None:
    """Start the control plane and the nodes, let them settle, then drive the scenario; its recorder is
    `cluster.recorder` from the moment it starts watching."""
    client, clock, scn, seed = cluster.client, cluster.clock, cluster.scn, cluster.seed
    cluster.spawn("scheduler", lambda: Scheduler(client, clock, sched, seed=seed).run())
    for name, start in registry.starters(client, clock, [n for n in registry.CONTROLLERS if n not in NOT_RUN],
                                         controller_factories(scn, cluster.node_config)).items():
        cluster.spawn(f"{name} controller", start)
    for pc in scn.priority_classes:
        await client.create("/apis/scheduling.k8s.io/v1/priorityclasses",
                            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **pc})
    await _namespaces(client, scn)
    index = 0
    for pool in scn.pools:
        for i in range(pool.count):
            await cluster.add_node(pool, f"{pool.name}-{i}", index)
            index += 1
    await clock.sleep(SETTLE)
    recorder = cluster.recorder = Recorder(client, clock, clock.monotonic(), scn.timeline)
    watching = [cluster.spawn(f"recorder {name}", informer.run)
                for name, informer in (("pods", recorder.pod_informer), ("nodes", recorder.node_informer),
                                       ("events", recorder.event_informer))]
    await recorder.node_informer.synced.wait()
    _settled()
    await _drive(cluster, recorder, scn, progress)
    if served:  # the report is the scenario's, the bytes `sim run` writes: the recorder stops watching at its end
        for task in watching:  # (a run's recorder hears nothing more while its cluster stops)
            task.cancel()


async def _namespaces(client: Client, scn: Scenario) -> None:
    """Each namespace the scenario's workloads (and PDB faults) use, created as `kubectl create namespace` would
    before they arrive (an imported trace names its pods' namespaces; the API server has only its own)."""
    used = {w.namespace for w in scn.workloads} | {str(dict(f.target).get("namespace", "default"))
                                                    for f in scn.faults if f.kind == "pdb"}
    existing = {ns["metadata"]["name"] for ns in (await client.get("/api/v1/namespaces")).get("items") or []}
    for name in sorted(used - existing):
        await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def _listen(server: ApiServer, serve: Serve, clock: VirtualClock) -> web.AppRunner:
    """The HTTP API and /simulation on `serve`'s port, before the API server starts: listening takes a turn of the
    loop (asyncio's create_server yields once), which once the server's own tasks exist would run their first
    steps ahead of what `sim run` runs first — a served run must order its work as a run does (clock.py,
    ControlledLoop). Clients are told the address (the kubeconfig) only once it has started."""
    loop = clock.loop
    assert isinstance(loop, ControlledLoop)
    runner = web.AppRunner(control.app(server, loop, clock), handler_cancellation=True, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, serve.bind, serve.port).start()
    except (OSError, OverflowError) as exc:  # in use, not ours to take, or no port at all (asyncio: OverflowError)
        await runner.cleanup()
        reason = os.strerror(exc.errno) if isinstance(exc, OSError) and exc.errno else "must be 0-65535"
        raise ScenarioError(f"--port {serve.port}: cannot listen on {serve.bind}:{serve.port}: {reason}") from None
    return runner


async def _close(http: web.AppRunner) -> None:
    """Stop serving, ending the requests still open — a `kubectl get -w`'s watch, a step under way — as the API
    server ends its watches when it stops. aiohttp's own shutdown would first wait up to its timeout for them
    to end by themselves: measured on the loop's clock, which here is simulated time, standing still when paused
    (the process then stayed until the watching client went away)."""
    assert http.server is not None
    for connection in http.server.connections:
        connection.force_close()  # the connection is lost: its request handler is cancelled (handler_cancellation)
    await http.cleanup()


def _announce(serve: Serve) -> _Interrupt:
    """The served cluster's address (a kubeconfig and a line on stdout), and from now on a signal ends it."""
    url = f"http://{serve.bind}:{serve.port}"
    pki.write_kubeconfig(serve.kubeconfig, url, None, None)
    pace = "paused" if serve.paused else f"{serve.speed:g}x real time"
    print(f"kubelite sim: simulated cluster at {url} ({pace}; control: kubelite sim control --server {url}); "
          f"export KUBECONFIG={serve.kubeconfig}", flush=True)
    return _Interrupt()


class _Interrupt:
    """SIGINT/SIGTERM end a served simulation: `asked` is set, and the work running `during` is cancelled."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._signalled)

    def _signalled(self) -> None:
        self.asked.set()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def during(self, work: Coroutine[Any, Any, None]) -> bool:
        """Run `work` in this task — not a task of its own, whose steps would run a turn later than `sim run`
        runs them — until it ends (True) or a signal comes first or ends it (False)."""
        if self.asked.is_set():
            work.close()
            return False
        task = self._task = asyncio.current_task()
        assert task is not None
        try:
            await work
        except asyncio.CancelledError:
            if not self.asked.is_set():  # not ours: the task itself is being cancelled
                raise
            task.uncancel()
            return False
        finally:
            self._task = None
        return True


def _spread(scn: Scenario) -> dict[str, tuple[dict[str, str], list[str]]]:
    """Workloads with topology spread constraints: their labels and topology keys (skew is sampled for them)."""
    return {w.name: (w.labels, sorted({c["topologyKey"] for c in w.spec.get("topologySpreadConstraints") or []}))
            for w in scn.workloads if w.spec.get("topologySpreadConstraints")}


async def _drive(cluster: _Cluster, recorder: Recorder, scn: Scenario, progress: Progress | None) -> None:
    """Arrivals, faults and samples in time order, until the scenario's duration. Each action is a task named
    after where the scenario asks for it (a workload, a fault's line): a failure is said so (_finished)."""
    actions: list[tuple[float, int, Callable[[], Coroutine[Any, Any, None]], str]] = []
    seq = 0
    for w in scn.workloads:
        where = f"workload {w.name}"  # one string for all of a workload's arrivals
        for i, arrival in enumerate(w.arrivals):
            actions.append((arrival.at, seq, _creator(cluster.client, recorder, w, i, arrival), where))
            seq += 1
    for fault in scn.faults:
        actions.append((fault.at, seq, _fault(cluster, recorder, fault), f"line {fault.line}: fault {fault.kind}"))
        seq += 1
    spread = _spread(scn)
    t = 0.0
    while t <= scn.duration:
        actions.append((t, seq, _sampler(recorder, spread, t, scn.duration, progress), "sample"))
        seq += 1
        t += scn.sample
    actions.sort(key=lambda a: (a[0], a[1]), reverse=True)  # popped from the end: in time order
    start = recorder.start
    # The actions still running, in start order (a dict: an ordered set). A finished one leaves it, and an
    # action is dropped from `actions` when it starts: a long run holds neither every finished task nor
    # every arrival's closure (BENCHMARKS.md, Memory kept after a pod is gone).
    background: dict[asyncio.Task[None], None] = {}
    while actions and actions[-1][0] <= scn.duration:
        at, _, action, where = actions.pop()
        await cluster.clock.sleep(start + at - cluster.clock.monotonic())
        task = asyncio.create_task(action(), name=where)
        background[task] = None
        task.add_done_callback(functools.partial(_finished, background, recorder, scn.file))
    await cluster.clock.sleep(start + scn.duration - cluster.clock.monotonic())
    left = list(background)
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)


def _finished(background: dict[asyncio.Task[None], None], recorder: Recorder, file: Path,
              task: asyncio.Task[None]) -> None:
    """A scenario action is done: it leaves the running set, and a failure (an arrival the API refused, a fault
    that could not be injected) is recorded — in events.log with the API's Status message, counted for the
    run's exit status — and said on stderr at once, naming where the scenario asks for it. The run goes on: a
    what-if run with one bad action still tells the rest."""
    background.pop(task)
    if task.cancelled() or (exc := task.exception()) is None:
        return
    message = exc.message if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}"
    recorder.action_failed(task.get_name(), message)
    print(f"kubelite sim: warning: {file}: {task.get_name()}: {message} (at {recorder.t():g} s; the run goes on "
          "without it)",
          file=sys.stderr, flush=True)


def _creator(client: Client, recorder: Recorder, w: Workload, index: int,
             arrival: Arrival) -> Callable[[], Coroutine[Any, Any, None]]:
    """The arrival's create; its object is built when it is due, not held from the start of the run."""
    async def create() -> None:
        obj = workloads.manifest(w, index, arrival)
        meta = obj["metadata"]
        recorder.log_action("create", f"{w.kind} {meta['namespace']}/{meta['name']}")
        await client.create(workloads.collection(w.kind, meta["namespace"]), obj)
    return create


def _sampler(recorder: Recorder, spread: dict[str, tuple[dict[str, str], list[str]]], t: float, total: float,
             progress: Progress | None) -> Callable[[], Coroutine[Any, Any, None]]:
    async def sample() -> None:
        recorder.sample(spread)
        if progress is not None:
            progress(t, total)
    return sample


def _fault(cluster: _Cluster, recorder: Recorder, fault: Fault) -> Callable[[], Coroutine[Any, Any, None]]:
    async def inject() -> None:
        recorder.log_action(fault.kind, fault.target if isinstance(fault.target, dict) else str(fault.target))
        target = fault.target
        if fault.kind == "nodeLost":  # the agent stops without a word: heartbeats end, its pods are orphaned
            await cluster.stop_agent(str(target))
        elif fault.kind == "agentRestart":
            await cluster.stop_agent(str(target))
            index = cluster.scn.node_names().index(str(target))
            cluster.start_agent(str(target), cluster._agent(str(target), index))
        elif fault.kind == "drain":
            pods = [p for p in recorder.pod_informer.store.values() if p["spec"].get("nodeName") == target
                    and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            await workloads.drain(cluster.client, cluster.clock, str(target), pods, recorder.evicted)
        elif fault.kind == "pdb":
            await workloads.apply(cluster.client, *workloads.pdb(dict(target)))
        elif fault.kind == "scale":
            w = next(w for w in cluster.scn.workloads if w.name == target["workload"])
            path = workloads.collection(w.kind, w.namespace)
            await cluster.client.patch(f"{path}/{w.name}", {"spec": {"replicas": int(target["replicas"])}})
        elif fault.kind == "delete":
            ns, _, name = str(target).rpartition("/")
            await cluster.client.delete(f"/api/v1/namespaces/{ns or 'default'}/pods/{name}")
    return inject
