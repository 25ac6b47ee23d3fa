"""The hollow runtime: containers that only pretend to run, on the injected clock.

For the simulator and for testing the pod worker's state machine on a fake clock. A
hollow container's command says what it does: `hollow [--run SECONDS] [--exit CODE]
[--exits CODE,CODE,…] [--start-after SECONDS] [--ignore-term] [--term-after SECONDS]` — take a while to
start (as a slow image pull or container creation would), run for a while (forever without --run; `--run`
also takes a distribution, `exp:MEAN` or `uniform:LOW:HIGH`, drawn per run from the runtime's seeded
random source so a simulation is reproducible), exit with a code (with --exits, the n-th run of the
container exits with the n-th code, the last one repeating), and on the stop signal either exit at once
(code 143), after a delay, or not at all (then only SIGKILL ends it, code 137).

Probes: a hollow container has no process to exec nor port to connect to, so the runtime answers its
probes itself (`answer_probe`, the prober's seam; upstream's exec probes go through the runtime too):
`--probe KIND=SUCCEED_AFTER[:FAIL_AFTER]` (KIND startup, liveness or readiness; seconds since this run
started) makes that probe succeed only in [SUCCEED_AFTER, FAIL_AFTER). A probe without a flag succeeds.

Agent restarts: hollow containers outlive the agent that started them, as real ones do (containerd's shims,
the process runtime's). The runtime keeps its running containers by pid, and records each exit as the process
runtime's shim does, in a file beside the log the container would write (`<attempt>.exit`: code and time), so
a restarted agent adopts from its checkpoint the same live container — or learns how one that ended while no
agent watched exited, and when. The record goes with the pod's directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import math
import os
import random
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelite.agent.cgroups import Limits
from kubelite.agent.runtime.interface import KILLED, Exit, Handle
from kubelite.clock import Clock


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """Built once: building it was most of a hollow container's start (parsing with it does not change it)."""
    p = argparse.ArgumentParser(prog="hollow", add_help=False, exit_on_error=False)
    p.add_argument("--run", type=_run_spec, default=None)
    p.add_argument("--start-after", type=float, default=0.0)
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--exits", default="")
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--term-after", type=float, default=0.0)
    p.add_argument("--probe", type=_probe_spec, action="append", default=[])
    return p


PROBE_KINDS = ("startup", "liveness", "readiness")


@dataclass(frozen=True)
class _Command:
    """A parsed `hollow` command line (shared by every start of it: never modified)."""

    run: tuple[str, float, float] | None
    start_after: float
    codes: tuple[int, ...]  # the n-th run exits with the n-th, the last repeating
    ignore_term: bool
    term_after: float
    probes: tuple[tuple[str, float, float], ...]


@functools.lru_cache(maxsize=1024)
def _command(argv: tuple[str, ...]) -> _Command:
    """Parse once per distinct command line (a Deployment's replicas, a container's restarts share theirs;
    a scenario that draws each pod's run time gives each its own). ArgumentError when it is bad."""
    args = _plain(argv)
    if args is None:
        args = vars(_parser().parse_args(argv))
    return _Command(args["run"], args["start_after"],
                    tuple(int(c) for c in args["exits"].split(",") if c) or (args["exit"],),
                    args["ignore_term"], args["term_after"], tuple(args["probe"]))


def _probe_spec(text: str) -> tuple[str, float, float]:
    """`KIND=SUCCEED_AFTER[:FAIL_AFTER]`: when, in seconds since the run started, the probe succeeds."""
    kind, _, window = text.partition("=")
    begin, _, end = window.partition(":")
    try:
        if kind not in PROBE_KINDS:
            raise ValueError(kind)
        return kind, float(begin or 0), float(end) if end else math.inf
    except ValueError:
        raise argparse.ArgumentTypeError(f"--probe: {text!r} is not KIND=SUCCEED_AFTER[:FAIL_AFTER] with KIND one "
                                         f"of {', '.join(PROBE_KINDS)}") from None


