"""`kubelite sim run` and `kubelite sim compare`: argument handling, the progress bar, exit codes."""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the command line builds this parser on every start: the simulator loads only when run
    from kubelite.sim import runner, scenario

DEFAULT = "default"  # --config default: the default profile (no file)
CONFIG_HELP = f"KubeSchedulerConfiguration file, or '{DEFAULT}' for the default profile"


class _Parser(argparse.ArgumentParser):
    """A value that starts with a minus and a digit (`step -5s`, `--seed -1`) is a value, not an unknown option:
    it reaches the command's own check and its clear error, not argparse's top-level usage."""

    def _parse_optional(self, arg_string: str) -> Any:  # argparse's own hook: its return type differs by version
        if re.match(r"-[0-9.]", arg_string):
            return None
        return super()._parse_optional(arg_string)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = sub.add_parser("sim", help="simulate a cluster: the real control plane on hollow nodes, on virtual time")
    verbs = sim.add_subparsers(dest="sim_command", required=True, parser_class=_Parser)
    run = verbs.add_parser("run", help="run a scenario; write events.log, metrics.json and report.html")
    compare = verbs.add_parser("compare", help="run a scenario under several scheduler configs on one seed")
    serve = verbs.add_parser("serve", help="run a scenario behind the HTTP API (kubectl works) at N x real time")
    serve.add_argument("--port", type=int, default=6443, help="the HTTP API's port on 127.0.0.1 (default: %(default)s)")
    serve.add_argument("--speed", type=float, default=1.0,
                       help="simulated seconds per real second (default: %(default)s)")
    serve.add_argument("--paused", action="store_true",
                       help="start with simulated time standing still (then: kubelite sim control resume|step)")
    ctl = verbs.add_parser("control", help="pause, resume, step or change the speed of a served simulation")
    ctl.add_argument("action", choices=("status", "pause", "resume", "speed", "step"))
    ctl.add_argument("value", nargs="?", help="speed: simulated seconds per real second; step: a duration (30s, 5m)")
    ctl.add_argument("--server", default="http://127.0.0.1:6443",
                     help="the served simulation's URL (default: %(default)s)")
    ctl.add_argument("-v", "--verbose", action="store_true", help=argparse.SUPPRESS)
    imp = verbs.add_parser("import", help="a scenario from a `kubectl get pods,nodes -A -o json` snapshot or an "
                                          "audit log (JSON lines)")
    imp.add_argument("source", type=Path)
    imp.add_argument("--out", type=Path, required=True, help="the scenario file to write")
    imp.add_argument("-v", "--verbose", action="store_true", help=argparse.SUPPRESS)
    for p in (run, compare, serve):
        p.add_argument("scenario", type=Path)
        p.add_argument("--seed", type=int, default=0, help="everything random follows it (default: %(default)s)")
        p.add_argument("--out", type=Path, default=Path("sim-out"),
                       help="the report's directory (default: %(default)s)")
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        p.add_argument("-v", "--verbose", action="store_true", help="log the components' warnings")
    for p in (run, serve):
        p.add_argument("--config", default=None,
                       help=f"{CONFIG_HELP} (default: the scenario's schedulerConfig; of a list, the first)")
    compare.add_argument("--config", action="append", default=None,
                         help=f"{CONFIG_HELP}; repeat (default: the scenario's schedulerConfig list)")


def _run_one(scn: scenario.Scenario, seed: int, config: Path | None, show: bool) -> runner.Outcome:
    from kubelite.sim import runner

    with runner.node_dirs() as work:
        if not show:
            return runner.run(scn, seed, config, work)
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(f"{scn.name} ({config.name if config else 'default'})", total=scn.duration)
            return runner.run(scn, seed, config, work, lambda done, total: bar.update(task, completed=done))


