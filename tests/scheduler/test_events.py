"""The scheduler's events go through the EventSink's correlator, as upstream's recorder (tools/record): a verdict
that comes back is counted on the first event rather than written again, and many different verdicts for one pod
are combined. Mirrors TestEventCorrelator's cases (events_cache_test.go) as the scheduler produces them."""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import pytest

from kubelite.client.events import COMBINED_PREFIX, Correlated, EventSink
from kubelite.client.http import ApiClient
from kubelite.clock import FakeClock
from kubelite.scheduler.binder import Binder
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.queue import SchedulingQueue
from kubelite.testing.builders import make_pod


def _discard(coro: Coroutine[Any, Any, Any]) -> None:
    coro.close()  # the condition and explanation writes are not what these cases are about


@dataclass(frozen=True)
class EventCase:
    name: str
    verdicts: list[str]
    want: list[tuple[str, int, bool]]  # per queued event: message, count, whether it patches an earlier one


CASES = [
    EventCase("the same verdict twice is written once", ["0/1 nodes are available", "0/1 nodes are available"],
              [("0/1 nodes are available", 1, False)]),
    EventCase("a verdict that comes back is counted on its first event", ["a", "b", "a"],
              [("a", 1, False), ("b", 1, False), ("a", 2, True)]),
    EventCase("the tenth different verdict is combined", [f"m{i}" for i in range(10)],
              [*((f"m{i}", 1, False) for i in range(9)), (COMBINED_PREFIX + "m9", 1, False)]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_failed_scheduling_events_are_correlated(case: EventCase) -> None:
    clock = FakeClock()
    client = ApiClient("http://127.0.0.1:1")
    sink = EventSink(client, clock, senders=1)
    binder = Binder(client, clock, NodeTable(), SchedulingQueue(clock), _discard, sink)
    pod = make_pod("p").obj()
    pod["metadata"]["uid"] = "uid-p"
    for verdict in case.verdicts:
        binder.unschedulable(pod, verdict, dict)
    queued: list[Correlated] = []
    while not sink.queues[0].empty():
        queued.append(sink.queues[0].get_nowait())
    got = [(c.event["message"], c.event["count"], c.patch is not None) for c in queued]
    assert got == case.want
    assert {c.event["reason"] for c in queued} == {"FailedScheduling"}
    assert {c.event["source"]["component"] for c in queued} == {"default-scheduler"}
