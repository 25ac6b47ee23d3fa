"""The autoscaler's normalization of a proposal: upstream horizontal_test.go's tables for the legacy rules
(TestConvertDesiredReplicasWithRules, TestNormalizeDesiredReplicas), the behavior's stabilization windows
(TestNormalizeDesiredReplicasWithBehavior), the policies' limits (TestCalculateScaleUpLimitWithScalingRules,
TestCalculateScaleDownLimitWithBehaviors) and the rate with recorded scale events (TestScalingWithRules' cases:
default behavior, pods vs percent policies, min/max clamping, events within the period)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.apiserver.registry.autoscaling import default_scale_down_rules, default_scale_up_rules
from kubelite.controllers.horizontal import (
    NormalizationArg,
    Recommendation,
    Recommender,
    ScaleEvent,
    calculate_scale_down_limit_with_behaviors,
    calculate_scale_up_limit,
    calculate_scale_up_limit_with_scaling_rules,
    convert_desired_replicas_with_rules,
)

NOW = 1_700_000_000.0
MIN = 60.0
KEY = ("default", "web")


@pytest.mark.parametrize("current,desired,low,high,converted,reason", [
    pytest.param(5, 7, 3, 8, 7, "DesiredWithinRange", id="prenormalized desired replicas within range"),
    pytest.param(3, 1, 2, 8, 2, "TooFewReplicas", id="prenormalized desired replicas < minReplicas"),
    pytest.param(1, 0, 0, 10, 0, "DesiredWithinRange", id="prenormalized desired replicas within range (zero)"),
    pytest.param(20, 1000, 1, 10, 10, "TooManyReplicas", id="maxReplicas is the limit because maxReplicas < "
                                                             "scaleUpLimit"),
    pytest.param(3, 1000, 1, 2000, calculate_scale_up_limit(3), "ScaleUpLimit",
                 id="scaleUpLimit is the limit because scaleUpLimit < maxReplicas"),
])
def test_convert_desired_replicas_with_rules(current: int, desired: int, low: int, high: int, converted: int,
                                             reason: str) -> None:
    assert convert_desired_replicas_with_rules(current, desired, low, high)[:2] == (converted, reason)


@pytest.mark.parametrize("recommendations,desired,stabilized,log_length", [
    pytest.param([], 5, 5, 1, id="empty log"),
    pytest.param([(4, 2), (5, 1)], 3, 5, 3, id="stabilize"),
    pytest.param([(1, 2), (2, 1)], 3, 3, 3, id="no stabilize"),
    pytest.param([(10, 10), (9, 9)], 3, 3, 2, id="no stabilize - old recommendations"),
    pytest.param([(10, 10), (4, 1), (5, 2), (9, 9)], 3, 5, 4, id="stabilize - old recommendations"),
])
def test_normalize_desired_replicas(recommendations: list[tuple[int, int]], desired: int, stabilized: int,
                                    log_length: int) -> None:
    """TestNormalizeDesiredReplicas: the highest recommendation of the last 5 minutes; an old one's slot reused."""
    r = Recommender(5 * MIN)
    r.recommendations[KEY] = [Recommendation(n, NOW - ago * MIN) for n, ago in recommendations]
    assert r.stabilize_recommendation(KEY, desired, NOW) == stabilized
    assert len(r.recommendations[KEY]) == log_length


def rules(defaults: dict[str, Any], window: int) -> dict[str, Any]:
    return {**defaults, "stabilizationWindowSeconds": window}


