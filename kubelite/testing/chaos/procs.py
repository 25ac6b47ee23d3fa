"""The host's process table as the invariant checkers need it: the workload's containers are real
processes, marked by their environment (CHAOS_RUN, and the pod's name, uid and node from the downward API)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from kubelite.testing.chaos.observations import MountSample, ProcSample

RUN_ENV = "CHAOS_RUN"
WORKLOAD_COMM = "bash"  # the workload's loop; its `sleep` children carry the same markers and are not counted


def _environ(pid_dir: Path) -> dict[str, str]:
    raw = (pid_dir / "environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def data_volume(pid: int, mount_point: str = "/data", proc: Path = Path("/proc")) -> str | None:
    """The volume (its directory's name: the PersistentVolume's) mounted at `mount_point` in the process's
    mount namespace, from /proc/PID/mountinfo (field 4 is the mount's root within its filesystem, field 5
    the mount point); None when nothing is mounted there or the process is gone."""
    try:
        lines = (proc / str(pid) / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    roots = [f[3] for f in (line.split() for line in lines) if len(f) > 4 and f[4] == mount_point]
    return Path(roots[-1]).name if roots else None  # the last mount over a point is the visible one


def mounts(samples: list[ProcSample], proc: Path = Path("/proc")) -> list[MountSample]:
    """Which node holds which StatefulSet volume, as the live processes of one scan show it."""
    out = []
    for s in samples:
        volume = data_volume(s.pid, proc=proc) if s.stateful else None
        if volume is not None:
            out.append(MountSample(s.t, volume, s.node))
    return out


def _running(stat: str) -> bool:
    """Whether /proc/PID/stat's text is a live process's (a zombie, dead but not yet reaped, is not)."""
    return stat[stat.rindex(")") + 2] not in "ZX"


def _workload(run_id: str, proc: Path, comm: str | None = None) -> Iterator[tuple[int, dict[str, str]]]:
    """(pid, environment) of every live process of run `run_id`'s workload — only those named `comm` when
    given (checked first: the cheapest read, it skips most of the host's processes)."""
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if comm is not None and (entry / "comm").read_text().strip() != comm:
                continue
            if not _running((entry / "stat").read_text()):
                continue
            env = _environ(entry)
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
        if env.get(RUN_ENV) == run_id:
            yield int(entry.name), env


def scan(run_id: str, t: float, proc: Path = Path("/proc")) -> list[ProcSample]:
    """Every live (not zombie) workload process of run `run_id` at time `t`."""
    return [ProcSample(t, pid, env.get("CHAOS_IDENTITY", ""), env.get("CHAOS_POD_UID", ""), env.get("CHAOS_NODE", ""),
                       env.get("CHAOS_KIND") == "statefulset")
            for pid, env in _workload(run_id, proc, WORKLOAD_COMM)]


def node_processes(run_id: str, node: str, proc: Path = Path("/proc")) -> list[int]:
    """Every live process of run `run_id`'s workload on `node`: the loops and their children alike."""
    return [pid for pid, env in _workload(run_id, proc) if env.get("CHAOS_NODE") == node]


def alive(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether `pid` is a live process (a zombie, dead but not yet reaped by its parent, is not)."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return False
    return _running(stat)
