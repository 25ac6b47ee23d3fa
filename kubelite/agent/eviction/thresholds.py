"""Eviction thresholds from a KubeletConfiguration, parsed and validated as kubelet does.

kubelet's `ParseThresholdConfig` (pkg/kubelet/eviction/helpers.go) turns the `evictionHard`,
`evictionSoft`, `evictionSoftGracePeriod` and `evictionMinimumReclaim` maps into thresholds:
a quantity or a percentage of capacity per signal, a grace period for soft ones (a soft
threshold without one is an error), "0%"/"100%" meaning disabled. The KubeletConfiguration
defaults apply first (v1beta1 SetDefaults): without `evictionHard`, the Linux defaults;
with `mergeDefaultEvictionSettings: true`, the defaults fill the signals left unset.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubelite.agent.eviction.quantity import BINARY_SI, Quantity
from kubelite.api.quantity import QuantityError
from kubelite.clock import parse_duration

MEMORY_AVAILABLE = "memory.available"
ALLOCATABLE_MEMORY_AVAILABLE = "allocatableMemory.available"
NODEFS_AVAILABLE = "nodefs.available"
NODEFS_INODES_FREE = "nodefs.inodesFree"
IMAGEFS_AVAILABLE = "imagefs.available"
IMAGEFS_INODES_FREE = "imagefs.inodesFree"
CONTAINERFS_AVAILABLE = "containerfs.available"
CONTAINERFS_INODES_FREE = "containerfs.inodesFree"
PID_AVAILABLE = "pid.available"

MEMORY, EPHEMERAL_STORAGE, INODES, PIDS = "memory", "ephemeral-storage", "inodes", "pids"
MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE = "MemoryPressure", "DiskPressure", "PIDPressure"

# signalToResource and signalToNodeCondition (helpers.go init())
SIGNAL_RESOURCE = {
    MEMORY_AVAILABLE: MEMORY, ALLOCATABLE_MEMORY_AVAILABLE: MEMORY,
    IMAGEFS_AVAILABLE: EPHEMERAL_STORAGE, IMAGEFS_INODES_FREE: INODES,
    CONTAINERFS_AVAILABLE: EPHEMERAL_STORAGE, CONTAINERFS_INODES_FREE: INODES,
    NODEFS_AVAILABLE: EPHEMERAL_STORAGE, NODEFS_INODES_FREE: INODES,
    PID_AVAILABLE: PIDS,
}
SIGNAL_CONDITION = {
    MEMORY_AVAILABLE: MEMORY_PRESSURE, ALLOCATABLE_MEMORY_AVAILABLE: MEMORY_PRESSURE,
    IMAGEFS_AVAILABLE: DISK_PRESSURE, IMAGEFS_INODES_FREE: DISK_PRESSURE,
    CONTAINERFS_AVAILABLE: DISK_PRESSURE, CONTAINERFS_INODES_FREE: DISK_PRESSURE,
    NODEFS_AVAILABLE: DISK_PRESSURE, NODEFS_INODES_FREE: DISK_PRESSURE,
    PID_AVAILABLE: PID_PRESSURE,
}

# KubeletConfiguration v1beta1 defaults (pkg/kubelet/eviction/defaults_linux.go, SetDefaults_KubeletConfiguration)
DEFAULT_EVICTION_HARD = {MEMORY_AVAILABLE: "100Mi", NODEFS_AVAILABLE: "10%", NODEFS_INODES_FREE: "5%",
                         IMAGEFS_AVAILABLE: "15%", IMAGEFS_INODES_FREE: "5%"}
DEFAULT_PRESSURE_TRANSITION_PERIOD = 300.0
DEFAULT_ENFORCE_NODE_ALLOCATABLE = ("pods",)
NODE_ALLOCATABLE_ENFORCEMENT_KEY = "pods"
OP_LESS_THAN = "LessThan"


class ThresholdConfigError(ValueError):
    pass


def float32(x: float) -> float:
    """Go's float32 rounding (percentages are float32 upstream, which shows in computed thresholds)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


@dataclass(frozen=True)
class ThresholdValue:
    quantity: Quantity | None = None
    percentage: float = 0.0

    def amount(self, capacity: Quantity | None) -> Quantity:
        """evictionapi.GetThresholdQuantity: the quantity, or the percentage of capacity (BinarySI, truncated)."""
        if self.quantity is not None:
            return self.quantity
        cap = capacity.value() if capacity is not None else 0
        return Quantity.of(int(float(cap) * self.percentage), BINARY_SI)


@dataclass(frozen=True)
class Threshold:
    signal: str
    value: ThresholdValue
    grace_period: float = 0.0  # seconds; 0 is a hard threshold
    min_reclaim: ThresholdValue | None = None
    operator: str = OP_LESS_THAN

    @property
    def hard(self) -> bool:
        """isHardEvictionThreshold."""
        return self.grace_period == 0


@dataclass
class EvictionConfig:
    thresholds: list[Threshold] = field(default_factory=list)
    pressure_transition_period: float = DEFAULT_PRESSURE_TRANSITION_PERIOD
    max_pod_grace_period: int = 0  # evictionMaxPodGracePeriod (seconds)


def go_duration(text: str) -> float:
    """time.ParseDuration (kubelite.clock.parse_duration), in seconds; surrounding blanks ignored."""
    try:
        return parse_duration(str(text).strip()) / 1e9
    except ValueError:
        raise ThresholdConfigError(f'time: invalid duration "{text}"') from None


