"""Scenario files: a bad one is reported with its file and line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelite.sim.scenario import ScenarioError, load

GOOD_POOL = "nodePools:\n  - {name: n, count: 1}\n"
CASES = [
    pytest.param("duration: 1h\n" + GOOD_POOL + "workloads:\n  - name: w\n    kind: Daemon\n", 6,
                 "kind must be one of", id="unknown workload kind: the kind's line"),
    pytest.param("duration: soon\n" + GOOD_POOL, 1, "is not a duration", id="bad duration: its line"),
    pytest.param("duration: 1h\nnodePools:\n  - name: n\n    count: -1\n", 4, "count must be a positive",
                 id="bad pool count: its line"),
    pytest.param("duration: 1h\n" + GOOD_POOL + "faults:\n  - {at: 1m, explode: n-0}\n", 5, "unknown field",
                 id="unknown fault: its line"),
    pytest.param("duration: 1h\n" + GOOD_POOL + "workloads:\n  - name: w\n    behaviour: {run: {gamma: 3}}\n",
                 6, "unknown field 'gamma'", id="unknown distribution: its line"),
    pytest.param("duration: 1h\n" + GOOD_POOL + "faults:\n  - at: 1m\n    nodeLost: m-0\n", 6, "no node 'm-0'",
                 id="fault on an unknown node: its line"),
    pytest.param("duration: 1h\n" + GOOD_POOL + "workloads:\n  - name: w\n    behaviour:\n      probes:\n"
                 "        liveness: {failAfter: 2m}\n", 8, "no container of the spec has a livenessProbe",
                 id="a probe behaviour needs its probe in the spec"),
    pytest.param("duration: 1h\n" + GOOD_POOL + "workloads:\n  - name: w\n    spec:\n      containers:\n"
                 "        - {name: c, readinessProbe: {tcpSocket: {port: 80}}}\n    behaviour:\n      probes:\n"
                 "        readiness: {succeedAfter: 5m, failAfter: 1m}\n", 11, "failAfter must be after succeedAfter",
                 id="a probe window that ends before it begins"),
    pytest.param("duration: 1h\n" + GOOD_POOL + "workloads:\n  - name: w\n    behaviour:\n      probes:\n"
                 "        health: {failAfter: 2m}\n", 8, "unknown field 'health'", id="unknown probe kind"),
    pytest.param("duration: 1h\nnodePools: [\n", 3, "", id="YAML syntax error: its line"),
    pytest.param("duration: 1h\n", 1, "nodePools: at least one pool", id="no nodes"),
]


@pytest.mark.parametrize("text,line,message", CASES)
def test_bad_scenario_names_the_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert str(err.value).startswith(f"{path}:{line}:")
    assert message in str(err.value)


def test_poisson_arrivals_follow_the_seed(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("duration: 2h\n" + GOOD_POOL +
                    "workloads:\n  - {name: w, kind: Pod, arrivals: {poisson: {perHour: 60, until: 2h}}}\n")
    first, again, other = (load(path, seed).workloads[0].arrivals for seed in (1, 1, 2))
    assert first == again
    assert first != other
    assert 60 < len(first) < 180  # about 120 in two hours


def test_examples_parse() -> None:
    for path in sorted(Path("examples/sim").glob("*.yaml")):
        if "KubeSchedulerConfiguration" not in path.read_text():
            assert load(path).pools, path


LIFECYCLE_CASES = [
    pytest.param("", (5.0, 40.0, 60.0), id="upstream's defaults: period 5 s, grace 40 s, startup grace 60 s"),
    pytest.param("nodeConfig: {nodeLeaseDurationSeconds: 240}\n", (5.0, 240.0, 240.0),
                 id="a longer Lease lengthens the grace periods with it"),
    pytest.param("nodeConfig: {nodeLeaseDurationSeconds: 240}\ncontrollerManager: {nodeMonitorGracePeriod: 2m, "
                 "nodeMonitorPeriod: 10s}\n", (10.0, 120.0, 120.0), id="controllerManager flags win"),
]


@pytest.mark.parametrize("extra,want", LIFECYCLE_CASES)
def test_node_lifecycle_options_follow_the_scenario(tmp_path: Path, extra: str,
                                                    want: tuple[float, float, float]) -> None:
    from kubelite.sim import runner

    path = tmp_path / "s.yaml"
    path.write_text("duration: 1h\n" + GOOD_POOL + extra)
    scn = load(path)
    options = runner.controller_factories(scn, runner.node_config(scn))["nodelifecycle"].keywords["options"]  # type: ignore[attr-defined]
    assert (options.node_monitor_period, options.node_monitor_grace_period,
            options.node_startup_grace_period) == want


EVENT_TTL_CASES = [
    # One pod starts at 0 s (Scheduled, Pulled, Created, Started …); the run ends at 200 s.
    pytest.param("", True, id="Events live an hour by default, as kube-apiserver's --event-ttl"),
    pytest.param("apiServer: {eventTTL: 60s}\n", False, id="an eventTTL shorter than the run expires them"),
    pytest.param("apiServer: {eventTTL: 0}\n", True, id="eventTTL 0 keeps Events forever"),
]


@pytest.mark.parametrize("extra,kept", EVENT_TTL_CASES)
def test_event_ttl_follows_the_scenario(tmp_path: Path, extra: str, kept: bool) -> None:
    from kubelite.sim import runner

    path = tmp_path / "s.yaml"
    path.write_text("duration: 200s\nsample: 100s\n" + GOOD_POOL + extra +
                    "workloads:\n  - {name: w, kind: Pod, spec: {restartPolicy: Never}}\n")
    with runner.node_dirs() as nodes:
        outcome = runner.run(load(path), 1, None, nodes)
    events = outcome.recorder.event_informer.store.values()
    assert any(e.get("reason") == "Started" for e in events) is kept
    assert bool(events) is kept


BAD_EVENT_TTL_CASES = [
    pytest.param("-300", "is negative", id="a negative number of seconds"),
    pytest.param("-5m", "is negative", id="a negative duration"),
    pytest.param(".inf", "a duration such as", id="not a whole number of seconds"),
    pytest.param("soon", "invalid duration 'soon'", id="not a duration"),
]


@pytest.mark.parametrize("value,message", BAD_EVENT_TTL_CASES)
def test_bad_event_ttl_names_the_line(tmp_path: Path, value: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("duration: 1h\n" + GOOD_POOL + f"apiServer:\n  eventTTL: {value}\n")
    with pytest.raises(ScenarioError, match=r"s.yaml:5: apiServer.eventTTL: ") as err:
        load(path)
    assert message in str(err.value)


@pytest.mark.parametrize("value,seconds", [
    pytest.param("90", 90, id="a bare number is seconds"),
    pytest.param("1h30m", 5400, id="a Go duration"),
    pytest.param("500ms", 0, id="under a second is no TTL, as --event-ttl's truncation"),
])
def test_event_ttl_values(tmp_path: Path, value: str, seconds: int) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("duration: 1h\n" + GOOD_POOL + f"apiServer: {{eventTTL: {value}}}\n")
    assert load(path).event_ttl == seconds
