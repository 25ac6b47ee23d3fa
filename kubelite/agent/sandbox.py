"""The container's sandbox: a bubblewrap mount namespace, and the container's securityContext.

Every container runs under `bwrap` when it is installed: it sees the host's filesystem, except
that the node's protected directories (the agent's data dir and, under `kubelite up`, the
control plane's: admin token, CA key, state.db, checkpoints) are covered by an empty tmpfs.
`/proc/<agent pid>/root/…` does not reach them either: that needs CAP_SYS_PTRACE, outside the
default capabilities (a privileged container, as upstream, can). The host's pid namespace is
kept: the process runtime's containers see, and are seen with, host pids. Each volume is bound
at its mountPath (the missing directories above it made 0755 here, as runc makes them; bwrap itself
would make them 0700, out of a non-root container's reach): emptyDir volumes are per-pod directories
under `volume_root` (shared by the pod's containers; bound from outside, so their place under the
agent's data dir stays hidden; 0777, see volumes/ownership.py),
hostPath volumes are host paths — refused inside a protected directory, and a protected
directory inside one is masked again at its place under the mount. configMap, secret,
downwardAPI and projected volumes are the directories the volume manager wrote under
`volume_root` (volumes/manager.py), always bound read-only as upstream mounts them; the
directory is bound, so its `..data` swap reaches the container, while a `subPath` binds the one
file as it is at the start, which later updates do not change (as upstream).
persistentVolumeClaim volumes are bound from the directory the agent's volumes/claims.py
linked once the volume may be used here.

securityContext, as far as a process runtime running as root can honour it (see README,
"What is enforced where"): capabilities through bwrap's --cap-drop/--cap-add from containerd's
default set, `privileged` keeps them all, readOnlyRootFilesystem binds / read-only, runAsUser /
runAsGroup / supplementalGroups (after fsGroup) through `setpriv` inside the sandbox, runAsNonRoot is checked
against the effective uid. bwrap always sets no_new_privs, so allowPrivilegeEscalation is
false for every sandboxed container whatever the field says.

Without bubblewrap a container without volumes runs unsandboxed (a development host), and
one with volumes is refused (CreateContainerConfigError) rather than run without its files.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubelite.agent.container import ConfigError
from kubelite.agent.records import format_pod
from kubelite.agent.volumes.manager import is_api_data
from kubelite.agent.volumes.ownership import HOST_DIR_MODE, HOST_FILE_MODE, fs_group, make_dirs, set_up_empty_dir

MOUNT_POINT_MODE = 0o755  # runc's MkdirAll for a mount point: a non-root container can reach its volumes
Obj = dict[str, Any]

# containerd's default capability set (oci.DefaultCapabilities / pkg/cap), as Docker's.
DEFAULT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
                "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE")
# bwrap's outer process is in the container's process group and would die of the stop signal at
# once (the shim then recording an exit while the container still runs): it, and bwrap's init,
# ignore the catchable signals, and `env --default-signal` restores them for the container.
_IGNORED = ",".join(str(int(s)) for s in sorted(signal.valid_signals())
                    if s < 32 and s not in {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGCONT})


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """The protected paths, resolved, without those inside another (one tmpfs hides both)."""
    resolved = sorted({p.resolve() for p in paths}, key=lambda p: len(p.parts))
    out: list[Path] = []
    for p in resolved:
        if not any(_inside(p, q) for q in out):
            out.append(p)
    return out


def _mount_target(mount_path: str) -> str:
    """The mountPath with the symlinks of its existing part resolved on the host (the sandbox sees the host's /):
    bwrap cannot create a mount point through a symlink such as /var/run -> /run, the service-account path's."""
    path = Path(mount_path)
    existing = next((p for p in [path, *path.parents] if p.exists()), Path("/"))
    return str(existing.resolve() / path.relative_to(existing))


def _volume_source(vol: Obj, pod: Obj, volume_root: Path, protected: list[Path]) -> Path:
    if is_api_data(vol):
        source = volume_root / str(vol["name"])
        if not source.is_dir():
            raise ConfigError(f'volume "{vol["name"]}" has not been set up')
        return source
    if "emptyDir" in vol:
        source = volume_root / str(vol["name"])
        set_up_empty_dir(source, fs_group(pod))
        return source
    if "hostPath" in vol:
        host = vol["hostPath"] or {}
        source = Path(host.get("path", ""))
        for p in protected:
            if _inside(source.resolve(), p):
                raise ConfigError(f'hostPath {source} of volume "{vol["name"]}" is inside {p}, '
                                  "which holds the node's credentials and state and is never mounted into a container")
        kind = host.get("type") or ""
        if kind == "DirectoryOrCreate":
            make_dirs(source, HOST_DIR_MODE)
        elif kind == "FileOrCreate" and not source.exists():
            make_dirs(source.parent, HOST_DIR_MODE)
            source.touch()
            source.chmod(HOST_FILE_MODE)
        if not source.exists():
            raise ConfigError(f"hostPath {source} does not exist")
        return source
    if "persistentVolumeClaim" in vol:  # mounted by volumes/claims.py as a symlink once usable on this node
        link = volume_root / str(vol["name"])
        if not link.is_symlink():
            raise ConfigError(f'volume "{vol["name"]}" (persistentVolumeClaim) is not mounted on this node')
        return link.resolve()
    kinds = ", ".join(k for k in vol if k != "name")
    raise ConfigError(f'volume "{vol["name"]}" of type {kinds} is not supported (emptyDir, hostPath, configMap, '
                      'secret, downwardAPI, projected and persistentVolumeClaim are)')


def _mounts(pod: Obj, container: Obj, volume_root: Path, protected: list[Path]) -> list[str]:
    volumes = {v.get("name"): v for v in pod["spec"].get("volumes") or []}
    binds: list[str] = []
    masks: list[str] = []
    for m in container.get("volumeMounts") or []:
        vol = volumes.get(m.get("name"))
        if vol is None:
            raise ConfigError(f'volumeMount "{m.get("name")}" names no volume of the pod')
        source = _volume_source(vol, pod, volume_root, protected)
        api_data = is_api_data(vol)
        if m.get("subPath"):
            root, source = source, source / m["subPath"]
            if api_data:  # a key of the volume: bound as it resolves now (through ..data), never updated
                if not source.exists():
                    raise ConfigError(f'subPath "{m["subPath"]}" of volume "{vol["name"]}" does not exist')
                source = source.resolve()
            else:  # SafeMakeDir: the subPath's directories get the volume's own mode
                make_dirs(source, stat.S_IMODE(root.stat().st_mode))
        target = _mount_target(str(m.get("mountPath", "")))
        parent = Path(target).parent
        if not any(parent == p or p in parent.parents for p in protected):  # under a hidden dir: left to bwrap
            make_dirs(parent, MOUNT_POINT_MODE)  # bwrap would make the missing parents 0700
        binds += ["--ro-bind" if m.get("readOnly") or api_data else "--bind", str(source), target]
        if "hostPath" in vol or "persistentVolumeClaim" in vol:  # e.g. "/": protected dirs stay hidden under it
            real = source.resolve()
            masks += [a for p in protected if real in p.parents
                      for a in ("--tmpfs", str(Path(target) / p.relative_to(real)))]
    return binds + masks


def _security(pod: Obj, container: Obj) -> tuple[list[str], list[str]]:
    """(bwrap options, command prefix) for the container's securityContext over the pod's."""
    pod_sc = pod["spec"].get("securityContext") or {}
    sc = container.get("securityContext") or {}

    def pick(key: str) -> Any:
        return sc[key] if sc.get(key) is not None else pod_sc.get(key)

    uid, gid = pick("runAsUser"), pick("runAsGroup")
    effective = os.geteuid() if uid is None else int(uid)
    if pick("runAsNonRoot"):
        name = format_pod(pod)
        if uid is not None and effective == 0:
            raise ConfigError(f"container's runAsUser breaks non-root policy (pod: \"{name}\", "
                              f"container: {container.get('name')})")
        if effective == 0:  # the "image" user is the agent's own
            raise ConfigError(f"container has runAsNonRoot and image will run as root (pod: \"{name}\", "
                              f"container: {container.get('name')})")
    options: list[str] = ["--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev"] if sc.get("readOnlyRootFilesystem") \
        else ["--dev-bind", "/", "/"]
    if not sc.get("privileged"):
        caps = sc.get("capabilities") or {}
        drop = {str(c).upper().removeprefix("CAP_") for c in caps.get("drop") or []}
        keep = set() if "ALL" in drop else set(DEFAULT_CAPS) - drop
        keep |= {str(c).upper().removeprefix("CAP_") for c in caps.get("add") or []}
        if "ALL" not in keep:  # add: [ALL] keeps every capability, as privileged does
            if uid is not None or gid is not None:
                keep |= {"SETUID", "SETGID"}  # for setpriv; a uid change from root clears them again
            options += ["--cap-drop", "ALL", *(a for c in sorted(keep) for a in ("--cap-add", f"CAP_{c}"))]
    prefix: list[str] = []
    # determineEffectiveSecurityContext: the fsGroup, then supplementalGroups (the volumes' group is the process's)
    groups = [int(g) for g in ([pod_sc["fsGroup"]] if pod_sc.get("fsGroup") is not None else [])
              + (pod_sc.get("supplementalGroups") or [])]
    if uid is not None or gid is not None or groups:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise ConfigError("runAsUser/runAsGroup need setpriv (util-linux), which is not installed on this node")
        prefix = [setpriv, "--reuid", str(effective), "--regid", str(os.getegid() if gid is None else int(gid))]
        prefix += ["--groups", ",".join(map(str, groups))] if groups else ["--clear-groups"]
        prefix.append("--")
    return options, prefix


def sandboxed(command: list[str], pod: Obj, container: Obj, volume_root: Path,
              protected: Sequence[Path] = ()) -> list[str]:
    """`command` wrapped in bubblewrap: protected paths masked, volumes bound, securityContext applied."""
    options, prefix = _security(pod, container)  # runAsNonRoot is refused with or without the sandbox
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        sc = container.get("securityContext") or {}
        needs = ["volumeMounts"] if container.get("volumeMounts") else []
        needs += ["runAsUser/runAsGroup"] if prefix else []
        needs += [k for k in ("readOnlyRootFilesystem", "capabilities") if sc.get(k)]
        if needs:
            raise ConfigError(f"{', '.join(needs)} need the bubblewrap sandbox (bwrap), which is not installed on "
                              "this node")
        return command
    hidden = _outermost(protected)
    masks = [a for p in hidden for a in ("--tmpfs", str(p))]
    mounts = _mounts(pod, container, volume_root, hidden)
    return ["env", f"--ignore-signal={_IGNORED}", bwrap, *options, *masks, *mounts, "--", "env", "--default-signal",
            *prefix, *command]
