"""`kubelite sim serve`: a simulated cluster that kubectl talks to over HTTP, at N x real time."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kubelite.sim import control, importer, scenario
from kubelite.sim.recorder import ZONE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_kubectl_sees_the_simulated_cluster(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "sim", "serve", "examples/sim/spread.yaml",
                             "--port", str(port), "--speed", "60", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}
        deadline = time.monotonic() + 60
        pods: list[dict[str, object]] = []
        while time.monotonic() < deadline:  # mypod arrives at 1 simulated minute: about 1 s of real time
            if (tmp_path / "kubeconfig").exists():
                out = subprocess.run(["kubectl", "get", "pods", "-o", "json"], env=env, capture_output=True, text=True)
                if out.returncode == 0:
                    pods = json.loads(out.stdout)["items"]
                    if any(p["metadata"]["name"] == "mypod" and p["spec"].get("nodeName") for p in pods):
                        break
            time.sleep(0.5)
        placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        assert placed.get("mypod") in ("node3-0", "node4-0"), placed
        nodes = subprocess.run(["kubectl", "get", "nodes", "--no-headers"], env=env, capture_output=True, text=True)
        assert nodes.stdout.count(" Ready") == 4
        snapshot = tmp_path / "snapshot.json"
        snapshot.write_text(subprocess.run(["kubectl", "get", "pods,nodes", "-A", "-o", "json"], env=env, check=True,
                                           capture_output=True, text=True).stdout)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stdout.read() if proc.stdout else ""
    assert (tmp_path / "metrics.json").exists()
    # The snapshot of the simulated cluster imports as a scenario: two pools (one per zone), its four pods.
    imported = tmp_path / "imported.yaml"
    imported.write_text(yaml.safe_dump(importer.load(snapshot)))
    scn = scenario.load(imported)
    assert sorted((p.count, p.labels[ZONE]) for p in scn.pools) == [(2, "zoneA"), (2, "zoneB")]
    assert sorted(w.name for w in scn.workloads) == ["existing-1", "existing-2", "existing-3", "mypod"]


def _serve_paused(out: Path) -> tuple[subprocess.Popen[str], str]:
    """`sim serve spread.yaml --paused`, once it listens (its kubeconfig written): the process, its URL."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "sim", "serve", "examples/sim/spread.yaml",
                             "--port", str(port), "--paused", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not (out / "kubeconfig").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    return proc, f"http://127.0.0.1:{port}"


def test_served_simulation_starts_paused_steps_and_changes_speed(tmp_path: Path) -> None:
    proc, server = _serve_paused(tmp_path)
    try:
        assert control.call(server, "status")["time"] == 0.0
        time.sleep(1)
        assert control.call(server, "status")["time"] == 0.0  # paused: time stands still
        # mypod arrives 1 simulated minute after the 30 s settle: a 90 s step ends with it placed, paused again.
        stepped = control.call(server, "step", "90s")
        assert stepped["paused"] and stepped["time"] >= 90
        env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}
        out = subprocess.run(["kubectl", "get", "pod", "mypod", "-o", "json"], env=env, capture_output=True, text=True)
        assert json.loads(out.stdout)["spec"]["nodeName"] in ("node3-0", "node4-0")
        control.call(server, "speed", "50")
        resumed = control.call(server, "resume")
        time.sleep(1)
        running = control.call(server, "pause")
        assert not resumed["paused"] and running["paused"] and running["time"] > stepped["time"] + 10
        bad = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "sim", "control", "--server", server,
                              "step", "soon"], capture_output=True, text=True)
        assert bad.returncode == 1 and "duration must be" in bad.stderr
        with pytest.raises(ValueError, match="duration must be"):  # the server's 400 ("²".isdigit() is true and
            control.call(server, "step", "²")  # float() raised: a 500 before)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stdout.read() if proc.stdout else ""


@pytest.mark.parametrize(("step", "sig", "watch", "reported"), [
    pytest.param(None, signal.SIGINT, False, False,
                 id="Ctrl-C while paused before the scenario began: ends, no report"),
    pytest.param(None, signal.SIGTERM, False, False,
                 id="SIGTERM while paused before the scenario began: ends, no report"),
    pytest.param("10s", signal.SIGINT, False, False,
                 id="Ctrl-C after a step short of the nodes' settling: ends, no report"),
    pytest.param("100s", signal.SIGINT, False, True, id="Ctrl-C paused mid-scenario: ends with the report so far"),
    pytest.param("100s", signal.SIGTERM, True, True,
                 id="SIGTERM paused with a kubectl watch open: the watch is ended, the report written"),
])
def test_a_signal_ends_a_served_simulation_in_any_state(tmp_path: Path, step: str | None, sig: signal.Signals,
                                                        watch: bool, reported: bool) -> None:
    proc, server = _serve_paused(tmp_path)
    watcher: subprocess.Popen[str] | None = None
    try:
        if step is not None:
            control.call(server, "step", step)
        if watch:
            env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}
            watcher = subprocess.Popen(["kubectl", "get", "pods", "-w"], env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
            assert watcher.stdout is not None and watcher.stdout.readline().startswith("NAME")  # the watch is open
        proc.send_signal(sig)
        proc.wait(timeout=30)  # it hung here, paused in the nodes' settling sleep (or with a watch open) until killed
    finally:
        for p in (proc, watcher):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    output = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 0, output
    assert (tmp_path / "metrics.json").exists() == reported, output
    if not reported:
        assert "interrupted before the scenario began" in output


@pytest.mark.parametrize(("port", "message"), [
    pytest.param("busy", "Address already in use", id="a port in use: one line, exit 2"),
    pytest.param("99999", "must be 0-65535", id="a port out of range: one line, exit 2"),
])
def test_serve_on_a_port_it_cannot_listen_on_is_refused(tmp_path: Path, port: str, message: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        number = str(taken.getsockname()[1]) if port == "busy" else port
        out = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "sim", "serve", "examples/sim/spread.yaml",
                              "--port", number, "--paused", "--out", str(tmp_path)],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr == f"kubelite sim: --port {number}: cannot listen on 127.0.0.1:{number}: {message}\n"


@pytest.mark.parametrize(("state", "shown"), [
    pytest.param({"time": 90.00000000000001, "stepUntil": None}, {"time": 90.0, "stepUntil": None},
                 id="a step's sum of timer delays reads as the step's time"),
    pytest.param({"time": 12.3456, "stepUntil": 100.0000001, "speed": 1.23456}, {"time": 12.346, "stepUntil": 100.0,
                                                                                 "speed": 1.23456},
                 id="times to the millisecond, the speed as set"),
])
def test_served_state_times_read_to_the_millisecond(state: dict[str, object], shown: dict[str, object]) -> None:
    assert control._rounded(state) == shown
