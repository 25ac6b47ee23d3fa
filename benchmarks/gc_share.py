"""The cyclic garbage collector's share of each process's CPU while a benchmark runs.

Runs another benchmark with `benchmarks/gc_probe` on PYTHONPATH, so that every Python process it starts (the
real `kubelite server`, `kubelite scheduler`, the driver itself) times its own collections
(gc_probe/sitecustomize.py), then prints per process: CPU seconds, the collections' CPU seconds and share by
generation, how many, the longest pause (wall) and the peak RSS.

    python benchmarks/gc_share.py [--thresholds 700,10,10] -- benchmarks/scheduler.py --workloads SchedulingBasic

`--thresholds` sets the kubelite processes' thresholds at start-up (what a process sets itself later wins).
Prints figures only (see BENCHMARKS.md, "Garbage collection in the real processes").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PROBE = Path(__file__).resolve().parent / "gc_probe"


def _name(argv: list[str]) -> str:
    """`server`, `scheduler`, ... for a kubelite process (`python -m kubelite.cli.main server`: argv[0] is the
    module's file); the script's name for another."""
    if argv[0].endswith(os.path.join("kubelite", "cli", "main.py")) and len(argv) > 1:
        return argv[1]
    return Path(argv[0]).name


def row(stats: dict[str, Any]) -> str:
    cpu = stats["process_cpu"]
    gc_cpu = sum(stats["cpu"])
    gens = "; ".join(f"gen{g}: {stats['count'][g]} in {stats['cpu'][g]:.2f} s, max {stats['max_wall'][g] * 1000:.0f} ms"
                     for g in range(3))
    return (f"{_name(stats['argv']):>12}: CPU {cpu:7.1f} s, GC {gc_cpu:6.2f} s ({100 * gc_cpu / max(cpu, 1e-9):4.1f} %)"
            f"  [{gens}]  peak RSS {stats['max_rss_kib'] / 1024:.0f} MiB, thresholds {stats['thresholds']}, "
            f"frozen {stats['frozen']:,}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--thresholds", default="", help="a,b,c for the kubelite processes at start-up (default: their own)")
    p.add_argument("--keep", type=Path, help="copy the per-process JSON files here")
    p.add_argument("command", nargs="+", help="the benchmark and its arguments (after --)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GC_PROBE_DIR": tmp,
               "PYTHONPATH": os.pathsep.join(x for x in (str(PROBE), os.environ.get("PYTHONPATH", "")) if x)}
        if args.thresholds:
            env["GC_PROBE_THRESHOLDS"] = args.thresholds
        code = subprocess.call([sys.executable, *args.command], env=env)
        for path in sorted(Path(tmp).glob("*.json")):
            stats = json.loads(path.read_text())
            print(row(stats), flush=True)
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"{_name(stats['argv'])}-{path.name}").write_text(path.read_text())
    return code


if __name__ == "__main__":
    sys.exit(main())
