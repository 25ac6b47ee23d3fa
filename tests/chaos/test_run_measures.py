"""What a chaos run measures besides the invariants: S4's partition -> replacement running, per fence."""

from __future__ import annotations

import pytest

from kubelite.testing.chaos.observations import Fence
from kubelite.testing.chaos.run import replacement_times
from kubelite.testing.chaos.schedule import Fault


@pytest.mark.parametrize("name,faults,fences,health,want", [
    ("from the partition's start to the first healthy look after the fence",
     [Fault(10, "cut", "node-a", 25)], [Fence(31, "node-a")], [(20, False), (32, False), (34, True)], [24.0]),
    ("a fault that began just before the fence did not cause it: the earlier one did",
     [Fault(5, "agent_kill", "node-a", 20), Fault(26, "delay", "node-a", 5)], [Fence(28, "node-a")],
     [(29, True)], [24.0]),
    ("a fence with no fault on its node long enough before is not measured",
     [Fault(20, "cut", "node-a", 10)], [Fence(28, "node-a")], [(29, True)], []),
    ("never healthy after the fence: not measured", [Fault(10, "cut", "node-a", 25)], [Fence(31, "node-a")],
     [(30, True)], []),
])
def test_replacement_times(name: str, faults: list[Fault], fences: list[Fence], health: list[tuple[float, bool]],
                           want: list[float]) -> None:
    assert replacement_times(faults, fences, health) == want