def _percentage(text: str) -> float:
    try:
        return float32(float32(float(text.rstrip("%"))) / 100)
    except ValueError:
        raise ThresholdConfigError(f'strconv.ParseFloat: parsing "{text.rstrip("%")}": invalid syntax') from None


def _quantity(text: str) -> Quantity:
    try:
        return Quantity.parse(str(text))
    except QuantityError as exc:
        raise ThresholdConfigError(str(exc)) from None


def _valid(signal: str) -> None:
    if signal not in SIGNAL_RESOURCE:
        raise ThresholdConfigError(f"unsupported eviction signal {signal}")


def parse_threshold_statement(signal: str, value: str) -> Threshold | None:
    """parseThresholdStatement: a threshold, or None when it is disabled ("0%" or "100%")."""
    _valid(signal)
    text = str(value)
    if text.endswith("%"):
        if text in ("0%", "100%"):
            return None
        pct = _percentage(text)
        if pct < 0:
            raise ThresholdConfigError(f"eviction percentage threshold {signal} must be >= 0%: {text}")
        if pct > 1:
            raise ThresholdConfigError(f"eviction percentage threshold {signal} must be <= 100%: {text}")
        return Threshold(signal, ThresholdValue(percentage=pct))
    q = _quantity(text)
    if q.amount <= 0:
        raise ThresholdConfigError(f"eviction threshold {signal} must be positive: {q}")
    return Threshold(signal, ThresholdValue(quantity=q))


def _grace_periods(statements: Mapping[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for signal, value in statements.items():
        _valid(signal)
        period = go_duration(value)
        if period < 0:
            raise ThresholdConfigError(f"invalid eviction grace period specified: {value}, must be a positive value")
        out[signal] = period
    return out


def _minimum_reclaims(statements: Mapping[str, str]) -> dict[str, ThresholdValue]:
    out: dict[str, ThresholdValue] = {}
    for signal, value in statements.items():
        _valid(signal)
        text = str(value)
        if text.endswith("%"):
            pct = _percentage(text)
            if pct <= 0:
                raise ThresholdConfigError(f"eviction percentage minimum reclaim {signal} must be positive: {text}")
            out[signal] = ThresholdValue(percentage=pct)
            continue
        q = _quantity(text)
        if q.amount < 0:
            raise ThresholdConfigError(f"negative eviction minimum reclaim specified for {signal}")
        out[signal] = ThresholdValue(quantity=q)
    return out


def parse_threshold_config(allocatable_config: list[str] | tuple[str, ...], hard: Mapping[str, str],
                           soft: Mapping[str, str], soft_grace: Mapping[str, str],
                           min_reclaim: Mapping[str, str]) -> list[Threshold]:
    """ParseThresholdConfig."""
    results = [t for s, v in hard.items() if (t := parse_threshold_statement(s, v)) is not None]
    softs = [t for s, v in soft.items() if (t := parse_threshold_statement(s, v)) is not None]
    periods = _grace_periods(soft_grace)
    reclaims = _minimum_reclaims(min_reclaim)
    for i, t in enumerate(softs):
        if t.signal not in periods:
            raise ThresholdConfigError(f"grace period must be specified for the soft eviction threshold {t.signal}")
        softs[i] = Threshold(t.signal, t.value, periods[t.signal])
    results += softs
    results = [Threshold(t.signal, t.value, t.grace_period, reclaims.get(t.signal)) for t in results]
    if NODE_ALLOCATABLE_ENFORCEMENT_KEY in allocatable_config:  # addAllocatableThresholds
        results += [Threshold(ALLOCATABLE_MEMORY_AVAILABLE, t.value, 0.0, t.min_reclaim)
                    for t in results if t.signal == MEMORY_AVAILABLE and t.hard]
    return results


def _string_map(raw: Mapping[str, Any], key: str) -> dict[str, str] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ThresholdConfigError(f"{key}: must be a map of eviction signals to values")
    return {str(k): str(v) for k, v in value.items()}


def eviction_config(raw: Mapping[str, Any]) -> EvictionConfig:
    """The eviction settings of a KubeletConfiguration dict (field names of kubelet.config.k8s.io/v1beta1)."""
    hard = _string_map(raw, "evictionHard")
    merge = bool(raw.get("mergeDefaultEvictionSettings", False))
    if hard is None:
        hard = dict(DEFAULT_EVICTION_HARD)
    elif merge:
        hard = {**DEFAULT_EVICTION_HARD, **hard}
    soft = _string_map(raw, "evictionSoft") or {}
    grace = _string_map(raw, "evictionSoftGracePeriod") or {}
    reclaim = _string_map(raw, "evictionMinimumReclaim") or {}
    allocatable = raw.get("enforceNodeAllocatable")
    thresholds = parse_threshold_config(list(allocatable) if allocatable is not None
                                        else DEFAULT_ENFORCE_NODE_ALLOCATABLE, hard, soft, grace, reclaim)
    transition = raw.get("evictionPressureTransitionPeriod")
    period = DEFAULT_PRESSURE_TRANSITION_PERIOD if transition is None else go_duration(str(transition))
    if period < 0:
        raise ThresholdConfigError("evictionPressureTransitionPeriod: must be a non-negative duration")
    try:
        max_grace = int(raw.get("evictionMaxPodGracePeriod", 0) or 0)
    except (TypeError, ValueError):
        raise ThresholdConfigError("evictionMaxPodGracePeriod: must be an integer number of seconds") from None
    return EvictionConfig(thresholds, period, max_grace)
