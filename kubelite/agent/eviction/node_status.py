"""How node pressure shows on the Node: conditions, NoSchedule taints, and node-side admission.

The conditions use kubelet's node status setters' reasons and messages (MemoryPressure
True is `KubeletHasInsufficientMemory`, …), with their transition events. The taints are
what upstream's node lifecycle controller adds for those conditions (TaintNodesByCondition);
kubelite has no such controller, so the agent sets them with the conditions. Admission is
the eviction manager's `Admit`: under memory pressure only BestEffort pods that do not
tolerate the memory-pressure taint are refused, under any other pressure every pod is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubelite.agent.eviction.thresholds import DISK_PRESSURE, MEMORY_PRESSURE, PID_PRESSURE
from kubelite.client.events import event_for

Obj = dict[str, Any]
COMPONENT = "kubelet"
REASON = "Evicted"
NODE_CONDITION_MESSAGE = "The node had condition: [{}]. "
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000

# condition → (reason, message, event) when True, and when False (nodestatus/setters.go)
CONDITION_TEXT = {
    MEMORY_PRESSURE: (("KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
                       "NodeHasInsufficientMemory"),
                      ("KubeletHasSufficientMemory", "kubelet has sufficient memory available",
                       "NodeHasSufficientMemory")),
    DISK_PRESSURE: (("KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasDiskPressure"),
                    ("KubeletHasNoDiskPressure", "kubelet has no disk pressure", "NodeHasNoDiskPressure")),
    PID_PRESSURE: (("KubeletHasInsufficientPID", "kubelet has insufficient PID available", "NodeHasInsufficientPID"),
                   ("KubeletHasSufficientPID", "kubelet has sufficient PID available", "NodeHasSufficientPID")),
}
TAINT_KEYS = {MEMORY_PRESSURE: "node.kubernetes.io/memory-pressure", DISK_PRESSURE: "node.kubernetes.io/disk-pressure",
              PID_PRESSURE: "node.kubernetes.io/pid-pressure"}


REPORTED = (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE)  # the conditions, in the order the Node shows them
# What the pressure conditions say but their heartbeat time: (condition, under, lastTransitionTime) for each of
# REPORTED. A tuple, replaced (never changed) when a condition flips: equal states are equal conditions.
PressureState = tuple[tuple[str, bool, str], ...]


def no_pressure(since: str) -> PressureState:
    """No pressure of any kind since `since`."""
    return tuple((c, False, since) for c in REPORTED)


def pressure_conditions(state: PressureState, heartbeat: str) -> list[Obj]:
    """The conditions `state` stands for, with a heartbeat time of `heartbeat`."""
    return [pressure_condition(c, under, heartbeat, since) for c, under, since in state]


def pressure_condition(kind: str, under: bool, heartbeat: str, transition: str) -> Obj:
    reason, message, _ = CONDITION_TEXT[kind][0 if under else 1]
    return {"type": kind, "status": "True" if under else "False", "reason": reason, "message": message,
            "lastHeartbeatTime": heartbeat, "lastTransitionTime": transition}


def transition_event(kind: str, under: bool) -> str:
    """The Normal event kubelet records on the Node when the condition flips (NodeHasDiskPressure, …)."""
    return CONDITION_TEXT[kind][0 if under else 1][2]


def node_event(node_name: str, reason: str, message: str, kind: str, now: float) -> Obj:
    """An event kubelet records about its Node: its nodeRef names the node and uses the name as the uid, which
    `kubectl describe node` looks for beside the Node's real uid."""
    ref = {"apiVersion": "v1", "metadata": {"name": node_name, "uid": node_name}}
    return event_for(ref, reason, message, "Node", COMPONENT, now, kind, host=node_name)


def status_event_message(node_name: str, event: str) -> str:
    """recordNodeStatusEvent's message."""
    return f"Node {node_name} status is now: {event}"


def reported_condition_events(stored: Iterable[Obj], reported: Iterable[Obj]) -> list[str]:
    """The events kubelet's node status setters record as this report replaces `stored` (the Node's conditions as
    read): a pressure condition the Node does not show as True or False — a new Node, or one the node lifecycle
    controller marked Unknown — records its event (NodeHasSufficientMemory, …), and Ready records NodeReady or
    NodeNotReady when the Node shows it with another status (not when it shows none: a new Node records no
    NodeReady). A pressure flip between True and False is recorded where it is set (node_pressure.py)."""
    shown = {c.get("type"): c.get("status") for c in stored}
    events = []
    for condition in reported:
        kind, status = condition["type"], condition["status"]
        if kind in CONDITION_TEXT and shown.get(kind) not in ("True", "False"):
            events.append(transition_event(kind, status == "True"))
        elif kind == "Ready" and shown.get(kind, status) != status:
            events.append("NodeReady" if status == "True" else "NodeNotReady")
    return events


def pressure_taints(existing: Iterable[Obj], conditions: Iterable[str]) -> list[Obj]:
    """The node's taints with one NoSchedule taint per pressure condition, others left as they are."""
    under = set(conditions)
    keys = set(TAINT_KEYS.values())
    kept = [t for t in existing if t.get("key") not in keys or t.get("effect") != "NoSchedule"]
    return kept + [{"key": TAINT_KEYS[c], "effect": "NoSchedule"} for c in REPORTED if c in under]


def is_critical_pod(pod: Obj) -> bool:
    """kubelettypes.IsCriticalPod: static and mirror pods, and system-critical priority."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if annotations.get("kubernetes.io/config.source", "api") != "api" or "kubernetes.io/config.mirror" in annotations:
        return True
    priority = (pod.get("spec") or {}).get("priority")
    return priority is not None and int(priority) >= SYSTEM_CRITICAL_PRIORITY


def is_best_effort(pod: Obj) -> bool:
    """GetPodQOS == BestEffort: no container asks for or limits cpu or memory."""
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = c.get("resources") or {}
        for section in ("requests", "limits"):
            if any(r in (resources.get(section) or {}) for r in ("cpu", "memory")):
                return False
    return True


def tolerates(pod: Obj, key: str, effect: str) -> bool:
    """TolerationsTolerateTaint for a taint with an empty value."""
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") and t.get("effect") != effect:
            continue
        if t.get("key") and t.get("key") != key:
            continue
        if not t.get("key") and t.get("operator") != "Exists":
            continue
        if t.get("operator") == "Exists" or not t.get("value"):
            return True
    return False


def admit(pod: Obj, conditions: list[str]) -> tuple[str, str] | None:
    """The eviction manager's Admit: None to admit, else (reason, message) to refuse the pod."""
    if not conditions or is_critical_pod(pod):
        return None
    if conditions == [MEMORY_PRESSURE] and (not is_best_effort(pod)
                                            or tolerates(pod, TAINT_KEYS[MEMORY_PRESSURE], "NoSchedule")):
        return None
    return REASON, NODE_CONDITION_MESSAGE.format(" ".join(conditions))
