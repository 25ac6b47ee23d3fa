"""What a watch stream sends next (`WatchStream.take`), in the order its old async generator sent it.

An in-process watch's reader drives the stream itself (`InProcessClient.watch`) and HTTP's `chunks` loops over
the same method, so both keep one order: a batch of the events pending; after a batch, the end if the watch was
closed meanwhile (its newer events are sent again to the watch that resumes); a bookmark only once no event is
pending (it says the client has every event up to its revision); otherwise a future to wait on. A real API
server on a real SQLite file; events are real writes, which the watch cache has offered by the time they return.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import orjson
import pytest

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.apiserver.registry import RESOURCES
from kubelite.apiserver.watch import json_encoder, open_stream
from kubelite.clock import RealClock

CONFIGMAPS = next(r for r in RESOURCES if r.plural == "configmaps")
PATH = "/api/v1/namespaces/default/configmaps"

# A step: something happens ("write NAME"; "close"; "tick": the ticker marks a bookmark due), or the stream is
# asked for what comes next and must give: "events A,B" (one chunk of those events), "bookmark" (the revision
# reached), "wait", "end".
CASES: dict[str, list[str]] = {
    "an event, then a future to wait on": ["write a", "events a", "wait"],
    "events written together come as one batch": ["write a", "write b", "events a,b", "wait"],
    "a watch closed while a batch was sent ends before the events that came meanwhile": [
        "write a", "events a", "write b", "close", "end"],
    "a watch closed with nothing pending ends": ["close", "end"],
    "a stream its reader closed before taking anything ends, its ticker never started": ["shut", "end"],
    "a bookmark waits for the pending events": ["write a", "tick", "events a", "bookmark", "wait"],
    "a bookmark due with nothing pending comes at once": ["tick", "bookmark", "wait"],
    "an event that arrives after a bookmark comes next": ["tick", "bookmark", "write a", "events a", "wait"],
}


@pytest.mark.parametrize("steps", [pytest.param(s, id=name) for name, s in CASES.items()])
async def test_take_sends_in_the_generators_order(inprocess_server: ApiServer, steps: list[str]) -> None:
    server = inprocess_server
    client = InProcessClient(server)
    revision = str(server.caches.revision)
    stream = await open_stream(server.caches, CONFIGMAPS, "default", None, json_encoder(), revision, None, True,
                               RealClock(), loopback=True)
    watcher = stream.watcher
    assert watcher is not None
    waiting: asyncio.Future[None] | None = None
    actions: dict[str, Callable[[], None]] = {"close": watcher.close, "shut": stream.close,
                                              "tick": lambda: setattr(watcher, "bookmark_due", True)}
    try:
        for step in steps:
            verb, _, arg = step.partition(" ")
            if verb == "write":
                await client.create(PATH, {"metadata": {"name": arg}, "data": {}})
            elif verb in actions:
                actions[verb]()
                watcher.wake()
            else:
                item = stream.take()
                if verb == "events":
                    assert type(item) is bytes, (step, item)
                    names = [orjson.loads(line)["object"]["metadata"]["name"] for line in item.splitlines()]
                    assert names == arg.split(","), step
                elif verb == "bookmark":
                    assert item == server.caches.revision, step
                elif verb == "wait":
                    assert isinstance(item, asyncio.Future) and not item.done(), (step, item)
                    waiting = item
                else:
                    assert verb == "end" and item is None, (step, item)
                    if "shut" in steps:
                        assert stream._ticker is None, "a closed stream keeps no timer"
        if waiting is not None:  # what it waits for resolves it
            await client.create(PATH, {"metadata": {"name": "later"}, "data": {}})
            assert waiting.done()
    finally:
        stream.close()


async def test_an_in_process_bookmark_is_the_object_its_json_line_decodes_to(inprocess_server: ApiServer) -> None:
    """The in-process reader makes a periodic bookmark's object itself; it is what HTTP's line decodes to."""
    server = inprocess_server
    stream = await open_stream(server.caches, CONFIGMAPS, "default", None, json_encoder(), str(server.caches.revision),
                               None, True, RealClock(), loopback=True)
    assert stream.watcher is not None
    stream.watcher.bookmark_due = True
    events = InProcessClient(server).watch(PATH, {"allowWatchBookmarks": "true",
                                                  "resourceVersion": str(server.caches.revision)})
    try:
        assert stream.take() == server.caches.revision
        line = stream.bookmark(CONFIGMAPS, server.caches.revision)
        reading = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0)  # the in-process watch is registered and waits
        cache = server.caches[CONFIGMAPS]
        for w in cache.watchers:
            if w is not stream.watcher:
                w.bookmark_due = True
                w.wake()
        event = await asyncio.wait_for(reading, 5)
        assert event == orjson.loads(line)
        assert list(event["object"]) == list(orjson.loads(line)["object"])  # key order too
    finally:
        await events.aclose()
        stream.close()
