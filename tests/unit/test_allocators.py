"""The ClusterIP and NodePort allocators (pkg/registry/core/service/ipallocator, portallocator behaviours)."""

from __future__ import annotations

import ipaddress

import pytest

from kubelite.apiserver.allocators import (
    AllocationError,
    ClusterIPAllocator,
    NodePortAllocator,
    kubernetes_service_ip,
)
from kubelite.clock import FakeClock


def test_dynamic_allocation_prefers_the_upper_band() -> None:
    """KEP-3070: a /24 has a static band of 16 addresses at its bottom that dynamic allocation uses last."""
    used: set[str] = set()
    alloc = ClusterIPAllocator("10.0.0.0/24", lambda: used, FakeClock())
    for _ in range(254 - 16):
        used.add(alloc.allocate_next())
    assert all(int(ipaddress.IPv4Address(ip)) & 0xFF > 16 for ip in used)
    assert int(ipaddress.IPv4Address(alloc.allocate_next())) & 0xFF <= 16  # then the static band


async def test_reservations_expire_and_release() -> None:
    clock = FakeClock()
    alloc = ClusterIPAllocator("10.0.0.0/29", list, clock)  # 6 usable addresses, none stored
    taken = {alloc.allocate_next() for _ in range(6)}
    assert len(taken) == 6
    with pytest.raises(AllocationError, match="range is full"):
        alloc.allocate_next()
    alloc.release("10.0.0.3")
    assert alloc.allocate("10.0.0.3") == "10.0.0.3"
    await clock.advance(31)  # a create that never reached the store frees its value
    assert alloc.allocate_next() in taken


@pytest.mark.parametrize(("name", "cidr", "ip", "error"), [
    ("network address", "10.0.0.0/24", "10.0.0.0", "not in the valid range"),
    ("broadcast address", "10.0.0.0/24", "10.0.0.255", "not in the valid range"),
    ("outside the range", "10.0.0.0/24", "10.0.1.1", "The range of valid IPs is 10.0.0.0/24"),
    ("not an IP", "10.0.0.0/24", "abc", "not in the valid range"),
])
def test_requested_ip_refused(name: str, cidr: str, ip: str, error: str) -> None:
    with pytest.raises(AllocationError, match=error):
        ClusterIPAllocator(cidr, list, FakeClock()).allocate(ip)


def test_node_ports() -> None:
    used = {30000}
    alloc = NodePortAllocator(lambda: used, FakeClock(), (30000, 30002))
    with pytest.raises(AllocationError, match="provided port is already allocated"):
        alloc.allocate(30000)
    with pytest.raises(AllocationError, match="The range of valid ports is 30000-30002"):
        alloc.allocate(29999)
    assert {alloc.allocate_next(), alloc.allocate_next()} == {30001, 30002}


@pytest.mark.parametrize(("cidr", "ip"), [("10.96.0.0/12", "10.96.0.1"), ("192.168.4.0/24", "192.168.4.1")])
def test_kubernetes_service_ip(cidr: str, ip: str) -> None:
    assert kubernetes_service_ip(cidr) == ip


@pytest.mark.parametrize("cidr", ["10.0.0.0/30", "fd00::/64", "10.0.0.1/24", "nonsense"])
def test_unusable_service_cidr(cidr: str) -> None:
    with pytest.raises(ValueError):
        kubernetes_service_ip(cidr)
