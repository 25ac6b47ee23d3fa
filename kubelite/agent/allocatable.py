"""The node's allocatable: its capacity less what is reserved for the system and for kubelet's eviction.

kubelet's MachineInfo setter subtracts GetNodeAllocatableReservation from each capacity (pkg/kubelet/cm/
node_container_manager_linux.go): `kubeReserved` plus `systemReserved` plus the hard eviction thresholds that keep
memory (`memory.available`) and the node filesystem (`nodefs.available`) free — with the default thresholds a node
shows 100Mi less memory and 10 % less ephemeral storage allocatable than its capacity. A negative result is 0. The
scheduler places pods by allocatable and the agent admits them by it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction

from kubelite.agent.eviction.quantity import Quantity
from kubelite.agent.eviction.thresholds import (
    EPHEMERAL_STORAGE,
    MEMORY,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    OP_LESS_THAN,
    Threshold,
)
from kubelite.api.quantity import QuantityError

RESERVABLE = ("cpu", MEMORY, EPHEMERAL_STORAGE, "pid")  # parseResourceList's cases
EVICTION_RESERVED = {MEMORY_AVAILABLE: MEMORY, NODEFS_AVAILABLE: EPHEMERAL_STORAGE}  # hardEvictionReservation's


class ReservationError(ValueError):
    pass


def parse_reserved(field: str, raw: object) -> dict[str, Quantity]:
    """kubelet's parseResourceList for `kubeReserved` / `systemReserved`: cpu, memory, ephemeral-storage and pid,
    each a non-negative quantity."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ReservationError(f"{field}: must be a map of resource names to quantities")
    reserved: dict[str, Quantity] = {}
    for name, value in raw.items():
        if name not in RESERVABLE:
            raise ReservationError(f"{field}: cannot reserve {name!r} resource")
        try:
            quantity = Quantity.parse(str(value))
        except QuantityError as exc:
            raise ReservationError(f"{field}: failed to parse quantity {value!r} for {name!r} resource: "
                                   f"{exc}") from None
        if quantity.amount < 0:
            raise ReservationError(f"{field}: resource quantity for {name!r} cannot be negative: {value}")
        reserved[name] = quantity
    return reserved


class NodeAllocatable(Mapping[str, str]):
    """The node's allocatable, made from its capacity as read now (a simulation sets a hollow node's capacity after
    the agent is built). With nothing reserved it is the capacity itself: no copy for every heartbeat."""

    def __init__(self, capacity: Mapping[str, str], reserved: list[Mapping[str, Quantity]],
                 thresholds: list[Threshold]) -> None:
        self.capacity = capacity
        self.reserved = [r for r in reserved if r]
        self.eviction = [t for t in thresholds
                         if t.hard and t.operator == OP_LESS_THAN and t.signal in EVICTION_RESERVED]

    def reservation(self) -> dict[str, Fraction]:
        """GetNodeAllocatableReservation: per resource, the reserved amounts and the hard eviction thresholds."""
        total: dict[str, Fraction] = {}
        for reserved in self.reserved:
            for name, quantity in reserved.items():
                total[name] = total.get(name, Fraction(0)) + quantity.amount
        for threshold in self.eviction:
            name = EVICTION_RESERVED[threshold.signal]
            capacity = Quantity.parse(self.capacity[name]) if name in self.capacity else None
            total[name] = total.get(name, Fraction(0)) + threshold.value.amount(capacity).amount
        return total

    def validate(self) -> None:
        """validateNodeAllocatable: kubelet refuses to start when a reservation exceeds the capacity."""
        reservation = self.reservation()
        for name, text in self.capacity.items():
            if name not in reservation:
                continue
            capacity = Quantity.parse(text)
            if capacity.amount < reservation[name]:
                raise ReservationError(f"Resource {name!r} has a reservation of "
                                       f"{Quantity(reservation[name], capacity.format)} but capacity of "
                                       f"{text}. Expected capacity >= reservation.")

    def __getitem__(self, name: str) -> str:
        return self.current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.current())

    def __len__(self) -> int:
        return len(self.current())

    def current(self) -> Mapping[str, str]:
        if not self.reserved and not self.eviction:
            return self.capacity
        reservation = self.reservation()
        allocatable = {}
        for name, text in self.capacity.items():
            if name not in reservation:
                allocatable[name] = text
                continue
            capacity = Quantity.parse(text)
            allocatable[name] = str(Quantity(max(capacity.amount - reservation[name], Fraction(0)), capacity.format))
        return allocatable