def _run_spec(text: str) -> tuple[str, float, float]:
    """`SECONDS`, `exp:MEAN` or `uniform:LOW:HIGH`: how long each run of the container lasts."""
    kind, _, rest = text.partition(":")
    if not rest:
        return "fixed", float(text), 0.0
    values = [float(v) for v in rest.split(":")]
    if kind == "exp" and len(values) == 1:
        return "exp", values[0], 0.0
    if kind == "uniform" and len(values) == 2:
        return "uniform", values[0], values[1]
    raise argparse.ArgumentTypeError(f"--run: {text!r} is not SECONDS, exp:MEAN or uniform:LOW:HIGH")


_VALUED: dict[str, tuple[str, Callable[[str], Any]]] = {  # each flag that takes a value: where it goes, its type
    "--run": ("run", _run_spec), "--start-after": ("start_after", float), "--exit": ("exit", int),
    "--exits": ("exits", str), "--term-after": ("term_after", float), "--probe": ("probe", _probe_spec),
}


@functools.cache
def _defaults() -> dict[str, Any]:
    """The parser's defaults: what it makes of an empty command line."""
    return vars(_parser().parse_args([]))


def _plain(argv: tuple[str, ...]) -> dict[str, Any] | None:
    """What `_parser()` makes of a command line written out plainly — each flag whole, each value its own word
    and not starting with "-" — else None (then argparse parses it: abbreviations, `--flag=value`, values like
    "-1", errors). A simulation's command lines are all plain, and with a run time drawn per pod each is new:
    argparse's parse was ≈ 1 % of a simulated pod's CPU. Same defaults and types; a repeated flag's last value
    wins, --probe's accumulate. `tests/sim/test_hollow.py` holds this to argparse's answers."""
    args = dict(_defaults())  # its lists are replaced, never appended to: the defaults stay as they are
    words = iter(argv)
    for flag in words:
        if flag == "--ignore-term":
            args["ignore_term"] = True
            continue
        valued = _VALUED.get(flag)
        value = next(words, None)
        if valued is None or value is None or value.startswith("-"):
            return None
        dest, convert = valued
        try:
            converted = convert(value)
        except (ValueError, argparse.ArgumentTypeError):
            return None  # argparse reports it
        if dest == "probe":
            args["probe"] = [*args["probe"], converted]
        else:
            args[dest] = converted
    return args


def attempt(log_path: Path) -> int:
    """Which run of its container an instance is (0 for the first): the attempt kubelet gives CRI's
    CreateContainer (ContainerMetadata.Attempt, the restart count), which names its log, `<name>/<attempt>.log`.
    Read from the log path rather than counted here: a count per container would be kept for every container
    this runtime ever started (kubelet tells the runtime nothing when a pod is gone) — on a simulated node
    whose pods come and go, one entry per pod for the whole run. A log not so named counts as the first run."""
    return int(log_path.stem) if log_path.stem.isdigit() else 0


@dataclass
class HollowProcess(Handle):
    run_for: float | None = None
    code: int = 0
    ignore_term: bool = False
    term_after: float = 0.0
    probes: dict[str, tuple[float, float]] = field(default_factory=dict)  # kind -> when it succeeds (since start)
    signals: list[int] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    state: str = ""  # its log path without ".log": `<state>.exit` records its exit

    def checkpoint(self) -> dict[str, Any]:
        return {**super().checkpoint(), "state": self.state}


