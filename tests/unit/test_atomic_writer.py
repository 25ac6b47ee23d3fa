"""The AtomicWriter, with the case tables of pkg/volume/util/atomic_writer_test.go by their upstream names:
TestValidatePath, TestValidatePayload, TestPathsToRemove, TestWriteOnce, TestUpdate, TestMultipleUpdates and
TestCreateUserVisibleFiles; checkVolumeContents reconstructs the payload through the user-visible symlinks."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from kubelite.agent.volumes.atomic_writer import (
    DATA_DIR,
    MAX_FILE_NAME_LENGTH,
    MAX_PATH_LENGTH,
    AtomicWriter,
    FileProjection,
    PayloadError,
    validate_path,
    validate_payload,
)

P = dict[str, FileProjection]


def f(data: str | bytes, mode: int = 0o644) -> FileProjection:
    return FileProjection(data.encode() if isinstance(data, str) else data, mode)


MYSTERY_BINARY = base64.b64decode(
    "f0VMRgIBAQAAAAAAAAAAAAIAPgABAAAAeABAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAAAAEAAOAAB"
    "AAAAAAAAAAEAAAAFAAAAAAAAAAAAAAAAAEAAAAAAAAAAQAAAAAAAfQAAAAAAAAB9AAAAAAAAAAAA"
    "IAAAAAAAsDyZDwU=")


def check_volume_contents(target: Path, payload: P) -> None:
    """checkVolumeContents: walk every user-visible symlink and compare what is there with the payload."""
    data_dir = target / DATA_DIR
    observed: P = {}
    for entry in target.iterdir():
        if entry.name.startswith("..") or not entry.is_symlink():
            continue
        root = target / os.readlink(entry)
        for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
            if path.is_dir():
                continue
            rel = str(path.relative_to(data_dir))
            observed[rel] = FileProjection(path.read_bytes(), path.stat().st_mode & 0o7777)
    assert observed == {os.path.normpath(k): v for k, v in payload.items()}


VALIDATE_PATH = [
    pytest.param("i/am/well/behaved.txt", True, id="valid 1"),
    pytest.param("keepyourheaddownandfollowtherules.txt", True, id="valid 2"),
    pytest.param("a" * (MAX_PATH_LENGTH + 1), False, id="max path length"),
    pytest.param("a" * (MAX_FILE_NAME_LENGTH + 1), False, id="max file length"),
    pytest.param("/dev/null", False, id="absolute failure"),
    pytest.param("..sneaky.txt", False, id="reserved path"),
    pytest.param("hello/there/../../../../../../etc/passwd", False, id="contains doubledot 1"),
    pytest.param("hello/../etc/somethingbad", False, id="contains doubledot 2"),
    pytest.param("", False, id="empty"),
]


@pytest.mark.parametrize("path,valid", VALIDATE_PATH)
def test_validate_path(path: str, valid: bool) -> None:
    if valid:
        validate_path(path)
    else:
        with pytest.raises(PayloadError):
            validate_path(path)


VALIDATE_PAYLOAD = [
    pytest.param({"foo": f(""), "bar": f("")}, {"foo", "bar"}, id="valid payload"),
    pytest.param({"a" * (MAX_PATH_LENGTH + 1): f("")}, None, id="payload with path length > 4096 is invalid"),
    pytest.param({"/dev/null": f("")}, None, id="payload with absolute path is invalid"),
    pytest.param({"..sneaky.txt": f("")}, None, id="payload with reserved path is invalid"),
    pytest.param({"foo/../etc/password": f("")}, None, id="payload with doubledot path is invalid"),
    pytest.param({"": f("")}, None, id="payload with empty path is invalid"),
    pytest.param({"foo////bar": f("")}, {"foo/bar"}, id="payload with unclean path should be cleaned"),
]


@pytest.mark.parametrize("payload,expected", VALIDATE_PAYLOAD)
def test_validate_payload(payload: P, expected: set[str] | None) -> None:
    if expected is None:
        with pytest.raises(PayloadError):
            validate_payload(payload)
    else:
        assert set(validate_payload(payload)) == expected


PATHS_TO_REMOVE = [
    pytest.param({"foo.txt": f("foo"), "bar.txt": f("bar")}, {"foo.txt": f("foo")}, {"bar.txt"}, id="simple"),
    pytest.param({"foo.txt": f("foo"), "zip/bar.txt": f("zip/b}ar")}, {"foo.txt": f("foo")}, {"zip/bar.txt", "zip"},
                 id="simple 2"),
    pytest.param({"foo.txt": f("foo"), "zip/zap/bar.txt": f("zip/bar")}, {"foo.txt": f("foo")},
                 {"zip/zap/bar.txt", "zip", "zip/zap"}, id="subdirs 1"),
    pytest.param({"foo.txt": f("foo"), "zip/1/2/3/4/bar.txt": f("zip/b}ar")}, {"foo.txt": f("foo")},
                 {"zip/1/2/3/4/bar.txt", "zip", "zip/1", "zip/1/2", "zip/1/2/3", "zip/1/2/3/4"}, id="subdirs 2"),
    pytest.param({"foo.txt": f("foo"), "zip/1/2/3/4/bar.txt": f("zip/b}ar"), "zap/a/b/c/bar.txt": f("zap/bar")},
                 {"foo.txt": f("foo")},
                 {"zip/1/2/3/4/bar.txt", "zip", "zip/1", "zip/1/2", "zip/1/2/3", "zip/1/2/3/4", "zap", "zap/a",
                  "zap/a/b", "zap/a/b/c", "zap/a/b/c/bar.txt"}, id="subdirs 3"),
    pytest.param({"foo.txt": f("foo"), "zap/1/2/3/4/bar.txt": f("zip/bar"), "zap/1/2/c/bar.txt": f("zap/bar"),
                  "zap/1/2/magic.txt": f("indigo")},
                 {"foo.txt": f("foo"), "zap/1/2/magic.txt": f("indigo")},
                 {"zap/1/2/3/4/bar.txt", "zap/1/2/3", "zap/1/2/3/4", "zap/1/2/c", "zap/1/2/c/bar.txt"},
                 id="subdirs 4"),
    pytest.param({"foo.txt": f("foo"), "zap/1/2/3/4/bar.txt": f("zip/bar"), "zap/1/2/c/bar.txt": f("zap/bar")},
                 {"foo.txt": f("foo"), "zap/1/2/magic.txt": f("indigo")},
                 {"zap/1/2/3/4/bar.txt", "zap/1/2/3", "zap/1/2/3/4", "zap/1/2/c", "zap/1/2/c/bar.txt"},
                 id="subdirs 5"),
]


@pytest.mark.parametrize("first,second,expected", PATHS_TO_REMOVE)
def test_paths_to_remove(tmp_path: Path, first: P, second: P, expected: set[str]) -> None:
    writer = AtomicWriter(tmp_path)
    writer.write(first)
    old = tmp_path / os.readlink(tmp_path / DATA_DIR)
    assert writer.paths_to_remove(second, old) == expected


WRITE_ONCE = [
    pytest.param({"foo": f("foo"), "..bar": f("bar"), "binary.bin": f(MYSTERY_BINARY)}, False,
                 id="invalid payload 1"),
    pytest.param({"foo/../bar": f("foo")}, False, id="invalid payload 2"),
    pytest.param({"foo": f("foo"), "bar": f("bar")}, True, id="basic 1"),
    pytest.param({"binary.bin": f(MYSTERY_BINARY), ".binary.bin": f(MYSTERY_BINARY)}, True, id="basic 2"),
    pytest.param({"foo": f("foo", 0o777), "bar": f("bar", 0o400)}, True, id="basic mode 1"),
    pytest.param({"foo": f("foo"), "bar": f("bar"), ".dotfile": f("dotfile"), ".dotfile.file": f("dotfile.file")},
                 True, id="dotfiles"),
    pytest.param({"foo": f("foo", 0o407), "bar": f("bar", 0o440), ".dotfile": f("dotfile", 0o777),
                  ".dotfile.file": f("dotfile.file", 0o666)}, True, id="dotfiles mode"),
    pytest.param({"foo/bar.txt": f("foo/bar"), "bar/zab.txt": f("bar/zab.txt")}, True, id="subdirectories 1"),
    pytest.param({"foo/bar.txt": f("foo/bar", 0o400), "bar/zab.txt": f("bar/zab.txt")}, True,
                 id="subdirectories mode 1"),
    pytest.param({"foo//bar.txt": f("foo//bar"), "bar///bar/zab.txt": f("bar/../bar/zab.txt")}, True,
                 id="subdirectories 2"),
    pytest.param({"foo/bar.txt": f("foo/bar"), "bar/zab.txt": f("bar/zab.txt"), "foo/blaz/bar.txt": f("foo/blaz/bar"),
                  "bar/zib/zab.txt": f("bar/zib/zab.txt")}, True, id="subdirectories 3"),
    pytest.param({"foo.log": f("foo"), "bar.zap": f("bar"), ".dotfile": f("dotfile"), "foo/bar.txt": f("foo/bar"),
                  "bar/zab.txt": f("bar/zab.txt"), "foo/blaz/bar.txt": f("foo/blaz/bar"),
                  "bar/zib/zab.txt": f("bar/zib/zab.txt", 0o400),
                  "1/2/3/4/5/6/7/8/9/10/.dotfile.lib": f("1-2-3-dotfile", 0o777)}, True, id="kitchen sink"),
]


@pytest.mark.parametrize("payload,success", WRITE_ONCE)
def test_write_once(tmp_path: Path, payload: P, success: bool) -> None:
    writer = AtomicWriter(tmp_path)
    if not success:
        with pytest.raises(PayloadError):
            writer.write(payload)
        assert not (tmp_path / DATA_DIR).exists()  # nothing half-written
        return
    assert writer.write(payload)
    check_volume_contents(tmp_path, payload)


UPDATE = [
    pytest.param({"foo": f("foo"), "bar": f("bar")}, {"foo": f("foo2"), "bar": f("bar2", 0o640)}, True, id="update"),
    pytest.param({"foo": f("foo"), "bar": f("bar")}, {"foo": f("foo"), "bar": f("bar")}, False, id="no update"),
    pytest.param({"foo/bar.txt": f("foo"), "bar/zab.txt": f("bar")}, {"foo/bar.txt": f("foo"), "bar/zab.txt": f("bar")},
                 False, id="no update 2"),
    pytest.param({"foo/bar.txt": f("foo"), "bar/zab.txt": f("bar")},
                 {"foo/bar.txt": f("foo"), "bar/zab.txt": f("bar"), "blu/zip.txt": f("zip")}, True, id="add 1"),
    pytest.param({"foo/bar.txt": f("foo"), "bar/zab.txt": f("bar")},
                 {"foo/bar.txt": f("foo"), "bar/zab.txt": f("bar"), "blu/two/2/3/4/5/zip.txt": f("zip")}, True,
                 id="add 2"),
    pytest.param({"foo/bar.txt": f("foo"), "bar/zab.txt": f("bar")},
                 {"foo/bar.txt": f("foo"), "bar/zab.txt": f("bar"), "bar/2/3/4/5/zip.txt": f("zip")}, True,
                 id="add 3"),
    pytest.param({"foo/bar.txt": f("foo"), "bar/zab.txt": f("bar")}, {"foo/bar.txt": f("foo")}, True, id="delete 1"),
    pytest.param({"foo/bar.txt": f("foo"), "bar/1/2/3/zab.txt": f("bar")}, {"foo/bar.txt": f("foo")}, True,
                 id="delete 2"),
    pytest.param({"foo/bar.txt": f("foo"), "bar/1/2/sip.txt": f("sip"), "bar/1/2/3/zab.txt": f("bar")},
                 {"foo/bar.txt": f("foo"), "bar/1/2/sip.txt": f("sip")}, True, id="delete 3"),
    pytest.param({"foo/bar.txt": f("foo"), "bar/1/2/sip.txt": f("sip"), "bar/1/2/3/4/5/6zab.txt": f("bar")},
                 {"foo/bar.txt": f("foo"), "bar/1/2/sip.txt": f("sip")}, True, id="delete 4"),
    pytest.param({"foo/bar.txt": f("foo"), "bar/1/2/sip.txt": f("sip"), "bar/1/2/3/4/5/6zab.txt": f("bar")}, {}, True,
                 id="delete all"),
    pytest.param({"foo/bar.txt": f("foo")}, {"bar/baz.txt": f("baz")}, True, id="add and delete 1"),
]


@pytest.mark.parametrize("first,second,should_write", UPDATE)
def test_update(tmp_path: Path, first: P, second: P, should_write: bool) -> None:
    writer = AtomicWriter(tmp_path)
    writer.write(first)
    check_volume_contents(tmp_path, first)
    before = os.readlink(tmp_path / DATA_DIR)
    assert writer.write(second) == should_write
    check_volume_contents(tmp_path, second)
    after = os.readlink(tmp_path / DATA_DIR)
    assert (after != before) == should_write
    hidden = {p.name for p in tmp_path.iterdir() if p.name.startswith("..") and p.name != DATA_DIR}
    assert hidden == {after}  # the previous timestamped directory is gone


MULTIPLE_UPDATES = [
    pytest.param([{"foo": f("foo"), "bar": f("bar")}, {"foo": f("foo2", 0o400), "bar": f("bar2", 0o400)},
                  {"foo": f("foo3", 0o600), "bar": f("bar3", 0o600)}], id="update 1"),
    pytest.param([{"foo/bar.txt": f("foo/bar"), "bar/zab.txt": f("bar/zab.txt")},
                  {"foo/bar.txt": f("foo/bar2"), "bar/zab.txt": f("bar/zab.txt2", 0o400)}], id="update 2"),
    pytest.param([{"foo": f("foo"), "bar": f("bar")}, {"foo": f("foo2"), "bar": f("bar2")},
                  {"foo": f("foo3"), "bar": f("bar3")}, {"foo": f("foo4"), "bar": f("bar4")}], id="clear sentinel"),
    pytest.param([{"foo/bar.txt": f("foo/bar"), "bar/zab.txt": f("bar/zab.txt"), "foo/blaz/bar.txt": f("foo/blaz/bar"),
                   "bar/zib/zab.txt": f("bar/zib/zab.txt")},
                  {"foo/bar.txt": f("foo/bar2"), "bar/zab.txt": f("bar/zab.txt2"),
                   "foo/blaz/bar.txt": f("foo/blaz/bar2"), "bar/zib/zab.txt": f("bar/zib/zab.txt2")}],
                 id="subdirectories 2"),
    pytest.param([{"foo/bar.txt": f("foo/bar"), "bar//zab.txt": f("bar/zab.txt"), "foo/blaz/bar.txt": f("foo/blaz/bar"),
                   "bar/zib////zib/zab.txt": f("bar/zib/zab.txt")},
                  {"foo/bar.txt": f("foo/bar2"), "bar/zab.txt": f("bar/zab.txt2"),
                   "foo/blaz/bar.txt": f("foo/blaz/bar2"), "bar/zib/zab.txt": f("bar/zib/zab.txt2"),
                   "add/new/keys.txt": f("addNewKeys")}], id="add 1"),
    pytest.param([{"foo/bar.txt": f("foo/bar"), "bar//zab.txt": f("bar/zab.txt"), "foo/blaz/bar.txt": f("foo/blaz/bar"),
                   "zip/zap/zup/fop.txt": f("zip/zap/zup/fop.txt")},
                  {"foo/bar.txt": f("foo/bar2"), "bar/zab.txt": f("bar/zab.txt2")},
                  {"foo/bar.txt": f("foo/bar")}], id="remove 1"),
]


@pytest.mark.parametrize("payloads", MULTIPLE_UPDATES)
def test_multiple_updates(tmp_path: Path, payloads: list[P]) -> None:
    writer = AtomicWriter(tmp_path)
    for payload in payloads:
        writer.write(payload)
        check_volume_contents(tmp_path, payload)


USER_VISIBLE = [
    pytest.param({"foo": f(""), "bar": f("")}, {"foo": "..data/foo", "bar": "..data/bar"}, id="simple path"),
    pytest.param({"foo/bar": f(""), "foo/bar/txt": f(""), "bar/txt": f("")}, {"foo": "..data/foo", "bar": "..data/bar"},
                 id="simple nested path"),
    pytest.param({"./bar": f(""), "foo///bar": f("")}, {"bar": "..data/bar", "foo": "..data/foo"},
                 id="unclean nested path"),
]


@pytest.mark.parametrize("payload,expected", USER_VISIBLE)
def test_create_user_visible_files(tmp_path: Path, payload: P, expected: dict[str, str]) -> None:
    (tmp_path / DATA_DIR).mkdir()
    AtomicWriter(tmp_path)._create_user_visible_files(validate_payload(payload))
    assert {name: os.readlink(tmp_path / name) for name in expected} == expected


def test_a_reader_never_sees_a_mix(tmp_path: Path) -> None:
    """The point of the ..data swap: a file opened through the old link keeps the old version whole."""
    writer = AtomicWriter(tmp_path)
    writer.write({"a": f("1"), "b": f("1")})
    held = (tmp_path / "a").open("rb")
    writer.write({"a": f("2"), "b": f("2")})
    assert held.read() == b"1" and (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes() == b"2"
    held.close()
