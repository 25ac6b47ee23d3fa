"""Event names as client-go's makeEvent gives them (`<object>.<UnixNano in hex>`), from the recorder's clock, and
unique on that clock even when several events share an instant (a virtual clock's usual case)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubelite.client.events import EventCorrelator, EventSink, event_for
from kubelite.client.http import ApiClient
from kubelite.clock import FakeClock
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import serving

Obj = dict[str, Any]
POD = {"apiVersion": "v1", "metadata": {"name": "web", "namespace": "default", "uid": "u1"}}
T0 = 1_700_000_000.0
T0_NANOS = 1_700_000_000_000_000_000


@dataclass(frozen=True)
class Post:
    """One event posted: by which component (each has its own correlator, as each has its own sink), its reason
    and message, and when (seconds after T0)."""

    component: str
    reason: str
    at: float = 0.0
    message: str = "m"


@pytest.mark.parametrize(("posts", "nanos"), [
    pytest.param([Post("kubelet", "Started", at=1.5)], [T0_NANOS + 1_500_000_000],
                 id="the name is the object's and the clock's UnixNano in hex"),
    pytest.param([Post("scheduler", "Scheduled"), Post("kubelet", "Pulled"), Post("kubelet", "Created"),
                  Post("kubelet", "Started")], [T0_NANOS, T0_NANOS + 1, T0_NANOS + 2, T0_NANOS + 3],
                 id="events at one instant get consecutive nanoseconds in the order posted, across components"),
    pytest.param([Post("kubelet", "Pulled", at=2.0), Post("kubelet", "Created", at=1.0)],
                 [T0_NANOS + 2_000_000_000, T0_NANOS + 2_000_000_001],
                 id="an event made before the last one named takes the next nanosecond"),
    pytest.param([Post("kubelet", "BackOff"), Post("kubelet", "BackOff"), Post("kubelet", "Failed")],
                 [T0_NANOS, T0_NANOS, T0_NANOS + 1],
                 id="a repeat is the first event patched: it keeps the first name and takes no nanosecond"),
])
def test_event_names(posts: list[Post], nanos: list[int]) -> None:
    clock = FakeClock(T0)
    correlators: dict[str, EventCorrelator] = {}
    names = []
    for post in posts:
        correlator = correlators.setdefault(post.component, EventCorrelator(clock))
        out = correlator.correlate(event_for(POD, post.reason, post.message, "Pod", post.component, T0 + post.at))
        assert out is not None
        names.append(out.event["metadata"]["name"])
    assert names == [f"web.{n:x}" for n in nanos]


def test_each_clock_names_on_its_own() -> None:
    """A second simulation in the process (a clock of its own) names its events as the first did."""
    first, second = (EventCorrelator(FakeClock(T0)).correlate(
        event_for(POD, "Started", "m", "Pod", "kubelet", T0)) for _ in range(2))
    assert first is not None and second is not None
    assert first.event["metadata"]["name"] == second.event["metadata"]["name"] == f"web.{T0_NANOS:x}"


async def test_events_at_one_instant_are_all_stored_and_listed_in_order(tmp_path: Path) -> None:
    """Against a real API server: none of the four same-instant events is lost to AlreadyExists, and the list
    (by name) is the posted order, which `kubectl describe` keeps within a second."""
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), clock=FakeClock()) as http:
        client = ApiClient(str(http.make_url("")))
        clock = FakeClock(T0)
        sinks = {c: EventSink(client, clock) for c in ("scheduler", "kubelet")}
        runners = [asyncio.create_task(s.run()) for s in sinks.values()]
        try:
            for component, reason in (("scheduler", "Scheduled"), ("kubelet", "Pulled"), ("kubelet", "Created"),
                                      ("kubelet", "Started")):
                sinks[component].post(event_for(POD, reason, reason.lower(), "Pod", component, clock.now()))
            for _ in range(200):
                listed = (await client.get("/api/v1/namespaces/default/events"))["items"]
                if len(listed) == 4:
                    break
                await asyncio.sleep(0.01)
            assert [e["reason"] for e in listed] == ["Scheduled", "Pulled", "Created", "Started"]
        finally:
            for r in runners:
                r.cancel()
