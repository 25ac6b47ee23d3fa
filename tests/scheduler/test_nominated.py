"""Nominated pods (P5): they hold their node against pods of equal or lower priority, and a
higher-priority pod taking the node clears nominations that no longer fit. Mirrors upstream's
TestNominatedNode… cases in schedule_one_test.go, on the scheduler's own cycle (no API calls)."""

from __future__ import annotations

from typing import Any

from kubelite.client.http import ApiClient
from kubelite.clock import FakeClock
from kubelite.scheduler.scheduler import Scheduler
from kubelite.testing.builders import make_pod
from tests.scheduler.helpers import node

Obj = dict[str, Any]


def _scheduler() -> Scheduler:
    s = Scheduler(ApiClient("http://127.0.0.1:1"), FakeClock(), seed=0)
    s._spawn = lambda coro: coro.close()  # type: ignore[method-assign]  # no API writes in these tests
    return s


def _pod(name: str, priority: int, cpu: str, nominated: str = "") -> Obj:
    obj = make_pod(name).req(cpu=cpu).spec(priority=priority, schedulerName="default-scheduler").obj()
    obj["metadata"]["uid"] = f"uid-{name}"
    if nominated:
        obj["status"] = {"nominatedNodeName": nominated}
    return obj


def _evaluate(s: Scheduler, obj: Obj) -> str | None:
    s.pods.store[("default", obj["metadata"]["name"])] = obj
    s._pod_added(obj)
    qp = s.queue.pop_nowait()
    assert qp is not None and qp.info.name == obj["metadata"]["name"]
    return s.schedule_one(qp)


def test_nominated_pod_holds_resources_against_lower_priority() -> None:
    s = _scheduler()
    s._node_changed(node("n1", cpu="4"))
    s._pod_added(_pod("nominated", 100, "3", nominated="n1"))
    s.queue.delete("uid-nominated")
    assert _evaluate(s, _pod("low", 10, "2")) is None  # 3 of 4 cpu held for the nominated pod
    assert _evaluate(s, _pod("small", 10, "1")) == "n1"


def test_nominated_pod_does_not_hold_against_higher_priority() -> None:
    s = _scheduler()
    s._node_changed(node("n1", cpu="4"))
    s._pod_added(_pod("nominated", 100, "3", nominated="n1"))
    s.queue.delete("uid-nominated")
    assert _evaluate(s, _pod("urgent", 1000, "2")) == "n1"
    # the higher-priority pod took the room: the lower nomination no longer fits and is cleared
    assert "uid-nominated" not in s.queue.nominator
    assert s.queue.contains("uid-nominated")
