"""Scheduling queue (P3, L19) on a fake clock, the FailedScheduling message, and configuration validation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from kubelite.clock import FakeClock
from kubelite.scheduler.config import ConfigError, parse
from kubelite.scheduler.framework import FilterOutcome, FilterResult, Rejection, fit_error_message, nodes_to_find
from kubelite.scheduler.queue import SchedulingQueue
from kubelite.testing.builders import make_pod
from tests.scheduler.helpers import pod


def _info(name: str, priority: int = 0) -> Any:
    return pod(make_pod(name).spec(priority=priority).obj())


async def test_active_queue_orders_by_priority_then_arrival() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock)
    q.add(_info("low", 1))
    await clock.advance(1)
    q.add(_info("high", 10))
    q.add(_info("low2", 1))
    order = [q.pop_nowait().info.name for _ in range(3)]  # type: ignore[union-attr]
    assert order == ["high", "low", "low2"]


async def test_unschedulable_pod_does_not_block_lower_priority() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock)
    q.add(_info("big", 100))
    q.add(_info("small", 1))
    big = q.pop_nowait()
    assert big is not None and big.info.name == "big"
    q.unschedulable(big, {"NodeResourcesFit"})
    nxt = q.pop_nowait()
    assert nxt is not None and nxt.info.name == "small"
    assert q.pop_nowait() is None  # big stays parked until an event


async def test_backoff_doubles_to_the_maximum() -> None:
    q = SchedulingQueue(FakeClock(), initial_backoff=1, max_backoff=10)
    q.add(_info("p"))
    qp = q.pop_nowait()
    assert qp is not None
    durations = []
    for _ in range(6):
        qp.attempts += 1
        durations.append(q.backoff_duration(qp))
    assert durations == [1, 2, 4, 8, 10, 10]


async def test_cluster_event_moves_parked_pod_after_backoff() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock, initial_backoff=1, max_backoff=10)
    q.add(_info("p"))
    qp = q.pop_nowait()
    assert qp is not None
    q.unschedulable(qp, {"NodeResourcesFit"})
    q.move_all()  # still backing off (1s): goes to backoffQ, not activeQ
    assert q.pop_nowait() is None
    await clock.advance(1.0)
    q.flush_backoff()
    again = q.pop_nowait()
    assert again is not None and again.info.name == "p"


async def test_parked_pods_are_retried_after_five_minutes() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock)
    q.add(_info("p"))
    qp = q.pop_nowait()
    assert qp is not None
    q.unschedulable(qp, set())
    await clock.advance(299)
    q.flush()
    assert q.pop_nowait() is None
    await clock.advance(1)
    q.flush()
    assert q.pop_nowait() is not None


async def test_event_during_attempt_requeues_instead_of_parking() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock, initial_backoff=1)
    q.add(_info("p"))
    qp = q.pop_nowait()
    assert qp is not None
    q.move_all()  # e.g. a node was added while the cycle ran
    q.unschedulable(qp, {"NodeResourcesFit"})
    await clock.advance(1)
    q.flush_backoff()
    assert q.pop_nowait() is not None


def test_fit_error_message_sorts_the_histogram() -> None:
    """Mirrors TestFitError / upstream's "0/5 nodes are available: …" message."""
    n = 5
    spread = np.array([True, True, False, False, False])
    cpu = np.array([False, False, True, True, True])
    outcome = FilterOutcome(np.zeros(n, np.bool_), np.array([1, 1, 0, 0, 0]), ["NodeResourcesFit",
                                                                              "PodTopologySpread"],
                            [FilterResult(~cpu, [Rejection("Insufficient cpu", cpu)]),
                             FilterResult(~spread, [Rejection("node(s) didn't match pod topology spread constraints",
                                                              spread)])])
    assert fit_error_message(n, outcome) == ("0/5 nodes are available: 2 node(s) didn't match pod topology spread "
                                             "constraints, 3 Insufficient cpu.")


@pytest.mark.parametrize("total,pct,want", [(50, 0, 50), (5000, 0, 500), (1000, 0, 420), (20000, 0, 1000),
                                            (5000, 100, 5000), (5000, 1, 100)])
def test_nodes_to_find(total: int, pct: int, want: int) -> None:
    assert nodes_to_find(total, pct) == want


def _cfg(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", **fields}


@dataclass(frozen=True)
class ConfigCase:
    name: str
    raw: dict[str, Any]
    error: str


CONFIG_ERRORS = [
    ConfigCase("wrong kind", {"apiVersion": "v1", "kind": "Pod"}, "expected apiVersion"),
    ConfigCase("unknown plugin", _cfg(profiles=[{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]),
               'profiles[0].plugins.filter.enabled[0].name: Invalid value: "Nope": unknown plugin'),
    ConfigCase("bad percentage", _cfg(percentageOfNodesToScore=150), "percentageOfNodesToScore"),
    ConfigCase("max backoff below initial", _cfg(podInitialBackoffSeconds=5, podMaxBackoffSeconds=2),
               "podMaxBackoffSeconds"),
    ConfigCase("duplicate profiles", _cfg(profiles=[{"schedulerName": "a"}, {"schedulerName": "a"}]),
               "Duplicate value"),
    ConfigCase("bad scoring strategy", _cfg(profiles=[{"pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Random"}}}]}]), "scoringStrategy"),
    ConfigCase("system defaulting with constraints", _cfg(profiles=[{"pluginConfig": [
        {"name": "PodTopologySpread", "args": {"defaultingType": "System", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}]}]), "defaultConstraints"),
    ConfigCase("hard affinity weight out of range", _cfg(profiles=[{"pluginConfig": [
        {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 101}}]}]), "hardPodAffinityWeight"),
    ConfigCase("zero score weight", _cfg(profiles=[{"plugins": {"score": {"enabled": [
        {"name": "NodeAffinity", "weight": 0}]}}}]), "weight"),
]


@pytest.mark.parametrize("case", CONFIG_ERRORS, ids=lambda c: c.name)
def test_invalid_config_is_rejected(case: ConfigCase) -> None:
    with pytest.raises(ConfigError, match=case.error.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse(case.raw)


def test_profiles_plugins_and_args() -> None:
    cfg = parse(_cfg(percentageOfNodesToScore=50, podInitialBackoffSeconds=2, podMaxBackoffSeconds=20, profiles=[
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "packer", "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [
            {"name": "NodeResourcesFit", "weight": 5}]}, "postFilter": {"disabled": [{"name": "DefaultPreemption"}]}},
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}]))
    assert cfg.scheduler_names == {"default-scheduler", "packer"}
    assert (cfg.percentage_of_nodes_to_score, cfg.initial_backoff, cfg.max_backoff) == (50, 2.0, 20.0)
    packer = cfg.profiles[1]
    assert packer.scores == [("NodeResourcesFit", 5)] and packer.post_filters == []
    assert cfg.profiles[0].scores[0] == ("TaintToleration", 3)
    assert packer.plugin_args["NodeResourcesFit"]["scoringStrategy"]["type"] == "MostAllocated"
