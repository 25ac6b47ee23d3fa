"""Eviction thresholds from the KubeletConfiguration (L21): TestParseThresholdConfig and friends,
pkg/kubelet/eviction/helpers_test.go, plus the v1beta1 defaults and Go quantity/duration forms."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubelite.agent.eviction.quantity import BINARY_SI, DECIMAL_SI, Quantity, format_quantity
from kubelite.agent.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    Threshold,
    ThresholdConfigError,
    ThresholdValue,
    eviction_config,
    float32,
    go_duration,
    parse_threshold_config,
)


def q(text: str) -> ThresholdValue:
    return ThresholdValue(quantity=Quantity.parse(text))


def pct(value: float) -> ThresholdValue:
    return ThresholdValue(percentage=float32(value))


def key(t: Threshold) -> tuple[str, float, Fraction | float, Fraction | float | None]:
    """What thresholdEqual compares: signal, grace, value and min-reclaim (quantities by value)."""
    def v(x: ThresholdValue | None) -> Fraction | float | None:
        if x is None:
            return None
        return x.quantity.amount if x.quantity is not None else x.percentage
    value = v(t.value)
    assert value is not None
    return t.signal, t.grace_period, value, v(t.min_reclaim)


NONE: dict[str, str] = {}
PARSE_CASES = [
    pytest.param([], NONE, NONE, NONE, NONE, None, [], id="no values"),
    pytest.param(["pods"], {"memory.available": "150Mi"}, {"memory.available": "300Mi"},
                 {"memory.available": "30s"}, {"memory.available": "0"}, None,
                 [Threshold(ALLOCATABLE_MEMORY_AVAILABLE, q("150Mi"), 0, q("0")),
                  Threshold(MEMORY_AVAILABLE, q("150Mi"), 0, q("0")),
                  Threshold(MEMORY_AVAILABLE, q("300Mi"), 30, q("0"))], id="all memory eviction values"),
    pytest.param([], {"memory.available": "10%"}, {"memory.available": "30%"}, {"memory.available": "30s"},
                 {"memory.available": "5%"}, None,
                 [Threshold(MEMORY_AVAILABLE, pct(0.1), 0, pct(0.05)),
                  Threshold(MEMORY_AVAILABLE, pct(0.3), 30, pct(0.05))],
                 id="all memory eviction values in percentages"),
    pytest.param([], {"imagefs.available": "150Mi", "nodefs.available": "100Mi"},
                 {"imagefs.available": "300Mi", "nodefs.available": "200Mi"},
                 {"imagefs.available": "30s", "nodefs.available": "30s"},
                 {"imagefs.available": "2Gi", "nodefs.available": "1Gi"}, None,
                 [Threshold(IMAGEFS_AVAILABLE, q("150Mi"), 0, q("2Gi")),
                  Threshold(NODEFS_AVAILABLE, q("100Mi"), 0, q("1Gi")),
                  Threshold(IMAGEFS_AVAILABLE, q("300Mi"), 30, q("2Gi")),
                  Threshold(NODEFS_AVAILABLE, q("200Mi"), 30, q("1Gi"))], id="disk eviction values"),
    pytest.param([], {"imagefs.available": "15%", "nodefs.available": "10.5%"},
                 {"imagefs.available": "30%", "nodefs.available": "20.5%"},
                 {"imagefs.available": "30s", "nodefs.available": "30s"},
                 {"imagefs.available": "10%", "nodefs.available": "5%"}, None,
                 [Threshold(IMAGEFS_AVAILABLE, pct(0.15), 0, pct(0.1)),
                  Threshold(NODEFS_AVAILABLE, pct(0.105), 0, pct(0.05)),
                  Threshold(IMAGEFS_AVAILABLE, pct(0.3), 30, pct(0.1)),
                  Threshold(NODEFS_AVAILABLE, pct(0.205), 30, pct(0.05))], id="disk eviction values in percentages"),
    pytest.param([], {"imagefs.inodesFree": "150Mi", "nodefs.inodesFree": "100Mi"},
                 {"imagefs.inodesFree": "300Mi", "nodefs.inodesFree": "200Mi"},
                 {"imagefs.inodesFree": "30s", "nodefs.inodesFree": "30s"},
                 {"imagefs.inodesFree": "2Gi", "nodefs.inodesFree": "1Gi"}, None,
                 [Threshold(IMAGEFS_INODES_FREE, q("150Mi"), 0, q("2Gi")),
                  Threshold(NODEFS_INODES_FREE, q("100Mi"), 0, q("1Gi")),
                  Threshold(IMAGEFS_INODES_FREE, q("300Mi"), 30, q("2Gi")),
                  Threshold(NODEFS_INODES_FREE, q("200Mi"), 30, q("1Gi"))], id="inode eviction values"),
    pytest.param([], {"memory.available": "0%"}, {"memory.available": "0%"}, NONE, NONE, None, [],
                 id="disable via 0%"),
    pytest.param([], {"memory.available": "100%"}, {"memory.available": "100%"}, NONE, NONE, None, [],
                 id="disable via 100%"),
    pytest.param([], {"mem.available": "150Mi"}, NONE, NONE, NONE, "unsupported eviction signal mem.available", [],
                 id="invalid-signal"),
    pytest.param([], {"memory.available": "-150Mi"}, NONE, NONE, NONE,
                 "eviction threshold memory.available must be positive: -150Mi", [], id="hard-signal-negative"),
    pytest.param([], {"memory.available": "-15%"}, NONE, NONE, NONE,
                 "eviction percentage threshold memory.available must be >= 0%: -15%", [],
                 id="hard-signal-negative-percentage"),
    pytest.param([], {"memory.available": "150%"}, NONE, NONE, NONE,
                 "eviction percentage threshold memory.available must be <= 100%: 150%", [],
                 id="hard-signal-percentage-greater-than-100%"),
    pytest.param([], NONE, {"memory.available": "-150Mi"}, NONE, NONE,
                 "eviction threshold memory.available must be positive: -150Mi", [], id="soft-signal-negative"),
    pytest.param([], {"memory.available": "150Mi", "invalid.foo": "150Mi"}, NONE, NONE, NONE,
                 "unsupported eviction signal invalid.foo", [], id="valid-and-invalid-signal"),
    pytest.param([], NONE, {"memory.available": "150Mi"}, NONE, NONE,
                 "grace period must be specified for the soft eviction threshold memory.available", [],
                 id="soft-no-grace-period"),
    pytest.param([], NONE, {"memory.available": "150Mi"}, {"memory.available": "-30s"}, NONE,
                 "invalid eviction grace period specified: -30s, must be a positive value", [],
                 id="soft-negative-grace-period"),
    pytest.param([], NONE, NONE, NONE, {"memory.available": "-300Mi"},
                 "negative eviction minimum reclaim specified for memory.available", [], id="negative-reclaim"),
]


@pytest.mark.parametrize(("allocatable", "hard", "soft", "grace", "reclaim", "error", "want"), PARSE_CASES)
def test_parse_threshold_config(allocatable: list[str], hard: dict[str, str], soft: dict[str, str],
                                grace: dict[str, str], reclaim: dict[str, str], error: str | None,
                                want: list[Threshold]) -> None:
    """TestParseThresholdConfig: the thresholds, or upstream's error message."""
    if error is not None:
        with pytest.raises(ThresholdConfigError) as exc:
            parse_threshold_config(allocatable, hard, soft, grace, reclaim)
        assert str(exc.value) == error
        return
    got = parse_threshold_config(allocatable, hard, soft, grace, reclaim)
    assert sorted(map(key, got), key=repr) == sorted(map(key, want), key=repr)


