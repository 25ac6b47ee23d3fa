"""The node's allocatable: capacity less kubeReserved, systemReserved and the hard eviction thresholds.

Upstream's TestNodeAllocatableReservationForScheduling and TestNodeAllocatableInputValidation tables
(pkg/kubelet/cm/node_container_manager_linux_test.go), case by case in their order (upstream's cases have no
names: each is named here after what it shows), then the allocatable the Node reports and the agent admits by."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.allocatable import NodeAllocatable, ReservationError, parse_reserved
from kubelite.agent.config import NodeConfigError, parse
from kubelite.agent.eviction.quantity import Quantity
from kubelite.agent.eviction.thresholds import MEMORY_AVAILABLE, NODEFS_AVAILABLE, Threshold, ThresholdValue, float32


def resources(cpu: str = "", memory: str = "", storage: str = "") -> dict[str, Quantity]:
    """getResourceList / getEphemeralStorageResourceList: the resources given, "" left out."""
    named = {"cpu": cpu, "memory": memory, "ephemeral-storage": storage}
    return {k: Quantity.parse(v) for k, v in named.items() if v}


def capacity(cpu: str = "", memory: str = "", storage: str = "") -> dict[str, str]:
    return {k: str(v) for k, v in resources(cpu, memory, storage).items()}


def threshold(signal: str, quantity: str = "", percentage: float = 0.0) -> list[Threshold]:
    return [Threshold(signal, ThresholdValue(Quantity.parse(quantity) if quantity else None, float32(percentage)))]


RESERVATION_CASES = [
    pytest.param(resources("100m", "100Mi"), resources("50m", "50Mi"), capacity("10", "10Gi"),
                 threshold(MEMORY_AVAILABLE), resources("150m", "150Mi"),
                 id="kube and system reserved add up"),
    pytest.param(resources("100m", "100Mi"), resources("50m", "50Mi"), capacity("10", "10Gi"),
                 threshold(MEMORY_AVAILABLE, "100Mi"), resources("150m", "250Mi"),
                 id="a memory.available quantity is reserved too"),
    pytest.param(resources("100m", "100Mi"), resources("50m", "50Mi"), capacity("10", "10Gi"),
                 threshold(MEMORY_AVAILABLE, percentage=0.05), resources("150m", "694157320"),
                 id="a memory.available percentage is of the memory capacity (float32, truncated)"),
    pytest.param({}, {}, capacity("10", "10Gi"), threshold(MEMORY_AVAILABLE), {}, id="nothing reserved"),
    pytest.param(resources(memory="100Mi"), resources("50m", "50Mi"), capacity("10", "10Gi"),
                 threshold(MEMORY_AVAILABLE), resources("50m", "150Mi"), id="cpu reserved by the system alone"),
    pytest.param(resources("50m", "100Mi"), resources(memory="50Mi"), capacity("10", "10Gi"),
                 threshold(MEMORY_AVAILABLE), resources("50m", "150Mi"), id="cpu reserved for kubelet alone"),
    pytest.param(resources(memory="100Mi"), resources(memory="50Mi"), capacity(cpu="10"),
                 threshold(MEMORY_AVAILABLE), resources(memory="150Mi"), id="memory reserved without a capacity"),
    pytest.param(resources(storage="100Mi"), {}, capacity(storage="10Gi"), threshold(NODEFS_AVAILABLE),
                 resources(storage="100Mi"), id="ephemeral storage reserved for kubelet"),
    pytest.param(resources(storage="100Mi"), {}, capacity(storage="10Gi"), threshold(NODEFS_AVAILABLE, "100Mi"),
                 resources(storage="200Mi"), id="a nodefs.available quantity is reserved too"),
    pytest.param(resources(storage="150Mi"), {}, capacity(storage="10Gi"),
                 threshold(NODEFS_AVAILABLE, percentage=0.05), resources(storage="694157320"),
                 id="a nodefs.available percentage is of the ephemeral storage capacity"),
    pytest.param({}, {}, capacity(storage="10Gi"), threshold(NODEFS_AVAILABLE), {},
                 id="no ephemeral storage reserved"),
]


@pytest.mark.parametrize(("kube", "system", "cap", "hard", "want"), RESERVATION_CASES)
def test_node_allocatable_reservation_for_scheduling(kube: dict[str, Quantity], system: dict[str, Quantity],
                                                     cap: dict[str, str], hard: list[Threshold],
                                                     want: dict[str, Quantity]) -> None:
    got = NodeAllocatable(cap, [kube, system], hard).reservation()
    assert {k: v for k, v in got.items() if v} == {k: v.amount for k, v in want.items()}


@pytest.mark.parametrize(("kube", "system", "cap", "hard", "invalid"), [
    pytest.param(resources("100m", "100Mi"), resources("50m", "50Mi"), capacity("10", "10Gi"), [], False,
                 id="reservations within the capacity"),
    pytest.param(resources("5", "10Gi"), resources("5", "10Gi"), capacity("10", "11Gi"),
                 threshold(MEMORY_AVAILABLE, "2Gi"), True, id="memory reserved beyond the capacity is refused"),
    pytest.param(resources(storage="100Mi"), {}, capacity(storage="500Mi"), [], False,
                 id="ephemeral storage within the capacity"),
    pytest.param(resources(storage="20Gi"), {}, capacity(storage="20Gi"), threshold(NODEFS_AVAILABLE, "100Mi"),
                 True, id="ephemeral storage reserved beyond the capacity is refused"),
])
def test_node_allocatable_input_validation(kube: dict[str, Quantity], system: dict[str, Quantity],
                                           cap: dict[str, str], hard: list[Threshold], invalid: bool) -> None:
    allocatable = NodeAllocatable(cap, [kube, system], hard)
    if invalid:
        with pytest.raises(ReservationError, match="Expected capacity >= reservation"):
            allocatable.validate()
    else:
        allocatable.validate()


HOST = {"cpu": "2", "memory": "24554408Ki", "ephemeral-storage": "105089261568", "pods": "110"}


@pytest.mark.parametrize(("config", "want"), [
    pytest.param({}, {**HOST, "memory": "24452008Ki", "ephemeral-storage": "94580335255"},
                 id="kubelet's defaults: 100Mi of memory and 10% of the node filesystem kept for eviction"),
    pytest.param({"evictionHard": {}}, HOST, id="no hard thresholds, nothing reserved: the capacity itself"),
    pytest.param({"evictionHard": {}, "kubeReserved": {"cpu": "100m", "memory": "1Gi"},
                  "systemReserved": {"cpu": "0.5", "pid": "100"}},
                 {**HOST, "cpu": "1400m", "memory": "23505832Ki"},
                 id="kube and system reserved, in each capacity's own format"),
    pytest.param({"evictionHard": {"memory.available": "30Gi"}}, {**HOST, "memory": "0"},
                 id="a reservation beyond the capacity shows as 0 (MachineInfo)"),
])
def test_allocatable_the_node_reports(config: dict[str, Any], want: dict[str, str]) -> None:
    cfg = parse({"kind": "KubeletConfiguration", **config})
    allocatable = NodeAllocatable(HOST, [cfg.kube_reserved, cfg.system_reserved], cfg.eviction.thresholds)
    assert dict(allocatable) == want
    if config == {"evictionHard": {}}:
        assert allocatable.current() is HOST, "nothing reserved: no copy is made"


@pytest.mark.parametrize(("raw", "message"), [
    pytest.param({"gpu": "1"}, "kubeReserved: cannot reserve 'gpu' resource", id="an unknown resource"),
    pytest.param({"memory": "lots"}, "failed to parse quantity 'lots' for 'memory' resource", id="not a quantity"),
    pytest.param({"cpu": "-1"}, "resource quantity for 'cpu' cannot be negative: -1", id="a negative quantity"),
    pytest.param(["cpu"], "kubeReserved: must be a map", id="not a map"),
])
def test_bad_reservations_are_refused(raw: object, message: str) -> None:
    with pytest.raises(NodeConfigError, match=message):
        parse({"kind": "KubeletConfiguration", "kubeReserved": raw})


def test_parse_reserved_keeps_pid() -> None:
    assert parse_reserved("systemReserved", {"pid": "1000"})["pid"].amount == Fraction(1000)


@pytest.mark.parametrize(("command", "node_config"), [
    pytest.param("up", "kubeReserved: {memory: 100Ti}", id="kubelite up: before anything starts"),
    pytest.param("agent", "systemReserved: {ephemeral-storage: 100Pi}", id="kubelite agent: before it registers"),
])
def test_a_reservation_beyond_this_host_stops_the_start(tmp_path: Path, command: str, node_config: str) -> None:
    """kubelet's validateNodeAllocatable at start: exit 2 with its message, not an agent restarted for ever."""
    config = tmp_path / "node.yaml"
    config.write_text(f"kind: KubeletConfiguration\n{node_config}\n")
    flags = ["--port", "0"] if command == "up" else ["--kubeconfig", str(tmp_path / "none"), "--node-name", "n1"]
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", command, "--data-dir", str(tmp_path / "data"),
                          "--node-config", str(config), *flags], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res
    assert "Expected capacity >= reservation." in res.stderr
    assert not (tmp_path / "data" / "kubeconfig").exists()
