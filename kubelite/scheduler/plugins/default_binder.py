"""DefaultBinder: mirrors plugins/defaultbinder — binds through the pods/binding subresource."""

from __future__ import annotations

from kubelite.client.http import resource_path
from kubelite.client.interface import Client
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import SUCCESS, Status
from kubelite.scheduler.podinfo import PodInfo

NAME = "DefaultBinder"


class DefaultBinder:
    name = NAME

    def __init__(self, client: Client) -> None:
        self.client = client

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """POST the Binding; an ApiError (pod gone, already bound, API down) propagates to the binding cycle."""
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod.name, "uid": pod.uid},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        await self.client.create(resource_path("pods", pod.namespace, pod.name, "binding"), binding)
        return SUCCESS
