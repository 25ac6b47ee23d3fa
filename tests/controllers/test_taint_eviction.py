"""The taint eviction controller, ported from pkg/controller/tainteviction/taint_eviction_test.go.

Pods and nodes live in a real API server on the test's FakeClock; upstream's `expectPatch` (the
DisruptionTarget condition) and `expectDelete` (a graceful delete) are read back from it.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubelite.controllers import taints as tt
from kubelite.controllers.taint_eviction import TaintEvictionController
from kubelite.testing.builders import make_pod
from tests.controllers.fakecluster import Cluster, cluster, settle, sync

__all__ = ["cluster"]

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"


def taint(i: int) -> Obj:
    """createNoExecuteTaint."""
    return {"key": f"testTaint{i}", "value": f"test{i}", "effect": "NoExecute"}


def pod(node: str = "node1", *tolerations: tuple[int, int]) -> Obj:
    """testutil.NewPod with addToleration(index, seconds) for each pair; seconds < 0 means forever."""
    obj = make_pod("pod1").obj()
    if node:
        obj["spec"]["nodeName"] = node
    obj["spec"]["tolerations"] = [
        {"key": f"testTaint{i}", "value": f"test{i}", "effect": "NoExecute",
         **({"tolerationSeconds": s} if s >= 0 else {})} for i, s in tolerations]
    return obj


@pytest.fixture
async def ctrl(cluster: Cluster) -> AsyncIterator[TaintEvictionController]:
    controller = TaintEvictionController(cluster.client, cluster.clock)
    tasks = [asyncio.create_task(controller.runner.run()), asyncio.create_task(controller.events.run())]
    yield controller
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _verify(cluster: Cluster, expect_patch: bool, expect_delete: bool) -> None:
    """verifyPodActions, read from the server."""
    got = await cluster.get(f"{PODS}/pod1")
    condition = tt.condition(got, "DisruptionTarget")
    assert (condition is not None, bool(got["metadata"].get("deletionTimestamp"))) == (expect_patch, expect_delete)
    if condition is not None:
        assert (condition["reason"], condition["message"]) == (
            "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
    if expect_delete:
        assert got["metadata"]["deletionGracePeriodSeconds"] == 30, "graceful: the pod's own grace period"


async def _node(cluster: Cluster, *taints: Obj) -> None:
    await cluster.client.create("/api/v1/nodes", {"metadata": {"name": "node1"}, "spec": {"taints": list(taints)}})


@pytest.mark.parametrize(("the_pod", "taints", "expect"), [
    pytest.param(pod(""), [], False, id="not scheduled - ignore"),
    pytest.param(pod(), [], False, id="scheduled on untainted Node"),
    pytest.param(pod(), [taint(1)], True, id="schedule on tainted Node"),
    pytest.param(pod("node1", (1, 100)), [taint(1)], False, id="schedule on tainted Node with finite toleration"),
    pytest.param(pod("node1", (1, -1)), [taint(1)], False, id="schedule on tainted Node with infinite toleration"),
    pytest.param(pod("node1", (2, -1)), [taint(1)], True,
                 id="schedule on tainted Node with infinite invalid toleration"),
])
async def test_create_pod(cluster: Cluster, ctrl: TaintEvictionController, the_pod: Obj, taints: list[Obj],
                          expect: bool) -> None:
    """TestCreatePod."""
    await _node(cluster, *taints)
    await cluster.client.create(PODS, the_pod)
    await sync(ctrl.nodes, ctrl.pods)
    await settle(cluster.clock)
    await _verify(cluster, expect, expect)


@pytest.mark.parametrize(("prev", "new", "await_scheduled", "expect"), [
    pytest.param(pod(""), pod(), False, True, id="scheduling onto tainted Node"),
    pytest.param(pod("", (1, -1)), pod("node1", (1, -1)), False, False,
                 id="scheduling onto tainted Node with toleration"),
    pytest.param(pod("node1", (1, 100)), pod(), True, True, id="removing toleration"),
    pytest.param(pod("node1", (1, 1)), pod("node1", (1, 100)), True, True,
                 id="lengthening toleration shouldn't work"),
])
async def test_update_pod(cluster: Cluster, ctrl: TaintEvictionController, prev: Obj, new: Obj,
                          await_scheduled: bool, expect: bool) -> None:
    """TestUpdatePod: the update is given to the controller's cache, as upstream updates its pod indexer."""
    await _node(cluster, taint(1))
    created = await cluster.client.create(PODS, {**prev, "spec": {**prev["spec"], "nodeName": "node1"}})
    cached = copy.deepcopy(created)
    cached["spec"]["tolerations"] = prev["spec"]["tolerations"]
    if not prev["spec"].get("nodeName"):
        del cached["spec"]["nodeName"]  # not yet bound, as far as the controller has seen
    await sync(ctrl.nodes)
    ctrl.pods.add(cached)
    ctrl.runner.enqueue(("default", "pod1"))
    await settle(cluster.clock)
    assert (("default", "pod1") in ctrl.scheduled) == await_scheduled
    updated = copy.deepcopy(created)
    updated["spec"]["tolerations"] = new["spec"]["tolerations"]
    ctrl.pods.add(updated)
    ctrl.runner.enqueue(("default", "pod1"))
    await settle(cluster.clock, 1.5)  # a 1 s toleration runs out; a 100 s one would not
    await _verify(cluster, expect, expect)


