"""Node pressure on a real API server (L21): conditions, NoSchedule taints, transition events; and the
eviction manager's admission of pods under pressure (TestAdmitUnderNodeConditions-style)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kubelite.agent.eviction.node_pressure import NodePressure
from kubelite.agent.eviction.node_status import admit, pressure_taints
from kubelite.agent.eviction.thresholds import DISK_PRESSURE, MEMORY_PRESSURE
from kubelite.client.http import ApiClient
from kubelite.clock import FakeClock
from tests.unit.eviction_pods import container, pod, resources

Obj = dict[str, Any]
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


async def test_set_pressure_writes_conditions_taints_and_events(api: TestClient) -> None:  # type: ignore[type-arg]
    client = ApiClient(str(api.make_url("")))
    events: list[Obj] = []
    try:
        await client.create("/api/v1/nodes", NODE)
        clock = FakeClock()
        reporter = NodePressure(client, clock, "n1", events.append)
        await clock.advance(30)
        await reporter.set_pressure(frozenset({DISK_PRESSURE}))
        node = await client.get("/api/v1/nodes/n1")
        conditions = {c["type"]: c for c in node["status"]["conditions"]}
        assert conditions["Ready"]["status"] == "True", "other conditions are left alone"
        disk = conditions["DiskPressure"]
        assert (disk["status"], disk["reason"], disk["message"]) == ("True", "KubeletHasDiskPressure",
                                                                     "kubelet has disk pressure")
        assert (conditions["MemoryPressure"]["status"], conditions["MemoryPressure"]["reason"]) == \
            ("False", "KubeletHasSufficientMemory")
        assert node["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                                          {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}]
        assert [(e["reason"], e["message"], e["involvedObject"]["kind"]) for e in events] == \
            [("NodeHasDiskPressure", "Node n1 status is now: NodeHasDiskPressure", "Node")]
        transition = conditions["DiskPressure"]["lastTransitionTime"]

        await clock.advance(30)
        await reporter.set_pressure(frozenset({DISK_PRESSURE}))  # no change: no event, same transition time
        assert len(events) == 1
        assert {c["type"]: c for c in reporter.conditions()}["DiskPressure"]["lastTransitionTime"] == transition

        await reporter.set_pressure(frozenset())
        node = await client.get("/api/v1/nodes/n1")
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["DiskPressure"] == "False"
        assert node["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
        assert events[-1]["reason"] == "NodeHasNoDiskPressure"
    finally:
        await client.close()


def test_pressure_taints_keep_other_taints_and_add_one_per_condition() -> None:
    other = {"key": "node.kubernetes.io/memory-pressure", "effect": "NoExecute"}  # not ours: a different effect
    got = pressure_taints([other], [DISK_PRESSURE, MEMORY_PRESSURE])
    assert got == [other, {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"},
                   {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}]


BEST_EFFORT = pod("best-effort")
BURSTABLE = pod("burstable", containers=[container("c", resources("100m", "100Mi"))])
TOLERATING = pod("tolerating")
TOLERATING["spec"]["tolerations"] = [{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
                                      "effect": "NoSchedule"}]
CRITICAL = pod("critical", priority=2_000_000_001)


@pytest.mark.parametrize(("conditions", "p", "admitted"), [
    pytest.param([], BEST_EFFORT, True, id="no pressure admits all"),
    pytest.param([MEMORY_PRESSURE], BEST_EFFORT, False, id="memory pressure refuses best effort"),
    pytest.param([MEMORY_PRESSURE], BURSTABLE, True, id="memory pressure admits burstable"),
    pytest.param([MEMORY_PRESSURE], TOLERATING, True, id="best effort tolerating the memory-pressure taint"),
    pytest.param([DISK_PRESSURE], BURSTABLE, False, id="disk pressure refuses every pod"),
    pytest.param([MEMORY_PRESSURE, DISK_PRESSURE], TOLERATING, False, id="memory and disk pressure"),
    pytest.param([DISK_PRESSURE], CRITICAL, True, id="critical pods are admitted"),
])
def test_admit_under_node_conditions(conditions: list[str], p: Obj, admitted: bool) -> None:
    """managerImpl.Admit: refused pods get reason Evicted and 'The node had condition: [...]. '."""
    got = admit(p, conditions)
    assert (got is None) == admitted
    if not admitted:
        assert got == ("Evicted", f"The node had condition: [{' '.join(conditions)}]. ")


async def test_the_last_pressure_taint_removed_leaves_no_taints_key(api: TestClient) -> None:  # type: ignore[type-arg]
    """NodeSpec.Taints is omitempty upstream: a node whose only taint was the pressure one ends with no `taints`
    key, not `taints: []`."""
    client = ApiClient(str(api.make_url("")))
    try:
        await client.create("/api/v1/nodes", {**NODE, "metadata": {"name": "n2"}, "spec": {}})
        clock = FakeClock()
        reporter = NodePressure(client, clock, "n2", lambda _: None)
        await reporter.set_pressure(frozenset({DISK_PRESSURE}))
        assert [t["key"] for t in (await client.get("/api/v1/nodes/n2"))["spec"]["taints"]] == \
            ["node.kubernetes.io/disk-pressure"]
        await reporter.set_pressure(frozenset())
        assert "taints" not in (await client.get("/api/v1/nodes/n2"))["spec"]
    finally:
        await client.close()
