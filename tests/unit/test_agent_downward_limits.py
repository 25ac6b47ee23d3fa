"""The downward API's resourceFieldRef in env: a limit the container leaves unset (or zero) reads the node's
allocatable, as kubelet's defaultPodLimitsForDownwardAPI → MergeContainerResourceLimits makes it (cpu, memory,
ephemeral-storage; never hugepages); an unset request reads 0 (ExtractContainerResourceValue of a zero
quantity). The volume side is in test_volume_projection.py."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.agent.container import environment

Obj = dict[str, Any]
NODE = {"cpu": "4", "memory": "16Gi", "ephemeral-storage": "100Gi", "pods": "110"}
POD: Obj = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"containers": []}}


@pytest.mark.parametrize("resources,ref,want", [
    pytest.param({}, {"resource": "limits.ephemeral-storage"}, str(100 * 2**30),
                 id="unset ephemeral-storage limit: the node's allocatable"),
    pytest.param({}, {"resource": "limits.cpu"}, "4", id="unset cpu limit: the node's allocatable cpu"),
    pytest.param({}, {"resource": "limits.memory", "divisor": "1Mi"}, "16384",
                 id="unset memory limit: the node's allocatable, with the divisor"),
    pytest.param({"limits": {"cpu": "0"}}, {"resource": "limits.cpu", "divisor": "1m"}, "4000",
                 id="zero limit: the node's allocatable (quantity.IsZero)"),
    pytest.param({"limits": {"memory": "64Mi"}}, {"resource": "limits.memory", "divisor": "1Mi"}, "64",
                 id="set limit: the container's own"),
    pytest.param({"limits": {"cpu": "250m"}}, {"resource": "limits.cpu"}, "1", id="set cpu limit: rounded up"),
    pytest.param({}, {"resource": "requests.memory"}, "0", id="unset request: 0"),
    pytest.param({}, {"resource": "limits.hugepages-2Mi"}, "0", id="unset hugepages limit: 0, never defaulted"),
])
def test_env_resource_field_ref_defaults_unset_limits_to_node_allocatable(resources: Obj, ref: Obj, want: str) -> None:
    container = {"name": "c", "resources": resources, "env": [{"name": "V", "valueFrom": {"resourceFieldRef": ref}}]}
    assert environment(POD, container, "10.0.0.1", {}, NODE)["V"] == want
