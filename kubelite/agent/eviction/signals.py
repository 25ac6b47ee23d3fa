"""Signals observed from stats and the threshold bookkeeping of kubelet's eviction helpers.

Each function is a port of the helpers.go function of the same name: observations per
signal (available and capacity), which thresholds are met (optionally until min-reclaim is
satisfied), when each was first observed, which have held for their grace period, the
node conditions they imply and how long a condition is kept after its last observation
(the pressure transition period). Times are seconds on the manager's clock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubelite.agent.eviction.quantity import BINARY_SI, DECIMAL_SI, Quantity
from kubelite.agent.eviction.ranking import StatsFunc
from kubelite.agent.eviction.stats import PodStats, Summary
from kubelite.agent.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    EPHEMERAL_STORAGE,
    MEMORY,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    SIGNAL_CONDITION,
    SIGNAL_RESOURCE,
    Threshold,
)

log = logging.getLogger("kubelite.agent.eviction")

Obj = dict[str, Any]
NODE_LOW_MESSAGE = "The node was low on resource: {}. "
THRESHOLD_MET_MESSAGE = "Threshold quantity: {}, available: {}. "
CONTAINER_MESSAGE = "Container {} was using {}, request is {}, has larger consumption of {}. "


@dataclass(frozen=True)
class Observation:
    available: Quantity
    capacity: Quantity | None = None
    time: float = 0.0


Observations = dict[str, Observation]


def make_signal_observations(summary: Summary) -> tuple[Observations, StatsFunc]:
    """makeSignalObservations: memory.available (capacity = available + working set), nodefs, pid.available."""
    by_uid = {p.uid: p for p in summary.pods}

    def stats(pod: Obj) -> PodStats | None:
        return by_uid.get(pod["metadata"].get("uid", ""))

    node, result = summary.node, Observations()
    if node.memory_available is not None and node.memory_working_set is not None:
        result[MEMORY_AVAILABLE] = Observation(Quantity.of(node.memory_available),
                                               Quantity.of(node.memory_available + node.memory_working_set),
                                               node.time)
    fs = node.fs
    if fs is not None and fs.available is not None and fs.capacity is not None:
        result[NODEFS_AVAILABLE] = Observation(Quantity.of(fs.available), Quantity.of(fs.capacity), node.time)
    if fs is not None and fs.inodes_free is not None and fs.inodes is not None:
        result[NODEFS_INODES_FREE] = Observation(Quantity.of(fs.inodes_free, DECIMAL_SI),
                                                 Quantity.of(fs.inodes, DECIMAL_SI), node.time)
    if node.max_pid is not None and node.running_processes is not None:
        result[PID_AVAILABLE] = Observation(Quantity.of(node.max_pid - node.running_processes, DECIMAL_SI),
                                            Quantity.of(node.max_pid, DECIMAL_SI), node.time)
    return result, stats


def thresholds_met(thresholds: Iterable[Threshold], observations: Observations,
                   enforce_min_reclaim: bool) -> list[Threshold]:
    """The thresholds met, ignoring grace periods; with min-reclaim, until available ≥ value + min-reclaim."""
    results = []
    for t in thresholds:
        observed = observations.get(t.signal)
        if observed is None:
            log.debug("eviction manager: no observation found for eviction signal %s", t.signal)
            continue
        quantity = t.value.amount(observed.capacity).amount
        if enforce_min_reclaim and t.min_reclaim is not None:
            quantity += t.min_reclaim.amount(observed.capacity).amount
        if quantity > observed.available.amount:
            results.append(t)
    return results


def thresholds_updated_stats(thresholds: Iterable[Threshold], observations: Observations,
                             last: Observations) -> list[Threshold]:
    """The thresholds whose signal was observed anew since the last synchronize."""
    results = []
    for t in thresholds:
        observed = observations.get(t.signal)
        if observed is None:
            continue
        previous = last.get(t.signal)
        if previous is None or observed.time == 0 or observed.time > previous.time:
            results.append(t)
    return results


def thresholds_first_observed_at(thresholds: Iterable[Threshold], last: Mapping[Threshold, float],
                                 now: float) -> dict[Threshold, float]:
    return {t: last.get(t, now) for t in thresholds}


def thresholds_met_grace_period(observed_at: Mapping[Threshold, float], now: float) -> list[Threshold]:
    return [t for t, at in observed_at.items() if now - at >= t.grace_period]


def node_conditions(thresholds: Iterable[Threshold]) -> list[str]:
    results: list[str] = []
    for t in thresholds:
        condition = SIGNAL_CONDITION.get(t.signal)
        if condition is not None and condition not in results:
            results.append(condition)
    return results


def node_conditions_last_observed_at(conditions: Iterable[str], last: Mapping[str, float],
                                     now: float) -> dict[str, float]:
    results = {c: now for c in conditions}
    for c, at in last.items():
        results.setdefault(c, at)
    return results


def node_conditions_observed_since(observed_at: Mapping[str, float], period: float, now: float) -> list[str]:
    return [c for c, at in observed_at.items() if now - at < period]


def merge_thresholds(a: Sequence[Threshold], b: Iterable[Threshold]) -> list[Threshold]:
    results = list(a)
    results += [t for t in b if t not in results]
    return results


def by_eviction_priority(thresholds: list[Threshold]) -> list[Threshold]:
    """byEvictionPriority: memory first, thresholds whose signal has no resource to reclaim last."""
    def rank(t: Threshold) -> int:
        if t.signal in (MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE):
            return 0
        return 1 if t.signal in SIGNAL_RESOURCE else 2
    return sorted(thresholds, key=rank)


def get_reclaimable_threshold(thresholds: Iterable[Threshold]) -> tuple[Threshold, str] | None:
    for t in thresholds:
        resource = SIGNAL_RESOURCE.get(t.signal)
        if resource is not None:
            return t, resource
    return None


def _threshold_met_info(resource: str, thresholds: Iterable[Threshold],
                        observations: Observations) -> tuple[Quantity, Quantity] | None:
    for t in thresholds:
        if SIGNAL_RESOURCE.get(t.signal) == resource and t.signal in observations:
            observed = observations[t.signal]
            return t.value.amount(observed.capacity), observed.available
    return None


def eviction_message(resource: str, pod: Obj, stats: StatsFunc, thresholds: Iterable[Threshold],
                     observations: Observations) -> str:
    """evictionMessage: the starved resource, the threshold and what each container over its request used."""
    message = NODE_LOW_MESSAGE.format(resource)
    met = _threshold_met_info(resource, thresholds, observations)
    if met is not None:
        message += THRESHOLD_MET_MESSAGE.format(*met)
    pod_stats = stats(pod)
    if pod_stats is None:
        return message
    spec = pod.get("spec") or {}
    containers = {c.get("name"): c for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]}
    for cs in pod_stats.containers:
        container = containers.get(cs.name)
        if container is None:
            continue
        raw = ((container.get("resources") or {}).get("requests") or {}).get(resource)
        requested = Quantity.parse(str(raw)) if raw is not None else Quantity.of(0, DECIMAL_SI)
        usage: Quantity | None = None
        if resource == MEMORY and cs.memory_working_set is not None:
            usage = Quantity.of(cs.memory_working_set, BINARY_SI)
        elif resource == EPHEMERAL_STORAGE and cs.rootfs is not None and cs.rootfs.used is not None \
                and cs.logs is not None and cs.logs.used is not None:
            usage = Quantity.of(cs.rootfs.used + cs.logs.used, BINARY_SI)
        if usage is not None and usage.amount > requested.amount:
            message += CONTAINER_MESSAGE.format(cs.name, usage, requested, resource)
    return message
