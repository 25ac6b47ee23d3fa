"""`--event-ttl` on `kubelite server` and `up`: upstream's duration form, default 1h0m0s, a bad value refused as
the command line is read (exit 2, naming the flag)."""

from __future__ import annotations

import pytest

from kubelite.cli.main import parser


@pytest.mark.parametrize("command", ["server", "up"])
@pytest.mark.parametrize(("argv", "seconds"), [
    pytest.param([], 3600, id="default: kube-apiserver's 1h0m0s"),
    pytest.param(["--event-ttl", "1h0m0s"], 3600, id="Go's duration form"),
    pytest.param(["--event-ttl=30m"], 1800, id="minutes"),
    pytest.param(["--event-ttl", "90s"], 90, id="seconds"),
    pytest.param(["--event-ttl", "0"], 0, id="zero: Events kept forever"),
])
def test_event_ttl_flag_parses(command: str, argv: list[str], seconds: int) -> None:
    assert parser().parse_args([command, *argv]).event_ttl == seconds


@pytest.mark.parametrize(("value", "message"), [
    pytest.param("1x", "argument --event-ttl: invalid duration '1x'", id="unknown unit"),
    pytest.param("3600", "argument --event-ttl: invalid duration '3600'", id="seconds without a unit"),
    pytest.param("-1h", "argument --event-ttl: '-1h' is negative", id="negative"),
])
def test_bad_event_ttl_is_a_clear_usage_error(value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["server", f"--event-ttl={value}"])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
