"""Partition → replacement running: how long a StatefulSet identity is down when its node is cut off (S4).

Each round is a fresh cluster from tests/e2e/partition.py: a server with `--fencing-config`,
node-a behind a cuttable TCP proxy running web-0 (a ReadWriteOnce shared-path volume), node-b.
The round cuts node-a's link and measures, from the cut, when
- the API shows node-a Ready=Unknown (the node lifecycle controller's grace),
- the NodeFence is Succeeded (status.fencedTime, second resolution),
- the replacement web-0 started on node-b (its own `date +%s.%N` stamp on the shared volume).
Modes: `command` (a fence script that kills node-a's agent and every process under it) and
`self` (node-a runs `--self-fence-after 4`, the controller's `self` agent with a 2 s margin).
The figure is dominated by the configured timings (grace 15 s, fencing delay 2 s), not by kubelite's
own latency: the "after Unknown" column is what the fencing path itself adds.

    python -m benchmarks.fencing [--rounds 3] [--modes command,self]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kubelite.clock import parse_rfc3339
from tests.e2e.partition import (
    GRACE,
    SELF_FENCE_AFTER,
    command_fencing,
    data_log,
    partitioned_cluster,
    ready,
    running_on,
    self_fencing_config,
)
from tests.e2e.pods import wait_for


def one_round(mode: str, base: Path) -> tuple[float, float, float]:
    """(cut → Unknown, cut → fence Succeeded, cut → replacement started), seconds."""
    if mode == "command":
        fencing, pidfile = command_fencing(base)
        flags: tuple[str, ...] = ()
    else:
        fencing, pidfile, flags = self_fencing_config(), None, ("--self-fence-after", str(SELF_FENCE_AFTER))
    with partitioned_cluster(base, fencing, *flags) as p:
        if pidfile is not None:
            pidfile.write_text(str(p.agents["node-a"].pid))
        if not wait_for(lambda: len(data_log(p)) == 1, timeout=30):
            raise RuntimeError("web-0 never wrote its first line")
        cut = time.time()
        p.proxy.cut()
        if not wait_for(lambda: ready(p.server, "node-a") == "Unknown", timeout=GRACE + 30):
            raise RuntimeError("node-a never went Unknown")
        unknown = time.time() - cut
        if not wait_for(lambda: running_on(p.server) == "node-b" and len(data_log(p)) == 2, timeout=120):
            raise RuntimeError("web-0 was never replaced on node-b")
        started = float(data_log(p)[1].split()[2])
        fence = json.loads(p.server.kubectl("get", "nodefence", "node-a", "-o", "json").stdout)
        fenced = parse_rfc3339(fence["status"]["fencedTime"])
        return unknown, fenced - cut, started - cut


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="command,self")
    args = parser.parse_args()
    for mode in args.modes.split(","):
        rows = []
        for i in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix=f"fencing-{mode}-") as tmp:
                rows.append(one_round(mode, Path(tmp)))
            print(f"{mode} round {i + 1}: unknown {rows[-1][0]:.1f} s, fenced {rows[-1][1]:.1f} s, "
                  f"replacement started {rows[-1][2]:.2f} s after the cut", flush=True)
        recovery = [r[2] for r in rows]
        after_unknown = [r[2] - r[0] for r in rows]
        print(f"{mode}: partition → replacement running p50 {statistics.median(recovery):.2f} s, "
              f"p99 {percentile(recovery, 0.99):.2f} s (n={len(rows)}); after Unknown: p50 "
              f"{statistics.median(after_unknown):.2f} s, p99 {percentile(after_unknown, 0.99):.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