def _config(given: str | None, scn: scenario.Scenario) -> Path | None:
    """`sim run`/`serve`'s scheduler config: --config (a file, checked now, or 'default'), else the scenario's.
    Of a scenario's list of several (for `compare`), the first is run and a notice says so: a run is one
    cluster with one scheduler (a refusal would make every A/B scenario unrunnable on its own)."""
    from kubelite.sim import checks

    if given is not None:
        if given == DEFAULT:
            return None
        checks.scheduler_config(Path(given))
        return Path(given)
    configs = scn.scheduler_configs
    if len(configs) > 1:
        print(f"kubelite sim: {scn.file} lists {len(configs)} scheduler configs; this run uses the first, "
              f"{configs[0]} (`kubelite sim compare` runs each; --config picks one)", file=sys.stderr)
    return configs[0] if configs else None


def _configs(given: list[str] | None, scn: scenario.Scenario) -> list[Path | None]:
    """`sim compare`'s configs: each --config (a file, checked now, or 'default'), else the scenario's list."""
    from kubelite.sim import checks
    from kubelite.sim.scenario import ScenarioError

    if not given:
        if not scn.scheduler_configs:
            raise ScenarioError(f"{scn.file}: no schedulerConfig to compare: give --config A --config B "
                                f"('{DEFAULT}': the default profile)")
        return list(scn.scheduler_configs)
    for c in given:
        if c != DEFAULT:
            checks.scheduler_config(Path(c))
    return [None if c == DEFAULT else Path(c) for c in given]


def _control_value(action: str, value: str | None) -> None:
    """`sim control speed|step VALUE` checked before it is sent: a clear error without a round trip."""
    if action not in ("speed", "step"):
        return
    from kubelite.agent.config import NodeConfigError, duration

    try:
        if value is None:
            raise ValueError
        number = float(value) if action == "speed" or re.fullmatch(r"-?[0-9.]+", value) else duration(value)
    except (ValueError, NodeConfigError):
        number = math.nan
    if not (number > 0 if action == "speed" else number >= 0) or not math.isfinite(number):  # control.py's words
        want = "value must be a positive number" if action == "speed" else \
            "duration must be seconds or a duration such as 30s, 5m, 1h"
        raise ValueError(f"{action}: {want}, not {value!r}")


def _failed(ms: list[dict[str, Any]]) -> int:
    """Exit status 1 when a scenario action failed (the API refused it; each was said on stderr as it happened and
    is in events.log and the report): the run went on and its report is written, but it is not the scenario asked."""
    failed = sum(len(m.get("failedActions") or []) for m in ms)
    if failed:
        print(f"kubelite sim: {failed} scenario action{'s' if failed > 1 else ''} failed (see events.log, "
              f"\"action\": \"failed\")", file=sys.stderr)
    return 1 if failed else 0


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
            scenario.load(args.out)  # what the source holds that a run could not do is said now, at its line
            return 0
        if args.sim_command == "control":
            import json

            from kubelite.sim import control

            try:
                _control_value(args.action, args.value)
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

            config = _config(args.config, scn)
            args.out.mkdir(parents=True, exist_ok=True)
            with runner.node_dirs() as work:
                try:
                    out = runner.run(scn, args.seed, config, work,
                                     serve=runner.Serve(args.port, args.speed, args.out / "kubeconfig",
                                                        paused=args.paused))
                except runner.Interrupted as exc:
                    print(f"kubelite sim: {exc}", file=sys.stderr)
                    return 0
            m = report.write(out, args.out)
            print(f"report: {args.out / 'report.html'}")
            return _failed([m])
        if args.sim_command == "run":
            config = _config(args.config, scn)
            m = report.write(_run_one(scn, args.seed, config, show), args.out)
            print(f"{m['pods']} pods, {m['neverScheduled']} never scheduled, pending p90 "
                  f"{m['pendingSeconds']['p90']} s; report: {args.out / 'report.html'}")
            return _failed([m])
        configs = _configs(args.config, scn)
        outs = [_run_one(scn, args.seed, c, show) for c in configs]
        ms = report.write_comparison(outs, args.out)
        for line in report.differences(ms):
            print(line)
        print(f"report: {args.out / 'report.html'}")
        return _failed(ms)
    except (ScenarioError, ConfigError) as exc:
        print(f"kubelite sim: {exc}", file=sys.stderr)
        return 2
