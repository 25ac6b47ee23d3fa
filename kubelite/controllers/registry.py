"""Every controller by name, as kube-controller-manager's `NewControllerDescriptors`: one flat map.

A new controller is one module plus one line here; `--controllers` and the composition root in
`kubelite.cli` pick from this map, so nothing else names controllers.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.disruption import DisruptionController
from kubelite.controllers.job import JobController
from kubelite.controllers.statefulset import StatefulSetController
from kubelite.controllers.ttl_after_finished import TTLAfterFinishedController


class Controller(Protocol):
    async def run(self) -> None: ...


Factory = Callable[[Client, Clock], Controller]

CONTROLLERS: dict[str, Factory] = {
    "disruption": DisruptionController,
    "job": JobController,
    "statefulset": StatefulSetController,
    "ttl-after-finished": TTLAfterFinishedController,
}


Starter = Callable[[], Coroutine[Any, Any, None]]


def starters(client: Client, clock: Clock, names: list[str] | None = None) -> dict[str, Starter]:
    """A fresh-run factory per selected controller (all when `names` is None), for a supervisor to restart."""
    selected = list(CONTROLLERS) if names is None else names
    unknown = [n for n in selected if n not in CONTROLLERS]
    if unknown:
        raise ValueError(f"unknown controllers: {', '.join(unknown)} (known: {', '.join(sorted(CONTROLLERS))})")

    def starter(factory: Factory) -> Starter:
        return lambda: factory(client, clock).run()

    return {name: starter(CONTROLLERS[name]) for name in selected}
