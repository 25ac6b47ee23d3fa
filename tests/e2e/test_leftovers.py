"""The fixtures' leak check (tests/e2e/pods.py `no_leftovers`) against real processes shaped as a container is:
a shim in its own session whose command line names the cluster's directory, and under it a process that names
nothing (the container's own `sleep`)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.pods import alive, no_leftovers, processes_under, wait_for


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Path]:
    """A stand-in container under tmp_path/cluster; yields that directory (the process is reaped after)."""
    base = tmp_path / "cluster"
    shim = subprocess.Popen(["sh", "-c", "sleep 60 & wait", str(base / "pods" / "shim")], start_new_session=True)
    try:
        assert wait_for(lambda: len(processes_under(base)) == 2, timeout=5), processes_under(base)
        yield base
    finally:
        shim.kill()
        shim.wait(timeout=5)


def test_a_container_that_outlives_its_cluster_fails_the_fixture_and_is_killed(container: Path) -> None:
    pids = list(processes_under(container))
    with pytest.raises(AssertionError, match="2 processes outlived"), no_leftovers(container, timeout=0.2):
        pass
    assert wait_for(lambda: not any(alive(pid) for pid in pids), timeout=5)  # the process that named nothing too


def test_a_cluster_that_stopped_everything_passes(tmp_path: Path) -> None:
    with no_leftovers(tmp_path / "cluster", timeout=0.2):
        pass


def test_a_sibling_directory_is_not_the_clusters(container: Path) -> None:
    """…/join1 must not claim the processes of …/join10."""
    sibling = container.parent / container.name[:-1]
    assert processes_under(sibling) == {}
    assert len(processes_under(container)) == 2