class HollowRuntime:
    sandboxed = False  # nothing runs

    def __init__(self, clock: Clock, rng: random.Random | None = None) -> None:
        self.clock = clock
        self.rng = rng or random.Random(0)
        self._pids = itertools.count(100_000)  # per runtime: two simulations in one process number alike
        self._running: dict[int, HollowProcess] = {}  # by pid: the containers a restarted agent adopts

    async def start(self, argv: list[str], env: dict[str, str], cwd: str | None, log_path: Path,
                    limits: Limits | None = None, stdin: bool = False, tty: bool = False) -> HollowProcess:
        if not argv or argv[0] != "hollow":
            raise OSError(f"the hollow runtime runs only `hollow` commands, not {argv[:1]}")
        try:
            args = _command(tuple(argv[1:]))
        except argparse.ArgumentError as exc:  # a failed start, as an exec of a bad command line would be
            raise OSError(f"hollow: {exc}") from None
        code = args.codes[min(attempt(log_path), len(args.codes) - 1)]
        if args.start_after > 0:
            await self.clock.sleep(args.start_after)
        p = HollowProcess(next(self._pids), self.clock.now(), self._duration(args.run), code, args.ignore_term,
                          args.term_after, {kind: (begin, end) for kind, begin, end in args.probes},
                          state=str(log_path.with_suffix("")))
        p.env = env
        self._running[p.pid] = p
        if p.run_for is not None:
            p.task = asyncio.ensure_future(self._run(p, p.run_for, Exit(p.code)))
        return p

    async def answer_probe(self, p: Handle, kind: str, spec: dict[str, Any]) -> tuple[bool, str]:
        """The probe `kind` (Startup, Liveness, Readiness) of container `p`, as its --probe flags say."""
        assert isinstance(p, HollowProcess), "a hollow runtime answers only its own containers' probes"
        begin, end = p.probes.get(kind.lower(), (0.0, math.inf))
        since = self.clock.now() - p.started
        if begin <= since < end:
            return True, ""
        return False, f"hollow {kind.lower()} probe fails {since:.0f} s after start (succeeds from {begin:g} s" + \
            (f" until {end:g} s)" if end < math.inf else ")")

    def _duration(self, spec: tuple[str, float, float] | None) -> float | None:
        if spec is None:
            return None
        kind, a, b = spec
        if kind == "exp":
            return self.rng.expovariate(1.0 / a) if a > 0 else 0.0
        return self.rng.uniform(a, b) if kind == "uniform" else a

    async def _run(self, p: HollowProcess, seconds: float, result: Exit) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self.clock.sleep(seconds)
            self._end(p, result)

    def _end(self, p: HollowProcess, result: Exit) -> None:
        """The container exits: its record is written (see the module doc) and the runtime forgets it."""
        if not p.alive:
            return
        p.finish(result)
        del self._running[p.pid]
        if p.state:
            _record_exit(p.state, result.code, self.clock.now())

    def signal(self, p: Handle, sig: int) -> None:
        assert isinstance(p, HollowProcess), "a hollow runtime signals only its own processes"
        p.signals.append(sig)
        if sig == signal.SIGKILL:
            self._end(p, KILLED)
        elif not p.ignore_term and p.alive:
            if p.task is not None:
                p.task.cancel()
            p.task = asyncio.ensure_future(self._run(p, p.term_after, Exit(128 + sig)))

    def adopt(self, checkpoint: dict[str, Any]) -> HollowProcess:
        """The container a previous agent started: still running (the same one: pid and start time name it, as
        pid and kernel start time name a real one), or ended, with its recorded exit (none: it was killed)."""
        p = self._running.get(int(checkpoint["pid"]))
        if p is not None and p.started == float(checkpoint["started"]):
            return p
        p = HollowProcess(int(checkpoint["pid"]), float(checkpoint["started"]), state=str(checkpoint.get("state", "")))
        p.finish(_recorded_exit(p.state))
        return p

    def find(self, log_path: Path) -> HollowProcess | None:
        """None: a hollow start leaves nothing behind for a stopped agent to find — the container exists only once
        `start` returns, and the agent records it in that same step; an agent stopped during the start-up delay
        cancelled the start itself."""
        return None

    def kill(self, p: Handle) -> None:
        self.signal(p, signal.SIGKILL)

    async def wait(self, p: Handle) -> Exit:
        await p.done.wait()
        assert p.result is not None
        return p.result


def _record_exit(state: str, code: int, at: float) -> None:
    """`<state>.exit`: the code and the (virtual) time of an exit. The container's directory is made with its
    first record (a hollow container writes no log); a record that cannot be written reads as killed."""
    record = f"{state}.exit"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    with contextlib.suppress(OSError):
        try:
            fd = os.open(record, flags, 0o666)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(record), exist_ok=True)
            fd = os.open(record, flags, 0o666)
        try:
            os.write(fd, f"{code} {at!r}".encode())  # a few bytes: a regular file takes them whole
        finally:
            os.close(fd)


def _recorded_exit(state: str) -> Exit:
    """The exit `_record_exit` recorded for `state`; none (or unreadable): the container was SIGKILLed."""
    try:
        with open(f"{state}.exit") as f:
            code, at = f.read().split()
        return Exit(int(code), finished_at=float(at))
    except (OSError, ValueError):
        return KILLED
