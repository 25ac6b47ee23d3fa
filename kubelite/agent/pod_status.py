"""Pod status generation from the container records (kubelet's generateAPIPodStatus and getPhase).

Pure: it computes the status object; the status manager writes it. The only state kept is each
condition's last transition, so `lastTransitionTime` moves only when the condition's status does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubelite.agent.lifecycle import ContainerView, phase, should_restart
from kubelite.agent.records import Record
from kubelite.clock import rfc3339

Obj = dict[str, Any]


@dataclass
class PodFacts:
    """What the pod's sync knows beyond the container records."""

    started_at: float
    initialized: bool = False  # every init container has completed once
    init_failed: bool = False
    failure: tuple[str, str] | None = None  # (reason, message) when the agent failed the pod
    final: bool = False  # the pod's containers have all been stopped for good


def terminated_state(r: Record) -> Obj:
    assert r.exit is not None
    reason = "OOMKilled" if r.exit.oom_killed else "Completed" if r.exit.code == 0 else "Error"
    return {"exitCode": r.exit.code, "reason": reason, "startedAt": rfc3339(r.started_at),
            "finishedAt": rfc3339(r.finished_at), "containerID": f"kubelite://{r.process.pid if r.process else 0}"}


def container_status(r: Record) -> Obj:
    image = r.spec.get("image", "")
    st: Obj = {"name": r.name, "image": image, "imageID": image, "restartCount": r.restarts,
               "ready": r.ready, "started": r.started}
    if r.running and r.process is not None:
        st["state"] = {"running": {"startedAt": rfc3339(r.started_at)}}
        st["containerID"] = f"kubelite://{r.process.pid}"
    elif r.exit is not None and not r.waiting:
        st["state"] = {"terminated": terminated_state(r)}
    else:
        waiting: Obj = {"reason": r.waiting or "ContainerCreating"}
        if r.waiting_message:
            waiting["message"] = r.waiting_message
        st["state"] = {"waiting": waiting}
    if r.last_terminated is not None and (r.running or r.waiting):
        st["lastState"] = {"terminated": r.last_terminated}
    else:
        st["lastState"] = {}
    return st


def pod_phase(pod: Obj, records: list[Record], facts: PodFacts) -> str:
    if facts.failure is not None:
        return "Failed"
    apps = [r for r in records if r.kind == "app"]
    if (pod["metadata"].get("deletionTimestamp") and all(not r.running for r in records)
            and (any(r.ever_started for r in apps) or facts.init_failed)):
        ok = all(r.exit is not None and r.exit.code == 0 for r in apps)
        return "Succeeded" if ok else "Failed"
    policy = pod["spec"].get("restartPolicy", "Always")
    views = []
    for r in apps:
        v = ContainerView(running=r.running)
        if not r.running and r.exit is not None:
            if should_restart(policy, r.spec, r.exit.code) and not pod["metadata"].get("deletionTimestamp"):
                v.waiting_after_exit, v.will_restart = True, True
            else:
                v.terminated_code = r.exit.code
        views.append(v)
    return phase(facts.init_failed, not facts.initialized and not facts.init_failed, views)


class StatusBuilder:
    def __init__(self, host_ip: str) -> None:
        self.host_ip = host_ip
        self.transitions: dict[str, tuple[str, str]] = {}

    def resume(self, status: Obj) -> None:
        """Keep the transition times a previous agent published."""
        for c in status.get("conditions") or []:
            self.transitions[c.get("type", "")] = (c.get("status", ""), c.get("lastTransitionTime", ""))

    def _condition(self, kind: str, ok: bool, now: str, reason: str = "") -> Obj:
        status = "True" if ok else "False"
        previous = self.transitions.get(kind)
        if previous is None or previous[0] != status:
            self.transitions[kind] = (status, now)
        cond: Obj = {"type": kind, "status": status, "lastProbeTime": None,
                     "lastTransitionTime": self.transitions[kind][1]}
        if reason and not ok:
            cond["reason"] = reason
        return cond

    def build(self, pod: Obj, records: list[Record], facts: PodFacts, now: float) -> Obj:
        stamp = rfc3339(now)
        apps = [r for r in records if r.kind == "app"]
        inits = [r for r in records if r.kind != "app"]
        containers_ready = all(r.ready for r in apps) and not facts.final
        gates = [g.get("conditionType") for g in pod["spec"].get("readinessGates") or []]
        existing = {c.get("type"): c.get("status") for c in (pod.get("status") or {}).get("conditions") or []}
        gates_ok = all(existing.get(g) == "True" for g in gates)
        initialized = facts.initialized and not facts.init_failed
        status: Obj = {
            "phase": pod_phase(pod, records, facts),
            "hostIP": self.host_ip, "hostIPs": [{"ip": self.host_ip}],
            "podIP": self.host_ip, "podIPs": [{"ip": self.host_ip}],
            "startTime": rfc3339(facts.started_at),
            "conditions": [
                self._condition("PodReadyToStartContainers", not facts.final, stamp),
                self._condition("Initialized", initialized or facts.final, stamp, "ContainersNotInitialized"),
                self._condition("ContainersReady", containers_ready, stamp, "ContainersNotReady"),
                self._condition("Ready", containers_ready and gates_ok, stamp,
                                "ReadinessGatesNotReady" if containers_ready else "ContainersNotReady"),
            ],
            "containerStatuses": [container_status(r) for r in apps],
        }
        if inits:
            status["initContainerStatuses"] = [container_status(r) for r in inits]
        if facts.failure is not None:
            status["reason"], status["message"] = facts.failure
        return status
