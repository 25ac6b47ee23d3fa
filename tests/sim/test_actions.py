"""A scenario's actions against the API: the namespaces its workloads use exist before they arrive, and an
action the API refuses is not dropped silently — it is logged with the API's Status message, said on stderr
naming where the scenario asks for it, and counted (the run's exit status; cli) — while the run goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubelite.sim import report, runner, scenario

Obj = dict[str, Any]
NODES = [{"name": "n", "count": 1}]
LATE = {"name": "late", "kind": "Pod", "at": "30s"}  # arrives after the failures: the run went on

CASES = [
    pytest.param([{"name": "web", "kind": "Pod", "namespace": "prod"}], None, [], ["prod/web", "default/late"], [],
                 id="a workload in a namespace of its own arrives there (the namespace is created first)"),
    pytest.param([{"name": "bad", "kind": "Pod"}], {"priorityClassName": "deleted-meanwhile"}, [],
                 ["default/late"], [("workload bad", 'pods "bad" is forbidden: no PriorityClass with name '
                                                     "deleted-meanwhile was found")],
                 id="an arrival the API refuses is recorded with its Status message and the run goes on"),
    pytest.param([], None, [{"at": "10s", "delete": "default/nosuch"}], ["default/late"],
                 [("line 8: fault delete", 'pods "nosuch" not found')],
                 id="a fault the API refuses is recorded with its scenario line"),
]


@pytest.mark.parametrize("workloads,late_spec,faults,running,failed", CASES)
def test_scenario_actions(tmp_path: Path, capsys: pytest.CaptureFixture[str], workloads: list[Obj],
                          late_spec: Obj | None, faults: list[Obj], running: list[str],
                          failed: list[tuple[str, str]]) -> None:
    """`late_spec` is put into the first workload's pod spec after loading: loading refuses what the API server
    would (checks.py), so a refusal at run time is what changed meanwhile — a PriorityClass deleted."""
    spec = tmp_path / "s.yaml"
    # one item a line: the fault case's fault is on line 8 (name, duration, nodePools and its pool, workloads and
    # its one item, faults, the fault)
    spec.write_text("\n".join(["name: actions", "duration: 1m", "nodePools:", f"  - {json.dumps(NODES[0])}",
                               "workloads:", *(f"  - {json.dumps(w)}" for w in [*workloads, LATE]),
                               *(["faults:", *(f"  - {json.dumps(f)}" for f in faults)] if faults else [])]) + "\n")
    scn = scenario.load(spec)
    if late_spec is not None:
        scn.workloads[0].spec.update(late_spec)
    outcome = runner.run(scn, 1, None, tmp_path / "nodes")
    m = report.write(outcome, tmp_path / "out")
    events = [json.loads(line) for line in (tmp_path / "out" / "events.log").read_text().splitlines()]
    phases = {e["pod"]: e["phase"] for e in events if "phase" in e}
    assert sorted(p for p, phase in phases.items() if phase == "Running") == sorted(running)
    logged = [(e["detail"], e["message"]) for e in events if e.get("action") == "failed"]
    assert outcome.failed_actions == len(failed) == len(logged)
    for (where, message), (logged_where, logged_message) in zip(failed, logged, strict=True):
        assert logged_where == where and logged_message.startswith(message)
    err = capsys.readouterr().err
    for where, message in failed:
        assert f"{spec}: {where}: {message}" in err
    assert [f["where"] for f in m.get("failedActions", [])] == [w for w, _ in failed]
