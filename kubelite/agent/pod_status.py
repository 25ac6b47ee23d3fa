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


def container_id(r: Record) -> str:
    """The ID of the container's latest instance (`kubelite://PID`): the process the record holds, else (an agent
    restarted after the instance ended keeps no process) the one its last termination recorded; empty while the
    container never had an instance."""
    if r.process is not None:
        return f"kubelite://{r.process.pid}"
    return str((r.last_terminated or {}).get("containerID", ""))


def terminated_state(r: Record) -> Obj:
    assert r.exit is not None
    reason = "OOMKilled" if r.exit.oom_killed else "Completed" if r.exit.code == 0 else "Error"
    return {"exitCode": r.exit.code, "reason": reason, "startedAt": rfc3339(r.started_at),
            "finishedAt": rfc3339(r.finished_at), "containerID": container_id(r) or "kubelite://0"}


def container_status(r: Record) -> Obj:
    image = r.spec.get("image", "")
    st: Obj = {"name": r.name, "image": image, "imageID": image, "restartCount": r.restarts,
               "ready": r.ready, "started": r.started}
    if r.running and r.process is not None:
        st["state"] = {"running": {"startedAt": rfc3339(r.started_at)}}
    elif r.exit is not None and not r.waiting:
        st["state"] = {"terminated": terminated_state(r)}
    else:
        waiting: Obj = {"reason": r.waiting or "ContainerCreating"}
        if r.waiting_message:
            waiting["message"] = r.waiting_message
        st["state"] = {"waiting": waiting}
    # convertContainerStatus sets ContainerID from the runtime's latest instance whatever its state, and the
    # reason cache's Waiting (CrashLoopBackOff, PostStartHookError) replaces only the state: a container that has
    # run keeps its latest instance's ID; one that never had an instance (ContainerCreating) has none
    if cid := container_id(r):
        st["containerID"] = cid
    if r.kind == "init":
        # prober_manager's UpdatePodStatus: a regular init container is ready only once terminated with exit
        # code 0 ("the most recent successful init container will have ready = true"), never while it runs —
        # else the pod were Initialized while its init still ran (kubectl: ContainerCreating, not Init:0/1)
        st["ready"] = st["state"].get("terminated", {}).get("exitCode") == 0
    if r.kind == "ephemeral":  # no probes, never in the prober manager's status: ready false, started unset
        st["ready"] = False
        del st["started"]
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


def _verdict(reason: str, unknown: list[str], label: str, names: list[str]) -> tuple[str, str, str]:
    """True when no container is unknown or `label` (unready, incomplete); else False with kubelet's message."""
    messages = [f"containers with {kind} status: [{' '.join(found)}]"
                for kind, found in (("unknown", unknown), (label, names)) if found]
    return ("False", reason, ", ".join(messages)) if messages else ("True", "", "")


def containers_ready_condition(spec: Obj, statuses: list[Obj], phase: str) -> tuple[str, str, str]:
    """GenerateContainersReadyCondition: (status, reason, message) over sidecars and regular containers."""
    if phase == "Succeeded":
        return "False", "PodCompleted", ""
    if phase == "Failed":
        return "False", "PodFailed", ""
    by_name = {s["name"]: s for s in statuses}
    watched = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    watched += spec.get("containers") or []
    unknown = [c["name"] for c in watched if c["name"] not in by_name]
    unready = [c["name"] for c in watched if c["name"] in by_name and not by_name[c["name"]].get("ready")]
    return _verdict("ContainersNotReady", unknown, "unready", unready)


def pod_ready_condition(spec: Obj, conditions: list[Obj], statuses: list[Obj], phase: str) -> tuple[str, str, str]:
    """GeneratePodReadyCondition: ContainersReady, then every readiness gate's condition True."""
    ready = containers_ready_condition(spec, statuses, phase)
    if ready[0] != "True":
        return ready
    existing = {c.get("type"): c.get("status") for c in conditions}
    messages = []
    for gate in spec.get("readinessGates") or []:
        kind = gate.get("conditionType")
        if kind not in existing:
            messages.append(f'corresponding condition of pod readiness gate "{kind}" does not exist.')
        elif existing[kind] != "True":
            messages.append(f'the status of pod readiness gate "{kind}" is not "True", but {existing[kind]}')
    return ("False", "ReadinessGatesNotReady", ", ".join(messages)) if messages else ("True", "", "")


