"""Simulator scale: hollow nodes x pod lifetimes over simulated hours — wall time, speed-up, peak memory.

    python benchmarks/sim.py --nodes 100 --pods 3000 --hours 1 [--lease-seconds 40]
    python benchmarks/sim.py --scenario examples/sim/scale-5000.yaml
    python benchmarks/sim.py --nodes 200 --pods 6000 --hours 0.5 --lease-seconds 240 \
        --arrive-within 300 --run-seconds 36000 --window 600 1800    # what running pods cost


Pods arrive as a Poisson process over the simulated span (bare pods, restartPolicy Never, 100m CPU, run
time exponential with a mean of a tenth of the span) on nodes of 4 CPUs. Everything is real — API server,
scheduler, controllers, each node's agent and pod workers — on virtual time.
"""

from __future__ import annotations

import argparse
import logging
import resource
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kubelite.sim import report, runner, scenario


def build(nodes: int, pods: int, hours: float, lease: int = 40, arrive_within: float | None = None,
          run_seconds: float | None = None) -> dict[str, object]:
    """The scenario; `arrive_within` puts every arrival in the first S seconds, `run_seconds` fixes each pod's
    run time (so the pods are all running, and stay so, after a while: what a running pod costs)."""
    span = hours * 3600
    arrivals = arrive_within or span
    rate = pods / hours if arrive_within is None else pods * 3600 / arrive_within
    run = {"fixed": f"{run_seconds:g}s"} if run_seconds else {"exponential": f"{span / 10:g}s"}
    return {"nodeConfig": {"nodeLeaseDurationSeconds": lease},
        "name": f"scale-{nodes}n-{pods}p-{hours:g}h", "duration": f"{span:g}s", "sample": f"{max(60, span / 100):g}s",
        "nodePools": [{"name": "n", "count": nodes, "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}],
        "workloads": [{"name": "p", "kind": "Pod",
                       "arrivals": {"poisson": {"perHour": rate, "until": f"{arrivals:g}s"}},
                       "spec": {"restartPolicy": "Never", "resources": {"requests": {"cpu": "100m"}}},
                       "behaviour": {"run": run}}],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--pods", type=int, default=3000)
    p.add_argument("--hours", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scenario", type=Path, default=None, help="run this scenario file instead (same report)")
    p.add_argument("--duration", type=float, default=None,
                   help="with --scenario: simulate only its first S seconds (arrivals after are not created)")
    p.add_argument("--lease-seconds", type=int, default=40,
                   help="the nodes' nodeLeaseDurationSeconds (renewed every quarter of it; upstream's 40)")
    p.add_argument("--arrive-within", type=float, default=None, help="all arrivals in the first S simulated seconds")
    p.add_argument("--run-seconds", type=float, default=None, help="each pod runs S seconds (default: exponential)")
    p.add_argument("--window", type=float, nargs=2, default=None, metavar=("FROM", "TO"),
                   help="also report the CPU-s per simulated second between these simulated times (at samples)")
    args = p.parse_args()
    logging.getLogger("kubelite").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.scenario or Path(tmp) / "scenario.yaml"
        if args.scenario is None:
            path.write_text(yaml.safe_dump(build(args.nodes, args.pods, args.hours, args.lease_seconds,
                                                 args.arrive_within, args.run_seconds)))
        scn = scenario.load(path, args.seed)
        if args.duration is not None and args.duration < scn.duration:
            scn.duration, scn.sample = args.duration, max(60.0, args.duration / 100)
        start = time.perf_counter()
        window: list[tuple[float, float]] = []  # (simulated, cpu) at the first samples at or after FROM and TO

        def progress(done: float, total: float) -> None:  # one line per sample: a run cut short still tells its rate
            usage = resource.getrusage(resource.RUSAGE_SELF)
            if args.window is not None and len(window) < 2 and done >= args.window[len(window)]:
                window.append((done, usage.ru_utime + usage.ru_stime))
            print(f"  simulated {done:.0f}/{total:.0f}s wall={time.perf_counter() - start:.0f}s "
                  f"cpu={usage.ru_utime + usage.ru_stime:.0f}s rss={usage.ru_maxrss / 1024:.0f}MiB",
                  file=sys.stderr, flush=True)

        with runner.node_dirs() as nodes:
            outcome = runner.run(scn, args.seed, None, nodes, progress)
            wall = time.perf_counter() - start  # not counting the removal of the nodes' directories
        m = report.metrics(outcome)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime  # cpu: what a core of its own would take
    simulated = scn.duration
    print(f"nodes={sum(p.count for p in scn.pools)} pods={m['pods']} (scheduled {m['scheduled']}) "
          f"simulated={simulated:.0f}s wall={wall:.1f}s speedup={simulated / wall:.1f}x cpu={cpu:.1f}s "
          f"speedup-by-cpu={simulated / cpu:.1f}x "
          f"pods/wall-s={m['pods'] / wall:.1f} "
          f"pending p99={m['pendingSeconds']['p99']}s peak RSS={peak:.0f} MiB")
    if len(window) == 2:
        (t0, c0), (t1, c1) = window
        print(f"window {t0:.0f}-{t1:.0f}s: cpu={c1 - c0:.2f}s per simulated second={(c1 - c0) / (t1 - t0):.5f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
