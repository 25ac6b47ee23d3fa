"""Times every cyclic garbage collection of the Python process it is loaded into (`benchmarks/gc_share.py`).

Loaded by the interpreter at start-up when this directory is on PYTHONPATH, so the measured processes (a
`kubelite server`, a `kubelite scheduler` started by a benchmark) run unedited. With GC_PROBE_DIR set it
records, per generation, the collections' count, their CPU time (the collecting thread's: `thread_time`, so
other threads' work meanwhile is not counted) and wall time (the pause every thread waited), the longest
pause, and per wall-clock second the collections' CPU time and the process's CPU time; it writes them to
GC_PROBE_DIR/<pid>.json every few seconds and at exit (a process killed outright keeps its last write).
GC_PROBE_THRESHOLDS=a,b,c sets the thresholds at start-up of the kubelite processes (`-m kubelite.cli.main`),
not the benchmark's driver: an experiment without editing the code (a process that sets its own later wins).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import resource
import sys
import time
from typing import Any

_DIR = os.environ.get("GC_PROBE_DIR")
FLUSH_EVERY = 5.0  # seconds between writes


class _Probe:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, f"{os.getpid()}.json")
        self.count = [0, 0, 0]
        self.cpu = [0.0, 0.0, 0.0]
        self.wall = [0.0, 0.0, 0.0]
        self.max_wall = [0.0, 0.0, 0.0]
        self.collected = [0, 0, 0]
        self.seconds: dict[int, list[float]] = {}  # wall second -> [gc CPU, process CPU at its first collection]
        self.started = (0.0, 0.0)
        self.flushed = time.monotonic()

    def callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = (time.thread_time(), time.perf_counter())
            return
        cpu = time.thread_time() - self.started[0]
        wall = time.perf_counter() - self.started[1]
        g = info["generation"]
        self.count[g] += 1
        self.cpu[g] += cpu
        self.wall[g] += wall
        self.max_wall[g] = max(self.max_wall[g], wall)
        self.collected[g] += info["collected"]
        second = self.seconds.setdefault(int(time.time()), [0.0, time.process_time()])
        second[0] += cpu
        if time.monotonic() - self.flushed > FLUSH_EVERY:
            self.write()

    def write(self) -> None:
        self.flushed = time.monotonic()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        out = {"argv": sys.argv, "thresholds": gc.get_threshold(), "process_cpu": time.process_time(),
               "max_rss_kib": usage.ru_maxrss, "frozen": gc.get_freeze_count(), "count": self.count,
               "cpu": self.cpu, "wall": self.wall, "max_wall": self.max_wall, "collected": self.collected,
               "seconds": self.seconds, "written": time.time()}
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, self.path)


if _DIR:
    if os.environ.get("GC_PROBE_THRESHOLDS") and "kubelite.cli.main" in sys.orig_argv:
        gc.set_threshold(*(int(x) for x in os.environ["GC_PROBE_THRESHOLDS"].split(",")))
    _probe = _Probe(_DIR)
    gc.callbacks.append(_probe.callback)
    atexit.register(_probe.write)
