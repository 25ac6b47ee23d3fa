"""Building core/v1 Events about an object and sending them, as client-go's event recorder does.

Three parts, as in client-go's tools/record:
- `event_for` builds the Event a component records (reason, message, involved object, source), named
  `<object>.<UnixNano in hex>` as makeEvent names it, so the names sort in the order the events were made
  (`_Stamps` keeps them unique when several share an instant).
- `EventCorrelator` (events_cache.go) decides what reaches the API: a spam filter (a token bucket
  per source and object: a burst of 25, then one per 5 minutes), the aggregator (more than 10
  events that differ only in message, for one object and reason within 10 minutes, become one
  "(combined from similar events): …" event) and the logger (an event seen before — same source,
  object, reason, message — is not created again: the existing one is patched with a growing
  `count` and a new `lastTimestamp`, which `kubectl describe` shows as "x4 over 2m").
- `EventSink` sends in the background, one queue per sender, and every event about one object
  goes through the same queue, so they are written in the order they were recorded: Created
  always before Started, and a count patch never before the create it patches.

Deliberately not done: `series` (events.k8s.io/v1). kubelite's components record core/v1 Events
as the legacy recorder does, and `kubectl describe` reads their count/firstTimestamp/lastTimestamp.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import weakref
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kubelite.api.errors import ApiError
from kubelite.client.interface import Client
from kubelite.client.retry import Backoff, is_unavailable, on_error
from kubelite.clock import Clock, RealClock, rfc3339

log = logging.getLogger("kubelite.client.events")

Obj = dict[str, Any]
V = TypeVar("V")
MERGE_PATCH = "application/merge-patch+json"

MAX_LRU_CACHE_ENTRIES = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
COMBINED_PREFIX = "(combined from similar events): "
# recordToSink tries an event up to 12 times; kubelite backs off on Unavailable from 0.5 s to 10 s.
SEND_BACKOFF = Backoff(duration=0.5, factor=2.0, jitter=0.1, steps=12, cap=10.0)


def _name(object_name: str, now: float) -> str:
    """makeEvent's `<object>.<UnixNano in hex>`: names sort as the events were made, and `kubectl describe`,
    which sorts by lastTimestamp (whole seconds) and keeps the list's order (by name) within a second, shows
    Scheduled, Pulled, Created, Started in that order. From the caller's clock, so a simulation's are its own."""
    return f"{object_name}.{round(now * 1e9):x}"


class _Stamps:
    """The last nanosecond put in an event's name, per time source: a new event's name is nudged past it.

    On a virtual clock many events share one instant (a pod's Created and Started, another component's
    Scheduled): named by the nanosecond alone they would share a name, and the second create would fail with
    AlreadyExists and be dropped — as upstream's would, on a real clock where it practically never happens.
    So each name's nanosecond is above the last one given out on that clock (all of a simulation's components
    share it; every RealClock reads one wall clock): equal instants become consecutive nanoseconds, in the
    order the events were posted. A repeat needs no name of its own: the correlator patches the first one.
    Kept per clock, not per process, so one simulation's names never depend on an earlier one in the process.
    """

    def __init__(self) -> None:
        self._last: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()

    def unique(self, clock: Clock, name: str) -> str:
        """`name` (made by `_name`), its nanosecond moved past the last one given out on `clock`'s time."""
        source = RealClock if isinstance(clock, RealClock) else clock
        prefix, _, stamp = name.rpartition(".")
        nanos = max(int(stamp, 16), self._last.get(source, -1) + 1)
        self._last[source] = nanos
        return f"{prefix}.{nanos:x}"


_STAMPS = _Stamps()


