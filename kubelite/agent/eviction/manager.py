"""The eviction manager: kubelet's node-pressure eviction control loop (eviction_manager.go).

Every monitoring interval (10 s) it takes stats, decides which thresholds are met — hard
ones at once, soft ones only once met continuously for their grace period — reports the
resulting node conditions (kept for the pressure transition period after the last
observation), and when some threshold holds it ranks the active pods for the starved
resource and evicts one: a hard threshold with grace 0, a soft one with the smaller of the
pod's grace and `evictionMaxPodGracePeriod`. The evicted pod ends Failed with reason
`Evicted`; if it has not stopped after max(1.5 x grace, 10 s) an `ExceededGracePeriod`
event says so (killPodNow's timeout) while the stop goes on.

It sees the agent only through the narrow Protocols below, so tests drive it with fakes on
a FakeClock. Two deliberate differences from kubelet: kubelet re-synchronizes as soon as an
evicted pod is cleaned up, kubelite keeps to one pod per monitoring interval (L21); and
kubelite has no image or container garbage collection to try before evicting.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from kubelite.agent.eviction import node_status
from kubelite.agent.eviction.local_storage import local_storage_violation
from kubelite.agent.eviction.ranking import (
    RANK_NODEFS,
    RANK_NODEFS_INODES,
    RankFunc,
    rank_memory_pressure,
    rank_pid_pressure,
)
from kubelite.agent.eviction.signals import (
    Observations,
    by_eviction_priority,
    eviction_message,
    get_reclaimable_threshold,
    make_signal_observations,
    merge_thresholds,
    node_conditions,
    node_conditions_last_observed_at,
    node_conditions_observed_since,
    thresholds_first_observed_at,
    thresholds_met,
    thresholds_met_grace_period,
    thresholds_updated_stats,
)
from kubelite.agent.eviction.stats import StatsProvider
from kubelite.agent.eviction.thresholds import (
    DISK_PRESSURE,
    MEMORY_AVAILABLE,
    MEMORY_PRESSURE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    EvictionConfig,
    Threshold,
)
from kubelite.clock import Clock

log = logging.getLogger("kubelite.agent.eviction")

Obj = dict[str, Any]
MONITORING_INTERVAL = 10.0  # kubelet's evictionMonitoringPeriod
POD_CLEANUP_TIMEOUT, POD_CLEANUP_POLL = 30.0, 1.0
IMMEDIATE_EVICTION_GRACE = 0  # L21; kubelet ≥1.31 passes 1 s — either way the agent's 2 s minimum stop window applies
MIN_KILL_TIMEOUT = 10
EXCEEDED_GRACE_PERIOD = "ExceededGracePeriod"
EXCEEDED_GRACE_MESSAGE = "Container runtime did not kill the pod within specified grace period."
DEFAULT_TERMINATION_GRACE = 30

SIGNAL_RANK: dict[str, RankFunc] = {MEMORY_AVAILABLE: rank_memory_pressure, NODEFS_AVAILABLE: RANK_NODEFS,
                                    NODEFS_INODES_FREE: RANK_NODEFS_INODES, PID_AVAILABLE: rank_pid_pressure}


class PodKiller(Protocol):
    def active_pods(self) -> list[Obj]:
        """The pods the node runs now (admitted, not yet terminal)."""
        ...

    async def evict(self, pod: Obj, grace_seconds: int, reason: str, message: str) -> None:
        """Record a Warning event with reason and message, stop the pod's containers with this grace period
        and leave it Failed with reason and message; returns once every container has stopped."""
        ...

    def cleaned_up(self, pod: Obj) -> bool:
        """The evicted pod's containers are gone and its volumes reclaimed."""
        ...


class NodeReporter(Protocol):
    async def set_pressure(self, conditions: frozenset[str]) -> None:
        """Publish the node's pressure conditions (and their taints); raises if it could not."""
        ...

    def pod_event(self, pod: Obj, reason: str, message: str) -> None:
        """A Warning event about the pod (ExceededGracePeriod)."""
        ...

    def node_event(self, reason: str, message: str, kind: str) -> None: ...


