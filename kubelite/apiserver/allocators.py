"""The Service ClusterIP and NodePort allocators.

Upstream keeps a bitmap per range in etcd (pkg/registry/core/service/ipallocator,
portallocator). Here the stored Services are the bitmap: what is in use is read from the
API server's watch cache (so it is the store's truth and survives restarts unchanged), and
values handed out to creates that have not reached the cache yet are held as short-lived
reservations, so concurrent creates in this API server never get the same value.

Partial: two API servers writing one store could still race for a value; upstream's newer
allocator (an IPAddress object per IP, created atomically) would close that gap.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kubelite.clock import Clock

RESERVATION_SECONDS = 30.0  # longer than any create takes to reach the watch cache
DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
NODE_PORT_RANGE = (30000, 32767)


class AllocationError(Exception):
    """A requested value cannot be had; the message is upstream's (after "failed to allocate …: ")."""


@dataclass
class RangeAllocator:
    """Integers in [low, high]; dynamic picks prefer the upper band, leaving the lower for explicit requests.

    Upstream's static-band rule (KEP-3070/3668): the lower min(max(16, size/16), 256) values
    are tried last by dynamic allocation.
    """

    low: int
    high: int
    in_use: Callable[[], Iterable[int]]
    clock: Clock
    rng: random.Random = field(default_factory=lambda: random.Random(random.getrandbits(64)))  # a simulation seeds it
    _reserved: dict[int, float] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.high - self.low + 1

    def _used(self) -> set[int]:
        now = self.clock.now()
        for value in [v for v, until in self._reserved.items() if until <= now]:
            del self._reserved[value]
        return set(self.in_use()) | set(self._reserved)

    def _reserve(self, value: int) -> int:
        self._reserved[value] = self.clock.now() + RESERVATION_SECONDS
        return value

    def contains(self, value: int) -> bool:
        return self.low <= value <= self.high

    def allocate(self, value: int) -> int:
        """Take a specific value (ValueError-free: AllocationError says why not)."""
        if not self.contains(value):
            raise AllocationError("out of range")
        if value in self._used():
            raise AllocationError("already allocated")
        return self._reserve(value)

    def allocate_next(self) -> int:
        used = self._used()
        band = min(max(16, self.size // 16), 256) if self.size > 16 else 0
        for lo, hi in ((self.low + band, self.high), (self.low, self.low + band - 1)):
            if hi < lo:
                continue
            count = hi - lo + 1
            start = self.rng.randrange(count)
            for i in range(count):
                value = lo + (start + i) % count
                if value not in used:
                    return self._reserve(value)
        raise AllocationError("range is full")

    def release(self, value: int) -> None:
        """Forget a reservation (a create that failed); values of stored objects free themselves."""
        self._reserved.pop(value, None)


class ClusterIPAllocator:
    """IPv4 ClusterIPs in the service CIDR, network and broadcast addresses excluded."""

    def __init__(self, cidr: str, in_use: Callable[[], Iterable[str]], clock: Clock) -> None:
        self.network = service_network(cidr)
        base = int(self.network.network_address)

        def used() -> Iterable[int]:
            for ip in in_use():
                parsed = _parse(ip)
                if parsed is not None:
                    yield int(parsed)

        self.range = RangeAllocator(base + 1, base + self.network.num_addresses - 2, used, clock)

    @property
    def first(self) -> str:
        """The `kubernetes` Service's address: the range's first usable IP, as upstream."""
        return str(ipaddress.IPv4Address(self.range.low))

    def allocate(self, ip: str) -> str:
        parsed = _parse(ip)
        if parsed is None or not self.range.contains(int(parsed)):
            raise AllocationError(f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is "
                                  f"{self.network}")
        try:
            self.range.allocate(int(parsed))
        except AllocationError:
            raise AllocationError("provided IP is already allocated") from None
        return ip

    def allocate_next(self) -> str:
        try:
            return str(ipaddress.IPv4Address(self.range.allocate_next()))
        except AllocationError:
            raise AllocationError("range is full") from None

    def release(self, ip: str) -> None:
        parsed = _parse(ip)
        if parsed is not None:
            self.range.release(int(parsed))


def _parse(ip: str) -> ipaddress.IPv4Address | None:
    try:
        return ipaddress.IPv4Address(ip)
    except ValueError:
        return None


class NodePortAllocator:
    """Ports in the node-port range (30000-32767 by default)."""

    def __init__(self, in_use: Callable[[], Iterable[int]], clock: Clock,
                 port_range: tuple[int, int] = NODE_PORT_RANGE) -> None:
        self.range = RangeAllocator(port_range[0], port_range[1], in_use, clock)

    def allocate(self, port: int) -> int:
        if not self.range.contains(port):
            raise AllocationError(f"provided port is not in the valid range. The range of valid ports is "
                                  f"{self.range.low}-{self.range.high}")
        try:
            return self.range.allocate(port)
        except AllocationError:
            raise AllocationError("provided port is already allocated") from None

    def allocate_next(self) -> int:
        return self.range.allocate_next()

    def release(self, port: int) -> None:
        self.range.release(port)



def service_network(cidr: str) -> ipaddress.IPv4Network:
    """The service CIDR, checked (ValueError): IPv4, with room for more than a handful of Services."""
    network = ipaddress.IPv4Network(cidr)
    if network.num_addresses < 8:
        raise ValueError(f"service CIDR {cidr} is too small (at least a /29)")
    return network


def kubernetes_service_ip(cidr: str) -> str:
    """The `kubernetes` Service's ClusterIP: the range's first usable address, as upstream."""
    return str(service_network(cidr).network_address + 1)
