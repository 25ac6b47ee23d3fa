"""kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go): a volume's files replaced all at once.

A payload (relative path → data and mode) is written into a fresh hidden directory
`..<UTC timestamp>.<random>`; the symlink `..data` is then pointed at it by creating
`..data_tmp` and renaming it over `..data` (rename is atomic), so a reader inside the container
sees either the whole old set of files or the whole new one, never a mix. The user-visible
names are symlinks through `..data` (`key -> ..data/key`), created once; top-level names no
longer in the payload are removed, and the previous timestamped directory is deleted. A file
bound on its own (a `subPath` mount) resolves the symlinks at mount time, so it keeps the old
content after an update, as upstream.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubelite.agent.volumes.ownership import DIR_MODE, RO_MASK, make_dirs, set_volume_ownership

DATA_DIR = "..data"
NEW_DATA_DIR = "..data_tmp"
MAX_PATH_LENGTH = 4096
MAX_FILE_NAME_LENGTH = 255


@dataclass(frozen=True)
class FileProjection:
    data: bytes
    mode: int = 0o644
    fs_user: int | None = None  # the file's owner (a projected token of a pod whose containers share a runAsUser)


Payload = Mapping[str, FileProjection]


class PayloadError(ValueError):
    pass


def validate_path(target: str) -> None:
    """validatePath: relative, no `..` element, no element over 255 characters, not starting with `..`."""
    if not target:
        raise PayloadError(f'invalid path: must not be empty: "{target}"')
    if posixpath.isabs(target):
        raise PayloadError(f"invalid path: must be relative path: {target}")
    if len(target) > MAX_PATH_LENGTH:
        raise PayloadError(f"invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters")
    items = target.split("/")
    for item in items:
        if item == "..":
            raise PayloadError(f"invalid path: must not contain '..': {target}")
        if len(item) > MAX_FILE_NAME_LENGTH:
            raise PayloadError(f"invalid path: filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} "
                               "characters")
    if items[0].startswith("..") and len(items[0]) > 2:
        raise PayloadError(f"invalid path: must not start with '..': {target}")


def validate_payload(payload: Payload) -> dict[str, FileProjection]:
    """validatePayload: every path valid, then cleaned (`foo////bar` → `foo/bar`)."""
    out = {}
    for target, projection in payload.items():
        validate_path(target)
        out[posixpath.normpath(target)] = projection
    return out


class AtomicWriter:
    """Writes one volume's payloads. With `fs_group` (the pod's fsGroup), the whole volume is given to that group,
    read-only (ownership.set_volume_ownership), before a new version is published — upstream's setPerms step."""

    def __init__(self, target_dir: Path, fs_group: int | None = None) -> None:
        self.target_dir = target_dir
        self.fs_group = fs_group

    def _same(self, path: Path, projection: FileProjection) -> bool:
        """Whether `path` holds the projection: its data, and the mode and owner it was given (the group's read
        bits added with an fsGroup) — so a changed defaultMode is written anew too."""
        try:
            st = path.stat()
            mode = projection.mode | (RO_MASK if self.fs_group is not None else 0)
            return (st.st_mode & 0o7777) == mode and projection.fs_user in (None, st.st_uid) and \
                path.read_bytes() == projection.data
        except FileNotFoundError:
            return False

    def paths_to_remove(self, payload: Payload, old_ts_dir: Path) -> set[str]:
        """Every file and directory of the old version that the new payload (its files and their parents) lacks."""
        old = {str(p.relative_to(old_ts_dir)) for p in old_ts_dir.rglob("*")}
        keep: set[str] = set()
        for target in payload:
            parts = target.split("/")
            keep.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        return old - keep

    def write(self, payload: Payload) -> bool:
        """Project `payload` into the target directory; False when it already holds exactly that."""
        clean = validate_payload(payload)
        data_dir = self.target_dir / DATA_DIR
        old_ts = os.readlink(data_dir) if data_dir.is_symlink() else ""
        old_ts_dir = self.target_dir / old_ts
        to_remove: set[str] = set()
        should_write = True
        if old_ts:
            to_remove = self.paths_to_remove(clean, old_ts_dir)
            should_write = bool(to_remove) or not all(self._same(old_ts_dir / p, f) for p, f in clean.items())
        if should_write:
            ts_dir = Path(tempfile.mkdtemp(prefix=time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()),
                                           dir=self.target_dir))
            ts_dir.chmod(DIR_MODE)
            self._write_payload(clean, ts_dir)
            set_volume_ownership(self.target_dir, self.fs_group, read_only=True)
            tmp_link = self.target_dir / NEW_DATA_DIR
            if tmp_link.is_symlink():
                tmp_link.unlink()
            os.symlink(ts_dir.name, tmp_link)
            os.rename(tmp_link, data_dir)
        self._create_user_visible_files(clean)
        for target in to_remove:
            if "/" not in target:
                (self.target_dir / target).unlink(missing_ok=True)
        if should_write and old_ts:
            shutil.rmtree(old_ts_dir, ignore_errors=True)
        return should_write

    @staticmethod
    def _write_payload(payload: Payload, ts_dir: Path) -> None:
        for target, projection in payload.items():
            path = ts_dir / target
            make_dirs(path.parent, DIR_MODE)
            path.write_bytes(projection.data)
            path.chmod(projection.mode)  # exactly the mode asked for, whatever the umask
            if projection.fs_user is not None:
                os.chown(path, projection.fs_user, -1)

    def _create_user_visible_files(self, payload: Payload) -> None:
        for target in payload:
            top = target.split("/", 1)[0]
            visible = self.target_dir / top
            if not visible.is_symlink():
                os.symlink(posixpath.join(DATA_DIR, top), visible)
