"""Probes (L10): startup, liveness and readiness with exec, httpGet and tcpSocket handlers.

Mirrors kubelet's prober workers: each probe waits initialDelaySeconds, then runs every
periodSeconds with timeoutSeconds; successThreshold consecutive successes or
failureThreshold consecutive failures change its result. Until the startup probe
succeeds the other probes do not run; readiness is False before its first success
(Success when there is no readiness probe). As in kubelet, the initial delay counts from the
container's start, so a re-adopted container is not probed again from scratch, and it keeps
the started/ready state it had. A liveness or startup failure kills the
container (with the probe's terminationGracePeriodSeconds when set) and the restart
policy decides what happens next.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubelite.agent.hooks import run_handler, timeout_message
from kubelite.clock import Clock, bounded

Obj = dict[str, Any]
# A runtime that answers its containers' probes itself (kind, probe spec) -> (succeeded, message): the hollow
# runtime, whose containers have no processes to exec nor ports to connect to. Otherwise the handler runs.
ProbeAnswer = Callable[[str, Obj], Awaitable[tuple[bool, str]]]


@dataclass
class ProbeState:
    started: bool
    ready: bool


class Prober:
    """The probes of one running container instance; `stop()` when the instance ends."""

    def __init__(self, clock: Clock, container: Obj, env: dict[str, str], host: str, started_at: float,
                 on_change: Callable[[], None], on_unhealthy: Callable[[str, str, float | None], None],
                 resumed: ProbeState | None = None, answer: ProbeAnswer | None = None) -> None:
        self.clock = clock
        self.answer = answer
        self.container = container
        self.env = env
        self.host = host
        self.on_change = on_change
        self.on_unhealthy = on_unhealthy
        self.started_at = started_at
        startup = container.get("startupProbe")
        self.state = resumed or ProbeState(started=startup is None, ready=container.get("readinessProbe") is None)
        self.started_event = asyncio.Event()
        if self.state.started:
            self.started_event.set()
        self.tasks = [asyncio.ensure_future(self._loop(kind, spec))
                      for kind, spec in (("Startup", startup), ("Liveness", container.get("livenessProbe")),
                                         ("Readiness", container.get("readinessProbe")))
                      if spec and not (kind == "Startup" and self.state.started)]

    def stop(self) -> None:
        for t in self.tasks:
            t.cancel()

    async def _loop(self, kind: str, spec: Obj) -> None:
        if kind != "Startup":
            await self.started_event.wait()
        await self.clock.sleep(self.started_at + float(spec.get("initialDelaySeconds", 0)) - self.clock.now())
        successes = failures = 0
        success_threshold = int(spec.get("successThreshold", 1))
        failure_threshold = int(spec.get("failureThreshold", 3))
        while True:
            probe = self.answer(kind, spec) if self.answer is not None else \
                run_handler(spec, self.container, self.env, self.host, self.clock)
            finished, result = await bounded(self.clock, probe, float(spec.get("timeoutSeconds", 1)))
            ok = bool(finished and result and result[0])
            message = timeout_message(spec, self.container, self.host) if not finished else \
                (result[1] if result else "")
            if ok:
                successes, failures = successes + 1, 0
            else:
                successes, failures = 0, failures + 1
            if kind == "Readiness":
                if ok and successes >= success_threshold and not self.state.ready:
                    self.state.ready = True
                    self.on_change()
                elif not ok:
                    if failures >= failure_threshold and self.state.ready:
                        self.state.ready = False
                        self.on_change()
                    self.on_unhealthy(kind, message, None)
            elif ok:
                if kind == "Startup" and not self.state.started:
                    self.state.started = True
                    self.started_event.set()
                    self.on_change()
                    return
            else:
                if failures >= failure_threshold:
                    grace = spec.get("terminationGracePeriodSeconds")
                    self.on_unhealthy(kind, message, float(grace) if grace is not None else -1.0)
                    return
                self.on_unhealthy(kind, message, None)
            await self.clock.sleep(float(spec.get("periodSeconds", 10)))