BEHAVIOR_CASES = [  # (name, recommendations (replicas, minutes ago), current, desired, stabilized, log, up, down)
    ("empty recommendations for scaling down", [], 100, 5, 5, [5], 0, 0),
    ("simple scale down stabilization", [(4, 1), (5, 2), (9, 3)], 100, 3, 9, [4, 5, 9, 3], 0, 300),
    ("simple scale up stabilization", [(4, 1), (5, 2), (9, 3)], 1, 7, 4, [4, 5, 9, 7], 300, 0),
    ("no scale down stabilization", [(1, 1), (2, 2)], 100, 3, 3, [1, 2, 3], 300, 0),
    ("no scale up stabilization", [(4, 1), (5, 2)], 1, 3, 3, [4, 5, 3], 0, 300),
    ("no scale down stabilization, reuse recommendation element", [(10, 10), (9, 9)], 100, 3, 3, [10, 3], 0, 0),
    ("no scale up stabilization, reuse recommendation element", [(10, 10), (9, 9)], 1, 100, 100, [10, 100], 0, 0),
    ("scale down stabilization, reuse one of obsolete recommendation element", [(10, 10), (4, 1), (5, 2), (9, 9)],
     100, 3, 5, [10, 4, 5, 3], 0, 180),
    ("scale up stabilization, reuse one of obsolete recommendation element", [(10, 10), (4, 1), (5, 2), (9, 9)],
     1, 100, 4, [10, 4, 5, 100], 300, 0),
]


@pytest.mark.parametrize("recommendations,current,desired,stabilized,log,up,down",
                         [pytest.param(*c[1:], id=c[0]) for c in BEHAVIOR_CASES])
def test_normalize_desired_replicas_with_behavior(recommendations: list[tuple[int, int]], current: int, desired: int,
                                                  stabilized: int, log: list[int], up: int, down: int) -> None:
    r = Recommender()
    r.recommendations[KEY] = [Recommendation(n, NOW - ago * MIN) for n, ago in recommendations]
    args = NormalizationArg(KEY, rules(default_scale_up_rules(), up), rules(default_scale_down_rules(), down), 1,
                            1000, current, desired)
    assert r.stabilize_recommendation_with_behaviors(args, NOW)[0] == stabilized
    assert [rec.replicas for rec in r.recommendations[KEY]] == log


def pods(value: int, period: int = 60) -> dict[str, Any]:
    return {"type": "Pods", "value": value, "periodSeconds": period}


def percent(value: int, period: int = 60) -> dict[str, Any]:
    return {"type": "Percent", "value": value, "periodSeconds": period}


@pytest.mark.parametrize("current,up_events,given,limit", [
    pytest.param(5, [], {"policies": [pods(4)]}, 9, id="No previous events"),
    pytest.param(5, [ScaleEvent(2, NOW - 30)], {"policies": [pods(4)]}, 7, id="With previous scale up event"),
    pytest.param(5, [], {"selectPolicy": "Disabled", "policies": [pods(4)]}, 5, id="Disabled policy"),
    pytest.param(5, [], {"selectPolicy": "Min", "policies": [pods(4), pods(2)]}, 7, id="MinChange policy"),
    pytest.param(10, [], {"policies": [percent(50)]}, 15, id="Percent scaling policy"),
])
def test_calculate_scale_up_limit_with_scaling_rules(current: int, up_events: list[ScaleEvent],
                                                     given: dict[str, Any], limit: int) -> None:
    assert calculate_scale_up_limit_with_scaling_rules(current, up_events, [], given, NOW) == limit


@pytest.mark.parametrize("current,down_events,given,limit", [
    pytest.param(10, [], {"policies": [percent(20)]}, 8, id="No previous events"),
    pytest.param(10, [ScaleEvent(1, NOW - 30)], {"policies": [percent(20)]}, 8, id="With previous scale down event"),
    pytest.param(100, [], {"policies": [percent(10), pods(5)]}, 90, id="Multiple policies"),
    pytest.param(10, [], {"selectPolicy": "Disabled", "policies": [percent(20)]}, 10, id="Disabled policy"),
    pytest.param(100, [], {"selectPolicy": "Min", "policies": [percent(10), pods(15)]}, 90, id="MinChange policy"),
])
def test_calculate_scale_down_limit_with_behaviors(current: int, down_events: list[ScaleEvent],
                                                   given: dict[str, Any], limit: int) -> None:
    assert calculate_scale_down_limit_with_behaviors(current, [], down_events, given, NOW) == limit


