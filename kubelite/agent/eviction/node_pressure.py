"""The NodeReporter the agent uses: pressure conditions, taints and events on the real Node.

`set_pressure` writes the MemoryPressure, DiskPressure and PIDPressure conditions through the status
subresource (strategic merge by condition type, so other conditions are untouched), records
kubelet's transition events (NodeHasDiskPressure, …) and sets or clears the matching
NoSchedule taints with a resourceVersion precondition (a conflicting taint edit is re-read
and retried). `state` is what the conditions say (node_status.PressureState) for the agent's heartbeats, which
compare it with what they last found the Node showing (node.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubelite.agent.eviction.node_status import (
    COMPONENT,
    PressureState,
    no_pressure,
    node_event,
    pressure_conditions,
    pressure_taints,
    status_event_message,
    transition_event,
)
from kubelite.api.errors import ApiError
from kubelite.client.events import event_for
from kubelite.client.http import MERGE_PATCH, STRATEGIC_PATCH
from kubelite.client.interface import Client
from kubelite.clock import Clock, rfc3339

log = logging.getLogger("kubelite.agent.eviction")

Obj = dict[str, Any]
TAINT_ATTEMPTS = 5


class NodePressure:
    def __init__(self, client: Client, clock: Clock, node_name: str, post: Callable[[Obj], None]) -> None:
        self.client = client
        self.clock = clock
        self.node_name = node_name
        self.post = post
        self.state: PressureState = no_pressure(rfc3339(clock.now()))  # replaced when a condition flips

    def conditions(self) -> list[Obj]:
        return pressure_conditions(self.state, rfc3339(self.clock.now()))

    async def set_pressure(self, conditions: frozenset[str]) -> None:
        now = rfc3339(self.clock.now())
        flipped = [c for c, under, _ in self.state if (c in conditions) != under]
        if flipped:
            self.state = tuple((c, c in conditions, now) if c in flipped else (c, under, since)
                               for c, under, since in self.state)
        path = f"/api/v1/nodes/{self.node_name}"
        await self.client.patch(f"{path}/status", {"status": {"conditions": self.conditions()}}, STRATEGIC_PATCH)
        for c in flipped:
            event = transition_event(c, c in conditions)
            self.node_event(event, status_event_message(self.node_name, event), "Normal")
        await self._set_taints(path, conditions)

    async def _set_taints(self, path: str, conditions: frozenset[str]) -> None:
        for _ in range(TAINT_ATTEMPTS):
            node = await self.client.get(path)
            current = (node.get("spec") or {}).get("taints") or []
            wanted = pressure_taints(current, conditions)
            if wanted == current:
                return
            try:
                await self.client.patch(path, {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                                               "spec": {"taints": wanted or None}}, MERGE_PATCH)  # none left:
                # no `taints` key, as upstream's omitempty NodeSpec.Taints writes
                return
            except ApiError as exc:
                if exc.code != 409:
                    raise
        raise ApiError(409, "Conflict", f"node {self.node_name}: taints kept changing, not updated")

    def pod_event(self, pod: Obj, reason: str, message: str) -> None:
        self.post(event_for(pod, reason, message, "Pod", COMPONENT, self.clock.now(), "Warning",
                            host=self.node_name))

    def node_event(self, reason: str, message: str, kind: str) -> None:
        self.post(node_event(self.node_name, reason, message, kind, self.clock.now()))
