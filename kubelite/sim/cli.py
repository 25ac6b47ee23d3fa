"""`kubelite sim run` and `kubelite sim compare`: argument handling, the progress bar, exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line builds this parser on every start: the simulator loads only when run
    from kubelite.sim import runner, scenario


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = sub.add_parser("sim", help="simulate a cluster: the real control plane on hollow nodes, on virtual time")
    verbs = sim.add_subparsers(dest="sim_command", required=True)
    run = verbs.add_parser("run", help="run a scenario; write events.log, metrics.json and report.html")
    compare = verbs.add_parser("compare", help="run a scenario under several scheduler configs on one seed")
    serve = verbs.add_parser("serve", help="run a scenario behind the HTTP API (kubectl works) at N x real time")
    serve.add_argument("--port", type=int, default=6443)
    serve.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second")
    serve.add_argument("--paused", action="store_true",
                       help="start with simulated time standing still (then: kubelite sim control resume|step)")
    serve.add_argument("--config", type=Path, default=None, help="KubeSchedulerConfiguration")
    ctl = verbs.add_parser("control", help="pause, resume, step or change the speed of a served simulation")
    ctl.add_argument("action", choices=("status", "pause", "resume", "speed", "step"))
    ctl.add_argument("value", nargs="?", help="speed: simulated seconds per real second; step: a duration (30s, 5m)")
    ctl.add_argument("--server", default="http://127.0.0.1:6443", help="the served simulation's URL")
    ctl.add_argument("-v", "--verbose", action="store_true", help=argparse.SUPPRESS)
    imp = verbs.add_parser("import", help="a scenario from a `kubectl get pods,nodes -A -o json` snapshot or an "
                                          "audit log (JSON lines)")
    imp.add_argument("source", type=Path)
    imp.add_argument("--out", type=Path, required=True, help="the scenario file to write")
    imp.add_argument("-v", "--verbose", action="store_true", help=argparse.SUPPRESS)
    for p in (run, compare, serve):
        p.add_argument("scenario", type=Path)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--out", type=Path, default=Path("sim-out"))
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        p.add_argument("-v", "--verbose", action="store_true", help="log the components' warnings")
    run.add_argument("--config", type=Path, default=None, help="KubeSchedulerConfiguration (default: the scenario's)")
    compare.add_argument("--config", type=Path, action="append", required=True,
                         help="KubeSchedulerConfiguration file (repeat; 'default' for the default profile)")


def _run_one(scn: scenario.Scenario, seed: int, config: Path | None, show: bool) -> runner.Outcome:
    from kubelite.sim import runner

    with runner.node_dirs() as work:
        if not show:
            return runner.run(scn, seed, config, work)
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(f"{scn.name} ({config.name if config else 'default'})", total=scn.duration)
            return runner.run(scn, seed, config, work, lambda done, total: bar.update(task, completed=done))


def main(args: argparse.Namespace) -> int:
    from kubelite.scheduler.config import ConfigError
    from kubelite.sim import report, scenario
    from kubelite.sim.scenario import ScenarioError

    # A simulated cluster's components log as real ones do (conflicts, retries): quiet unless asked.
    logging.getLogger("kubelite").setLevel(logging.WARNING if args.verbose else logging.CRITICAL)
    try:
        if args.sim_command == "import":
            import yaml

            from kubelite.sim import importer

            args.out.write_text(yaml.safe_dump(importer.load(args.source), sort_keys=False))
            print(f"scenario: {args.out}")
            return 0
        if args.sim_command == "control":
            import json

            from kubelite.sim import control

            try:
                print(json.dumps(control.call(args.server, args.action, args.value)))
            except (ValueError, OSError) as exc:
                print(f"kubelite sim control: {exc}", file=sys.stderr)
                return 1
            return 0
        scn = scenario.load(args.scenario, args.seed)
        show = not args.no_progress and sys.stderr.isatty()
        if args.sim_command == "serve":
            if args.speed <= 0:
                raise ScenarioError("--speed: must be positive")
            from kubelite.sim import runner

            args.out.mkdir(parents=True, exist_ok=True)
            config = args.config or (scn.scheduler_configs[0] if scn.scheduler_configs else None)
            with runner.node_dirs() as work:
                try:
                    out = runner.run(scn, args.seed, config, work,
                                     serve=runner.Serve(args.port, args.speed, args.out / "kubeconfig",
                                                        paused=args.paused))
                except runner.Interrupted as exc:
                    print(f"kubelite sim: {exc}", file=sys.stderr)
                    return 0
            report.write(out, args.out)
            return 0
        if args.sim_command == "run":
            config = args.config or (scn.scheduler_configs[0] if scn.scheduler_configs else None)
            m = report.write(_run_one(scn, args.seed, config, show), args.out)
            print(f"{m['pods']} pods, {m['neverScheduled']} never scheduled, pending p90 "
                  f"{m['pendingSeconds']['p90']} s; report: {args.out / 'report.html'}")
            return 0
        configs = [None if str(c) == "default" else c for c in args.config]
        outs = [_run_one(scn, args.seed, c, show) for c in configs]
        for line in report.differences(report.write_comparison(outs, args.out)):
            print(line)
        print(f"report: {args.out / 'report.html'}")
        return 0
    except (ScenarioError, ConfigError) as exc:
        print(f"kubelite sim: {exc}", file=sys.stderr)
        return 2
