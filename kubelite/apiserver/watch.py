"""Watch streams: newline-delimited JSON (or length-prefixed protobuf) over chunked HTTP, flushed per batch.

Initial state is sent as synthetic ADDED events in ascending resourceVersion order
(so a resuming client never sees one twice); a resourceVersion older than the watch
cache reaches yields one ERROR event with a 410 Expired Status, as upstream. Each
event's encoding is computed once per wire format and shared by all watchers.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any, cast, final

import orjson
from aiohttp import web

from kubelite.api import errors
from kubelite.apiserver import listoptions, negotiation, nesting, protobuf, tables
from kubelite.apiserver.cache import CachedEvent, Caches, Watcher
from kubelite.apiserver.registry.base import Obj, Resource
from kubelite.clock import Cancellable, Clock, timer

# A watch that asked for bookmarks gets one at least this often, so a client can tell a dead connection
# (a half-open link, a frozen server) from a quiet watch by silence alone: HTTP/1.1 has no pings, where
# client-go's HTTP/2 health check pings after 30 s of silence and gives up 15 s later.
BOOKMARK_INTERVAL = 20.0
# An in-process watch has no connection to lose: it gets bookmarks as upstream's cacher sends them, every minute
# (cacher.go defaultBookmarkFrequency). 10,000 of them (a 5,000-node simulation's agents) at 20 s were 500
# wake-ups, bookmarks and decodes per simulated second.
LOOPBACK_BOOKMARK_INTERVAL = 60.0
# Either way one more comes this long before the watch's lifetime ends (cache_watcher.go nextBookmarkTime), so the
# client resumes from a resourceVersion seconds old, not up to an interval old (older: nearer 410 Gone, a relist).
PRE_TIMEOUT_BOOKMARK = 2.0
# kube-apiserver's --min-request-timeout: a watch that asks for no timeout lives a random time between it and twice it
MIN_REQUEST_TIMEOUT = 1800
INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # metav1.InitialEventsAnnotationKey

Encoder = Callable[[CachedEvent], bytes]
_PROTOBUF_VIEWS: weakref.WeakSet[Encoder] = weakref.WeakSet()  # protobuf_encoder's: streams of protobuf frames


def json_encoder(view: Callable[[Obj], Obj] | None = None, key: str = "") -> Encoder:
    """`view`: how a custom resource's served version `key` (a group-version) shows its stored objects
    (`CustomResource.view`: its apiVersion, its defaults); events are encoded once per view."""
    if view is not None:
        def viewed(ev: CachedEvent) -> bytes:
            cache_key = ("json", key)
            line = ev.encoded.get(cache_key)
            if line is None:
                line = nesting.dumps({"type": ev.type, "object": view(ev.obj)}) + b"\n"
                ev.encoded[cache_key] = line
            return line

        return viewed

    def enc(ev: CachedEvent) -> bytes:
        line = ev.encoded.get("json")
        if line is None:
            line = nesting.dumps({"type": ev.type, "object": ev.obj}) + b"\n"
            ev.encoded["json"] = line
        return line

    return enc


def _protobuf_frame(ev: CachedEvent, obj: Obj) -> bytes:
    frame = protobuf.watch_frame(ev.type, obj) or protobuf.watch_frame("ERROR", errors.internal(
        f"{ev.resource.kind} {ev.obj['metadata'].get('name')} cannot be encoded as protobuf").status())
    assert frame is not None
    return frame


def protobuf_event(ev: CachedEvent) -> bytes:
    """An Encoder: length-prefixed protobuf WatchEvents. Only kinds with a message are watched this way; an object
    holding a value of the wrong type for its message (never one that passed validation) becomes an ERROR event."""
    frame = ev.encoded.get("protobuf")
    if frame is None:
        frame = ev.encoded["protobuf"] = _protobuf_frame(ev, ev.obj)
    return frame


def protobuf_encoder(view: Callable[[Obj], Obj], key: str) -> Encoder:
    """protobuf_event for a version served by conversion (`view` shows a stored object as the group-version `key`);
    events are encoded once per view."""
    def viewed(ev: CachedEvent) -> bytes:
        cache_key = ("protobuf", key)
        frame = ev.encoded.get(cache_key)
        if frame is None:
            frame = ev.encoded[cache_key] = _protobuf_frame(ev, view(ev.obj))
        return frame

    _PROTOBUF_VIEWS.add(viewed)
    return viewed


def table_encoder(kind: str, include: str, clock: Clock, printer: tables.Printer | None = None,
                  version: str = "") -> Encoder:
    """One-row Tables; cells carry ages, so they are cached only within the same second. `printer` and `version`:
    a custom resource's, whose versions may print different columns of the same events."""
    def enc(ev: CachedEvent) -> bytes:
        now = int(clock.now())
        key = ("table", include, now, version)
        line = ev.encoded.get(key)
        if line is None:
            obj = tables.table(kind, [ev.obj], now, include, ev.obj["metadata"]["resourceVersion"],
                               printer=printer)
            line = nesting.dumps({"type": ev.type, "object": obj}) + b"\n"
            ev.encoded[key] = line
        return line

    return enc


