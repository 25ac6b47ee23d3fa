"""Building core/v1 Events about an object, and sending them, as client-go's event recorder does."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import TYPE_CHECKING, Any

from kubelite.api.errors import ApiError
from kubelite.clock import rfc3339

if TYPE_CHECKING:
    from kubelite.client.http import ApiClient

Obj = dict[str, Any]


def event_for(obj: Obj, reason: str, message: str, kind: str, component: str, now: float,
              event_type: str = "Normal", host: str = "", action: str = "") -> Obj:
    meta = obj["metadata"]
    stamp = rfc3339(now)
    source: Obj = {"component": component}
    if host:
        source["host"] = host
    ev: Obj = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": meta.get("namespace") or "default"},
        "involvedObject": {"kind": kind, "namespace": meta.get("namespace", ""), "name": meta["name"],
                           "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", "v1"),
                           "resourceVersion": meta.get("resourceVersion", "")},
        "reason": reason, "message": message, "type": event_type, "source": source,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        "reportingComponent": component, "reportingInstance": host or component,
    }
    if action:
        ev["action"] = action
    return ev


class EventSink:
    """Posts events in the background through a few senders (client-go's broadcaster has one).

    Events are best-effort and many: sending them from a queue keeps them from crowding out
    the writes that carry state (a burst of pod starts makes two events per container but
    only one status write, which is what watchers wait for).
    """

    def __init__(self, client: ApiClient, senders: int = 2) -> None:
        self.client = client
        self.senders = senders
        self.queue: asyncio.Queue[Obj] = asyncio.Queue()

    def post(self, event: Obj) -> None:
        self.queue.put_nowait(event)

    async def run(self) -> None:
        await asyncio.gather(*(self._send() for _ in range(self.senders)))

    async def _send(self) -> None:
        while True:
            event = await self.queue.get()
            with contextlib.suppress(ApiError):
                await self.client.create(f"/api/v1/namespaces/{event['metadata']['namespace']}/events", event)
