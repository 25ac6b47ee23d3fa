"""What a simulation observes: an event log of pod and Event changes, and samples of the cluster over time.

It watches through the same client as every component (informers over the in-process transport);
times are virtual seconds since the simulation started. The log is the run's fingerprint: the same
scenario and seed give the same bytes.
"""

from __future__ import annotations

import re
import sys
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from kubelite.api.podresources import pod_requests, quantity_units
from kubelite.client.informer import Handlers, Informer
from kubelite.client.interface import Client
from kubelite.clock import Clock

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
RESOURCES = ("cpu", "memory", "pods")
DISRUPTIONS = ("Preempted", "Evicted", "TaintManagerEviction")


@dataclass(slots=True)
class Timeline:
    """The termination timeline of a pod the scenario's `timeline` names: its milestones (virtual seconds; None
    until reached) and the steps the report draws."""

    running: float | None = None
    deleting: float | None = None
    finished: float | None = None
    deleted: float | None = None
    steps: list[tuple[float, str]] = field(default_factory=list)


@dataclass(slots=True)
class PodLife:
    """What the report keeps of every pod, for the whole run: when it was created and scheduled, and where —
    with its key, about 250 bytes a pod (BENCHMARKS.md, Memory kept after a pod is gone). Only the pods of
    the scenario's `timeline` keep their milestones and steps too."""

    created: float
    scheduled: float | None = None
    node: str = ""  # interned: one string per node, however many pods it ran
    timeline: Timeline | None = None


def on_timeline(name: str, timeline: Iterable[str]) -> bool:
    """Whether the report draws the termination timeline of the pod `name` (a name in it, or prefixed by one)."""
    return any(name.startswith(prefix) for prefix in timeline)


def _view(pod: Obj) -> tuple[Any, ...]:
    """What of a pod the log follows: phase, node, deletion, readiness, each container's state and restarts."""
    status = pod.get("status") or {}
    containers = tuple((c["name"], next(iter(c.get("state") or {"waiting": {}})), c.get("restartCount", 0),
                        ((c.get("state") or {}).get("terminated") or {}).get("exitCode"))
                       for c in [*(status.get("initContainerStatuses") or []),
                                 *(status.get("containerStatuses") or [])])
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return (status.get("phase"), pod["spec"].get("nodeName"), bool(pod["metadata"].get("deletionTimestamp")),
            ready, containers)


def _milestones(life: Timeline, now: float, view: tuple[Any, ...]) -> None:
    """The steps a timeline pod's new view reached: running, deletion requested, finished."""
    phase, _, deleting, _, _ = view
    if phase == "Running" and life.running is None:
        life.running = now
        life.steps.append((now, "running"))
    if deleting and life.deleting is None:
        life.deleting = now
        life.steps.append((now, "deletion requested"))
    if phase in ("Succeeded", "Failed") and life.finished is None:
        life.finished = now
        life.steps.append((now, phase.lower()))


def _statuses(pod: Obj | None) -> dict[str, Obj]:
    status = (pod or {}).get("status") or {}
    return {c["name"]: c for c in [*(status.get("initContainerStatuses") or []),
                                   *(status.get("containerStatuses") or [])]}


def _ended(terminated: Obj | None) -> tuple[Any, ...] | None:
    """An exit as a container status shows it (state or lastState `terminated`), to tell one exit from another."""
    return None if not terminated else (terminated.get("startedAt"), terminated.get("finishedAt"),
                                        terminated.get("exitCode"))


BACK_OFF = re.compile(r"back-off (\S+) restarting")  # kubelet's CrashLoopBackOff message: "back-off 40s restarting …"


def _container_steps(life: Timeline, now: float, old: Obj | None, pod: Obj) -> None:
    """Each container's exits, restarts and back-off delays: an exit shows as the state `terminated`, or — for a
    container that is restarted — as a new `lastState`; a restart as a higher restartCount; a back-off as the
    CrashLoopBackOff message's delay (10 s, 20 s, 40 s, … up to 300 s: it changes only the message)."""
    before = _statuses(old)
    for name, c in _statuses(pod).items():
        b = before.get(name) or {}
        state, was = c.get("state") or {}, b.get("state") or {}
        ended, was_ended = _ended(state.get("terminated")), _ended(was.get("terminated"))
        last, was_last = _ended((c.get("lastState") or {}).get("terminated")), \
            _ended((b.get("lastState") or {}).get("terminated"))
        if ended is not None and ended != was_ended:
            life.steps.append((now, f"{name} exited {ended[2]}"))
        elif last is not None and last not in (was_last, was_ended):
            life.steps.append((now, f"{name} exited {last[2]}"))
        restarts = int(c.get("restartCount") or 0)
        if restarts > int(b.get("restartCount") or 0) and "running" in state:
            life.steps.append((now, f"{name} restart {restarts}"))
        waiting, was_waiting = state.get("waiting") or {}, was.get("waiting") or {}
        delay = BACK_OFF.match(waiting.get("message") or "") if waiting.get("reason") == "CrashLoopBackOff" else None
        if delay is not None and waiting.get("message") != was_waiting.get("message"):
            life.steps.append((now, f"{name} back-off {delay.group(1)}"))


