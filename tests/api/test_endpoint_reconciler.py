"""The `kubernetes` Service's endpoints list every live API server (upstream's lease endpoint reconciler,
pkg/controlplane/reconcilers/lease_test.go's behaviours): two real ApiServers on one SQLite file, as
two servers on one etcd, on a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.endpoint_reconciler import INTERVAL, TTL, endpoint_objects, live_endpoints
from kubelite.clock import FakeClock, micro_time
from kubelite.store.sqlite import SQLiteStore

NOW = 1_700_000_000.0


def lease(endpoint: str | None, renewed: float, identity: str = "kube-apiserver") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "labels": {"apiserver.kubernetes.io/identity": identity}}
    if endpoint is not None:
        meta["annotations"] = {"kubelite.io/endpoint": endpoint}
    return {"metadata": meta, "spec": {"renewTime": micro_time(renewed), "leaseDurationSeconds": TTL}}


LIVE_CASES = [
    ("a renewed lease is live", [lease("10.0.0.1:6443", NOW - 1)], {("10.0.0.1", 6443)}),
    ("a lease past its duration has expired", [lease("10.0.0.1:6443", NOW - TTL - 1)], set()),
    ("a lease exactly at its duration is still live", [lease("10.0.0.1:6443", NOW - TTL)], {("10.0.0.1", 6443)}),
    ("leases of other components are ignored", [lease("10.0.0.1:6443", NOW, identity="kube-scheduler")], set()),
    ("a lease without an endpoint is ignored", [lease(None, NOW)], set()),
    ("a malformed endpoint is ignored", [lease("nonsense", NOW)], set()),
    ("a wildcard address is advertised as loopback", [lease("0.0.0.0:6443", NOW)], {("127.0.0.1", 6443)}),
    ("several servers are all listed",
     [lease("10.0.0.1:6443", NOW), lease("10.0.0.2:6443", NOW), lease("10.0.0.3:6443", NOW - 100)],
     {("10.0.0.1", 6443), ("10.0.0.2", 6443)}),
]


@pytest.mark.parametrize(("name", "leases", "want"), LIVE_CASES, ids=[c[0] for c in LIVE_CASES])
def test_live_endpoints(name: str, leases: list[dict[str, Any]], want: set[tuple[str, int]]) -> None:
    assert live_endpoints(leases, NOW) == want


def test_endpoints_are_grouped_by_port() -> None:
    endpoints, slices = endpoint_objects({("10.0.0.2", 6443), ("10.0.0.1", 6443), ("127.0.0.1", 7000)}, 6443)
    assert endpoints["subsets"] == [
        {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"name": "https", "port": 6443,
                                                                          "protocol": "TCP"}]},
        {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 7000, "protocol": "TCP"}]}]
    assert sorted(slices) == ["kubernetes", "kubernetes-7000"]
    assert [e["addresses"] for e in slices["kubernetes"]["endpoints"]] == [["10.0.0.1"], ["10.0.0.2"]]


def addresses(server: ApiServer) -> set[tuple[str, int]]:
    endpoints = server.registry.get("endpoints", "default", "kubernetes")
    assert endpoints is not None
    return {(a["ip"], s["ports"][0]["port"]) for s in endpoints["subsets"] for a in s["addresses"]}


async def caught_up(*servers: ApiServer) -> None:
    """Until every server's watch cache has the store's latest revision (the others' writes)."""
    for _ in range(500):
        if all(s.caches.revision >= s.store.revision for s in servers):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the watch caches never caught up")


async def settle(clock: FakeClock, *servers: ApiServer) -> None:
    """One reconcile interval on every server, each seeing the others' writes in its cache."""
    await clock.advance(INTERVAL)
    for server in servers:
        await caught_up(*servers)
        await server.endpoints.reconcile()
    await caught_up(*servers)


@pytest.fixture
async def two_servers(tmp_path: Path) -> AsyncIterator[tuple[FakeClock, ApiServer, ApiServer]]:
    """Servers at 10.0.0.1 and .2 on one SQLite file, started in that order (a fake clock for both)."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    clock = FakeClock(NOW)
    one = ApiServer(store, clock, server_address="10.0.0.1:6443")
    two = ApiServer(store, clock, server_address="10.0.0.2:6443")
    try:
        await one.start()
        assert addresses(one) == {("10.0.0.1", 6443)}
        await caught_up(one)
        await two.start()
        yield clock, one, two
    finally:
        await two.stop()
        await one.stop()
        await store.close()


async def test_every_live_server_is_an_endpoint_and_a_dead_one_drops_out(
        two_servers: tuple[FakeClock, ApiServer, ApiServer]) -> None:
    clock, one, two = two_servers
    await settle(clock, one, two)
    assert addresses(one) == addresses(two) == {("10.0.0.1", 6443), ("10.0.0.2", 6443)}
    # `two` dies without a word: its Lease is no longer renewed, nor is it removed on the way out
    two.ready = False
    for task in two._tasks:
        task.cancel()
    await settle(clock, one)  # within the TTL it is still listed
    assert ("10.0.0.2", 6443) in addresses(one)
    await settle(clock, one)  # 20 s after its last renewal, past the 15 s TTL
    assert addresses(one) == {("10.0.0.1", 6443)}


async def test_a_clean_stop_leaves_the_endpoints_at_once(
        two_servers: tuple[FakeClock, ApiServer, ApiServer]) -> None:
    _, one, two = two_servers
    assert addresses(two) == {("10.0.0.1", 6443), ("10.0.0.2", 6443)}
    await two.stop()
    await caught_up(one)  # no reconcile by `one`: the departure itself rewrote the endpoints
    assert addresses(one) == {("10.0.0.1", 6443)}
    assert one.registry.get("leases", "kube-system", two.endpoints.name) is None
