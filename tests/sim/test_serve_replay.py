"""`kubelite sim serve` runs the very simulation `kubelite sim run` does: served through the scenario's whole
duration — in one step, in steps and pauses at varying speeds, or at N x real time — with no writes from
outside, its report is `sim run`'s, byte for byte (ControlledLoop is VirtualTimeLoop, paced; clock.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kubelite.sim import control, report, runner, scenario

SCENARIO = Path("examples/sim/faults.yaml")  # node lost, agent restart, drain held by a PDB: 12 KB of events
SEED = 3
# Past the scenario's end (30 s of settling, then its 20 minutes): the served cluster has run on a while.
END = runner.SETTLE + scenario.load(SCENARIO, SEED).duration + 70


def _one_step(server: str, kubeconfig: Path) -> None:
    control.call(server, "step", f"{END}s")


def _steps_pauses_and_speeds(server: str, kubeconfig: Path) -> None:
    """Steps of odd sizes, reads of the state between them, a stretch at 200x, paused and stepped again."""
    for size in ("0.5s", "29s", "1m", "7s"):
        control.call(server, "step", size)
        control.call(server, "status")
    control.call(server, "speed", "200")
    control.call(server, "resume")
    time.sleep(0.5)
    paused = control.call(server, "pause")
    control.call(server, "step", f"{END - paused['time']}s")


def _read_by_kubectl(server: str, kubeconfig: Path) -> None:
    """What a user inspecting the simulation does — a watch of every pod open throughout, gets and describes
    between steps — reads only: the run is the same."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    watch = subprocess.Popen(["kubectl", "get", "pods", "-A", "-w", "-o", "name"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for size in ("100s", "3m", "5m"):
            control.call(server, "step", size)
            for cmd in (["get", "pods", "-A", "-o", "wide"], ["describe", "nodes"]):
                subprocess.run(["kubectl", *cmd], env=env, check=True, capture_output=True)
        control.call(server, "step", f"{END - control.call(server, 'status')['time']}s")
    finally:
        watch.terminate()
        out, _ = watch.communicate(timeout=30)
    assert "pod/web-" in out  # the watch heard the Deployment's pods


def _at_speed(server: str, kubeconfig: Path) -> None:
    """Started at 3000x (not paused): it runs on its own, behind or ahead of its pace as the work goes."""
    deadline = time.monotonic() + 120
    while control.call(server, "status")["time"] < END:
        assert time.monotonic() < deadline, "the served simulation did not reach the scenario's end"
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scenario as `kubelite sim run --seed SEED --out DIR` writes it."""
    out = tmp_path_factory.mktemp("run")
    scn = scenario.load(SCENARIO, SEED)
    with runner.node_dirs() as work:
        outcome = runner.run(scn, SEED, scn.scheduler_configs[0] if scn.scheduler_configs else None, work)
    report.write(outcome, out)
    return out


@pytest.mark.parametrize("flags,drive", [
    pytest.param(["--paused"], _one_step, id="paused, then one step through the scenario"),
    pytest.param(["--paused"], _steps_pauses_and_speeds, id="steps, pauses and a stretch at 200x"),
    pytest.param(["--paused"], _read_by_kubectl, id="stepped, watched and read by kubectl"),
    pytest.param(["--speed", "3000"], _at_speed, id="at 3000x real time"),
])
def test_served_simulation_writes_the_report_sim_run_writes(tmp_path: Path, ran: Path, flags: list[str],
                                                             drive: Callable[[str, Path], None]) -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "sim", "serve", str(SCENARIO),
                             "--seed", str(SEED), "--port", str(port), "--out", str(tmp_path), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "kubeconfig").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the served simulation did not start"
            time.sleep(0.1)
        drive(f"http://127.0.0.1:{port}", tmp_path / "kubeconfig")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stdout.read() if proc.stdout else ""
    written = sorted(p.name for p in ran.iterdir())
    assert "events.log" in written and "metrics.json" in written
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "kubeconfig") == written
    for name in ["events.log", "metrics.json", *written]:  # the run's fingerprint first, then every plot
        assert (tmp_path / name).read_bytes() == (ran / name).read_bytes(), name
