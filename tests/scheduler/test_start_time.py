"""Preemption orders by the pods' start time as the scheduler's pod view sees it (util.GetPodStartTime).

Pods are bound first without `status.startTime`, then the node agent writes it through the
status subresource; the scheduler must take the start time from that update. The cases go
through the scheduler's informer handlers and its cycle, as in a running scheduler.
Mirrors TestDryRunPreemption and TestSelectBestCandidate, defaultpreemption/default_preemption_test.go.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from kubelite.client.http import ApiClient
from kubelite.clock import FakeClock
from kubelite.scheduler.scheduler import Scheduler
from kubelite.testing.builders import make_pod
from tests.scheduler.helpers import node, pod

Obj = dict[str, Any]
T1, T2, T3, T4, T5 = (f"2026-01-01T00:00:0{i}Z" for i in range(1, 6))


def _bound(name: str, priority: int, cpu: str, node_name: str) -> Obj:
    obj = make_pod(name).req(cpu=cpu).spec(priority=priority, nodeName=node_name).obj()
    obj["metadata"]["uid"] = f"uid-{name}"
    obj["status"] = {"phase": "Pending"}
    return obj


@dataclass(frozen=True)
class StartTimeCase:
    name: str
    nodes: list[Obj]
    existing: list[tuple[Obj, str]]  # bound pod, the startTime its node agent writes later
    incoming: Obj
    want_victims: dict[str, list[str]]  # candidate node → victims, most important first
    want_node: str
    want_criterion: str = ""


CASES = [
    StartTimeCase(
        "mixed priority pods are preempted, pick later StartTime one when priorities are equal",
        [node("node1", cpu="5"), node("node2", cpu="5")],
        [(_bound("p1.1", 1, "1", "node1"), T5), (_bound("p1.2", 1, "1", "node1"), T4),
         (_bound("p1.3", 50, "2", "node1"), T3), (_bound("p1.4", 100, "1", "node1"), T2),
         (_bound("p2", 100, "3", "node2"), T1)],
        make_pod("p").req(cpu="3").spec(priority=100).obj(),
        {"node1": ["p1.3", "p1.1"]}, "node1", "only candidate"),
    StartTimeCase(
        "same priority, same number of victims, different start time for each node's pod",
        [node("node1", cpu="4"), node("node2", cpu="4"), node("node3", cpu="4")],
        [(_bound("a", 10, "4", "node1"), T1), (_bound("b", 10, "4", "node2"), T3),
         (_bound("c", 10, "4", "node3"), T2)],
        make_pod("p").req(cpu="4").spec(priority=100).obj(),
        {"node1": ["a"], "node2": ["b"], "node3": ["c"]}, "node2",
        "latest start time of the highest-priority victims"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_start_time_written_through_status_orders_preemption(case: StartTimeCase) -> None:
    s = Scheduler(ApiClient("http://127.0.0.1:1"), FakeClock(), seed=0)
    for n in case.nodes:
        s.nodes.handlers.on_add(n)
    for obj, _ in case.existing:
        s.pods.handlers.on_add(obj)  # bound, not started yet
    for obj, started in case.existing:  # the agent's status write: phase Running and startTime
        updated = copy.deepcopy(obj)
        updated["status"] = {"phase": "Running", "startTime": started}
        s.pods.handlers.on_update(obj, updated)
    incoming = pod(case.incoming)
    attempt = s.evaluate(s.profiles["default-scheduler"], incoming)
    assert attempt.preemption is not None and attempt.preemption.candidate is not None
    got = {c.node: [v.name for v in c.victims] for c in attempt.preemption.candidates}
    assert got == case.want_victims
    assert attempt.preemption.candidate.node == case.want_node
    assert attempt.preemption.decided_by == case.want_criterion
