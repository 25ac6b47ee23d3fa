"""A run's process settings: where the hollow nodes' data dirs go, and the garbage collector's tuning —
both for the run only."""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path

import pytest

from kubelite.sim import runner


@pytest.mark.parametrize("memory_fs", [
    pytest.param(True, id="a RAM-backed filesystem: the nodes' dirs go there"),
    pytest.param(False, id="none: the usual temporary directory"),
])
def test_node_dirs_in_memory_where_the_machine_has_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      memory_fs: bool) -> None:
    shm = tmp_path / "shm"
    if memory_fs:
        shm.mkdir()
    monkeypatch.setattr(runner, "MEMORY_FS", shm)
    with runner.node_dirs() as work:
        assert work.is_dir() and work.parent == (shm if memory_fs else Path(tempfile.gettempdir()))
        (work / "node-0" / "pods").mkdir(parents=True)
    assert not work.exists()


def test_collector_tuning_holds_for_the_run_only() -> None:
    before = gc.get_threshold()
    with runner._collector():
        assert gc.get_threshold() == runner.GC_THRESHOLDS
        runner._settled()
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
