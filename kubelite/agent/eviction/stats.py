"""What the eviction manager measures: a small copy of kubelet's stats Summary.

Upstream the manager reads the Summary API (node memory and filesystems, each pod's memory
working set, its containers' rootfs and logs, its volumes). The same shape here keeps the
ranking and signal code a line-by-line port, and lets tests hand the manager a fake
`StatsProvider` instead of a real host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Obj = dict[str, Any]


@dataclass(frozen=True)
class FsStats:
    available: int | None = None  # bytes
    capacity: int | None = None
    used: int | None = None
    inodes_free: int | None = None
    inodes: int | None = None
    inodes_used: int | None = None


@dataclass(frozen=True)
class ContainerStats:
    name: str
    memory_working_set: int | None = None
    rootfs: FsStats | None = None  # the container's writable layer (kubelite containers have none: zero)
    logs: FsStats | None = None


@dataclass(frozen=True)
class PodStats:
    uid: str
    memory_working_set: int | None = None
    containers: tuple[ContainerStats, ...] = ()
    volumes: tuple[tuple[str, FsStats], ...] = ()  # (volume name, usage)
    ephemeral_storage: FsStats | None = None  # containers' rootfs + logs + local volumes
    process_count: int | None = None


@dataclass(frozen=True)
class NodeStats:
    memory_available: int | None = None
    memory_working_set: int | None = None
    fs: FsStats | None = None  # the filesystem of the agent's data directory (nodefs)
    max_pid: int | None = None  # min(kernel.pid_max, kernel.threads-max)
    running_processes: int | None = None  # tasks on the node
    time: float = 0.0  # when these stats were taken (clock.now())


@dataclass(frozen=True)
class Summary:
    node: NodeStats
    pods: Sequence[PodStats] = field(default_factory=tuple)


class StatsProvider(Protocol):
    async def summary(self, pods: Sequence[Obj]) -> Summary:
        """Stats of the node and of `pods` (the ones it runs now)."""
        ...
