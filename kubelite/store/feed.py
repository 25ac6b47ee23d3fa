"""The watchers of a store that publishes every change itself (SQLite, memory): one queue per watch.

Both stores hand each applied change to `publish` on the loop, before they acknowledge the write, and serve a
watch as its history (read after the watch is registered, so nothing falls between the two) followed by the
live events, those already in the history skipped by revision.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from kubelite.store.interface import Event, prefix_end

# (prefix, end of its key range, from_revision as the caller gave it) -> (revision the watch starts after,
# the events after it in the range, in order); raises Compacted when that history is gone.
History = Callable[[str, str, int], tuple[int, list[Event]]]


@dataclass(slots=True)
class _Watcher:
    prefix: str
    end: str
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)


class Feed:
    def __init__(self) -> None:
        self._watchers: list[_Watcher] = []

    def publish(self, ev: Event) -> None:
        key = ev.kv.key
        for w in self._watchers:
            if w.prefix <= key < w.end:
                w.queue.put_nowait(ev)

    def close(self) -> None:
        """End every watch (after the events already published to it)."""
        for w in self._watchers:
            w.queue.put_nowait(None)

    async def follow(self, prefix: str, from_revision: int, history: History) -> AsyncIterator[Event]:
        w = _Watcher(prefix, prefix_end(prefix))
        self._watchers.append(w)
        try:
            last, past = history(prefix, w.end, from_revision)
            for ev in past:
                last = ev.revision
                yield ev
            while True:
                item = await w.queue.get()
                if item is None:
                    return
                if item.revision > last:  # an event published after the history was read may be in it
                    last = item.revision
                    yield item
        finally:
            self._watchers.remove(w)
