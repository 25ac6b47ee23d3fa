"""Nothing of a pod is kept once it is gone: a simulated cluster runs pods to their end and deletes them, and
then no component still holds anything of them (BENCHMARKS.md, Memory kept after a pod is gone).

The check is a walk of what each component reaches (its own objects, not the API server, the store, the
client or the loop it shares with the others), looking for a string naming a deleted pod's uid — a map
keyed by it, a pod object, a path of its directory. The simulation's recorder must keep each pod for its
report, compactly: it has its own case.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import types
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubelite.agent.agent import Agent
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.client.events import EventCorrelator
from kubelite.controllers import registry
from kubelite.scheduler.scheduler import Scheduler
from kubelite.sim import runner, scenario
from kubelite.sim.clock import VirtualClock
from kubelite.sim.recorder import Recorder
from kubelite.store.memory import MemoryStore

PODS = 6
# Pods arrive in the first 20 s and run 10 s (the first two are deleted while they run, the others once
# finished); by 120 s every one is gone from the API and from every informer.
SCENARIO = {
    "name": "podleak", "duration": "150s", "sample": "60s", "timeline": ["p-1"],
    "nodePools": [{"name": "n", "count": 2, "capacity": {"cpu": "4", "memory": "8Gi"}}],
    "workloads": [{"name": "p", "kind": "Pod", "arrivals": {"times": [f"{3 * i}s" for i in range(PODS)]},
                   "spec": {"restartPolicy": "Never"}, "behaviour": {"run": {"fixed": "10s"}}}],
    "faults": [{"at": "5s", "delete": "default/p-0"}, {"at": "8s", "delete": "default/p-1"},
               *({"at": f"{60 + i}s", "delete": f"default/p-{i}"} for i in range(2, PODS))],
}
# Not what a component keeps of pods: what every component shares or the simulation's own; work in flight (a
# task holds what it works on, and an informer's watch leads into the API server's watch cache); and the event
# correlator's caches, which remember recent events' keys (the pod's uid among them) up to 4,096 entries
# each, least recently used evicted, as client-go's EventCorrelator does in kubelet and the scheduler.
SHARED = (ApiServer, MemoryStore, InProcessClient, VirtualClock, asyncio.AbstractEventLoop, Recorder,
          asyncio.Future, EventCorrelator, types.ModuleType, type)

CONTROLLERS = [name for name in registry.CONTROLLERS if name not in runner.NOT_RUN]
# Every component of the simulated cluster, by what a case calls it: the class of its instances.
COMPONENTS: dict[str, type] = {"agent": Agent, "scheduler": Scheduler,
                               **{f"{name} controller": kind for name, kind in registry.CONTROLLERS.items()
                                  if name in CONTROLLERS and isinstance(kind, type)}}
ARRIVAL = "_creator.<locals>.create"  # the simulation driver's action that creates an arrival's object


def holders(root: object, needles: set[str], limit: int = 2_000_000) -> list[str]:
    """The strings naming any of `needles` that `root` reaches, not through SHARED objects nor module globals."""
    modules = {id(m.__dict__) for m in list(sys.modules.values()) if m is not None}
    seen = {id(root)}
    queue: deque[object] = deque([root])
    found: list[str] = []
    while queue and len(seen) < limit:
        obj = queue.popleft()
        for ref in gc.get_referents(obj):
            if id(ref) in seen or id(ref) in modules or isinstance(ref, SHARED):
                continue
            seen.add(id(ref))
            if isinstance(ref, str):
                found += [ref for needle in needles if needle in ref]
            elif not isinstance(ref, (bytes, int, float)):
                queue.append(ref)
    return found


def instances(kind: type) -> Iterator[Any]:
    return (o for o in gc.get_objects() if isinstance(o, kind))


def _run(tmp_path: Path, inspect: Any) -> None:
    """Run the scenario; `inspect()` is called at the last sample, once every pod is gone."""
    path = tmp_path / "podleak.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    scn = scenario.load(path, 1)

    def progress(done: float, total: float) -> None:
        if done == 120.0:
            inspect()

    with runner.node_dirs() as nodes:
        runner.run(scn, 1, None, nodes, progress)


@pytest.fixture(scope="module")
def gone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """What each component still held of the deleted pods (and how the recorder kept them), at 120 s."""
    seen: dict[str, list[str]] = {}

    def inspect() -> None:
        gc.unfreeze()  # the cluster's start-up objects, frozen by the run (runner._settled), are listed again
        gc.set_debug(gc.DEBUG_SAVEALL)  # what only the cyclic collector would free is kept in gc.garbage
        gc.collect()
        gc.set_debug(0)
        seen["cyclic garbage"] = sorted({type(o).__qualname__ for o in gc.garbage
                                         if type(o).__module__.startswith("kubelite.")})
        gc.garbage.clear()
        gc.collect()
        recorder = next(instances(Recorder))
        uids = {key.rsplit("/", 1)[1] for key in recorder.pods}
        assert len(uids) == PODS and not recorder.pod_informer.store, "every pod came and went"
        for name, kind in COMPONENTS.items():
            components = list(instances(kind))
            assert components, f"the simulation runs the {name}"
            seen[name] = [s for component in components for s in holders(component, uids)]
        seen["finished actions"] = [repr(t) for t in instances(asyncio.Task)
                                    if t.done() and t.get_coro().__qualname__ == ARRIVAL]
        seen["arrival closures"] = [f.__qualname__ for f in instances(types.FunctionType) if f.__qualname__ == ARRIVAL]
        seen["timelines"] = sorted(key for key, life in recorder.pods.items() if life.timeline is not None)
        seen["latest"] = sorted(recorder.latest)

    gc.collect()  # what earlier tests' runs in this process left is not this run's (test_runs before this file)
    gc.disable()  # no collection before the inspection's: a pod's parts must be freed by reference counting
    try:
        _run(tmp_path_factory.mktemp("podleak"), inspect)
    finally:
        gc.enable()
    assert seen, "the inspection ran and passed its own checks"
    return seen


@pytest.mark.parametrize("component", [
    pytest.param("agent", id="the node agents (pod workers, syncers, status manager, probes, hollow runtime)"),
    pytest.param("scheduler", id="the scheduler (queue, node table, cycle, binder)"),
    *(pytest.param(f"{name} controller", id=f"the {name} controller") for name in CONTROLLERS),
    pytest.param("finished actions", id="the simulation driver keeps no finished arrival"),
    pytest.param("arrival closures", id="the simulation driver drops each arrival once made"),
    # A simulation's collector seldom runs and never walks its older generations (runner.GC_THRESHOLDS): a pod's
    # parts held in a reference cycle outlived it (≈ 16 KB a pod, BENCHMARKS.md, Memory at steady state).
    pytest.param("cyclic garbage", id="a gone pod's parts are freed without the cyclic collector"),
])
def test_nothing_of_a_deleted_pod_is_kept(gone: dict[str, list[str]], component: str) -> None:
    assert gone[component] == []


def test_the_recorder_keeps_steps_only_for_the_timeline_pods(gone: dict[str, list[str]]) -> None:
    """The report draws the timeline of the pods the scenario names; every other pod keeps three fields."""
    assert [key.rsplit("/", 1)[0] for key in gone["timelines"]] == ["default/p-1"]
    assert gone["latest"] == ["default/p-1"]
