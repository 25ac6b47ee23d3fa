"""The real StatsProvider: node memory and disk, and each pod's memory, logs and emptyDirs.

- Node memory follows kubelet's definition, not MemAvailable: memory.available = capacity -
  working set, with working set = usage - inactive file pages (kubelet reads them from the
  root cgroup; here from /proc/meminfo: usage = MemTotal - MemFree, `Inactive(file)`).
- nodefs is the filesystem of the agent's data directory (statvfs: f_bavail, f_blocks,
  f_ffree, f_files), as cAdvisor reports the kubelet root directory's device.
- A container's memory is its cgroup's working set (usage - inactive_file, v2 or v1) when
  the agent gave it a cgroup, else the resident set of its process group from /proc; its
  process count is that of its process group.
- pid.available is min(kernel.pid_max, kernel.threads-max) minus the tasks in /proc/loadavg,
  as kubelet's pidlimit stats.
- Disk usage is counted like `du` (allocated blocks, one inode per entry) over each emptyDir
  directory and each container's log directory. Containers have no writable layer of their
  own (they write to the host's filesystem), so their rootfs usage is zero.

The walk is blocking I/O, so it runs in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelite.agent.eviction.stats import ContainerStats, FsStats, NodeStats, PodStats, Summary
from kubelite.clock import Clock

Obj = dict[str, Any]
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class PodPaths:
    """Where a pod's usage is found on this host (the agent knows its own layout)."""
    volumes: dict[str, Path] = field(default_factory=dict)  # emptyDir name → directory
    logs: dict[str, Path] = field(default_factory=dict)  # container name → directory of its log files
    cgroups: dict[str, Path] = field(default_factory=dict)  # container name → its memory cgroup directory
    process_groups: dict[str, list[int]] = field(default_factory=dict)  # container name → its process groups


Locate = Callable[[Obj], PodPaths]


def meminfo(path: Path = Path("/proc/meminfo")) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                out[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def node_memory(info: dict[str, int]) -> tuple[int, int] | None:
    """(available, working set) in bytes, kubelet's way."""
    if "MemTotal" not in info or "MemFree" not in info:
        return None
    working_set = max(0, info["MemTotal"] - info["MemFree"] - info.get("Inactive(file)", 0))
    return max(0, info["MemTotal"] - working_set), working_set


def disk_usage(path: Path) -> FsStats:
    """Bytes allocated and inodes used under `path` (not following symlinks); zero when it is absent."""
    used, inodes = 0, 0
    stack = [str(path)]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    used += st.st_blocks * 512
                    inodes += 1
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
    return FsStats(used=used, inodes_used=inodes)


def cgroup_working_set(directory: Path) -> int | None:
    """usage - inactive_file of a memory cgroup (v2 memory.current, v1 memory.usage_in_bytes)."""
    for usage_file, inactive_key in (("memory.current", "inactive_file"),
                                     ("memory.usage_in_bytes", "total_inactive_file")):
        try:
            usage = int((directory / usage_file).read_text())
            stat = dict(line.split() for line in (directory / "memory.stat").read_text().splitlines())
        except (OSError, ValueError):
            continue
        return max(0, usage - int(stat.get(inactive_key, "0")))
    return None


def process_groups(proc: Path = Path("/proc")) -> dict[int, tuple[int, int]]:
    """(resident bytes, processes) per process group, from one pass over /proc/<pid>/stat."""
    totals: dict[int, tuple[int, int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            pgrp, rss = int(fields[2]), int(fields[21])
        except (OSError, ValueError, IndexError):
            continue
        total_rss, count = totals.get(pgrp, (0, 0))
        totals[pgrp] = (total_rss + rss * PAGE_SIZE, count + 1)
    return totals


def pid_stats(proc: Path = Path("/proc")) -> tuple[int | None, int | None]:
    """kubelet's pidlimit stats: (min(kernel.pid_max, kernel.threads-max), tasks running from /proc/loadavg)."""
    limits = []
    for name in ("pid_max", "threads-max"):
        with contextlib.suppress(OSError, ValueError):
            limits.append(int((proc / "sys" / "kernel" / name).read_text()))
    running = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        running = int((proc / "loadavg").read_text().split()[3].split("/")[1])
    return (min(limits) if limits else None), running


class HostStatsProvider:
    def __init__(self, clock: Clock, data_dir: Path, locate: Locate, proc: Path = Path("/proc")) -> None:
        self.clock = clock
        self.data_dir = data_dir
        self.locate = locate
        self.proc = proc

    async def summary(self, pods: Sequence[Obj]) -> Summary:
        located = [(p["metadata"].get("uid", ""), self.locate(p)) for p in pods]
        return await asyncio.to_thread(self.collect, located, self.clock.now())

    def collect(self, pods: Sequence[tuple[str, PodPaths]], now: float) -> Summary:
        memory = node_memory(meminfo(self.proc / "meminfo"))
        vfs = os.statvfs(self.data_dir)
        fs = FsStats(available=vfs.f_bavail * vfs.f_frsize, capacity=vfs.f_blocks * vfs.f_frsize,
                     inodes_free=vfs.f_ffree, inodes=vfs.f_files)
        max_pid, running = pid_stats(self.proc)
        node = NodeStats(memory_available=memory[0] if memory else None,
                         memory_working_set=memory[1] if memory else None, fs=fs, max_pid=max_pid,
                         running_processes=running, time=now)
        groups = process_groups(self.proc) if any(p.process_groups for _, p in pods) else {}
        return Summary(node, tuple(self._pod(uid, paths, groups) for uid, paths in pods))

    def _pod(self, uid: str, paths: PodPaths, groups: dict[int, tuple[int, int]]) -> PodStats:
        containers = []
        names = sorted({*paths.logs, *paths.cgroups, *paths.process_groups})
        for name in names:
            working_set = None
            if name in paths.cgroups:
                working_set = cgroup_working_set(paths.cgroups[name])
            if working_set is None and name in paths.process_groups:
                working_set = sum(groups.get(g, (0, 0))[0] for g in paths.process_groups[name])
            logs = disk_usage(paths.logs[name]) if name in paths.logs else FsStats(used=0, inodes_used=0)
            containers.append(ContainerStats(name, working_set, FsStats(used=0, inodes_used=0), logs))
        volumes = tuple((name, disk_usage(d)) for name, d in sorted(paths.volumes.items()))
        used = [c.logs for c in containers if c.logs] + [fs for _, fs in volumes]
        ephemeral = FsStats(used=sum(f.used or 0 for f in used), inodes_used=sum(f.inodes_used or 0 for f in used))
        memory = [c.memory_working_set for c in containers if c.memory_working_set is not None]
        processes = sum(groups.get(g, (0, 0))[1] for gs in paths.process_groups.values() for g in gs)
        return PodStats(uid, sum(memory) if memory else None, tuple(containers), volumes, ephemeral, processes)
