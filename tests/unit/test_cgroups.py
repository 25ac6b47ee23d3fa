"""cgroup limits: kubelet's CPU conversions and the files written per hierarchy (on a directory tree shaped
like /sys/fs/cgroup; the real hierarchy is exercised by the agent's e2e tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kubelite.agent.cgroups import Cgroups, Limits, quota, shares, weight


@pytest.mark.parametrize("name,milli,want_shares,want_weight,want_quota", [
    ("no request gets the minimum shares", 0, 2, 1, 1000),
    ("tiny requests are clamped to the minimum", 1, 2, 1, 1000),
    ("100m", 100, 102, 4, 10_000),
    ("one CPU is 1024 shares", 1000, 1024, 39, 100_000),
    ("huge requests are clamped to the maximum", 1_000_000, 262_144, 10_000, 100_000_000),
])
def test_cpu_conversions(name: str, milli: int, want_shares: int, want_weight: int, want_quota: int) -> None:
    assert (shares(milli), weight(milli), quota(milli)) == (want_shares, want_weight, want_quota)


def _v1(root: Path) -> None:
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("max")
    (root / "cpu").mkdir()
    (root / "cpu" / "cpu.shares").write_text("1024")


def _v2(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids")
    (root / "cgroup.subtree_control").write_text("")


def _touch(d: Path, *names: str) -> None:
    """The kernel creates a cgroup's interface files on mkdir; a plain directory needs them made."""
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).touch()


@pytest.mark.parametrize("name,make,version,files", [
    ("v1 writes memory limit, CFS quota and shares", _v1, 1, {
        "memory/kubelite/podu/c_0/memory.limit_in_bytes": "67108864",
        "cpu/kubelite/podu/c_0/cpu.cfs_quota_us": "50000", "cpu/kubelite/podu/c_0/cpu.cfs_period_us": "100000",
        "cpu/kubelite/podu/c_0/cpu.shares": "256"}),
    ("v2 writes memory.max, cpu.max and cpu.weight", _v2, 2, {
        "kubelite/podu/c_0/memory.max": "67108864", "kubelite/podu/c_0/cpu.max": "50000 100000",
        "kubelite/podu/c_0/cpu.weight": "10"}),
])
def test_limits_are_written(tmp_path: Path, name: str, make: Callable[[Path], None], version: int,
                            files: dict[str, str]) -> None:
    make(tmp_path)
    cg = Cgroups.detect(tmp_path)
    assert cg is not None and cg.version == version
    for path in files:
        _touch((tmp_path / path).parent, Path(path).name)
    procs = cg.create("podu/c_0", Limits("podu", memory=64 * 1024 * 1024, cpu=500, cpu_request=250))
    assert {p: (tmp_path / p).read_text() for p in files} == files
    assert len(procs) == (2 if version == 1 else 1) and all(p.endswith("/podu/c_0/cgroup.procs") for p in procs)


@pytest.mark.parametrize("name,make,events_file,text,want", [
    ("v1 oom_control counts an OOM kill", _v1, "memory/kubelite/p/c/memory.oom_control",
     "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", True),
    ("v1 without a kill", _v1, "memory/kubelite/p/c/memory.oom_control", "oom_kill_disable 0\noom_kill 0\n", False),
    ("v2 memory.events counts an OOM kill", _v2, "kubelite/p/c/memory.events",
     "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n", True),
    ("v2 hitting max without a kill", _v2, "kubelite/p/c/memory.events", "max 3\noom 0\noom_kill 0\n", False),
])
def test_oom_kill_is_detected(tmp_path: Path, name: str, make: Callable[[Path], None], events_file: str, text: str,
                              want: bool) -> None:
    make(tmp_path)
    cg = Cgroups.detect(tmp_path)
    assert cg is not None
    (tmp_path / events_file).parent.mkdir(parents=True)
    (tmp_path / events_file).write_text(text)
    assert cg.oom_killed("p/c") is want


def test_no_controllers_means_no_limits(tmp_path: Path) -> None:
    assert Cgroups.detect(tmp_path) is None