def _synthetic(objs: list[Obj], resource: Resource) -> list[CachedEvent]:
    ordered = sorted(objs, key=lambda o: int(o["metadata"]["resourceVersion"]))
    return [CachedEvent("ADDED", o, None, int(o["metadata"]["resourceVersion"]), resource) for o in ordered]


LOOPBACK = web.RequestKey("loopback", bool)  # set by the in-process transport: hand the stream over, unwritten


class WatchStream:
    """One watch, registered with the watch cache, as the chunks its client reads (each whole lines or frames).

    The same stream is written to an HTTP response by `serve` or handed to an in-process client by
    `WatchResponse`; either way its owner calls `close()` when done (the watcher leaves the cache).
    """

    def __init__(self, caches: Caches, resource: Resource, watcher: Watcher | None, encoder: Encoder,
                 first: bytes, bookmarks: float | None, lifetime: float, clock: Clock, exact_end: bool = False,
                 shown: Resource | None = None) -> None:
        """`bookmarks`: the interval between periodic bookmarks, None if the client did not ask for them.
        `exact_end`: the client chose the lifetime (timeoutSeconds), so it ends on time (Ticker).
        `shown`: the version the client watches, when it is served by conversion from `resource` (its bookmarks
        carry that version's apiVersion)."""
        self.caches, self.resource, self.watcher, self.encoder = caches, resource, watcher, encoder
        self.shown = shown or resource
        self.first = first  # the initial events (and bookmark), or the one ERROR event of an expired watch
        self.bookmarks, self.lifetime, self.clock, self.exact_end = bookmarks, lifetime, clock, exact_end
        frames = encoder is protobuf_event or encoder in _PROTOBUF_VIEWS
        self.bookmark = _protobuf_bookmark if frames else _bookmark
        self.content_type = protobuf.WATCH_MEDIA_TYPE if frames else "application/json"
        self._ticker: Ticker | None = None
        self._closers: list[Callable[[], None]] = []
        self._first_taken = False
        self._after_batch = False  # the last thing taken was a batch of events: check for the end before the next

    def take(self) -> bytes | int | asyncio.Future[None] | None:
        """What the watch sends next: a chunk of whole events or frames (bytes), a bookmark (the int revision it
        carries: `bookmark` encodes it, an in-process reader makes the object itself), a future to await before
        asking again (nothing to send yet), or None once the watch is over (its lifetime ended, the cache
        relisted, the server stops).

        A plain method that its one reader calls in a loop, rather than an async generator: an in-process
        watch's reader (`InProcessClient.watch`) drives the stream itself, one generator and one frame fewer per
        delivery; `chunks` is the same loop for HTTP. The order is the generator's it replaced: the first chunk,
        then the ticker starts; after a batch, a closed watch ends before events that arrived meanwhile; a
        bookmark only when no event is pending (it says the client has every event up to its revision)."""
        watcher = self.watcher
        if self._ticker is None:  # the first call, the second after a first chunk, or an expired watch's
            if not self._first_taken:
                self._first_taken = True
                if self.first:
                    return self.first
            if watcher is None or watcher.closed:  # expired (the ERROR event was all), or closed before it began
                return None
            self._ticker = Ticker(watcher, self.clock, self.lifetime, self.bookmarks, self.exact_end)
        assert watcher is not None
        while True:
            if not self._after_batch and watcher.pending:
                self._after_batch = True
                batch, watcher.pending = watcher.pending, []
                return self.encoder(batch[0]) if len(batch) == 1 else b"".join([self.encoder(e) for e in batch])
            self._after_batch = False
            if watcher.closed:
                return None
            if watcher.bookmark_due and not watcher.pending:
                watcher.bookmark_due = False
                return self.caches.revision
            waiter = watcher.waiter()
            if waiter is not None:
                return waiter

    async def chunks(self) -> AsyncIterator[bytes]:
        """The chunks in order (`take`), bookmarks encoded, until the watch is over."""
        while (item := self.take()) is not None:
            if type(item) is bytes:
                yield item
            elif type(item) is int:
                yield self.bookmark(self.shown, item)
            else:
                await cast(asyncio.Future[None], item)

    def on_close(self, callback: Callable[[], None]) -> None:
        self._closers.append(callback)

    def close(self) -> None:
        """Leave the watch cache (idempotent); then the callbacks (the request's metrics), once."""
        if self._ticker is not None:
            self._ticker.cancel()
        if self.watcher is not None:
            self.caches[self.resource].discard(self.watcher)
            self.watcher.closed = True  # a `take` after this ends the stream (and starts no ticker)
        closers, self._closers = self._closers, []
        for callback in closers:
            callback()


