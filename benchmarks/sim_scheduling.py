"""SchedulingBasic inside the simulator, next to the real-process figure.

    python benchmarks/sim_scheduling.py [--scale 1.0] [--real]

upstream's SchedulingBasic/5000Nodes_10000Pods (benchmarks/scheduler.py: nodes of 4 CPU / 32Gi / 110
pods, 1,000 init pods, then 10,000 measured pods of 100m / 500Mi created at once) as a scenario: the
nodes are hollow nodes with their agents, so every bound pod is also started by its node's pod worker
(more work than scheduler_perf, which has no kubelets). One process: API server, scheduler,
controllers and agents on one virtual-time loop. Throughput as upstream's SchedulingThroughput
Average, on the wall clock: measured pods bound ÷ (last bind - first measured create, as the
simulation's own pod watch sees them); also per CPU-second of the process over the same span (the
real benchmark's figure to compare is its API server + scheduler CPU seconds). The virtual
clock does not move during the burst (it moves only when every task waits), so simulated time is no
measure of scheduling speed. With `--real`, benchmarks/scheduler.py's SchedulingBasic (separate API
server and scheduler processes over HTTP, no agents) runs after it at the same scale, and both lines
are printed.
"""

from __future__ import annotations

import argparse
import logging
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from kubelite.sim import recorder, runner, scenario

Obj = dict[str, Any]
INIT_AT, MEASURED_AT = 10.0, 60.0  # simulated seconds after the nodes settled


def build(scale: float) -> Obj:
    def scaled(n: int) -> int:
        return max(1, int(n * scale))

    spec = {"resources": {"requests": {"cpu": "100m", "memory": "500Mi"}, "limits": {"cpu": "100m",
                                                                                      "memory": "500Mi"}},
            "terminationGracePeriodSeconds": 0}
    return {
        "name": f"scheduling-basic-x{scale:g}", "duration": f"{MEASURED_AT + 60:g}s", "sample": "60s",
        "nodePools": [{"name": "node", "count": scaled(5000),
                       "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"}}],
        "workloads": [
            {"name": "init", "kind": "Pod", "spec": spec, "arrivals": {"times": [INIT_AT] * scaled(1000)}},
            {"name": "m", "kind": "Pod", "spec": spec, "arrivals": {"times": [MEASURED_AT] * scaled(10000)}}],
    }


class Marks:
    """Wall-clock times of the measured pods' creations and bindings, from the recorder's pod informer
    (the recorder is the simulation's own watcher: what it sees is what a watching client would)."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.cpu: list[float] = []  # the process's CPU time at the first creation seen and at each binding

    def install(self) -> None:
        seen_by_recorder = recorder.Recorder._pod_updated
        marks = self

        def pod_updated(self: recorder.Recorder, old: Obj | None, pod: Obj) -> None:
            name = pod["metadata"]["name"]
            if name.startswith("m-"):
                now = time.perf_counter()
                if not marks.created:
                    marks.cpu.append(time.process_time())
                marks.created.setdefault(name, now)
                if (pod.get("spec") or {}).get("nodeName") and name not in marks.bound:
                    marks.bound[name] = now
                    marks.cpu[1:] = [time.process_time()]
            seen_by_recorder(self, old, pod)

        recorder.Recorder._pod_updated = pod_updated  # type: ignore[method-assign]


def simulated(scale: float) -> str:
    logging.getLogger("kubelite").setLevel(logging.CRITICAL)
    marks = Marks()
    marks.install()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml.safe_dump(build(scale)))
        scn = scenario.load(path)
        began = time.perf_counter()
        with runner.node_dirs() as nodes:
            runner.run(scn, 0, None, nodes)
            wall = time.perf_counter() - began
    usage = resource.getrusage(resource.RUSAGE_SELF)
    done = [n for n in marks.created if n in marks.bound]
    if not done:
        return "SchedulingBasic in the simulator: no measured pod was bound"
    elapsed = max(marks.bound[n] for n in done) - min(marks.created.values())
    lat = sorted(marks.bound[n] - marks.created[n] for n in done)
    p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    cpu = marks.cpu[-1] - marks.cpu[0]
    return (f"SchedulingBasic in the simulator (x{scale:g}, hollow nodes with agents, one process): "
            f"{len(done) / elapsed:,.0f} pods/s ({len(done)}/{len(marks.created)} bound in {elapsed:.1f} s wall, "
            f"{cpu:.1f} CPU-s: {len(done) / cpu:,.0f} pods per CPU-s), "
            f"latency p50 {p50 * 1000:.0f} ms p99 {p99 * 1000:.0f} ms; whole run {wall:.0f} s wall, "
            f"{usage.ru_utime + usage.ru_stime:.0f} CPU-s, peak RSS {usage.ru_maxrss / 1024:.0f} MiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--real", action="store_true", help="also run benchmarks/scheduler.py's SchedulingBasic")
    args = p.parse_args()
    print(simulated(args.scale), flush=True)
    if args.real:
        out = subprocess.run([sys.executable, "-m", "benchmarks.scheduler", "--workloads", "SchedulingBasic",
                              "--scale", f"{args.scale:g}"], capture_output=True, text=True, check=False)
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("SchedulingBasic")), out.stderr[-500:])
        print(f"SchedulingBasic real processes (x{args.scale:g}, API server + scheduler over HTTP, no agents): "
              f"{line.split(': ', 1)[-1]}", flush=True)


if __name__ == "__main__":
    main()
