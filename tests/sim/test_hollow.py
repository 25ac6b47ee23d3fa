"""The hollow command's simulation flags: run-time distributions from the runtime's seed, start-up delay."""

from __future__ import annotations

import argparse
import asyncio
import random
from pathlib import Path

import pytest

from kubelite.agent.runtime.hollow import HollowRuntime, _command, _parser, _plain
from kubelite.sim.clock import VirtualClock, VirtualTimeLoop

RNG_EXP = random.Random(5).expovariate(1 / 60)
RNG_UNI = random.Random(5).uniform(10, 20)

CASES = [
    pytest.param(["--run", "30"], 30.0, id="fixed run time"),
    pytest.param(["--run", "exp:60"], RNG_EXP, id="exponential: drawn from the runtime's seeded source"),
    pytest.param(["--run", "uniform:10:20"], RNG_UNI, id="uniform: drawn from the runtime's seeded source"),
    pytest.param(["--run", "30", "--start-after", "4"], 34.0, id="start-up delay before the run"),
]


@pytest.mark.parametrize("flags,ends_at", CASES)
def test_hollow_run_time(tmp_path: Path, flags: list[str], ends_at: float) -> None:
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)
    runtime = HollowRuntime(clock, random.Random(5))

    async def run() -> int:
        p = await runtime.start(["hollow", *flags], {}, None, tmp_path / "c" / "0.log")
        return (await runtime.wait(p)).code

    try:
        assert loop.run_until_complete(run()) == 0
    finally:
        loop.close()
    assert clock.monotonic() == pytest.approx(ends_at, abs=1e-6)


def test_bad_run_spec_is_refused(tmp_path: Path) -> None:
    runtime = HollowRuntime(VirtualClock(VirtualTimeLoop()))
    with pytest.raises(OSError, match="not SECONDS, exp:MEAN or uniform:LOW:HIGH"):  # a failed start, not an exit
        asyncio.new_event_loop().run_until_complete(
            runtime.start(["hollow", "--run", "gamma:3"], {}, None, tmp_path / "c" / "0.log"))


PROBE_CASES = [
    pytest.param([], "Liveness", 0.0, True, id="no flag: the probe succeeds"),
    pytest.param(["--probe", "startup=40"], "Startup", 39.0, False, id="startup before succeedAfter fails"),
    pytest.param(["--probe", "startup=40"], "Startup", 40.0, True, id="startup from succeedAfter succeeds"),
    pytest.param(["--probe", "liveness=0:120"], "Liveness", 119.0, True, id="liveness before failAfter succeeds"),
    pytest.param(["--probe", "liveness=0:120"], "Liveness", 120.0, False, id="liveness from failAfter fails"),
    pytest.param(["--probe", "liveness=0:120"], "Readiness", 500.0, True, id="another kind's window does not apply"),
]


@pytest.mark.parametrize("flags,kind,at,ok", PROBE_CASES)
def test_hollow_probe_answers(tmp_path: Path, flags: list[str], kind: str, at: float, ok: bool) -> None:
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)
    runtime = HollowRuntime(clock)

    async def probe() -> bool:
        p = await runtime.start(["hollow", *flags], {}, None, tmp_path / "c" / "0.log")
        await clock.sleep(at)
        return (await runtime.answer_probe(p, kind, {}))[0]

    try:
        assert loop.run_until_complete(probe()) is ok
    finally:
        loop.close()


def test_bad_probe_spec_is_refused(tmp_path: Path) -> None:
    runtime = HollowRuntime(VirtualClock(VirtualTimeLoop()))
    with pytest.raises(OSError, match="KIND=SUCCEED_AFTER"):
        asyncio.new_event_loop().run_until_complete(
            runtime.start(["hollow", "--probe", "health=3"], {}, None, tmp_path / "c" / "0.log"))


def test_one_command_line_started_again_keeps_per_run_behaviour(tmp_path: Path) -> None:
    """A command line is parsed once for all its starts; each start still draws its own run time and takes
    the exit code of its own run of its own container (the attempt its log is named after, as kubelet names it)."""
    loop = VirtualTimeLoop()
    runtime = HollowRuntime(VirtualClock(loop), random.Random(5))
    argv = ["hollow", "--run", "exp:60", "--exits", "3,0"]

    async def run(container: str, attempt: int) -> tuple[float | None, int]:
        p = await runtime.start(list(argv), {}, None, tmp_path / container / f"{attempt}.log")
        return p.run_for, (await runtime.wait(p)).code

    try:
        results = [loop.run_until_complete(run(c, n)) for c, n in (("a", 0), ("a", 1), ("b", 0), ("a", 2))]
    finally:
        loop.close()
    draws = random.Random(5)
    assert results == [(draws.expovariate(1 / 60), 3), (draws.expovariate(1 / 60), 0),
                       (draws.expovariate(1 / 60), 3), (draws.expovariate(1 / 60), 0)]


PARSE_CASES = [  # (argv, whether the plain reading takes it): argparse's answer is the spec either way
    pytest.param(["--run", "1234.567", "--exits", "0"], True, id="a simulated pod's drawn run time"),
    pytest.param(["--run", "exp:60", "--exits", "3,0", "--start-after", "4", "--term-after", "2.5"], True,
                 id="every valued flag"),
    pytest.param(["--exits", "1", "--ignore-term", "--probe", "startup=40", "--probe", "liveness=0:120"], True,
                 id="a switch and accumulated probes"),
    pytest.param(["--run", "30", "--run", "uniform:10:20", "--exit", "2", "--exit", "5"], True,
                 id="a repeated flag: the last value wins"),
    pytest.param(["--exits", ""], True, id="an empty value"),
    pytest.param([], True, id="no flags: the defaults"),
    pytest.param(["--run", "1e3", "--exit", " 7"], True, id="values as float() and int() read them"),
    pytest.param(["--run=30"], False, id="flag=value: left to argparse"),
    pytest.param(["--ru", "30", "--ignore"], False, id="abbreviations: left to argparse"),
    pytest.param(["--exit", "-1"], False, id="a negative number: left to argparse"),
    pytest.param(["--term-after", "-2.5", "--run", "3"], False, id="a negative float: left to argparse"),
]


@pytest.mark.parametrize("argv,plain", PARSE_CASES)
def test_plain_command_lines_parse_as_argparse_does(argv: list[str], plain: bool) -> None:
    expected = vars(_parser().parse_args(argv))
    got = _plain(tuple(argv))
    assert (got is not None) == plain
    if got is not None:
        assert got == expected
    _command.cache_clear()
    parsed = _command(tuple(argv))
    assert (parsed.run, parsed.start_after, parsed.ignore_term, parsed.term_after, list(parsed.probes)) == \
        (expected["run"], expected["start_after"], expected["ignore_term"], expected["term_after"], expected["probe"])


BAD_CASES = [
    pytest.param(["--run", "gamma:3"], "not SECONDS", id="bad run spec"),
    pytest.param(["--start-after", "soon"], "invalid float value", id="bad float"),
    pytest.param(["--probe", "health=3"], "KIND=SUCCEED_AFTER", id="bad probe"),
    pytest.param(["--run"], "expected one argument", id="a flag without its value"),
    pytest.param(["--run", "--exits", "0"], "expected one argument", id="a flag where the value should be"),
]


@pytest.mark.parametrize("argv,message", BAD_CASES)
def test_bad_command_lines_are_refused_by_argparse(argv: list[str], message: str) -> None:
    assert _plain(tuple(argv)) is None
    _command.cache_clear()
    with pytest.raises(argparse.ArgumentError, match=message):
        _command(tuple(argv))
