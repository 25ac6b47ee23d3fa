"""Volume directories a non-root container can use: modes set explicitly, and fsGroup ownership.

The agent runs with umask 077 (its own files stay private), so every directory a container sees
is given its mode with chmod after mkdir, never through the umask: an emptyDir is 0777 (pkg/volume/
emptydir `perm`), the directories of an API-data volume 0777 at its root (it is an emptyDir
underneath) and 0755 inside, a subPath directory takes its volume's mode, a hostPath
DirectoryOrCreate 0755 and FileOrCreate file 0644 (hostutil's MakeDir / MakeFile).

`set_volume_ownership` ports pkg/volume/volume_linux.go SetVolumeOwnership: with the pod's
`fsGroup`, every file and directory of the volume (children before their directory, symlinks
not chmodded) gets that group and the group's bits — rw (0660), or r (0440) for a read-only
volume — and directories also x (0110) and setgid, so what the container creates there inherits
the group. The container's process has the fsGroup among its supplementary groups (sandbox.py), as
kubelet's determineEffectiveSecurityContext adds it. A chown the agent may not make (it does not run
as root) is logged, as upstream logs and goes on.

`fsGroupChangePolicy: OnRootMismatch` skips the walk when the volume's root already has the group, the
group's bits and setgid (skipPermissionChange / requiresPermissionChange). As upstream, only persistent
volumes pass the pod's policy: emptyDir and API-data volumes are set up with none (Always), and of the
persistent volumes only `local` ones get an fsGroup at all (kubelite's own CSI drivers have no fsType, so
the default CSIDriver fsGroupPolicy ReadWriteOnceWithFSType skips them; hostPath volumes never get one).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("kubelite.agent.volumes")

Obj = dict[str, Any]
RW_MASK, RO_MASK, EXEC_MASK = 0o660, 0o440, 0o110
EMPTY_DIR_MODE = 0o777  # emptydir.perm: anyone may write, as the container's user is unknown in advance
DIR_MODE = 0o755  # MkdirAll(…, ModePerm) under kubelet's umask 022: the directories inside a projected payload
HOST_DIR_MODE = 0o755  # hostutil.MakeDir, for a hostPath DirectoryOrCreate
HOST_FILE_MODE = 0o644  # hostutil.MakeFile, for a hostPath FileOrCreate
ON_ROOT_MISMATCH = "OnRootMismatch"  # v1.FSGroupChangeOnRootMismatch


def fs_group(pod: Obj) -> int | None:
    value = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
    return None if value is None else int(value)


def fs_group_change_policy(pod: Obj) -> str | None:
    value = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroupChangePolicy")
    return None if value is None else str(value)


def fs_user(pod: Obj) -> int | None:
    """volume/util.FsUserFrom: the runAsUser every container of the pod runs as (container's over pod's), None when
    one has none or two differ. A projected token is then owned by that user, mode 0600."""
    spec = pod.get("spec") or {}
    pod_uid = (spec.get("securityContext") or {}).get("runAsUser")
    found: int | None = None
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []) + \
            (spec.get("ephemeralContainers") or []):
        own = (c.get("securityContext") or {}).get("runAsUser")
        uid = own if own is not None else pod_uid
        if uid is None or (found is not None and found != int(uid)):
            return None
        found = int(uid)
    return found


def make_dirs(path: Path, mode: int) -> bool:
    """Create `path` and its missing parents with exactly `mode` (chmod after each mkdir: the umask would clear
    bits); False when it existed already (then it is left as it is)."""
    if path.is_dir():
        return False
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for p in reversed(missing):
        try:
            p.mkdir()
        except FileExistsError:  # made meanwhile (another container of the pod starting)
            continue
        p.chmod(mode)
    return True


def make_volume_dir(path: Path, mode: int) -> bool:
    """A volume's own directory, made with `mode` (False: it existed); the agent's directories above it (the
    pod's, under the data dir) are made as the agent's other files are, private."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return make_dirs(path, mode)


def set_up_empty_dir(path: Path, group: int | None) -> None:
    """emptyDir SetUpAt: the directory 0777 whatever the umask, then the fsGroup's ownership — once, when it is
    made (upstream marks the volume ready then and does not redo it)."""
    if make_volume_dir(path, EMPTY_DIR_MODE):
        set_volume_ownership(path, group, read_only=False)


def _change(path: Path, group: int, read_only: bool, st: os.stat_result) -> None:
    """changeFilePermission: the group always (lchown), the mode bits except on a symlink (a chmod would follow
    it and widen the file it points to, overriding the volume's defaultMode)."""
    try:
        os.lchown(path, -1, group)
    except OSError as exc:
        log.warning("Lchown failed on %s: %s", path, exc)
    if stat.S_ISLNK(st.st_mode):
        return
    mask = RO_MASK if read_only else RW_MASK
    if stat.S_ISDIR(st.st_mode):
        mask |= stat.S_ISGID | EXEC_MASK
    try:
        os.chmod(path, stat.S_IMODE(st.st_mode) | mask)
    except OSError as exc:
        log.warning("chmod failed on %s: %s", path, exc)


def _walk_deep(path: Path, st: os.stat_result, group: int, read_only: bool, skip: frozenset[Path]) -> None:
    """walkDeep: children (unsorted) before their directory; nothing in `skip` or below it."""
    if path in skip:
        return
    if stat.S_ISDIR(st.st_mode):
        with os.scandir(path) as entries:
            for entry in list(entries):
                _walk_deep(Path(entry.path), entry.stat(follow_symlinks=False), group, read_only, skip)
    _change(path, group, read_only, st)


def requires_permission_change(root: Path, group: int, read_only: bool) -> bool:
    """requiresPermissionChange: whether the volume's root lacks the group, the group's bits (rw, or r when read-only;
    x on a directory) or setgid — or is no directory, or cannot be read."""
    try:
        st = root.stat()
    except OSError as exc:
        log.error("Performing recursive ownership change on %s because reading permissions of root volume failed: "
                  "%s", root, exc)
        return True
    if st.st_gid != group or not stat.S_ISDIR(st.st_mode):
        return True
    wanted = (RO_MASK if read_only else RW_MASK) | EXEC_MASK
    return (stat.S_IMODE(st.st_mode) & wanted) != wanted or not st.st_mode & stat.S_ISGID


def skip_permission_change(directory: Path, group: int, read_only: bool, policy: str | None) -> bool:
    """skipPermissionChange: only with the OnRootMismatch policy, when the root already matches."""
    return policy == ON_ROOT_MISMATCH and not requires_permission_change(directory, group, read_only)


def set_volume_ownership(directory: Path, group: int | None, read_only: bool, policy: str | None = None,
                         protected: Sequence[Path] = ()) -> None:
    """SetVolumeOwnership: nothing without an fsGroup; with `policy` OnRootMismatch nothing when the volume's root
    already matches (`policy` None or Always: the whole volume, every time). The `protected` directories (resolved:
    the node's credentials and state) are left as they are when the volume holds them (a local volume at `/`)."""
    if group is None:
        return
    if skip_permission_change(directory, group, read_only, policy):
        log.debug("Skipping permission and ownership change for volume %s", directory)
        return
    root = directory.resolve()
    _walk_deep(root, root.lstat(), group, read_only, frozenset(protected))
