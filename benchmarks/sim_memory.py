"""Memory of a simulation at steady state: what is in use at chosen simulated instants, and what is garbage.

    python benchmarks/sim_memory.py --nodes 100 --per-hour 6000 --run 240 --hours 5 --at 10800 14400 18000
    python benchmarks/sim_memory.py --nodes 200 --per-hour 1250 --run 8640 --hours 15 --at 39600 46800 54000

The scenario is benchmarks/sim.py's (bare pods, Poisson arrivals, 100m CPU) with the arrival rate and the mean
run time given: running pods level off at rate x run, terminated ones at pod GC's 12,500, Events at an hour's
worth (the Event TTL), so between instants past all three the live objects should not grow. At each instant
(a multiple of the 300 s sample) it prints the RSS, the bytes in use (pymalloc's allocated blocks, malloc's in-use
bytes: the allocators' view, without the free memory they keep — fragmentation is RSS beyond them), the objects
the cyclic collector tracks in each generation and the collections run so far. The simulation's own collector
settings are kept (kubelite/sim/runner.py, GC_THRESHOLDS): nothing here collects until the last instant, where
one full collection keeps what it finds (gc.DEBUG_SAVEALL) and reports it — the garbage the run was carrying,
which reference counting could not free and the simulation's collector had not reached.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import gc
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.sim import build
from kubelite.sim import runner, scenario

SAMPLE = 300.0


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def malloc_in_use() -> int:
    """glibc's bytes in use (mallinfo2: uordblks + mmapped chunks); -1 without glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):
        return -1
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def pymalloc_in_use() -> int:
    """pymalloc's bytes in allocated blocks (sys._debugmallocstats, which writes to the C stderr)."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as out:
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        for line in out.read().decode().splitlines():
            if line.startswith("# bytes in allocated blocks"):
                return int(line.split("=")[1].replace(",", ""))
    return -1


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def kind(o: object) -> str:
    name = f"{type(o).__module__}.{type(o).__qualname__}"
    return f"{name} {getattr(o, '__qualname__', '')}" if isinstance(o, collections.abc.Coroutine) else name


def garbage_report() -> None:
    """One full collection, keeping what it frees: how much, and of what."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = gc.collect()
    finally:
        gc.set_debug(0)
    garbage = list(gc.garbage)
    gc.garbage.clear()
    tracked = {id(o) for o in garbage}
    owned: dict[int, int] = {}  # untracked objects (str, bytes, numbers) garbage refers to, by id: their size
    for o in garbage:
        for ref in gc.get_referents(o):
            if id(ref) not in tracked and not gc.is_tracked(ref):
                owned[id(ref)] = sys.getsizeof(ref)
    size = sum(sys.getsizeof(o) for o in garbage)
    print(f"garbage at the last instant: {found:,} objects, {size / 2**20:.1f} MiB "
          f"(+ {sum(owned.values()) / 2**20:.1f} MiB of strings and bytes they alone may hold)")
    for name, n in collections.Counter(kind(o) for o in garbage).most_common(25):
        print(f"  {n:>9,}  {name}")
    del garbage
    gc.collect()
    print(f"after freeing it: rss={rss_mib():.0f} MiB pymalloc={pymalloc_in_use() / 2**20:.0f} MiB "
          f"malloc={malloc_in_use() / 2**20:.0f} MiB")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--per-hour", type=float, default=6000, help="pod arrivals per simulated hour")
    p.add_argument("--run", type=float, default=240, help="mean run time of a pod, seconds (exponential)")
    p.add_argument("--hours", type=float, default=5)
    p.add_argument("--lease-seconds", type=int, default=240)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--at", type=float, nargs="+", required=True, help="simulated instants (multiples of 300 s)")
    args = p.parse_args()
    logging.getLogger("kubelite").setLevel(logging.CRITICAL)
    spec: dict[str, Any] = build(args.nodes, round(args.per_hour * args.hours), args.hours, args.lease_seconds)
    spec["sample"] = f"{SAMPLE:g}s"
    spec["workloads"][0]["behaviour"]["run"] = {"exponential": f"{args.run:g}s"}
    collections_run = [0, 0, 0]

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections_run[info["generation"]] += 1

    print("simulated s | RSS MiB | pymalloc MiB | malloc MiB | tracked objects by generation | collections (gen 0/1/2)")

    def progress(done: float, total: float) -> None:
        if done not in args.at:
            return
        gens = "/".join(f"{len(gc.get_objects(g)):,}" for g in range(3))
        print(f"{done:.0f} | {rss_mib():.0f} | {pymalloc_in_use() / 2**20:.0f} | {malloc_in_use() / 2**20:.0f} | "
              f"{gens} | {'/'.join(map(str, collections_run))}", flush=True)
        if done == max(args.at):
            garbage_report()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml.safe_dump(spec))
        scn = scenario.load(path, args.seed)
        gc.callbacks.append(counted)
        try:
            with runner.node_dirs() as nodes:
                runner.run(scn, args.seed, None, nodes, progress)
        finally:
            gc.callbacks.remove(counted)


if __name__ == "__main__":
    main()
