"""`kubelite sim` on the command line: which scheduler configs a run and a comparison use, the defaults
--help shows, and values that look like options."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelite.cli.main import main

MOST_ALLOCATED = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                  "  - pluginConfig:\n      - name: NodeResourcesFit\n        args: {scoringStrategy: {type: "
                  "MostAllocated}}\n")
SCENARIO = ("duration: 1m\nsample: 30s\nschedulerConfig: [spread.yaml, packed.yaml]\nnodePools:\n"
            "  - {name: n, count: 2}\nworkloads:\n  - {name: w, kind: Pod}\n")


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    (tmp_path / "spread.yaml").write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                                          "kind: KubeSchedulerConfiguration\n")
    (tmp_path / "packed.yaml").write_text(MOST_ALLOCATED)
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    return path


def test_compare_without_config_compares_the_scenarios_list(scenario: Path, tmp_path: Path) -> None:
    out = tmp_path / "ab"
    assert main(["sim", "compare", str(scenario), "--out", str(out), "--no-progress"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["0-spread", "1-packed"]


RUN_CASES = [
    pytest.param([], "uses the first, ", id="a list of configs: the first runs, and a notice says so"),
    pytest.param(["--config", "default"], "", id="--config default: the default profile, as compare takes it"),
]


@pytest.mark.parametrize("flags,notice", RUN_CASES)
def test_run_picks_one_config(scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
                              notice: str) -> None:
    assert main(["sim", "run", str(scenario), "--out", str(tmp_path / "out"), "--no-progress", *flags]) == 0
    err = capsys.readouterr().err
    assert (notice in err) if notice else "scheduler configs" not in err


REFUSED_CASES = [
    pytest.param(["sim", "compare", "{scenario}", "--config", "{dir}/nosuch.yaml"], 2, "nosuch.yaml: [Errno 2]",
                 id="compare: a config that is not there"),
    pytest.param(["sim", "run", "{scenario}", "--config", "{dir}/s.yaml"], 2, 'unknown field "duration"',
                 id="run: a config kube-scheduler would refuse (strict decoding), with its file and line"),
    pytest.param(["sim", "control", "step", "-5s"], 1,
                 "step: duration must be seconds or a duration such as 30s, 5m, 1h, not '-5s'",
                 id="a negative step: its own error, not argparse's usage"),
    pytest.param(["sim", "control", "speed", "-2"], 1, "speed: value must be a positive number, not '-2'",
                 id="a negative speed"),
]


@pytest.mark.parametrize("argv,code,message", REFUSED_CASES)
def test_refused_with_a_clear_error(scenario: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int,
                                    message: str) -> None:
    argv = [a.replace("{scenario}", str(scenario)).replace("{dir}", str(scenario.parent)) for a in argv]
    assert main(argv) == code
    err = capsys.readouterr().err
    assert message in err and "usage:" not in err


HELP_CASES = [
    pytest.param("run", ["(default: 0)", "(default: sim-out)", "'default' for the default profile"],
                 id="run: seed, out, config"),
    pytest.param("compare", ["(default: 0)", "(default: sim-out)", "(default: the scenario's schedulerConfig list)"],
                 id="compare: seed, out, the scenario's configs"),
    pytest.param("serve", ["(default: 6443)", "(default: 1.0)", "(default: sim-out)"], id="serve: port, speed, out"),
]


@pytest.mark.parametrize("verb,shown", HELP_CASES)
def test_help_shows_the_defaults(capsys: pytest.CaptureFixture[str], verb: str, shown: list[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sim", verb, "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines where the terminal is narrow
    for s in shown:
        assert s in text


def test_a_run_with_a_failed_action_writes_its_report_and_exits_1(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A fault the API refuses at run time (deleting a pod that is not there) does not stop the run: its report
    is written, and the exit status says the run was not the scenario asked."""
    path = tmp_path / "s.yaml"
    path.write_text("duration: 1m\nsample: 30s\nnodePools:\n  - {name: n, count: 1}\nworkloads:\n"
                    "  - {name: w, kind: Pod}\nfaults:\n  - {at: 10s, delete: default/nosuch}\n")
    out = tmp_path / "out"
    assert main(["sim", "run", str(path), "--out", str(out), "--no-progress"]) == 1
    assert (out / "report.html").is_file()
    assert "1 scenario action failed" in capsys.readouterr().err
