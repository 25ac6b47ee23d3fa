"""The HA flags: when `kubelite server` leader-elects its scheduler and controllers, and the lease timings and
server lists the commands accept or refuse (exit 2, as kube-scheduler refuses bad --leader-elect-* values)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubelite.cli.main import parser, server_urls
from kubelite.cli.serve import Options
from kubelite.store import StoreSpec

ETCD = "etcd://127.0.0.1:2379"


@pytest.mark.parametrize(("store", "flag", "elect"), [
    pytest.param("sqlite", [], False, id="sqlite: off by default (one process's file, nobody to elect against)"),
    pytest.param(ETCD, [], True, id="etcd: on by default (several servers may share it)"),
    pytest.param(ETCD, ["--no-leader-elect"], False, id="etcd with --no-leader-elect: off"),
    pytest.param("sqlite", ["--leader-elect"], True, id="sqlite with --leader-elect: on"),
])
def test_leader_election_default_follows_the_store(store: str, flag: list[str], elect: bool) -> None:
    args = parser().parse_args(["server", "--store", store, *flag])
    assert Options(Path("/x"), 1, store=StoreSpec(args.store), leader_elect=args.leader_elect).elect is elect


@pytest.mark.parametrize(("argv", "message"), [
    pytest.param(["server", "--leader-elect-lease-duration", "5", "--leader-elect-renew-deadline", "5"],
                 "leaseDuration must be greater than renewDeadline", id="server: lease not above renew deadline"),
    pytest.param(["scheduler", "--kubeconfig", "/nonexistent", "--leader-elect-retry-period", "9"],
                 "renewDeadline must be greater than retryPeriod*JitterFactor",
                 id="scheduler: retry period too long for the default renew deadline"),
    pytest.param(["controller-manager", "--kubeconfig", "/nonexistent", "--leader-elect-lease-duration", "0.5",
                  "--leader-elect-renew-deadline", "0.4", "--leader-elect-retry-period", "0.1"],
                 "leaseDuration must be at least 1 second", id="controller-manager: sub-second lease"),
])
def test_bad_lease_timings_are_refused(argv: list[str], message: str, tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", *argv, *(
        ["--data-dir", str(tmp_path)] if argv[0] == "server" else [])], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr


@pytest.mark.parametrize("command", ["agent", "scheduler", "controller-manager"])
def test_components_take_a_server_list(command: str) -> None:
    args = parser().parse_args([command, "--kubeconfig", "k", "--server", "https://a:6443, https://b:6443"])
    assert server_urls(args) == ("https://a:6443", "https://b:6443")
