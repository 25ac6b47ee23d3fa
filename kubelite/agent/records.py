"""What the agent knows of each container of a pod: its current instance, restarts, last exit, back-off.

kubelet asks the container runtime for this (the pod status cache); here the runtime is plain
processes, so the record is the agent's own and it is checkpointed (checkpoint.py) so that a
restarted agent takes over with the same restart counts, exits and back-off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelite.agent.lifecycle import Backoff
from kubelite.agent.prober import Prober
from kubelite.agent.runtime.interface import Exit, Handle

Obj = dict[str, Any]


def format_pod(pod: Obj) -> str:
    """kubelet's format.Pod: `name_namespace(uid)`, how its events and messages name a pod."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})"


def pod_dir(data_dir: Path, pod: Obj) -> Path:
    """The pod's directory under the data dir (logs, volumes, checkpoint): `<namespace>_<name>_<uid>`."""
    meta = pod["metadata"]
    return Path(data_dir) / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid']}"


@dataclass
class Record:
    spec: Obj
    kind: str  # init | sidecar | app | ephemeral
    process: Handle | None = None
    restarts: int = 0
    started_at: float = 0.0
    exit: Exit | None = None
    finished_at: float = 0.0
    last_terminated: Obj | None = None
    waiting: str = "ContainerCreating"
    waiting_message: str = ""
    not_before: float = 0.0
    backoff: Backoff = field(default_factory=Backoff)
    ever_started: bool = False
    backoff_reported: int = -1
    prober: Prober | None = None
    starting: str | None = None  # the log path of an instance being spawned (checkpointed before the spawn)

    @property
    def ready(self) -> bool:
        return self.started and (self.prober is None or self.prober.state.ready)

    @property
    def started(self) -> bool:
        return self.running and (self.prober is None or self.prober.state.started)

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.alive

    def checkpoint(self) -> Obj:
        return {"restarts": self.restarts, "startedAt": self.started_at, "everStarted": self.ever_started,
                "exit": [self.exit.code, self.exit.oom_killed] if self.exit else None,
                "finishedAt": self.finished_at, "lastTerminated": self.last_terminated, "notBefore": self.not_before,
                "backoff": self.backoff.delay, "waiting": [self.waiting, self.waiting_message],
                "process": self.process.checkpoint() if self.process is not None and self.process.alive else None,
                "starting": self.starting}

    def restore(self, saved: Obj) -> None:
        self.restarts, self.started_at = int(saved["restarts"]), float(saved["startedAt"])
        self.ever_started, self.finished_at = bool(saved["everStarted"]), float(saved["finishedAt"])
        self.exit = Exit(*saved["exit"]) if saved["exit"] else None
        self.last_terminated, self.not_before = saved["lastTerminated"], float(saved["notBefore"])
        self.backoff.delay = float(saved["backoff"])
        self.waiting, self.waiting_message = saved["waiting"]


def records_for(spec: Obj, backoff: Backoff) -> list[Record]:
    """One record per container: init containers (sidecars when restartPolicy Always) in order, then apps."""
    records = [Record(c, "sidecar" if c.get("restartPolicy") == "Always" else "init")
               for c in spec.get("initContainers") or []]
    records += [Record(c, "app") for c in spec.get("containers") or []]
    for r in records:
        r.backoff = Backoff(backoff.maximum, backoff.initial)
    return records