def pod_initialized_condition(spec: Obj, statuses: list[Obj], phase: str) -> tuple[str, str, str]:
    """GeneratePodInitializedCondition: every init container done (a sidecar: started), or a regular one ran."""
    by_name = {s["name"]: s for s in statuses}
    inits = spec.get("initContainers") or []
    unknown = [c["name"] for c in inits if c["name"] not in by_name]
    incomplete = [c["name"] for c in inits if c["name"] in by_name and not (
        by_name[c["name"]].get("started") if c.get("restartPolicy") == "Always" else by_name[c["name"]].get("ready"))]
    if phase == "Succeeded" and not unknown:
        return "True", "PodCompleted", ""
    regular = {c["name"] for c in spec.get("containers") or []}
    if any("running" in (s.get("state") or {}) or "terminated" in (s.get("state") or {})
           for s in statuses if s["name"] in regular):  # HasAnyRegularContainerStarted
        return "True", "", ""
    return _verdict("ContainersNotInitialized", unknown, "incomplete", incomplete)


class StatusBuilder:
    def __init__(self, host_ip: str) -> None:
        self.host_ip = host_ip
        self.transitions: dict[str, tuple[str, str]] = {}

    def resume(self, status: Obj) -> None:
        """Keep the transition times a previous agent published."""
        for c in status.get("conditions") or []:
            self.transitions[c.get("type", "")] = (c.get("status", ""), c.get("lastTransitionTime", ""))

    def _condition(self, kind: str, value: tuple[str, str, str], now: str) -> Obj:
        status, reason, message = value
        previous = self.transitions.get(kind)
        if previous is None or previous[0] != status:
            self.transitions[kind] = (status, now)
        cond: Obj = {"type": kind, "status": status, "lastProbeTime": None,
                     "lastTransitionTime": self.transitions[kind][1]}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        return cond

    def _scheduled(self, conditions: list[Obj], now: str) -> Obj:
        """PodScheduled=True, always: the pod is on this node, bound by a scheduler or made with spec.nodeName
        (generateAPIPodStatus). A scheduler's True condition keeps its transition time (kubelet's
        updateLastTransitionTime against the pod's status)."""
        given = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
        if "PodScheduled" not in self.transitions and given.get("status") == "True" and given.get("lastTransitionTime"):
            self.transitions["PodScheduled"] = ("True", given["lastTransitionTime"])
        return self._condition("PodScheduled", ("True", "", ""), now)

    def build(self, pod: Obj, records: list[Record], facts: PodFacts, now: float, phase: str = "") -> Obj:
        """The pod's status; `phase` given: report that phase instead of the computed one."""
        stamp = rfc3339(now)
        spec = pod["spec"]
        apps = [container_status(r) for r in records if r.kind == "app"]
        inits = [container_status(r) for r in records if r.kind in ("init", "sidecar")]
        statuses = inits + apps
        current = phase or pod_phase(pod, records, facts)
        conditions = (pod.get("status") or {}).get("conditions") or []
        status: Obj = {
            "phase": current,
            "hostIP": self.host_ip, "hostIPs": [{"ip": self.host_ip}],
            "podIP": self.host_ip, "podIPs": [{"ip": self.host_ip}],
            "startTime": rfc3339(facts.started_at),
            # generateAPIPodStatus's kubelet-owned conditions, in its order (kubectl describe lists them so)
            "conditions": [
                self._condition("PodReadyToStartContainers", ("False" if facts.final else "True", "", ""), stamp),
                self._condition("Initialized", pod_initialized_condition(spec, statuses, current), stamp),
                self._condition("Ready", pod_ready_condition(spec, conditions, statuses, current), stamp),
                self._condition("ContainersReady", containers_ready_condition(spec, statuses, current), stamp),
                self._scheduled(conditions, stamp),
            ],
            "containerStatuses": apps,
        }
        if inits:
            status["initContainerStatuses"] = inits
        ephemeral = [container_status(r) for r in records if r.kind == "ephemeral"]
        if ephemeral:
            status["ephemeralContainerStatuses"] = ephemeral
        if facts.failure is not None:
            status["reason"], status["message"] = facts.failure
        return status
