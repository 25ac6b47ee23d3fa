"""The agent's checkpoint file on a real filesystem: written whole and atomically, read back by a restarted agent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubelite.agent import checkpoint

POD = {"uid": "u-1", "namespace": "default", "name": "p", "initFailed": False, "initialized": True,
       "containers": {"main": {"restarts": 2, "process": {"pid": 100_001, "started": 12.5}}}}
LARGE = {**POD, "containers": {f"c{i}": {"restarts": i, "starting": "x" * 1000} for i in range(300)}}


def _written(directory: Path, *saves: dict[str, object]) -> dict[str, tuple[Path, dict[str, object]]]:
    for data in saves:
        checkpoint.save(directory, data)
    return checkpoint.load_all(directory.parent)


CASES = [
    pytest.param((POD,), POD, id="the first checkpoint makes the pod's directory"),
    pytest.param((LARGE, POD), POD, id="a shorter checkpoint replaces a longer one whole"),
    pytest.param((POD, LARGE), LARGE, id="a large checkpoint after a small one is written whole"),
]


@pytest.mark.parametrize("saves,expected", CASES)
def test_save_writes_what_load_all_reads(tmp_path: Path, saves: tuple[dict[str, object], ...],
                                         expected: dict[str, object]) -> None:
    directory = tmp_path / "pods" / "default_p_u-1"
    assert _written(directory, *saves) == {"u-1": (directory, expected)}
    assert sorted(os.listdir(directory)) == [checkpoint.FILE]  # no temporary file left beside it


def test_short_writes_are_continued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """os.write may write less than it is given (a regular file seldom does): the rest is written after it."""
    write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: write(fd, bytes(data[:7])))
    directory = tmp_path / "pods" / "default_p_u-1"
    assert _written(directory, LARGE) == {"u-1": (directory, LARGE)}


def test_save_creates_the_file_as_open_wb_would(tmp_path: Path) -> None:
    """Mode 0o666 less the umask, as `Path.write_bytes` (the earlier form) made it."""
    directory = tmp_path / "pod"
    checkpoint.save(directory, POD)
    (tmp_path / "reference").write_bytes(b"{}")
    assert (directory / checkpoint.FILE).stat().st_mode == (tmp_path / "reference").stat().st_mode


def test_remove_forgets_the_pod_and_tolerates_a_missing_file(tmp_path: Path) -> None:
    directory = tmp_path / "pods" / "default_p_u-1"
    checkpoint.save(directory, POD)
    checkpoint.remove(directory)
    checkpoint.remove(directory)  # already gone: no error
    assert checkpoint.load_all(tmp_path / "pods") == {}


def test_a_temporary_file_left_by_a_crash_is_overwritten_whole(tmp_path: Path) -> None:
    """An agent killed mid-write leaves its temporary file: the next save truncates it, not writes over its start."""
    directory = tmp_path / "pods" / "default_p_u-1"
    directory.mkdir(parents=True)
    (directory / f".{checkpoint.FILE}.tmp").write_bytes(b"x" * 100_000)
    assert _written(directory, POD) == {"u-1": (directory, POD)}