def events(*changes: int, period: int) -> list[ScaleEvent]:
    """generateEvents: the changes within the period, one more just past it, and an outdated one."""
    return [*(ScaleEvent(c, NOW - period / 2) for c in changes), ScaleEvent(42, NOW - period - 1),
            ScaleEvent(42, NOW - period - 100, outdated=True)]


RATE_CASES = [  # (name, up rules, down rules, up events, down events, min, max, current, desired, expected)
    ("scaleUp with default behavior", None, None, [], [], 1, 1000, 10, 50, 20),
    ("scaleUp with pods policy larger than percent policy", [pods(100), percent(100)], None, [], [], 1, 1000, 10, 500,
     110),
    ("scaleUp with percent policy larger than pods policy", [pods(2), percent(100)], None, [], [], 1, 1000, 10, 500,
     20),
    ("scaleUp with spec MaxReplicas limitation with large pod policy", [pods(100)], None, [], [], 1, 1000, 10, 50,
     50),
    ("scaleUp with pod policy limitation", [pods(30)], None, [], [], 1, 1000, 10, 50, 40),
    ("scaleUp with percent policy limitation", [percent(200)], None, [], [], 1, 1000, 10, 50, 30),
    ("scaleDown with default behavior", None, None, [], [], 1, 1000, 10, 5, 5),
    ("scaleDown with pod policy limitation", None, [pods(5)], [], [], 1, 1000, 10, 2, 5),
    ("scaleDown with percent policy limitation", None, [percent(50)], [], [], 1, 1000, 10, 5, 5),
    ("scaleDown with spec MinReplicas limitation with large percent policy", None, [percent(100)], [], [], 5, 1000,
     10, 2, 5),
    ("scaleUp with events within the period", [percent(100)], None, events(1, 2, 3, 4, 5, period=60), [], 1, 1000,
     100, 500, 170),
    ("scaleUp with currentReplicas limitation with a lot of recent scale up events", [pods(5, 120)], None,
     events(1, 5, 9, period=120), [], 1, 1000, 100, 500, 100),
    ("scaleDown with events within the period", None, [percent(50)], [], events(10, 10, period=60), 1, 1000, 80, 10,
     50),
]


@pytest.mark.parametrize("up,down,up_events,down_events,low,high,current,desired,expected",
                         [pytest.param(*c[1:], id=c[0]) for c in RATE_CASES])
def test_scaling_with_rules(up: list[dict[str, Any]] | None, down: list[dict[str, Any]] | None,
                            up_events: list[ScaleEvent], down_events: list[ScaleEvent], low: int, high: int,
                            current: int, desired: int, expected: int) -> None:
    """convertDesiredReplicasWithBehaviorRate over the default rules, or the given policies (selectPolicy Max)."""
    r = Recommender()
    r.scale_up_events[KEY], r.scale_down_events[KEY] = up_events, down_events
    up_rules = default_scale_up_rules() if up is None else {"selectPolicy": "Max", "policies": up}
    down_rules = default_scale_down_rules() if down is None else {"selectPolicy": "Max", "policies": down}
    args = NormalizationArg(KEY, up_rules, down_rules, low, high, current, desired)
    assert r.convert_desired_replicas_with_behavior_rate(args, NOW)[0] == expected


def test_store_scale_events_reuses_outdated_slots() -> None:
    """TestStoreScaleEvents: a new event takes the place of one older than the longest policy period."""
    r = Recommender()
    behavior = {"scaleUp": {"policies": [pods(4, 60)]}, "scaleDown": {"policies": [percent(100, 30)]}}
    r.scale_up_events[KEY] = [ScaleEvent(1, NOW - 100), ScaleEvent(2, NOW - 10)]
    r.store_scale_event(behavior, KEY, 5, 8, NOW)
    assert [(e.change, e.timestamp) for e in r.scale_up_events[KEY]] == [(3, NOW), (2, NOW - 10)]
    r.store_scale_event(behavior, KEY, 8, 6, NOW)
    assert [(e.change, e.timestamp) for e in r.scale_down_events[KEY]] == [(2, NOW)]
    r.store_scale_event(None, KEY, 6, 9, NOW)  # without behavior nothing reads them
    assert len(r.scale_up_events[KEY]) == 2
