"""The `kubernetes` Service's endpoints list every live API server (upstream's lease endpoint reconciler,
pkg/controlplane/reconcilers/lease_test.go's behaviours): two real ApiServers on one SQLite file, as
two servers on one etcd, on a fake clock."""

from __future__ import annotations

import asyncio
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


async def test_every_live_server_is_an_endpoint_and_a_dead_one_drops_out(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "state.db")
    clock = FakeClock(NOW)
    one = ApiServer(store, clock, server_address="10.0.0.1:6443")
    two = ApiServer(store, clock, server_address="10.0.0.2:6443")
    try:
        await one.start()
        assert addresses(one) == {("10.0.0.1", 6443)}
        await caught_up(one)
        await two.start()
        await settle(clock, one, two)
        assert addresses(one) == addresses(two) == {("10.0.0.1", 6443), ("10.0.0.2", 6443)}
        # `two` dies without a word: its Lease is no longer renewed; within the TTL it is still listed
        two_tasks = list(two._tasks)
        for task in two_tasks:
            task.cancel()
        await settle(clock, one)
        assert ("10.0.0.2", 6443) in addresses(one)
        await settle(clock, one)  # 20 s after its last renewal, past the 15 s TTL
        assert addresses(one) == {("10.0.0.1", 6443)}
    finally:
        two.ready = False  # it "died": no clean removal
        await two.stop()
        await one.stop()
        await store.close()


async def test_a_clean_stop_leaves_the_endpoints_at_once(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "state.db")
    clock = FakeClock(NOW)
    one = ApiServer(store, clock, server_address="10.0.0.1:6443")
    two = ApiServer(store, clock, server_address="10.0.0.2:6443")
    try:
        await one.start()
        await caught_up(one)
        await two.start()
        assert addresses(two) == {("10.0.0.1", 6443), ("10.0.0.2", 6443)}
        await two.stop()
        await caught_up(one)  # no reconcile by `one`: the departure itself rewrote the endpoints
        assert addresses(one) == {("10.0.0.1", 6443)}
        assert one.registry.get("leases", "kube-system", two.endpoints.name) is None
    finally:
        await one.stop()
        await store.close()