def kill_timeout(grace: int) -> int:
    """killPodNow: wait 1.5 x grace (integer seconds), at least 10 s."""
    return max(grace + grace // 2, MIN_KILL_TIMEOUT)


class EvictionManager:
    def __init__(self, config: EvictionConfig, clock: Clock, stats: StatsProvider, pods: PodKiller,
                 node: NodeReporter, interval: float = MONITORING_INTERVAL) -> None:
        self.config = config
        self.clock = clock
        self.stats = stats
        self.pods = pods
        self.node = node
        self.interval = interval
        self.conditions: list[str] = []
        self._conditions_last_observed: dict[str, float] = {}
        self._first_observed: dict[Threshold, float] = {}
        self._thresholds_met: list[Threshold] = []
        self._last_observations: Observations = {}
        self._reported: frozenset[str] | None = None
        self._stopping: set[asyncio.Task[None]] = set()  # evictions that overran their wait (still stopping)

    # --- what the agent asks -------------------------------------------------------------------

    def is_under_memory_pressure(self) -> bool:
        return MEMORY_PRESSURE in self.conditions

    def is_under_disk_pressure(self) -> bool:
        return DISK_PRESSURE in self.conditions

    def admit(self, pod: Obj) -> tuple[str, str] | None:
        return node_status.admit(pod, self.conditions)

    # --- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Synchronize every interval; after an eviction wait (≤30 s) for the pod's cleanup first.
        A failed round is logged and the loop carries on."""
        while True:
            started = self.clock.monotonic()
            evicted: Obj | None = None
            try:
                evicted = await self.synchronize()
                if evicted is not None:
                    await self._wait_for_cleanup(evicted)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("eviction manager: failed to synchronize")
            await self.clock.sleep(max(0.0, started + self.interval - self.clock.monotonic()))

    async def _wait_for_cleanup(self, pod: Obj) -> None:
        deadline = self.clock.monotonic() + POD_CLEANUP_TIMEOUT
        while not self.pods.cleaned_up(pod):
            if self.clock.monotonic() >= deadline:
                log.info("eviction manager: timed out waiting for pod %s to be cleaned up", _name(pod))
                return
            await self.clock.sleep(POD_CLEANUP_POLL)

    async def synchronize(self) -> Obj | None:
        """One round of kubelet's synchronize: the evicted pod, or None."""
        thresholds = self.config.thresholds
        active = self.pods.active_pods()
        try:
            summary = await self.stats.summary(active)
        except Exception:
            log.exception("eviction manager: failed to get summary stats")
            return None
        observations, stats = make_signal_observations(summary)
        met = thresholds_met(thresholds, observations, False)
        if self._thresholds_met:  # previously met ones stay until their minimum reclaim is satisfied
            met = merge_thresholds(met, thresholds_met(self._thresholds_met, observations, True))
        now = self.clock.monotonic()
        first_observed = thresholds_first_observed_at(met, self._first_observed, now)
        last_observed = node_conditions_last_observed_at(node_conditions(met), self._conditions_last_observed, now)
        self.conditions = node_conditions_observed_since(last_observed, self.config.pressure_transition_period, now)
        self._first_observed, self._conditions_last_observed = first_observed, last_observed
        self._thresholds_met = met = thresholds_met_grace_period(first_observed, now)
        met = thresholds_updated_stats(met, observations, self._last_observations)
        self._last_observations = observations
        await self._report()

        for pod in active:  # emptyDir sizeLimit and ephemeral-storage limits (LocalStorageCapacityIsolation)
            violation = local_storage_violation(pod, stats(pod))
            if violation is not None and await self._evict(pod, IMMEDIATE_EVICTION_GRACE, violation):
                return pod
        if not met:
            return None
        found = get_reclaimable_threshold(by_eviction_priority(met))
        if found is None:
            return None
        threshold, resource = found
        log.info("eviction manager: attempting to reclaim %s", resource)
        self.node.node_event("EvictionThresholdMet", f"Attempting to reclaim {resource}", "Warning")
        rank = SIGNAL_RANK.get(threshold.signal)
        if rank is None:
            log.error("eviction manager: no ranking function for signal %s", threshold.signal)
            return None
        if not active:
            log.error("eviction manager: eviction thresholds have been met, but no pods are active to evict")
            return None
        ranked = list(active)
        rank(ranked, stats)
        for pod in ranked:  # at most one pod per round
            grace = IMMEDIATE_EVICTION_GRACE if threshold.hard else self._soft_grace(pod)
            if await self._evict(pod, grace, eviction_message(resource, pod, stats, met, observations)):
                return pod
        log.info("eviction manager: unable to evict any pods from the node")
        return None

    def _soft_grace(self, pod: Obj) -> int:
        spec_grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return min(DEFAULT_TERMINATION_GRACE if spec_grace is None else int(spec_grace),
                   self.config.max_pod_grace_period)

    async def _report(self) -> None:
        conditions = frozenset(self.conditions)
        if conditions == self._reported:
            return
        try:
            await self.node.set_pressure(conditions)
            self._reported = conditions
        except Exception:  # the API may be away: report again next round
            log.warning("eviction manager: could not report node conditions %s", sorted(conditions), exc_info=True)

    async def _evict(self, pod: Obj, grace: int, message: str) -> bool:
        """evictPod + killPodNow: refuse critical pods, stop the pod (the killer records the `Evicted` event)
        and wait for it (bounded); an overrun is reported and the stop continues in the background."""
        if node_status.is_critical_pod(pod):
            log.error("eviction manager: cannot evict a critical pod %s", _name(pod))
            return False
        log.info("eviction manager: evicting pod %s (grace %ss): %s", _name(pod), grace, message)
        stop = asyncio.ensure_future(self.pods.evict(pod, grace, node_status.REASON, message))
        timer = asyncio.ensure_future(self.clock.sleep(kill_timeout(grace)))
        try:
            await asyncio.wait({stop, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        if not stop.done():
            self.node.pod_event(pod, EXCEEDED_GRACE_PERIOD, EXCEEDED_GRACE_MESSAGE)
            self._stopping.add(stop)
            stop.add_done_callback(self._stopping.discard)
        elif stop.exception() is not None:
            log.error("eviction manager: pod %s failed to evict: %s", _name(pod), stop.exception())
        return True


def _name(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"
