"""Trace import: an audit log becomes a scenario that replays its pods at their times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kubelite.sim import importer
from kubelite.sim.scenario import ScenarioError

AUDIT = Path(__file__).parent / "audit.jsonl"


def test_audit_log_replays_creations_and_deletions(tmp_path: Path) -> None:
    scenario = tmp_path / "replay.yaml"
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "kubelite.cli.main", "sim", "import", str(AUDIT), "--out", str(scenario)],
                   check=True)
    subprocess.run([sys.executable, "-m", "kubelite.cli.main", "sim", "run", str(scenario), "--out", str(out)],
                   check=True, capture_output=True)
    events = map(json.loads, (out / "events.log").read_text().splitlines())
    actions = [(e["t"], e["action"], e["detail"]) for e in events if "action" in e]
    assert actions == [(0.0, "create", "Pod default/web"), (90.0, "create", "Pod default/big"),
                       (180.0, "delete", "default/web")]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["placementByZone"] == {"z1": 2}  # the audited nodes, as one pool (same zone and size)


@pytest.mark.parametrize("text,message", [
    pytest.param('{"kind": "Event"}\n{not json\n', ":2: not an audit.k8s.io Event",
                 id="an audit log's bad line: its line"),
    pytest.param('{"kind": "List", "items": [\n  {"kind": "Node",\n', r":3:1: truncated JSON \(it ends early\)",
                 id="a truncated snapshot: truncated JSON at its line and column, not 'not an audit Event'"),
    pytest.param("{not json\n{}\n", ":1:2: invalid JSON: ", id="neither a document nor JSON lines: where it breaks"),
    pytest.param('{"kind": "List", "items": []}', "no nodes and no live pods", id="an empty snapshot"),
    pytest.param('{"kind": "Pod"}', "neither a `kubectl get -o json` List nor an audit log",
                 id="a JSON document of another kind")])
def test_bad_trace(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "trace.json"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=message):
        importer.load(path)
