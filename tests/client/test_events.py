"""Event correlation (client-go's events_cache_test.go, ported by case name) and in-order sending."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kubelite.api.errors import ApiError, not_found, unavailable
from kubelite.client.events import (
    AGGREGATE_INTERVAL,
    AGGREGATE_MAX_EVENTS,
    COMBINED_PREFIX,
    SPAM_BURST,
    EventCorrelator,
    EventSink,
    aggregate_key,
    event_for,
)
from kubelite.client.http import ApiClient
from kubelite.clock import FakeClock, rfc3339
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import serving

Obj = dict[str, Any]


class IntervalClock:
    """client-go's clock.IntervalClock: every reading moves time on by `interval`."""

    def __init__(self, interval: float) -> None:
        self.t = 1_700_000_000.0
        self.interval = interval

    def now(self) -> float:
        self.t += self.interval
        return self.t

    def monotonic(self) -> float:
        return self.now()

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("the correlator never sleeps")


def make_event(reason: str, message: str, name: str = "my-pod", namespace: str = "my-ns",
               field_path: str = "spec.containers{mycontainer}") -> Obj:
    return {"metadata": {"name": f"{name}.0", "namespace": namespace}, "reason": reason, "message": message,
            "involvedObject": {"kind": "Pod", "name": name, "namespace": namespace, "uid": "C934D34AFB20242",
                               "apiVersion": "version", "fieldPath": field_path},
            "source": {"component": "kubelet", "host": "kublet.node1"}, "count": 1, "type": "Normal"}


def make_unique_events(n: int) -> list[Obj]:
    return [make_event(f"reason-{i}", f"message-{i}", f"pod-{i}", f"ns-{i}") for i in range(n)]


def make_similar_events(n: int, template: Obj) -> list[Obj]:
    return [{**template, "message": f"{template['message']}-{i}-{template['message']}"} for i in range(n)]


FIRST = make_event("first", "i am first")
DUPLICATE = make_event("duplicate", "me again")
UNIQUE = make_event("unique", "snowflake")
SIMILAR = make_event("similar", "similar message", field_path="spec.containers{container1}")
OTHER_CONTAINER = {**SIMILAR, "involvedObject": {**SIMILAR["involvedObject"],
                                                 "fieldPath": "spec.containers{container2}"}}
COMBINED = COMBINED_PREFIX + SIMILAR["message"]


@pytest.mark.parametrize(("previous", "new", "message", "count", "interval"), [
    pytest.param([], FIRST, FIRST["message"], 1, 5, id="create-a-single-event"),
    pytest.param([DUPLICATE], DUPLICATE, DUPLICATE["message"], 2, 5, id="the-same-event-should-just-count"),
    pytest.param([DUPLICATE] * AGGREGATE_MAX_EVENTS, DUPLICATE, DUPLICATE["message"], AGGREGATE_MAX_EVENTS + 1, 30,
                 id="the-same-event-should-just-count-even-if-more-than-aggregate"),
    pytest.param([DUPLICATE] * (SPAM_BURST + 1), DUPLICATE, None, 0, 1,
                 id="the-same-event-is-spam-if-happens-too-frequently"),
    pytest.param(make_unique_events(30), UNIQUE, UNIQUE["message"], 1, 5, id="create-many-unique-events"),
    pytest.param(make_similar_events(AGGREGATE_MAX_EVENTS - 1, SIMILAR), SIMILAR, COMBINED, 1, 5,
                 id="similar-events-should-aggregate-event"),
    pytest.param(make_similar_events(AGGREGATE_MAX_EVENTS, SIMILAR), SIMILAR, COMBINED, 2, 5,
                 id="similar-events-many-times-should-count-the-aggregate"),
    pytest.param([OTHER_CONTAINER], SIMILAR, SIMILAR["message"], 1, 5,
                 id="events-from-different-containers-do-not-aggregate"),
    pytest.param(make_similar_events(AGGREGATE_MAX_EVENTS - 1, SIMILAR), SIMILAR, SIMILAR["message"], 1,
                 AGGREGATE_INTERVAL,
                 id="similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate"),
])
def test_event_correlator(previous: list[Obj], new: Obj, message: str | None, count: int, interval: float) -> None:
    clock = IntervalClock(interval)
    correlator = EventCorrelator(clock)

    def stamped(ev: Obj) -> Obj:
        now = rfc3339(clock.now())
        return {**ev, "firstTimestamp": now, "lastTimestamp": now}

    for ev in previous:
        correlator.correlate(stamped(ev))
    out = correlator.correlate(stamped(new))
    if message is None:
        assert out is None and correlator.skipped > 0
        return
    assert out is not None
    assert (out.event["message"], out.event["count"]) == (message, count)
    assert out.event["reason"] == new["reason"]
    assert out.event["involvedObject"] == new["involvedObject"]
    # validateEvent: a counted event's first and last timestamps differ; a single one's are equal
    assert (out.event["firstTimestamp"] != out.event["lastTimestamp"]) == (count > 1)
    assert (out.patch is not None) == (count > 1)


def test_event_spam_filter_default_key_is_the_object() -> None:
    """TestEventSpamFilter: "event should be reported as spam if object reference is the same for default spam
    filter"."""
    correlator = EventCorrelator(IntervalClock(1), spam_burst=1)
    stamp = {"firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z"}
    assert correlator.correlate({**make_event("original", "i am first"), **stamp}) is not None
    assert correlator.correlate({**make_event("duplicate", "me again"), **stamp}) is None