def test_kubelet_configuration_defaults_apply_without_eviction_hard() -> None:
    """v1beta1 SetDefaults: memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
    imagefs.available<15%, imagefs.inodesFree<5%; transition period 5m; max pod grace 0."""
    cfg = eviction_config({"kind": "KubeletConfiguration"})
    hard = {t.signal: t.value for t in cfg.thresholds if t.signal != ALLOCATABLE_MEMORY_AVAILABLE}
    assert hard == {MEMORY_AVAILABLE: q("100Mi"), NODEFS_AVAILABLE: pct(0.1), NODEFS_INODES_FREE: pct(0.05),
                    IMAGEFS_AVAILABLE: pct(0.15), IMAGEFS_INODES_FREE: pct(0.05)}
    assert all(t.hard for t in cfg.thresholds)
    assert (cfg.pressure_transition_period, cfg.max_pod_grace_period) == (300.0, 0)


@pytest.mark.parametrize(("raw", "signals"), [
    pytest.param({"evictionHard": {"nodefs.available": "1Gi"}}, {NODEFS_AVAILABLE},
                 id="a set evictionHard replaces the defaults"),
    pytest.param({"evictionHard": {"nodefs.available": "1Gi"}, "mergeDefaultEvictionSettings": True},
                 {MEMORY_AVAILABLE, NODEFS_AVAILABLE, NODEFS_INODES_FREE, IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE},
                 id="mergeDefaultEvictionSettings fills the unset signals"),
    pytest.param({"evictionHard": {}}, set(), id="an empty evictionHard disables hard eviction"),
])
def test_eviction_hard_defaulting(raw: dict[str, object], signals: set[str]) -> None:
    cfg = eviction_config({"enforceNodeAllocatable": [], **raw})
    assert {t.signal for t in cfg.thresholds} == signals


