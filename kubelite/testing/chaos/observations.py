"""What the run saw, as plain values: the invariant checkers are pure functions of these, so each can be
tested with synthetic observations that hold a violation."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProcSample:
    """One workload process seen alive in /proc at time `t` (seconds since the run started)."""

    t: float
    pid: int
    identity: str  # the pod name (a StatefulSet identity for StatefulSet pods)
    pod_uid: str
    node: str
    stateful: bool


@dataclass(frozen=True)
class PodSample:
    """One pod object as the API listed it at time `t`."""

    t: float
    uid: str
    name: str
    node: str
    deletion_timestamp: float | None  # seconds since the run started
    grace: int | None  # metadata.deletionGracePeriodSeconds


@dataclass(frozen=True)
class FileRecord:
    """One line a StatefulSet pod wrote to its identity's file: who, which instance, and when."""

    identity: str
    pod_uid: str
    node: str
    pid: int
    counter: int
    t: float  # seconds since the run started


@dataclass(frozen=True)
class MountSample:
    """A ReadWriteOnce volume seen mounted by a live process on `node` at time `t`."""

    t: float
    volume: str
    node: str


@dataclass(frozen=True)
class Fence:
    """A fence of `node` confirmed at `t` (its NodeFence's status.fencedTime: second precision, so up to 1 s
    early) and cleared (the NodeFence deleted: the node may run pods again) at `cleared`, if it was."""

    t: float
    node: str
    cleared: float | None = None


@dataclass(frozen=True)
class Removal:
    """A pod object deleted from the API, as the DELETED watch event showed its final state at `t`.

    `running`: that final state still reported a container running and no terminal phase — so nobody
    had confirmed its processes dead (the agent publishes the terminal status before its grace-0
    DELETE, PodGC sets the phase Failed before its own)."""

    t: float
    uid: str
    name: str
    node: str
    grace: int | None  # metadata.deletionGracePeriodSeconds of the final state (0: a force delete)
    running: bool


@dataclass(frozen=True)
class Window:
    """A fault on `target` from `start` to `end`."""

    start: float
    end: float
    kind: str
    target: str


@dataclass
class Observations:
    procs: list[ProcSample] = field(default_factory=list)
    pods: list[PodSample] = field(default_factory=list)
    pod_list_times: list[float] = field(default_factory=list)  # when a pod list succeeded
    files: list[FileRecord] = field(default_factory=list)
    acked_writes: set[str] = field(default_factory=set)  # names the server answered 201 for
    final_writes: set[str] | None = None  # the names readable after recovery (None: never read)
    mounts: list[MountSample] = field(default_factory=list)
    fences: list[Fence] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)  # as the pod watch saw them (a 410 relist loses some)
    faults: list[Window] = field(default_factory=list)
    sample_interval: float = 0.25
    pod_list_interval: float = 0.5
