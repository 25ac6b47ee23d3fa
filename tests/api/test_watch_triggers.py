"""Indexed triggers in the watch cache (kube-apiserver's cacher, pods' spec.nodeName): a watch for one node's
pods is filed under that node and offered only the events of pods that are (or were) on it — and still sees
exactly what an unindexed watch with the same selector would. Real API server on a real SQLite file."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.cache import Watcher
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.testing.builders import make_pod

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def server(inprocess_server: ApiServer) -> ApiServer:
    return inprocess_server


async def _collect(client: InProcessClient, selector: str, into: list[tuple[str, str]],
                   resource_version: str = "") -> None:
    params = {"fieldSelector": selector, **({"resourceVersion": resource_version} if resource_version else {})}
    async for ev in client.watch("/api/v1/pods", params):
        into.append((ev["type"], ev["object"]["metadata"]["name"]))


async def _life(client: InProcessClient) -> None:
    """p1 created on node-a; p2 created unscheduled, then bound to node-a; p3 on node-b; p1 and p3 deleted."""
    await client.create(PODS, make_pod("p1").node("node-a").obj())
    await client.create(PODS, make_pod("p2").obj())
    await client.create(f"{PODS}/p2/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p2"},
                                               "target": {"kind": "Node", "name": "node-a"}})
    await client.create(PODS, make_pod("p3").node("node-b").obj())
    for name in ("p1", "p3"):
        await client.delete(f"{PODS}/{name}", {"gracePeriodSeconds": 0})


CASES = {
    "one node's watch sees its pods, a bound pod arriving as ADDED": (
        "spec.nodeName=node-a", [("ADDED", "p1"), ("ADDED", "p2"), ("DELETED", "p1")]),
    "the unscheduled pods' watch sees a pod leave when it is bound": (
        "spec.nodeName=", [("ADDED", "p2"), ("DELETED", "p2")]),
    "another node's watch sees only that node's pods": (
        "spec.nodeName=node-b", [("ADDED", "p3"), ("DELETED", "p3")]),
    "an inequality is not indexed and sees every other pod": (
        "spec.nodeName!=node-a", [("ADDED", "p2"), ("DELETED", "p2"), ("ADDED", "p3"), ("DELETED", "p3")]),
}


@pytest.mark.parametrize("resumed", [False, True], ids=["live", "resumed from the ring"])
@pytest.mark.parametrize("selector,expected", CASES.values(), ids=list(CASES))
async def test_triggered_watch_sees_what_its_selector_selects(server: ApiServer, selector: str,
                                                              expected: list[tuple[str, str]], resumed: bool) -> None:
    """Live, the events are offered by trigger value; resumed from a resourceVersion before them, the ring's
    backlog is picked by the same values (before decoding): both must be what the selector selects."""
    client = InProcessClient(server)
    seen: list[tuple[str, str]] = []
    if resumed:
        start = str(server.caches.revision)
        await _life(client)
        watching = asyncio.create_task(_collect(client, selector, seen, start))
    else:
        watching = asyncio.create_task(_collect(client, selector, seen))
        await asyncio.sleep(0.05)
        await _life(client)
    for _ in range(100):
        if len(seen) >= len(expected):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # nothing more arrives
    watching.cancel()
    assert seen == expected


async def test_a_node_watch_is_filed_under_its_node_and_offered_no_other_nodes_events(server: ApiServer) -> None:
    client = InProcessClient(server)
    seen: list[tuple[str, str]] = []
    watching = asyncio.create_task(_collect(client, "spec.nodeName=node-a", seen))
    await asyncio.sleep(0.05)
    cache = server.caches[next(r for r in server.caches.by_resource if r.plural == "pods" and not r.group)]
    (watcher,) = cache.triggered["node-a"]
    assert watcher in cache.watchers and watcher not in cache.plain
    offered: list[str] = []
    original = Watcher.offer

    def spy(self: Watcher, ev: Any) -> None:
        if self is watcher:
            offered.append(ev.obj["metadata"]["name"])
        original(self, ev)

    Watcher.offer = spy  # type: ignore[method-assign]
    try:
        await client.create(PODS, make_pod("elsewhere").node("node-b").obj())
        await client.create(PODS, make_pod("here").node("node-a").obj())
        await asyncio.sleep(0.05)
    finally:
        Watcher.offer = original  # type: ignore[method-assign]
    watching.cancel()
    assert offered == ["here"]
    await asyncio.sleep(0.05)
    assert "node-a" not in cache.triggered and watcher not in cache.watchers  # the watch ended: its entries are gone


async def test_a_resumed_node_watch_decodes_only_its_nodes_events(server: ApiServer) -> None:
    """The ring's backlog for one trigger value holds the events of pods on that node (now or before) only:
    every node agent's pod watch resumes every few minutes, and decoding the whole cluster's pod events since
    its last bookmark for each of them grew with nodes x pod churn (a 5,000-node simulation's second hour)."""
    client = InProcessClient(server)
    start = server.caches.revision
    await _life(client)
    pods = next(r for r in server.caches.by_resource if r.plural == "pods" and not r.group)
    everything = server.caches.events_since(pods, start)
    for_b = server.caches.events_since(pods, start, "node-b")
    assert everything is not None and for_b is not None
    assert [(e.type, e.obj["metadata"]["name"]) for e in for_b] == [("ADDED", "p3"), ("DELETED", "p3")]
    assert [(e.type, e.obj["metadata"]["name"]) for e in everything] == [
        ("ADDED", "p1"), ("ADDED", "p2"), ("MODIFIED", "p2"), ("ADDED", "p3"), ("DELETED", "p1"), ("DELETED", "p3")]