class Recorder:
    def __init__(self, client: Client, clock: Clock, start: float, timeline: Sequence[str] = ()) -> None:
        self.clock = clock
        self.start = start
        self.timeline = tuple(timeline)  # the pod names (prefixes) whose termination timeline is kept
        # The event log, compressed as it is written (a JSON line is ≈ 200 bytes, a pod writes ≈ 10 of them,
        # and the log is kept whole until the run's end: ≈ 2 KB a pod uncompressed, ≈ 0.2 KB so).
        self._log = zlib.compressobj(1)
        self._log_chunks: list[bytes] = []
        self.pods: dict[str, PodLife] = {}  # by namespace/name/uid
        self.latest: dict[str, Timeline] = {}  # by namespace/name: the newest timeline pod of that name
        self.disruptions: list[tuple[float, str, str]] = []  # (t, reason, pod)
        self.samples: list[Obj] = []
        self.pod_informer = Informer(client, "/api/v1/pods", clock,
                                     Handlers(self._pod_added, self._pod_updated, self._pod_deleted))
        self.node_informer = Informer(client, "/api/v1/nodes", clock)
        self.event_informer = Informer(client, "/api/v1/events", clock,
                                       Handlers(self._event, lambda old, new: self._event(new), self._event_gone))
        self._seen_events: dict[str, int] = {}  # by uid: the count last logged
        self.failures: list[tuple[float, str, str]] = []  # (t, where in the scenario, the API's message)

    def t(self) -> float:
        return round(self.clock.monotonic() - self.start, 3)

    def _write(self, record: Obj) -> None:
        line = orjson.dumps({"t": self.t(), **record}, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
        chunk = self._log.compress(line)
        if chunk:
            self._log_chunks.append(chunk)

    def events_log(self) -> bytes:
        """The event log so far: one JSON line per record, each ending in a newline (a lone newline when there
        is none, as it has always been written)."""
        text = zlib.decompress(b"".join([*self._log_chunks, self._log.copy().flush()]))
        return text or b"\n"

    @staticmethod
    def _key(pod: Obj) -> str:
        m = pod["metadata"]
        return f"{m['namespace']}/{m['name']}/{m['uid']}"

    def _pod_added(self, pod: Obj) -> None:
        meta = pod["metadata"]
        life = self.pods[self._key(pod)] = PodLife(self.t())
        if on_timeline(meta["name"], self.timeline):
            life.timeline = self.latest[f"{meta['namespace']}/{meta['name']}"] = Timeline()
        self._pod_updated(None, pod)

    def _pod_updated(self, old: Obj | None, pod: Obj) -> None:
        life = self.pods.get(self._key(pod))
        if life is None:
            return
        view = _view(pod)
        seen = _view(old) if old is not None else None
        if seen == view and life.timeline is None:  # a timeline pod's back-off delay changes only a message
            return
        now = self.t()
        if seen != view:
            phase, node, deleting, ready, containers = view
            if node and life.scheduled is None:
                life.scheduled, life.node = now, sys.intern(node)
                if life.timeline is not None:
                    life.timeline.steps.append((now, f"scheduled to {node}"))
            if life.timeline is not None:
                _milestones(life.timeline, now, view)
            self._write({"pod": self._key(pod).rsplit("/", 1)[0], "phase": phase, "node": node,
                         "deleting": deleting, "ready": ready, "containers": [list(c) for c in containers]})
        if life.timeline is not None:
            _container_steps(life.timeline, now, old, pod)

    def _pod_deleted(self, pod: Obj) -> None:
        life = self.pods.get(self._key(pod))
        if life is not None and life.timeline is not None:
            life.timeline.deleted = self.t()
            life.timeline.steps.append((life.timeline.deleted, "deleted"))
        self._write({"pod": self._key(pod).rsplit("/", 1)[0], "gone": True})

    def _event(self, event: Obj) -> None:
        """An Event, and each repeat of it: the event recorder's correlator aggregates a repeat (same object,
        reason, message) into the same Event with its count bumped, as upstream's does — ten back-offs are one
        BackOff Event counted to 10. Each count is logged (`count` when above 1) and drawn on a timeline."""
        uid = event["metadata"].get("uid", "")
        count = int(event.get("count") or 1)
        last = self._seen_events.get(uid)
        if last is not None and count <= last:  # written again, not repeated
            return
        self._seen_events[uid] = count
        obj = event.get("involvedObject") or {}
        name = f"{obj.get('namespace', '')}/{obj.get('name', '')}"
        reason = event.get("reason", "")
        self._write({"event": reason, "object": f"{obj.get('kind', '')} {name}", "message": event.get("message", ""),
                     **({"count": count} if count > 1 else {})})
        if reason in DISRUPTIONS and last is None:  # a disruption is counted once per pod and reason
            self.disruptions.append((self.t(), reason, name))
        life = self.latest.get(name) if obj.get("kind") == "Pod" else None
        if life is not None and life.deleted is None and reason in ("Killing", "BackOff", *DISRUPTIONS):
            life.steps.append((self.t(), reason))

    def _event_gone(self, event: Obj) -> None:
        """An Event deleted (expired): nothing of it comes again, its uid need not be remembered."""
        self._seen_events.pop(event["metadata"].get("uid", ""), None)

    def evicted(self, pod: Obj) -> None:
        """An eviction through the API (a drain) succeeded: it leaves no Event, so it is counted here."""
        name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        self.disruptions.append((self.t(), "Evicted (API)", name))
        self._write({"action": "evicted", "detail": name})

    def log_action(self, what: str, detail: str | Obj) -> None:
        """A scenario action: its detail a name, or the fault's mapping (a pdb, a scale) as a JSON object."""
        self._write({"action": what, "detail": detail})

    def action_failed(self, where: str, message: str) -> None:
        """A scenario action failed (the runner says where): logged with the API's message, and counted."""
        self.failures.append((self.t(), where, message))
        self._write({"action": "failed", "detail": where, "message": message})

    @property
    def failed_actions(self) -> int:
        return len(self.failures)

    def sample(self, spread: dict[str, tuple[dict[str, str], list[str]]]) -> None:
        """Utilisation per resource and topology skew per spread workload, now."""
        nodes = {n["metadata"]["name"]: n for n in self.node_informer.store.values()}
        alloc = {r: 0 for r in RESOURCES}
        for n in nodes.values():
            for r in RESOURCES:
                alloc[r] += quantity_units(r, ((n.get("status") or {}).get("allocatable") or {}).get(r, "0"))
        used = {r: 0 for r in RESOURCES}
        running = [p for p in self.pod_informer.store.values()
                   if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        in_use: set[str] = set()
        for p in running:
            req = pod_requests(p["spec"])
            for r in ("cpu", "memory"):
                used[r] += req.get(r, 0)
            used["pods"] += 1
            in_use.add(p["spec"]["nodeName"])
        # Bin packing shows as fewer nodes in use, each fuller: CPU requested over the CPU of those nodes.
        in_use_cpu = sum(quantity_units("cpu", ((nodes[n].get("status") or {}).get("allocatable") or {}).get("cpu", 0))
                         for n in in_use if n in nodes)
        skew: Obj = {}
        for workload, (labels, keys) in sorted(spread.items()):
            for key in keys:
                counts = {n["metadata"]["labels"][key]: 0 for n in nodes.values()
                          if key in (n["metadata"].get("labels") or {})}
                for p in running:
                    domain = (nodes.get(p["spec"]["nodeName"], {}).get("metadata", {}).get("labels") or {}).get(key)
                    if domain in counts and labels.items() <= (p["metadata"].get("labels") or {}).items():
                        counts[domain] += 1
                if counts:
                    skew[f"{workload}/{key}"] = max(counts.values()) - min(counts.values())
        pending = sum(1 for p in self.pod_informer.store.values() if not p["spec"].get("nodeName"))
        self.samples.append({"t": self.t(), "utilisation": {r: (used[r] / alloc[r] if alloc[r] else 0.0)
                                                             for r in RESOURCES},
                             "nodesInUse": len(in_use),
                             "cpuOfNodesInUse": used["cpu"] / in_use_cpu if in_use_cpu else 0.0,
                             "pending": pending, "running": len(running), "skew": skew})

    def zones(self) -> dict[str, str]:
        return {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE, "")
                for n in self.node_informer.store.values()}