def event_for(obj: Obj, reason: str, message: str, kind: str, component: str, now: float,
              event_type: str = "Normal", host: str = "", action: str = "", field_path: str = "") -> Obj:
    """The Event about `obj` (of `kind`); `field_path` names a part of it (a pod's container: the kubelet's
    GenerateContainerRef), omitted when empty as ObjectReference's omitempty omits it."""
    meta = obj["metadata"]
    stamp = rfc3339(now)
    source: Obj = {"component": component}
    if host:
        source["host"] = host
    ev: Obj = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": _name(meta["name"], now), "namespace": meta.get("namespace") or "default"},
        "involvedObject": {"kind": kind, "namespace": meta.get("namespace", ""), "name": meta["name"],
                           "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", "v1"),
                           "resourceVersion": meta.get("resourceVersion", "")},
        "reason": reason, "message": message, "type": event_type, "source": source,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        "reportingComponent": component, "reportingInstance": host or component,
    }
    if action:
        ev["action"] = action
    if field_path:
        ev["involvedObject"]["fieldPath"] = field_path
    return ev


def _object_key(ev: Obj) -> list[str]:
    src, ref = ev.get("source") or {}, ev.get("involvedObject") or {}
    return [src.get("component", ""), src.get("host", ""), ref.get("kind", ""), ref.get("namespace", ""),
            ref.get("name", ""), ref.get("uid", ""), ref.get("apiVersion", "")]


def event_key(ev: Obj) -> str:
    """getEventKey: events with this key are one event, counted."""
    ref = ev.get("involvedObject") or {}
    parts = _object_key(ev)
    parts.insert(5, ref.get("fieldPath", ""))
    return "\x00".join([*parts, ev.get("type", ""), ev.get("reason", ""), ev.get("message", "")])


def spam_key(ev: Obj) -> str:
    """getSpamKey: the source and the object (not the reason): one token bucket each."""
    return "\x00".join([*_object_key(ev), ev.get("type", "")])


def aggregate_key(ev: Obj) -> tuple[str, str]:
    """EventAggregatorByReasonFunc: (what similar events share, what tells them apart: the message)."""
    key = "\x00".join([*_object_key(ev), ev.get("type", ""), ev.get("reason", ""),
                       ev.get("reportingComponent", ""), ev.get("reportingInstance", "")])
    return key, ev.get("message", "")


class _Lru(Generic[V]):
    """The bounded caches of events_cache.go (4096 entries, least recently used evicted)."""

    def __init__(self, size: int = MAX_LRU_CACHE_ENTRIES) -> None:
        self.size = size
        self.items: OrderedDict[str, V] = OrderedDict()

    def get(self, key: str) -> V | None:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: str, value: V) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Aggregate:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass
class _Observation:
    count: int
    first_timestamp: str
    name: str


@dataclass(frozen=True)
class Correlated:
    """What to send: `event` created, or (when `patch` is set) the existing event of that name patched."""

    event: Obj
    patch: Obj | None = None