@final  # recognized by `type(resp) is WatchResponse` on every request's way back (an ABC's isinstance costs more)
class WatchResponse(web.StreamResponse):
    """A watch answered to an in-process client: the stream itself, read in the client's task (no HTTP framing,
    no writer task); status and headers as `serve` would have sent them."""

    def __init__(self, stream: WatchStream) -> None:
        super().__init__(headers={"Content-Type": stream.content_type})
        self.stream = stream


async def open_stream(caches: Caches, resource: Resource, namespace: str, matches: Callable[[Obj], bool] | None,
                      encoder: Encoder, resource_version: str, timeout: float | None, bookmarks: bool,
                      clock: Clock, trigger: str | None = None, loopback: bool = False,
                      initial_events: bool = False, shown: Resource | None = None) -> WatchStream:
    """Register the watch (or find its resourceVersion expired); a bad or future resourceVersion raises before.
    `loopback`: for an in-process client (bookmarks at upstream's cadence, not HTTP's liveness one); `shown`: as
    WatchStream's.

    `initial_events`: sendInitialEvents as defaulted and validated (listoptions.watch_options), served as the watch
    cache's getAllEventsSinceLocked serves it. True (WatchList, also every watch from resourceVersion "" or "0"
    that chose nothing): the current state as ADDED events, at least as fresh as resourceVersion, then — with
    bookmarks — a bookmark annotated k8s.io/initial-events-end (the client's list is complete), then changes.
    False: changes only, after resourceVersion or, for "" and "0", from now."""
    watcher = Watcher(namespace, matches, trigger)
    cache = caches[resource]
    interval = (LOOPBACK_BOOKMARK_INTERVAL if loopback else BOOKMARK_INTERVAL) if bookmarks else None
    lifetime = timeout if timeout is not None else random.uniform(MIN_REQUEST_TIMEOUT, 2 * MIN_REQUEST_TIMEOUT)
    from_now = resource_version in ("", "0")
    initial: list[CachedEvent] = []
    # Register before reading the backlog: the loop is single-threaded, so nothing slips between.
    if initial_events or from_now:
        if not from_now:  # NotOlderThan: the cache must have reached it
            await listoptions.wait_fresh(caches, clock, listoptions.parse_resource_version(resource_version))
        if initial_events:
            initial = [e for e in _synthetic(cache.list(namespace), resource) if matches is None or matches(e.obj)]
        start = caches.revision
    else:
        start = listoptions.parse_resource_version(resource_version)
        await listoptions.wait_fresh(caches, clock, start)  # the watch cache waits a little for a revision it lacks
        backlog = caches.events_since(resource, start, trigger)
        if backlog is None:
            return WatchStream(caches, resource, None, encoder, _expired(start, caches.revision), None, 0.0, clock,
                               shown=shown)
        for ev in backlog:
            watcher.offer(ev)
    cache.add(watcher)
    stream = WatchStream(caches, resource, watcher, encoder, b"", interval, lifetime, clock, timeout is not None,
                         shown)
    stream.first = b"".join(encoder(e) for e in initial)
    if bookmarks and initial_events:
        stream.first += stream.bookmark(stream.shown, start, True)
    return stream


