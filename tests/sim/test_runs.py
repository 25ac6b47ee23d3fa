"""Whole simulations: reproducible to the byte, and the seed examples show what the seeds say.

Each runs the real API server, scheduler, controllers and hollow agents on virtual time (seconds of
wall time for minutes of cluster life).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubelite.sim import report, runner, scenario

EXAMPLES = Path("examples/sim")
Obj = dict[str, Any]


def _run(tmp: Path, name: str, seed: int = 0, config: Path | None = None, out: str = "out") -> Obj:
    scn = scenario.load(EXAMPLES / name, seed)
    outcome = runner.run(scn, seed, config, tmp / f"nodes-{out}")
    return report.write(outcome, tmp / out)


def _events(tmp: Path, out: str = "out") -> list[Obj]:
    return [json.loads(line) for line in (tmp / out / "events.log").read_text().splitlines()]


def _run_in_process(tmp: Path, name: str, seed: int, out: str, hash_seed: str) -> None:
    """`kubelite sim run` in a process of its own, with its own string hash seed (as a second run would be)."""
    cmd = [sys.executable, "-c", "import sys; from kubelite.cli.main import main; sys.exit(main())",
           "sim", "run", str(EXAMPLES / name), "--seed", str(seed), "--out", str(tmp / out), "--no-progress"]
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONHASHSEED": hash_seed}, timeout=300)


def test_same_scenario_and_seed_give_identical_bytes(tmp_path: Path) -> None:
    """Twice in this process (what a process keeps between runs must not matter) and once in another with a
    different hash seed (set iteration over strings, object addresses, the OS entropy pool must not either)."""
    for out in ("a", "b"):
        _run(tmp_path, "faults.yaml", seed=7, out=out)
    _run_in_process(tmp_path, "faults.yaml", 7, "p", hash_seed="4242")
    for other in ("b", "p"):
        for name in ("events.log", "metrics.json", "report.html", "utilisation.svg"):
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / other / name).read_bytes(), (other, name)
    _run(tmp_path, "faults.yaml", seed=8, out="c")
    assert (tmp_path / "a" / "events.log").read_bytes() != (tmp_path / "c" / "events.log").read_bytes()


def test_spread_example_places_the_new_pod_in_the_emptier_zone(tmp_path: Path) -> None:
    """Seed 004: zoneA holds 2 foo=bar pods, zoneB 1; maxSkew 1 sends mypod to zoneB."""
    m = _run(tmp_path, "spread.yaml")
    bound = [e for e in _events(tmp_path) if e.get("event") == "Scheduled" and "default/mypod " in e["message"]]
    assert len(bound) == 1 and bound[0]["message"].endswith(("node3-0", "node4-0"))
    assert m["placementByZone"] == {"zoneA": 2, "zoneB": 2}


def test_preemption_example_follows_the_walk_through(tmp_path: Path) -> None:
    """Seed 001: the high-priority pod preempts a victim, waits for its graceful exit, then binds."""
    m = _run(tmp_path, "preemption.yaml")
    (victim,) = [d for d in m["disruptions"] if d["reason"] == "Preempted"]
    assert victim["t"] == 120.0
    steps = {e["pod"]: e["steps"] for e in m["timeline"]}
    assert [130.0, "main exited 143"] in steps[victim["pod"]]  # SIGTERM, stopped after its 10 s
    assert steps["default/important"][0] == [130.0, "scheduled to node-0"]


def test_restart_backoff_example_doubles_the_delay(tmp_path: Path) -> None:
    """Seed 000: exits after 5 s each run; restarts come after back-offs of 10, 20, 40, 80, 160, 300 s."""
    m = _run(tmp_path, "restart-backoff.yaml")
    starts = [e["t"] for e in _events(tmp_path) if e.get("pod") == "default/crasher"
              and e["containers"] and e["containers"][0][1] == "running"]
    gaps = [round(b - a - 5) for a, b in itertools.pairwise(starts)]
    assert gaps[:8] == [0, 10, 20, 40, 80, 160, 300, 300]
    # the report shows it: every exit, restart and back-off delay on the timeline, each BackOff (one Event,
    # counted up) in events.log
    steps = [s for _, s in m["timeline"][0]["steps"]]
    delays = [s.rsplit(" ", 1)[1] for s in steps if " back-off " in s]
    assert delays[:6] == ["10s", "20s", "40s", "1m20s", "2m40s", "5m0s"] and set(delays[5:]) == {"5m0s"}  # Go Durations
    assert steps.count("main exited 1") == len(delays) + 1 == steps.count("BackOff") + 1
    assert f"main restart {len(starts) - 1}" in steps
    counts = [e.get("count", 1) for e in _events(tmp_path) if e.get("event") == "BackOff"]
    assert counts == list(range(1, len(delays) + 1))


def test_probes_example_startup_readiness_and_liveness_restarts(tmp_path: Path) -> None:
    """Probes run by the agent's prober, answered by the hollow runtime: a startup probe passing at 40 s gates
    readiness; a liveness probe failing from 2 min kills the container after 3 failures (10 s apart), then
    again each run, with the restart back-off between (10 s, 20 s, …)."""
    m = _run(tmp_path, "probes.yaml")
    events = _events(tmp_path)
    ready = [e["t"] for e in events if e.get("pod") == "default/slow-start" and e.get("ready") == "True"]
    assert ready[0] == 40.0
    unhealthy = [e["t"] for e in events if e.get("event") == "Unhealthy" and e["object"] == "Pod default/slow-start"]
    assert unhealthy == [0.0, 10.0, 20.0, 30.0]
    restarts: dict[int, float] = {}
    for e in events:
        if e.get("pod") == "default/wedged" and e["containers"]:
            restarts.setdefault(e["containers"][0][2], e["t"])
    # killed at 140 s and restarted at once; then each run lives 140 s, after back-offs of 10 s, 20 s, 40 s
    assert [restarts[n] for n in (1, 2, 3, 4)] == [140.0, 290.0, 450.0, 630.0]
    # the timeline goes on past the first kill: each kill and restart
    steps = {e["pod"]: e["steps"] for e in m["timeline"]}["default/wedged"]
    assert [t for t, s in steps if s == "Killing"] == [140.0, 280.0, 430.0, 590.0, 770.0]
    assert [t for t, s in steps if s.startswith("main restart ")] == [140.0, 290.0, 450.0, 630.0, 850.0]


def test_termination_example_grace_period(tmp_path: Path) -> None:
    """Seed 003: deleted at 60 s with 30 s grace: one stops 10 s after SIGTERM (143), the other is killed (137)."""
    m = _run(tmp_path, "termination.yaml")
    steps = {e["pod"]: e["steps"] for e in m["timeline"]}
    assert [70.0, "main exited 143"] in steps["default/graceful"]
    assert [90.0, "main exited 137"] in steps["default/stubborn"]
    assert steps["default/graceful"][-1] == [70.0, "deleted"] and steps["default/stubborn"][-1] == [90.0, "deleted"]


def test_binpacking_ab_shows_pending_and_utilisation_differences(tmp_path: Path) -> None:
    """The A/B example: spreading (default) leaves no large node free for the 7.5-CPU pods, which wait;
    MostAllocated packs the small pods onto fewer nodes, fuller, and the big pods bind at once."""
    scn = scenario.load(EXAMPLES / "binpacking.yaml", 3)
    outs = [runner.run(scn, 3, config, tmp_path / f"nodes-{i}")
            for i, config in enumerate([None, EXAMPLES / "most-allocated.yaml"])]
    spread, packed = report.write_comparison(outs, tmp_path / "ab")
    assert spread["pendingSeconds"]["max"] > 60 and packed["pendingSeconds"]["max"] == 0
    assert spread["pods"] == packed["pods"]

    def mean(m: Obj, key: str) -> float:
        return sum(s[key] for s in m["samples"]) / len(m["samples"])

    assert mean(packed, "nodesInUse") < mean(spread, "nodesInUse")
    assert mean(packed, "cpuOfNodesInUse") > mean(spread, "cpuOfNodesInUse")
    page = (tmp_path / "ab" / "report.html").read_text()
    assert "Differences" in page and "mean pending time" in page and "utilisation.svg" in page


def test_sidecar_starts_first_and_stops_after_main(tmp_path: Path) -> None:
    """The hollow agent's pod sync orders a sidecar as kubelet does: started before main (which takes 2 s
    to start), stopped once main has exited at 32 s, the pod Succeeded when the sidecar is gone 3 s later."""
    _run(tmp_path, "sidecar.yaml")
    events = _events(tmp_path)
    started = [(e["t"], e["message"]) for e in events if e.get("event") in ("Started", "Killing")]
    assert started == [(0.0, "Started container proxy"), (2.0, "Started container main"),
                       (32.0, "Stopping container proxy")]
    last = [e for e in events if e.get("pod") == "default/job"][-1]
    assert (last["t"], last["phase"], last["containers"]) == (
        35.0, "Succeeded", [["proxy", "terminated", 0, 143], ["main", "terminated", 0, 0]])


def test_faults_example(tmp_path: Path) -> None:
    """A lost node is marked NotReady after the 40 s grace and its pods evicted 300 s later; the drain of
    another node is held by the PDB until the replacements are up."""
    m = _run(tmp_path, "faults.yaml", seed=7)
    events = _events(tmp_path)
    not_ready = [e["t"] for e in events if e.get("event") == "NodeNotReady" and e["object"] == "Node /n-0"]
    assert len(not_ready) == 1 and 150 <= not_ready[0] <= 165
    taint = sorted(d["t"] for d in m["disruptions"] if d["reason"] == "TaintManagerEviction")
    assert len(taint) == sum(1 for e in events if e.get("event") == "NodeNotReady" and "Pod" in e["object"])
    assert all(t == pytest.approx(not_ready[0] + 300, abs=1) for t in taint)
    (drained,) = [d for d in m["disruptions"] if d["reason"] == "Evicted (API)"]
    assert drained["t"] > taint[0]  # refused (429) while the PDB's minAvailable was not met
    pdbs = [e["detail"] for e in events if e.get("action") == "pdb"]  # the fault's mapping, as JSON
    assert pdbs[0] == {"name": "web", "matchLabels": {"app": "web"}, "minAvailable": 5}


def test_a_refused_arrival_is_reported_and_the_run_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An arrival the API server refuses (here: a PriorityClass that does not exist) is said on stderr when its
    action ends and counted, and the other arrivals still run. (Loading refuses such a scenario — checks.py —, so
    the refused value is put in after loading: what the API server can still refuse mid-run, such as a
    PriorityClass deleted.)"""
    path = tmp_path / "refused.yaml"
    path.write_text(yaml.safe_dump({
        "name": "refused", "duration": "60s", "sample": "30s",
        "nodePools": [{"name": "n", "count": 1, "capacity": {"cpu": "4", "memory": "8Gi"}}],
        "workloads": [
            {"name": "bad", "kind": "Pod", "arrivals": {"times": ["1s"]},
             "spec": {"restartPolicy": "Never"}, "behaviour": {"run": "5s"}},
            {"name": "good", "kind": "Pod", "arrivals": {"times": ["2s"]},
             "spec": {"restartPolicy": "Never"}, "behaviour": {"run": "5s"}}]}))
    scn = scenario.load(path)
    scn.workloads[0].spec["priorityClassName"] = "missing"
    outcome = runner.run(scn, 0, None, tmp_path / "nodes")
    refused = capsys.readouterr().err.splitlines()
    assert len(refused) == 1 and "workload bad" in refused[0] and "missing" in refused[0], refused
    assert outcome.failed_actions == 1
    assert [k.split("/")[1] for k in outcome.recorder.pods] == ["good"]
