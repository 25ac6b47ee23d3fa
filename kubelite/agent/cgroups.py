"""Container memory and CPU limits through the host's cgroups (v2 where delegated, else v1).

Each container instance gets its own cgroup, `kubelite/pod<uid>/<container>_<restart>`, which
its shim joins before running it: memory limit → memory.max (v2) or memory.limit_in_bytes (v1),
CPU limit → a CFS quota per 100 ms period, CPU request → cpu.weight / cpu.shares with kubelet's
conversion. A container the kernel's OOM killer ended in its cgroup is reported OOMKilled.
Kubernetes supports both hierarchies; which one a host gives us decides the files written.
Where neither is writable (an unprivileged agent, a container without delegation) limits are
not enforced — `Cgroups.detect` returns None and the agent says so in its log.

The same cgroups measure what a container uses (agent/stats.py): CPU time from cpu.stat
(v2) or cpuacct.usage (v1, where the cpuacct controller may be mounted apart from cpu, so
containers join it too), memory from memory.stat.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("kubelite.agent")

ROOT = Path("/sys/fs/cgroup")
PREFIX = "kubelite"
CFS_PERIOD_US = 100_000
MIN_SHARES, MAX_SHARES = 2, 262_144


@dataclass(frozen=True)
class Limits:
    group: str  # the pod's cgroup name, shared by its containers
    memory: int | None = None  # bytes
    cpu: int | None = None  # millicores
    cpu_request: int = 0  # millicores


def shares(milli_cpu: int) -> int:
    """kubelet's MilliCPUToShares."""
    if milli_cpu == 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli_cpu * 1024 // 1000))


def weight(milli_cpu: int) -> int:
    """cgroup v2 cpu.weight from shares, as runc converts them."""
    return 1 + ((shares(milli_cpu) - 2) * 9999) // 262_142


def quota(milli_cpu: int) -> int:
    """kubelet's MilliCPUToQuota (at least 1 ms per period)."""
    return max(1000, milli_cpu * CFS_PERIOD_US // 1000)


class Cgroups:
    """One hierarchy flavour; `create` returns the cgroup.procs files a process joins."""

    def __init__(self, version: int, dirs: dict[str, Path]) -> None:
        self.version = version
        self.dirs = dirs  # controller → the kubelite directory in its hierarchy (v2: one directory for all)

    @classmethod
    def detect(cls, root: Path = ROOT) -> Cgroups | None:
        controllers = root / "cgroup.controllers"
        try:
            if controllers.exists() and {"memory", "cpu"} <= set(controllers.read_text().split()):
                base = root / PREFIX
                base.mkdir(exist_ok=True)
                (root / "cgroup.subtree_control").write_text("+memory +cpu")
                (base / "cgroup.subtree_control").write_text("+memory +cpu")
                return cls(2, {"memory": base, "cpu": base})
            if (root / "memory" / "memory.limit_in_bytes").exists() and (root / "cpu" / "cpu.shares").exists():
                dirs = {c: root / c / PREFIX for c in ("memory", "cpu")}
                if (root / "cpuacct" / "cpuacct.usage").exists():  # CPU accounting (separate on some hosts)
                    dirs["cpuacct"] = root / "cpuacct" / PREFIX
                for d in dirs.values():
                    d.mkdir(exist_ok=True)
                return cls(1, dirs)
        except OSError as exc:
            log.warning("cgroups are not writable here (%s): container limits are not enforced", exc)
            return None
        log.warning("no cgroup memory and cpu controllers here: container limits are not enforced")
        return None

    def create(self, name: str, limits: Limits) -> list[str]:
        files: dict[str, str] = {}
        if self.version == 2:
            pod = self.dirs["cpu"] / limits.group
            pod.mkdir(exist_ok=True)
            with contextlib.suppress(OSError):
                (pod / "cgroup.subtree_control").write_text("+memory +cpu")
            if limits.memory is not None:
                files["memory/memory.max"] = str(limits.memory)
                files["memory/memory.swap.max"] = "0"
            if limits.cpu is not None:
                files["cpu/cpu.max"] = f"{quota(limits.cpu)} {CFS_PERIOD_US}"
            files["cpu/cpu.weight"] = str(weight(limits.cpu_request))
        else:
            if limits.memory is not None:
                files["memory/memory.limit_in_bytes"] = str(limits.memory)
            if limits.cpu is not None:
                files["cpu/cpu.cfs_period_us"] = str(CFS_PERIOD_US)
                files["cpu/cpu.cfs_quota_us"] = str(quota(limits.cpu))
            files["cpu/cpu.shares"] = str(shares(limits.cpu_request))
        procs: list[str] = []
        for base in self._bases():  # v2: one directory; v1: one per controller
            (base / name).mkdir(parents=True, exist_ok=True)
            procs.append(str(base / name / "cgroup.procs"))
        for key, value in files.items():
            controller, _, filename = key.partition("/")
            with contextlib.suppress(FileNotFoundError):  # e.g. memory.swap.max without swap accounting
                (self.dirs[controller] / name / filename).write_text(value)
        return procs

    def oom_killed(self, name: str) -> bool:
        events = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.dirs["memory"] / name / events).read_text()
        except OSError:
            return False
        counts = dict(line.split() for line in text.splitlines() if line.count(" ") == 1)
        return int(counts.get("oom_kill", "0")) > 0

    def cpu_seconds(self, name: str) -> float | None:
        """CPU time the processes of cgroup `name` have used (v2 cpu.stat usage_usec, v1 cpuacct.usage ns)."""
        try:
            if self.version == 2:
                stat = dict(line.split() for line in (self.dirs["cpu"] / name / "cpu.stat").read_text().splitlines())
                return int(stat["usage_usec"]) / 1e6
            return int((self.dirs.get("cpuacct", self.dirs["cpu"]) / name / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError, KeyError):
            return None

    def memory_dir(self, name: str) -> Path:
        return self.dirs["memory"] / name

    def _bases(self) -> list[Path]:
        """Each hierarchy directory once (v1's cpu and cpuacct may be one directory under two names)."""
        seen: dict[Path, Path] = {}
        for d in sorted(set(self.dirs.values())):
            seen.setdefault(d.resolve(), d)
        return list(seen.values())

    def remove(self, name: str) -> None:
        """Remove a container's cgroup (after its processes ended) and its pod's when that is empty."""
        for d in self._bases():
            for path in (d / name, (d / name).parent):
                with contextlib.suppress(OSError):
                    os.rmdir(path)
