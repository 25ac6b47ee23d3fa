"""`python -m kubelite.testing.chaos` (`make chaos`): seeded chaos runs; exit status 1 on any violation.

Schedule i uses seed `--seed + i`, so one failing schedule is rerun alone with `--seed S --schedules 1`
(and the same `--duration`: the schedule depends on both)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import tempfile
from pathlib import Path

from kubelite.testing.chaos.run import RunReport, percentile, run_one
from kubelite.testing.chaos.schedule import KINDS


def summary(reports: list[RunReport]) -> dict[str, object]:
    # Recovery after each episode of overlapping faults that disturbed the workload, unless the next
    # episode began before the workload was healthy again (then the time is not this episode's).
    recoveries = [e.recovery.seconds for rep in reports for e in rep.episodes
                  if e.recovery.seconds is not None and e.recovery.disrupted and not e.recovery.overlapped]
    replaced = [r for rep in reports for r in rep.replacements]
    kinds: dict[str, int] = {}
    for rep in reports:
        for f in rep.faults:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
    return {"schedules": len(reports), "faults": sum(kinds.values()), "faults_by_kind": kinds,
            "violations": sum(len(r.violations) for r in reports), "errors": sum(1 for r in reports if r.error),
            "disruptive_faults": sum(1 for rep in reports for r in rep.recoveries if r.disrupted),
            "episodes": sum(len(r.episodes) for r in reports),
            "recoveries_measured": len(recoveries),
            "unrecovered": sum(1 for rep in reports for r in rep.recoveries if r.seconds is None),
            "recovery_p50_s": round(percentile(recoveries, 50), 2) if recoveries else None,
            "recovery_p99_s": round(percentile(recoveries, 99), 2) if recoveries else None,
            "acked_writes": sum(r.acked_writes for r in reports),
            "fences": sum(r.fences for r in reports),
            "replacement_p50_s": round(percentile(replaced, 50), 2) if replaced else None,
            "replacement_p99_s": round(percentile(replaced, 99), 2) if replaced else None,
            "failed_seeds": [r.seed for r in reports if not r.ok]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubelite.testing.chaos", description=__doc__)
    parser.add_argument("--schedules", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults per schedule")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first schedule")
    parser.add_argument("--exclude", default="", metavar="KIND[,KIND]",
                        help=f"fault kinds to leave out (the others stay as the seed has them): {', '.join(KINDS)}")
    parser.add_argument("--workdir", type=Path, default=None, help="where runs keep their data and logs")
    parser.add_argument("--fencing", action="store_true",
                        help="fence nodes lost for 5 s by powering them off (power.py); off: nothing is fenced")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kubelite.testing.chaos").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    # SIGTERM as Ctrl-C: asyncio.run cancels the run, whose cleanup stops the cluster it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    exclude = frozenset(k for k in args.exclude.split(",") if k)
    if exclude - set(KINDS):
        parser.error(f"unknown fault kinds: {', '.join(sorted(exclude - set(KINDS)))}")
    base = args.workdir or Path(tempfile.mkdtemp(prefix="kubelite-chaos-"))
    reports = []
    for i in range(args.schedules):
        seed = args.seed + i
        report = asyncio.run(run_one(seed, args.duration, base / f"seed-{seed}", exclude, fencing=args.fencing))
        print(report.text(), flush=True)
        reports.append(report)
    result = summary(reports)
    (base / "summary.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    print(f"reports and logs in {base}")
    return 0 if not result["failed_seeds"] else 1


if __name__ == "__main__":
    sys.exit(main())
