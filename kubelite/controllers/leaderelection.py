"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's tools/leaderelection with a LeaseLock.

Two control planes can run side by side: each candidate tries every `retry_period` to take
the Lease; it succeeds when the Lease is missing, already its own, or expired — i.e. its
record has not changed for `lease_duration` as *this candidate* observed it (client-go
measures expiry on its own clock from when it last saw the record change, never from the
holder's timestamps, so clock skew between machines cannot make two leaders). Writes are
compare-and-swap on resourceVersion, so of two candidates racing for an expired Lease one
wins. The leader renews every `retry_period`; if it cannot renew for `renew_deadline` it
stops leading — its work is cancelled before another candidate can take the Lease
(renew_deadline < lease_duration), so there is never a moment with two active leaders.
On a clean shutdown the leader releases the Lease so a standby takes over at once.
Defaults are kube-controller-manager's: 15 s / 10 s / 2 s. All waiting is on the injected clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.interface import Client
from kubelite.clock import Clock, micro_time

log = logging.getLogger("kubelite.leaderelection")

Obj = dict[str, Any]
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
JITTER_FACTOR = 1.2  # wait.JitterUntil's factor for the acquire loop


@dataclass(frozen=True)
class LeaseTiming:
    """The --leader-elect-lease-duration / -renew-deadline / -retry-period flags (seconds), checked as
    client-go's NewLeaderElector checks them."""

    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def __post_init__(self) -> None:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if self.lease_duration < 1:  # the Lease records whole seconds (leaseDurationSeconds)
            raise ValueError("leaseDuration must be at least 1 second")


UPSTREAM_TIMING = LeaseTiming()


class LeadershipLost(Exception):
    """The leader could not renew within the renew deadline; its work was stopped."""


def identity() -> str:
    """Upstream's id: the hostname plus a uuid, unique per process."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass
class LeaderElector:
    client: Client
    clock: Clock
    namespace: str
    name: str
    identity: str
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        LeaseTiming(self.lease_duration, self.renew_deadline, self.retry_period)  # raises on bad timings
        self._observed: Obj | None = None  # the last record seen (spec of the Lease)
        self._observed_at = 0.0  # monotonic time it was seen to change
        self._rng = random.Random()
        self.is_leader = False

    @property
    def path(self) -> str:
        return resource_path("leases", self.namespace, self.name, group_version="coordination.k8s.io/v1")

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Block until this candidate leads, then run `lead()` while renewing; raises LeadershipLost when
        renewal fails (after cancelling `lead`). Cancelling releases the Lease if held."""
        await self.acquire()
        try:
            async with asyncio.TaskGroup() as tasks:
                work = tasks.create_task(lead())
                renewing = tasks.create_task(self.renew())
                await asyncio.wait({work, renewing}, return_when=asyncio.FIRST_COMPLETED)
                if renewing.done():
                    work.cancel()
                else:
                    renewing.cancel()
        except asyncio.CancelledError:
            if self.is_leader and self.release_on_cancel:
                await asyncio.shield(self.release())
            raise
        if not self.is_leader:
            raise LeadershipLost(f"leader election lost: {self.namespace}/{self.name}")

    async def acquire(self) -> None:
        log.info("attempting to acquire leader lease %s/%s...", self.namespace, self.name)
        while not await self.try_acquire_or_renew():
            await self.clock.sleep(self.retry_period * (1 + self._rng.random() * (JITTER_FACTOR - 1)))
        # the identity too (upstream logs it in the LeaderElection event): which process leads, from its log
        log.info("successfully acquired lease %s/%s as %s", self.namespace, self.name, self.identity)

    async def renew(self) -> None:
        """Renew every retry period; return (no longer leader) when no renewal succeeded for renew_deadline."""
        while True:
            await self.clock.sleep(self.retry_period)
            deadline = self.clock.monotonic() + self.renew_deadline
            while not await self.try_acquire_or_renew():
                if self.clock.monotonic() >= deadline:
                    self.is_leader = False
                    log.error("failed to renew lease %s/%s: timed out", self.namespace, self.name)
                    return
                await self.clock.sleep(self.retry_period)

    async def try_acquire_or_renew(self) -> bool:
        now, mono = self.clock.now(), self.clock.monotonic()
        mine: Obj = {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                     "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}
        try:
            lease = await self.client.get(self.path)
        except ApiError as exc:
            if exc.code != 404:
                log.warning("error retrieving lease %s/%s: %s", self.namespace, self.name, exc)
                return False
            try:
                await self.client.create(resource_path("leases", self.namespace,
                                                       group_version="coordination.k8s.io/v1"),
                                         {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                          "metadata": {"name": self.name, "namespace": self.namespace},
                                          "spec": mine})
            except ApiError as create_exc:
                log.info("error initially creating lease: %s", create_exc)
                return False
            self._observe(mine, mono)
            self.is_leader = True
            return True
        record: Obj = lease.get("spec") or {}
        if record != self._observed:
            self._observe(record, mono)
        holder = record.get("holderIdentity") or ""
        duration = float(record.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and self._observed_at + duration > mono:
            self.is_leader = False
            return False  # held by another, not expired
        if holder == self.identity:
            mine["acquireTime"] = record.get("acquireTime") or mine["acquireTime"]
            mine["leaseTransitions"] = int(record.get("leaseTransitions") or 0)
        else:
            mine["leaseTransitions"] = int(record.get("leaseTransitions") or 0) + 1
        try:
            await self.client.request("PUT", self.path, {**lease, "spec": mine})
        except ApiError as exc:
            log.info("failed to update lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        self._observe(mine, mono)
        self.is_leader = True
        return True

    def _observe(self, record: Obj, mono: float) -> None:
        self._observed = record
        self._observed_at = mono

    async def release(self) -> None:
        """Give the Lease up (holder cleared, 1 s duration) so a standby need not wait for expiry. A conflict
        (a renewal that was in flight when we were cancelled) is retried from a fresh read."""
        for _ in range(3):
            try:
                lease = await self.client.get(self.path)
                if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                    return
                now = micro_time(self.clock.now())
                await self.client.request("PUT", self.path, {**lease, "spec": {
                    **lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now,
                    "acquireTime": now}})
                self.is_leader = False
                return
            except ApiError as exc:
                log.warning("failed to release lease %s/%s: %s", self.namespace, self.name, exc)
                if exc.code != 409:
                    return


def elected(client: Client, clock: Clock, lease: str, lead: Callable[[], Coroutine[Any, Any, None]],
            timing: LeaseTiming = UPSTREAM_TIMING) -> Callable[[], Coroutine[Any, Any, None]]:
    """`lead` behind leader election on the Lease kube-system/`lease` (kube-scheduler,
    kube-controller-manager), a fresh candidate identity per call: what `--leader-elect` runs. Each call's
    coroutine returns only by raising LeadershipLost, or by `lead` ending."""

    def run() -> Coroutine[Any, Any, None]:
        elector = LeaderElector(client, clock, "kube-system", lease, identity(), timing.lease_duration,
                                timing.renew_deadline, timing.retry_period)
        return elector.run(lead)

    return run
