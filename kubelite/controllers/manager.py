"""The controller manager: runs the selected controllers, each restarted if it ever fails.

What `kubelite controller-manager` runs on its own (optionally behind leader election), and
what `kubelite server` / `up` run in-process. `--controllers` takes upstream's syntax: `*`
for every controller, a name to enable one, `-name` to leave one out (`*,-namespace`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from typing import Any

from kubelite.client.interface import Client
from kubelite.client.retry import Backoff
from kubelite.clock import Clock
from kubelite.controllers import registry
from kubelite.controllers.metrics import WorkqueueMetrics

log = logging.getLogger("kubelite")
COMPONENT_BACKOFF = Backoff(duration=1.0, factor=2.0, jitter=0.1, cap=60.0)
COMPONENT_HEALTHY_RUN = 60.0


def select(spec: str) -> list[str]:
    """The controller names a `--controllers` value selects (ValueError for unknown names)."""
    known = list(registry.CONTROLLERS)
    chosen: list[str] = []
    parts = [p.strip() for p in spec.split(",") if p.strip()] or ["*"]
    for part in parts:
        name = part.lstrip("-")
        if name != "*" and name not in known:
            raise ValueError(f"{name!r} is not in the list of known controllers: {', '.join(sorted(known))}")
    if "*" in parts:
        chosen = list(known)
    chosen += [p for p in parts if p != "*" and not p.startswith("-") and p not in chosen]
    return [n for n in chosen if f"-{n}" not in parts]


async def keep_running(name: str, start: Callable[[], Coroutine[Any, Any, None]], clock: Clock) -> None:
    """Run a component until cancelled; if it ever fails, log it and start a fresh one after a back-off
    (1 s doubling to 60 s, afresh once a run lasted a minute), as `up` restarts its node agent."""
    rng = random.Random(random.getrandbits(64))  # from the process's generator: a simulation seeds it
    delays = COMPONENT_BACKOFF.delays(rng)
    while True:
        started = clock.monotonic()
        try:
            await start()
            log.error("%s stopped; restarting it", name)
        except Exception:
            log.exception("%s failed; restarting it", name)
        if clock.monotonic() - started >= COMPONENT_HEALTHY_RUN:
            delays = COMPONENT_BACKOFF.delays(rng)
        await clock.sleep(next(delays))


async def run_controllers(client: Client, clock: Clock, names: list[str] | None = None,
                          metrics: WorkqueueMetrics | None = None) -> None:
    """Every selected controller, supervised, until cancelled (their work queues reporting to `metrics`)."""
    async with asyncio.TaskGroup() as tasks:
        for name, start in registry.starters(client, clock, names, metrics=metrics).items():
            tasks.create_task(keep_running(f"{name} controller", start, clock), name=f"{name}-controller")
