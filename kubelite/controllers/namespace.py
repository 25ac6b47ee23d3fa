"""The namespace controller: empties a terminating namespace, then lets it go.

A port of pkg/controller/namespace (namespaced_resources_deleter.go). Deleting a namespace
makes it Terminating (the API server then refuses new content in it); this controller
deletes everything in it through the ordinary API — every deletable namespaced kind, found
by discovery, with the default propagation, pods gracefully (never forced: a node that is
unreachable holds the namespace, as seed 002 accepts) — and re-checks until nothing is
left. Then it removes the `kubernetes` finalizer through the `finalize` subresource, and the
API server removes the namespace.
"""

from __future__ import annotations

import logging
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.informer import Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.discovery import deletable_resources
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.namespace")

Obj = dict[str, Any]
FINALIZER = "kubernetes"
RECHECK = 1.0  # content still terminating: look again after this long
WORKERS = 2  # --concurrent-namespace-syncs is 10


def terminating(ns: Obj) -> bool:
    return bool(ns["metadata"].get("deletionTimestamp")) and \
        FINALIZER in ((ns.get("spec") or {}).get("finalizers") or [])


class NamespaceController:
    def __init__(self, client: Client, clock: Clock, workers: int = WORKERS) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[Key] = Runner("namespace", self.sync, clock, workers)
        self.namespaces = shared_informer(client, clock, "/api/v1/namespaces",
                                          Handlers(self._changed, lambda old, new: self._changed(new)))

    def _changed(self, ns: Obj) -> None:
        if terminating(ns):
            self.runner.enqueue(key_of(ns))

    async def run(self) -> None:
        await run_synced((self.namespaces,), (self.runner.run,))

    async def sync(self, key: Key) -> None:
        ns = self.namespaces.store.get(key)
        if ns is None or not terminating(ns):
            return
        name = ns["metadata"]["name"]
        remaining = await self.delete_content(name)
        if remaining:
            log.debug("namespace %s: %d objects still terminating", name, remaining)
            self.runner.queue.add_after(key, RECHECK)
            return
        spec = ns.get("spec") or {}
        body = {**ns, "spec": {**spec, "finalizers": [f for f in spec.get("finalizers") or [] if f != FINALIZER]}}
        try:
            await self.client.request("PUT", f"/api/v1/namespaces/{name}/finalize", body)
        except ApiError as exc:
            if exc.code != 404:
                raise

    async def delete_content(self, namespace: str) -> int:
        """Delete every object in the namespace that is not already being deleted; how many objects remain."""
        remaining = 0
        for resource in await deletable_resources(self.client):
            if not resource.namespaced:
                continue
            listed = await self.client.get(resource.collection(namespace))
            for obj in listed.get("items") or []:
                remaining += 1
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    out = await self.client.delete(resource.path(namespace, obj["metadata"]["name"]),
                                                   {"propagationPolicy": "Background"})
                except ApiError as exc:
                    if exc.code != 404:
                        raise
                    out = {}
                if not (out.get("metadata") or {}).get("deletionTimestamp"):
                    remaining -= 1  # gone now (a Status, or the object as it was removed)
        return remaining