class EventCorrelator:
    def __init__(self, clock: Clock, max_events: int = AGGREGATE_MAX_EVENTS,
                 max_interval: float = AGGREGATE_INTERVAL, spam_burst: int = SPAM_BURST,
                 spam_qps: float = SPAM_QPS) -> None:
        self.clock = clock
        self.max_events = max_events
        self.max_interval = max_interval
        self.spam_burst = spam_burst
        self.spam_qps = spam_qps
        self._buckets: _Lru[_Bucket] = _Lru()
        self._aggregates: _Lru[_Aggregate] = _Lru()
        self._observed: _Lru[_Observation] = _Lru()
        self.skipped = 0  # events dropped by the spam filter

    def correlate(self, event: Obj) -> Correlated | None:
        """EventCorrelate: None when the spam filter drops the event."""
        if not self._accept(spam_key(event)):
            self.skipped += 1
            return None
        event, key = self._aggregate(event)
        return self._observe(event, key)

    def _accept(self, key: str) -> bool:
        """A token bucket per key (flowcontrol.NewTokenBucketRateLimiterWithClock(qps, burst).TryAccept)."""
        now = self.clock.monotonic()
        bucket = self._buckets.get(key) or _Bucket(float(self.spam_burst), now)
        bucket.tokens = min(float(self.spam_burst), bucket.tokens + (now - bucket.at) * self.spam_qps)
        bucket.at = now
        self._buckets.put(key, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _aggregate(self, event: Obj) -> tuple[Obj, str]:
        """EventAggregate: the event itself (keyed by event_key), or the combined one (keyed by its aggregate key)."""
        now = self.clock.now()
        key, message = aggregate_key(event)
        record = self._aggregates.get(key)
        if record is None or now - record.last > self.max_interval:
            record = _Aggregate()
        record.messages.add(message)
        record.last = now
        self._aggregates.put(key, record)
        if len(record.messages) < self.max_events:
            return event, event_key(event)
        record.messages.pop()  # do not grow the set of messages beyond the maximum
        stamp = rfc3339(now)
        ref = event["involvedObject"]
        combined: Obj = {
            **{k: v for k, v in event.items() if k not in ("action", "reportingComponent", "reportingInstance")},
            "metadata": {"name": _name(ref["name"], now), "namespace": event["metadata"]["namespace"]},
            "message": COMBINED_PREFIX + message, "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp,
        }
        return combined, key

    def _observe(self, event: Obj, key: str) -> Correlated:
        """eventObserve: a repeat takes the first one's name and firstTimestamp, count + 1, and becomes a patch."""
        last = self._observed.get(key)
        if last is None:
            name = _STAMPS.unique(self.clock, event["metadata"]["name"])
            event = {**event, "metadata": {**event["metadata"], "name": name}}
            self._observed.put(key, _Observation(int(event.get("count") or 1), event["firstTimestamp"], name))
            return Correlated(event)
        count = last.count + 1
        repeated = {**event, "metadata": {**event["metadata"], "name": last.name}, "count": count,
                    "firstTimestamp": last.first_timestamp}
        self._observed.put(key, _Observation(count, last.first_timestamp, last.name))
        patch = {"count": count, "lastTimestamp": event["lastTimestamp"], "message": event["message"]}
        return Correlated(repeated, patch)


class EventSink:
    """Correlates events as they are recorded and posts them in the background through a few senders.

    Events are best-effort and many: sending them from queues keeps them from crowding out the
    writes that carry state. Each involved object's events go to one sender (by a hash of its
    uid), so they reach the API in recorded order; different objects' events go in parallel.
    """

    def __init__(self, client: Client, clock: Clock | None = None, senders: int = 2,
                 correlator: EventCorrelator | None = None) -> None:
        self.client = client
        self.clock = clock or RealClock()
        self.correlator = correlator or EventCorrelator(self.clock)
        self.queues: list[asyncio.Queue[Correlated]] = [asyncio.Queue() for _ in range(max(1, senders))]
        self.failed = 0  # events given up on (the API refused them, or stayed unavailable)

    def post(self, event: Obj) -> None:
        out = self.correlator.correlate(event)
        if out is None:
            return
        ref = event.get("involvedObject") or {}
        shard = zlib.crc32((ref.get("uid") or f"{ref.get('namespace')}/{ref.get('name')}").encode())
        self.queues[shard % len(self.queues)].put_nowait(out)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            for queue in self.queues:
                tasks.create_task(self._send(queue))

    async def _send(self, queue: asyncio.Queue[Correlated]) -> None:
        while True:
            item = await queue.get()
            try:
                await on_error(functools.partial(self._write, item), clock=self.clock, retriable=is_unavailable,
                               backoff=SEND_BACKOFF)
            except ApiError as exc:
                self.failed += 1
                log.debug("event %s dropped: %s", item.event["metadata"]["name"], exc)

    async def _write(self, item: Correlated) -> None:
        ns = item.event["metadata"]["namespace"]
        path = f"/api/v1/namespaces/{ns}/events"
        if item.patch is not None:
            try:
                await self.client.patch(f"{path}/{item.event['metadata']['name']}", item.patch, MERGE_PATCH)
                return
            except ApiError as exc:
                if exc.code != 404:
                    raise
                # The event expired (events have a TTL) or was deleted: create it anew, as recordToSink does.
        event = {**item.event, "metadata": {k: v for k, v in item.event["metadata"].items()
                                            if k != "resourceVersion"}}
        try:
            await self.client.create(path, event)
        except ApiError as exc:
            if exc.code != 409 or exc.reason != "AlreadyExists":  # a retried create that had gone through
                raise