@pytest.mark.parametrize(("the_pod", "taints", "expect"), [
    pytest.param(pod(), [], False, id="Creating Node matching already assigned Pod"),
    pytest.param(pod(), [taint(1)], True, id="Creating tainted Node matching already assigned Pod"),
    pytest.param(pod("node1", (1, -1)), [taint(1)], False,
                 id="Creating tainted Node matching already assigned tolerating Pod"),
])
async def test_create_node(cluster: Cluster, ctrl: TaintEvictionController, the_pod: Obj, taints: list[Obj],
                           expect: bool) -> None:
    """TestCreateNode."""
    await cluster.client.create(PODS, the_pod)
    await sync(ctrl.pods)
    await _node(cluster, *taints)
    await sync(ctrl.nodes)
    await settle(cluster.clock)
    await _verify(cluster, expect, expect)


async def test_delete_node(cluster: Cluster, ctrl: TaintEvictionController) -> None:
    """TestDeleteNode: a deleted node is forgotten."""
    await _node(cluster, taint(1))
    await sync(ctrl.nodes)
    assert "node1" in ctrl.tainted
    await cluster.client.delete("/api/v1/nodes/node1")
    await sync(ctrl.nodes)
    assert "node1" not in ctrl.tainted


MULTI = {**pod(), "spec": {**pod()["spec"], "tolerations": [
    {"key": "testTaint1", "value": "test1", "effect": "NoExecute", "tolerationSeconds": 1},
    {"key": "testTaint2", "value": "test2", "effect": "NoExecute", "tolerationSeconds": 100}]}}


@pytest.mark.parametrize(("the_pod", "old", "new", "expect"), [
    pytest.param(pod(), [], [taint(1)], True, id="Added taint, expect node patched and deleted"),
    pytest.param(pod("node1", (1, 100)), [], [taint(1)], False, id="Added tolerated taint"),
    pytest.param(pod("node1", (1, 100)), [], [taint(1), taint(2)], True, id="Only one added taint tolerated"),
    pytest.param(pod("node1", (1, 1)), [taint(1)], [], False, id="Taint removed"),
    pytest.param(MULTI, [], [taint(1), taint(2)], True,
                 id="Pod with multiple tolerations are evicted when first one runs out"),
])
async def test_update_node(cluster: Cluster, ctrl: TaintEvictionController, the_pod: Obj, old: list[Obj],
                           new: list[Obj], expect: bool) -> None:
    """TestUpdateNode: taints change on a node with a pod; 1.5 s later (upstream's additionalSleep)."""
    await _node(cluster, *old)
    await cluster.client.create(PODS, the_pod)
    await sync(ctrl.nodes, ctrl.pods)
    await settle(cluster.clock)
    node = await cluster.get("/api/v1/nodes/node1")
    node["spec"]["taints"] = new
    await cluster.client.request("PUT", "/api/v1/nodes/node1", node)
    await sync(ctrl.nodes)
    await settle(cluster.clock)
    await settle(cluster.clock, 1.5)
    await _verify(cluster, expect, expect)


async def test_taint_removed_cancels_eviction_with_event(cluster: Cluster, ctrl: TaintEvictionController) -> None:
    """A scheduled eviction is cancelled when the taint goes, with a TaintManagerEviction event saying so."""
    await _node(cluster, taint(1))
    await cluster.client.create(PODS, pod("node1", (1, 60)))
    await sync(ctrl.nodes, ctrl.pods)
    await settle(cluster.clock, 30)
    node = await cluster.get("/api/v1/nodes/node1")
    node["spec"]["taints"] = []
    await cluster.client.request("PUT", "/api/v1/nodes/node1", node)
    await sync(ctrl.nodes)
    await settle(cluster.clock, 60)
    await _verify(cluster, False, False)
    messages = [e["message"] for e in await cluster.events("TaintManagerEviction")]
    assert messages == ["Cancelling deletion of Pod default/pod1"]


@pytest.mark.parametrize(("tolerations", "expected"), [
    pytest.param([], 0.0, id="no tolerations: at once"),
    pytest.param([{"tolerationSeconds": 10}, {"tolerationSeconds": 5}], 5.0, id="the shortest"),
    pytest.param([{"tolerationSeconds": 10}, {}], 10.0, id="a toleration without seconds is forever"),
    pytest.param([{}], None, id="forever"),
    pytest.param([{"tolerationSeconds": -5}, {}], 0.0, id="negative is at once"),
])
def test_get_min_toleration_time(tolerations: list[Obj], expected: float | None) -> None:
    """TestGetMinTolerationTime."""
    assert tt.min_toleration_seconds(tolerations) == expected