def test_merged_defaults_keep_the_configured_value() -> None:
    cfg = eviction_config({"evictionHard": {"nodefs.available": "1Gi"}, "mergeDefaultEvictionSettings": True})
    assert next(t for t in cfg.thresholds if t.signal == NODEFS_AVAILABLE).value == q("1Gi")


def test_soft_thresholds_and_settings_from_the_configuration() -> None:
    cfg = eviction_config({"evictionHard": {}, "evictionSoft": {"memory.available": "1Gi"},
                           "evictionSoftGracePeriod": {"memory.available": "1m30s"},
                           "evictionMinimumReclaim": {"memory.available": "500Mi"},
                           "evictionPressureTransitionPeriod": "30s", "evictionMaxPodGracePeriod": 20})
    assert cfg.thresholds == [Threshold(MEMORY_AVAILABLE, q("1Gi"), 90.0, q("500Mi"))]
    assert (cfg.pressure_transition_period, cfg.max_pod_grace_period) == (30.0, 20)


def test_soft_threshold_without_grace_period_is_a_configuration_error() -> None:
    with pytest.raises(ThresholdConfigError, match="grace period must be specified for the soft eviction "
                                                   "threshold nodefs\\.available"):
        eviction_config({"evictionSoft": {"nodefs.available": "15%"}})


@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("30s", 30.0, id="seconds"), pytest.param("1m30s", 90.0, id="minutes and seconds"),
    pytest.param("1.5h", 5400.0, id="fractional hours"), pytest.param("300ms", 0.3, id="milliseconds"),
    pytest.param("-30s", -30.0, id="negative"), pytest.param("0", 0.0, id="bare zero"),
])
def test_go_duration(text: str, seconds: float) -> None:
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30", "abc", "1x", ""])
def test_go_duration_rejects(text: str) -> None:
    with pytest.raises(ThresholdConfigError, match="time: invalid duration"):
        go_duration(text)


@pytest.mark.parametrize(("amount", "fmt", "want"), [
    pytest.param(100 * 2**20, BINARY_SI, "100Mi", id="binary mebibytes"),
    pytest.param(1536 * 2**20, BINARY_SI, "1536Mi", id="1.5Gi prints in Mi"),
    pytest.param(123456789, BINARY_SI, "123456789", id="binary not a power of 1024"),
    pytest.param(1000, BINARY_SI, "1k", id="small binary values print decimal"),
    pytest.param(500_000_000, DECIMAL_SI, "500M", id="decimal mega"),
    pytest.param(1500, DECIMAL_SI, "1500", id="decimal not a power of 1000"),
    pytest.param(0, BINARY_SI, "0", id="zero"),
    pytest.param(-150 * 2**20, BINARY_SI, "-150Mi", id="negative"),
])
def test_quantity_string(amount: int, fmt: str, want: str) -> None:
    """resource.Quantity.String(), as eviction messages print thresholds and usage."""
    assert format_quantity(Fraction(amount), fmt) == want


def test_percentage_threshold_quantity_uses_float32_as_upstream() -> None:
    """GetThresholdQuantity: int64(float64(capacity) * float64(float32 percentage)), BinarySI."""
    got = pct(0.1).amount(Quantity.of(10 * 2**30))
    assert got.value() == int(float(10 * 2**30) * float32(0.1)) != 2**30  # float32(0.1) is a hair above 0.1