async def serve(request: web.Request, caches: Caches, resource: Resource, namespace: str,
                matches: Callable[[Obj], bool] | None, encoder: Encoder, resource_version: str,
                timeout: float | None, bookmarks: bool, clock: Clock,
                trigger: str | None = None, initial_events: bool = False,
                shown: Resource | None = None) -> web.StreamResponse:
    """`trigger`: the value of the resource's indexed trigger field that `matches` requires (cache.py);
    `initial_events`, `shown`: as open_stream's."""
    loopback = bool(request.get(LOOPBACK))
    stream = await open_stream(caches, resource, namespace, matches, encoder, resource_version, timeout, bookmarks,
                               clock, trigger, loopback, initial_events, shown)
    try:  # after the watch opened, as serveWatchHandler negotiates after rw.Watch: its 400s come first
        negotiation.check_stream_acceptable(request.headers.get("Accept", ""))
    except errors.ApiError:
        stream.close()
        raise
    if loopback:
        return WatchResponse(stream)
    resp = web.StreamResponse(headers={"Content-Type": stream.content_type})
    resp.enable_chunked_encoding()
    try:
        await resp.prepare(request)
        async for chunk in stream.chunks():
            await resp.write(chunk)
        await resp.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        stream.close()
    return resp


class Ticker:
    """A watch's only timer: closes it when its lifetime ends and, if it asked for them, marks bookmarks due —
    every `interval` and once PRE_TIMEOUT_BOOKMARK before the end (upstream's nextBookmarkTime).

    A chain of coarse timers (kubelite.clock.timer), not a task per watch: each fires up to a
    TIMER_GRANULARITY late, which neither a lifetime (itself random) nor a heartbeat minds, and all the watches
    due in the same second are woken by one loop timer (upstream's cacher also files watchers by bookmark time
    in one-second buckets). The pre-timeout bookmark stays ahead of the end: due PRE_TIMEOUT_BOOKMARK (2 s)
    earlier, it fires at least a second before the watch closes. A lifetime the client chose (timeoutSeconds,
    `exact`) ends on time, as upstream's timer ends it: its last wake is an exact timer (a coarse one made
    timeoutSeconds=1 last up to 2 s)."""

    __slots__ = ("_handle", "clock", "deadline", "exact", "interval", "next_bookmark", "watcher")

    def __init__(self, watcher: Watcher, clock: Clock, lifetime: float, interval: float | None,
                 exact: bool = False) -> None:
        self.watcher, self.clock, self.interval, self.exact = watcher, clock, interval, exact
        now = clock.monotonic()
        self.deadline = now + lifetime
        self.next_bookmark = self._bookmark_after(now)
        self._handle = self._arm(now)

    def _bookmark_after(self, t: float) -> float | None:
        """The next bookmark's time after one at `t` (None: no more, the watch ends before another is due)."""
        if self.interval is None:
            return None
        at = min(t + self.interval, self.deadline - PRE_TIMEOUT_BOOKMARK)
        return at if at > t else None

    def _arm(self, now: float) -> Cancellable:
        if self.next_bookmark is None:
            return timer(self.clock, self.deadline - now, self._fire, coarse=not self.exact)
        return timer(self.clock, min(self.deadline, self.next_bookmark) - now, self._fire, coarse=True)

    def _fire(self) -> None:
        now = self.clock.monotonic()
        if now >= self.deadline:
            self.watcher.close()
            return
        if self.next_bookmark is not None and now >= self.next_bookmark:
            self.next_bookmark = self._bookmark_after(self.next_bookmark)  # on schedule, however late this woke
            self.watcher.bookmark_due = True
            self.watcher.wake()
        self._handle = self._arm(now)

    def cancel(self) -> None:
        self._handle.cancel()


def bookmark_object(resource: Resource, revision: int, initial_end: bool = False) -> Obj:
    """A BOOKMARK event's object: only its kind and the revision the watch has reached; `initial_end`: the one
    that ends a WatchList's initial events carries metav1.InitialEventsAnnotationKey."""
    meta: Obj = {"resourceVersion": str(revision)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {"kind": resource.kind, "apiVersion": resource.group_version, "metadata": meta}


def _bookmark(resource: Resource, revision: int, initial_end: bool = False) -> bytes:
    return orjson.dumps({"type": "BOOKMARK", "object": bookmark_object(resource, revision, initial_end)}) + b"\n"


def _protobuf_bookmark(resource: Resource, revision: int, initial_end: bool = False) -> bytes:
    frame = protobuf.watch_frame("BOOKMARK", bookmark_object(resource, revision, initial_end))
    assert frame is not None  # only resources with a message are watched as protobuf
    return frame


def _expired(requested: int, current: int) -> bytes:
    """The one ERROR event (410 Expired) of a watch from a resourceVersion the cache no longer reaches."""
    status: dict[str, Any] = errors.gone(f"too old resource version: {requested} ({current})").status()
    return orjson.dumps({"type": "ERROR", "object": status}) + b"\n"