def test_event_aggregator_by_reason_func() -> None:
    """TestEventAggregatorByReasonFunc: events that differ only in message share the aggregate key."""
    e1 = make_event("end-of-world", "it was fun", "pod1", "other")
    e2 = make_event("end-of-world", "it was awful", "pod1", "other")
    e3 = make_event("nevermind", "it was a bug", "pod1", "other")
    (k1, local1), (k2, local2), (k3, _) = aggregate_key(e1), aggregate_key(e2), aggregate_key(e3)
    assert k1 == k2 and local1 != local2 and k1 != k3


class RecordingClient:
    """Applies event creates and merge patches to a dict, as the API would; `gate` holds chosen writes back."""

    def __init__(self) -> None:
        self.events: dict[str, Obj] = {}
        self.log: list[tuple[str, str]] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.failures: list[ApiError] = []

    async def create(self, path: str, obj: Obj) -> Obj:
        if self.failures:
            raise self.failures.pop(0)
        gate = self.gates.get(obj["reason"])
        if gate is not None:
            await gate.wait()
        self.events[obj["metadata"]["name"]] = dict(obj)
        self.log.append(("create", obj["reason"]))
        return obj

    async def patch(self, path: str, patch: Any, content_type: str = "") -> Obj:
        name = path.rsplit("/", 1)[1]
        if name not in self.events:
            raise not_found("events", name)
        self.events[name].update(patch)
        self.log.append(("patch", self.events[name]["reason"]))
        return self.events[name]

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        raise NotImplementedError

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "",
                      params: Mapping[str, str] | None = None) -> Any:
        raise NotImplementedError

    async def delete(self, path: str, options: Obj | None = None) -> Obj:
        raise NotImplementedError

    def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        raise NotImplementedError

    async def close(self) -> None:
        return None


POD = {"apiVersion": "v1", "metadata": {"name": "web", "namespace": "default", "uid": "u1"}}


async def _drain(clock: FakeClock, sink: EventSink, until: Any) -> None:
    for _ in range(100):
        if until():
            return
        await clock.advance(0.5)
    raise AssertionError("the sink did not deliver")


async def test_repeated_event_is_one_event_with_count_and_last_timestamp() -> None:
    clock = FakeClock()
    client = RecordingClient()
    sink = EventSink(client, clock)
    runner = asyncio.create_task(sink.run())
    first = clock.now()
    for _ in range(4):
        sink.post(event_for(POD, "BackOff", "Back-off restarting failed container", "Pod", "kubelet", clock.now(),
                            "Warning"))
        await clock.advance(40)
    await _drain(clock, sink, lambda: len(client.log) == 4)
    runner.cancel()
    [event] = client.events.values()
    assert event["count"] == 4
    assert event["firstTimestamp"] == rfc3339(first) and event["lastTimestamp"] == rfc3339(first + 120)
    assert client.log == [("create", "BackOff")] + [("patch", "BackOff")] * 3


async def test_events_about_one_object_are_sent_in_recorded_order() -> None:
    """Created before Started, even when the Created write is slow and several senders run."""
    clock = FakeClock()
    client = RecordingClient()
    client.gates["Created"] = asyncio.Event()
    sink = EventSink(client, clock, senders=4)
    runner = asyncio.create_task(sink.run())
    sink.post(event_for(POD, "Created", "Created container app", "Pod", "kubelet", clock.now()))
    sink.post(event_for(POD, "Started", "Started container app", "Pod", "kubelet", clock.now()))
    await clock.advance(1)
    assert client.log == []  # Started waits behind Created
    client.gates["Created"].set()
    await _drain(clock, sink, lambda: len(client.log) == 2)
    runner.cancel()
    assert client.log == [("create", "Created"), ("create", "Started")]


async def test_unavailable_is_retried_and_an_expired_event_is_created_again() -> None:
    clock = FakeClock()
    client = RecordingClient()
    client.failures = [unavailable("refused"), unavailable("refused")]
    sink = EventSink(client, clock)
    runner = asyncio.create_task(sink.run())
    ev = event_for(POD, "Pulled", "image present", "Pod", "kubelet", clock.now())
    sink.post(ev)
    await _drain(clock, sink, lambda: len(client.log) == 1)
    client.events.clear()  # the event's TTL ran out on the server
    sink.post(event_for(POD, "Pulled", "image present", "Pod", "kubelet", clock.now()))
    await _drain(clock, sink, lambda: len(client.log) == 2)
    runner.cancel()
    assert client.log == [("create", "Pulled"), ("create", "Pulled")]
    assert next(iter(client.events.values()))["count"] == 2 and sink.failed == 0


async def test_counted_event_against_a_real_api_server(tmp_path: Path) -> None:
    """The create and the count patches pass the real API server's validation, and it stores one Event."""
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), clock=FakeClock()) as http:
        client = ApiClient(str(http.make_url("")))
        clock = FakeClock()
        sink = EventSink(client, clock)
        runner = asyncio.create_task(sink.run())
        try:
            for _ in range(3):
                sink.post(event_for(POD, "Unhealthy", "Liveness probe failed", "Pod", "kubelet", clock.now(),
                                    "Warning"))
                await clock.advance(30)
            for _ in range(200):
                listed = await client.get("/api/v1/namespaces/default/events")
                if listed["items"] and listed["items"][0]["count"] == 3:
                    break
                await asyncio.sleep(0.01)
            [event] = listed["items"]
            assert event["count"] == 3 and event["lastTimestamp"] == rfc3339(clock.now() - 30)
        finally:
            runner.cancel()
            await client.close()
