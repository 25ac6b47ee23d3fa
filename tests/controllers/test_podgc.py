"""Pod GC, ported from pkg/controller/podgc/gc_controller_test.go (TestGCTerminated, TestGCOrphaned,
TestGCUnscheduledTerminating, TestGCTerminating) against a real API server; the deletes are recorded
on their way to it, as upstream's fake client records them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from kubelite.apiserver.inprocess import InProcessClient
from kubelite.client.informer import Key
from kubelite.controllers.podgc import PodGCController, PodGCOptions, eviction_and_creation_order, is_terminated
from kubelite.testing.builders import make_pod
from tests.controllers.fakecluster import Cluster, cluster, sync

__all__ = ["cluster"]

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"


class RecordingClient(InProcessClient):
    """The real server; DELETEs of pods are recorded (name, options) as they pass."""

    def __init__(self, inner: InProcessClient) -> None:
        super().__init__(inner.server)
        self.deleted: list[tuple[str, Obj]] = []

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                      params: Mapping[str, str] | None = None) -> Any:
        if method == "DELETE" and path.startswith(PODS):
            self.deleted.append((path.rsplit("/", 1)[1], body or {}))
        return await super().request(method, path, body, content_type, params)


async def _pods(cluster: Cluster, pods: list[tuple[str, str, str]], terminating: bool = False) -> None:
    """(name, phase, nodeName) each a second after the previous (upstream: an hour; the order is what counts); a
    terminating pod is held by a finalizer so that it stays (with its deletionTimestamp) for PodGC."""
    for name, phase, node in pods:
        await cluster.clock.advance(1)
        obj = make_pod(name).obj()
        if node:
            obj["spec"]["nodeName"] = node
        if terminating:
            obj["metadata"]["finalizers"] = ["example.com/hold"]
        await cluster.client.create(PODS, obj)
        await cluster.client.patch(f"{PODS}/{name}/status", {"status": {"phase": phase}})
        if terminating:
            await cluster.client.delete(f"{PODS}/{name}")


def _controller(cluster: Cluster, threshold: int = 12_500) -> tuple[PodGCController, RecordingClient]:
    client = RecordingClient(cluster.client)
    return PodGCController(client, cluster.clock, PodGCOptions(terminated_pod_gc_threshold=threshold)), client


def _names(client: RecordingClient) -> list[str]:
    assert all(options.get("gracePeriodSeconds") == 0 for _, options in client.deleted)
    return sorted(name for name, _ in client.deleted)


@pytest.mark.parametrize(("pods", "threshold", "deleted"), [
    pytest.param([("a", "Failed"), ("b", "Succeeded"), ("c", "Failed")], 1, ["a", "b"],
                 id="delete pod a which is PodFailed and pod b which is PodSucceeded"),
    pytest.param([("a", "Failed"), ("b", "Succeeded")], 0, [], id="threshold = 0, disables terminated pod deletion"),
    pytest.param([("a", "Running"), ("b", "Succeeded"), ("c", "Failed")], 1, ["b"],
                 id="threshold = 1, delete pod b which is PodSucceeded"),
    pytest.param([("a", "Failed"), ("b", "Succeeded")], 1, ["a"], id="threshold = 1, delete pod a which is PodFailed"),
    pytest.param([("a", "Failed"), ("b", "Succeeded")], 5, [], id="threshold = 5, don't delete pod"),
])
async def test_gc_terminated(cluster: Cluster, pods: list[tuple[str, str]], threshold: int,
                             deleted: list[str]) -> None:
    await cluster.node("node")
    await _pods(cluster, [(name, phase, "node") for name, phase in pods])
    ctrl, client = _controller(cluster, threshold)
    await sync(ctrl.pods, ctrl.nodes)
    await ctrl.gc()
    assert _names(client) == deleted


async def test_gc_terminated_evicted_first(cluster: Cluster) -> None:
    """byEvictionAndCreationTimestamp: an evicted pod goes before older terminated ones."""
    await cluster.node("node")
    await _pods(cluster, [("a", "Failed", "node"), ("b", "Succeeded", "node"), ("c", "Failed", "node")])
    await cluster.client.patch(f"{PODS}/c/status", {"status": {"reason": "Evicted"}})
    ctrl, client = _controller(cluster, 2)
    await sync(ctrl.pods, ctrl.nodes)
    await ctrl.gc()
    assert _names(client) == ["c"]


async def test_gc_terminated_deletes_what_a_sort_of_every_terminated_pod_picks(cluster: Cluster) -> None:
    """The kept deletion order (a heap with stale entries) picks what upstream's sort of every terminated pod
    picks, after pods were removed by someone else and one already terminated was evicted (re-ordered)."""
    await cluster.node("node")
    names = [f"p{i}" for i in range(8)]
    await _pods(cluster, [(n, "Succeeded" if i % 2 else "Failed", "node") for i, n in enumerate(names)])
    ctrl, client = _controller(cluster, 3)
    await sync(ctrl.pods, ctrl.nodes)
    await cluster.client.delete(f"{PODS}/p0", {"gracePeriodSeconds": 0})
    await cluster.client.patch(f"{PODS}/p6/status", {"status": {"reason": "Evicted"}})
    await sync(ctrl.pods)
    terminated = [p for p in ctrl.pods.store.values() if is_terminated(p)]
    expected = sorted(terminated, key=eviction_and_creation_order)[:len(terminated) - 3]
    await ctrl.gc()
    assert [name for name, _ in client.deleted] == [p["metadata"]["name"] for p in expected] == [
        "p6", "p1", "p2", "p3"]


@pytest.mark.parametrize(("pods", "node_exists", "quarantine_over", "deleted"), [
    pytest.param([("a", "Failed"), ("b", "Succeeded")], False, True, ["a", "b"], id="no nodes"),
    pytest.param([("a", "Failed"), ("b", "Succeeded")], False, False, [], id="quarantine not finished"),
    pytest.param([("a", "Failed"), ("b", "Succeeded")], True, True, [], id="nodes present in lister"),
    pytest.param([("a", "Running")], False, True, ["a"], id="pod in running state"),
])
async def test_gc_orphaned(cluster: Cluster, pods: list[tuple[str, str]], node_exists: bool, quarantine_over: bool,
                           deleted: list[str]) -> None:
    if node_exists:
        await cluster.node("node")
    await _pods(cluster, [(name, phase, "node") for name, phase in pods])
    ctrl, client = _controller(cluster, 0)
    await sync(ctrl.pods, ctrl.nodes)
    await ctrl.gc()  # the missing node enters quarantine
    await cluster.clock.advance(41 if quarantine_over else 10)
    await ctrl.gc()
    assert _names(client) == deleted
    remaining = {p["metadata"]["name"] for p in (await cluster.client.get(PODS))["items"]}
    assert remaining == {name for name, _ in pods} - set(deleted)


async def test_gc_orphaned_finds_only_the_pods_of_missing_nodes_among_present_ones(cluster: Cluster) -> None:
    """The pass's presence check (one lookup per node in the node cache) tells present nodes from missing ones."""
    for node in ("n1", "n3"):
        await cluster.node(node)
    await _pods(cluster, [("a", "Succeeded", "n1"), ("b", "Failed", "n2"), ("c", "Running", "n3"),
                          ("d", "Running", "n4"), ("e", "Succeeded", "n2")])
    ctrl, client = _controller(cluster, 0)
    await sync(ctrl.pods, ctrl.nodes)
    await ctrl.gc()
    await cluster.clock.advance(41)
    await ctrl.gc()
    assert _names(client) == ["b", "d", "e"]


async def test_gc_orphaned_running_pod_is_failed_with_disruption_target_first(cluster: Cluster) -> None:
    """An orphan not yet terminal is set Failed with DisruptionTarget (DeletionByPodGC) before the force delete;
    a finalizer holds the object so the status written before the delete can be read back."""
    obj = make_pod("a").node("gone").finalizer("example.com/hold").obj()
    await cluster.client.create(PODS, obj)
    await cluster.client.patch(f"{PODS}/a/status", {"status": {"phase": "Running"}})
    ctrl, client = _controller(cluster, 0)
    await sync(ctrl.pods, ctrl.nodes)
    await ctrl.gc()
    await cluster.clock.advance(41)
    await ctrl.gc()
    pod = await cluster.client.get(f"{PODS}/a")
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (pod["status"]["phase"], condition["reason"], condition["message"]) == (
        "Failed", "DeletionByPodGC", "PodGC: node no longer exists")
    assert pod["metadata"]["deletionTimestamp"] and _names(client) == ["a"]


async def test_gc_orphaned_node_added_to_client_after_quarantine(cluster: Cluster) -> None:
    """"node added to client after quarantine": the cache misses the node but the API has it: no deletion."""
    await _pods(cluster, [("a", "Running", "node")])
    ctrl, client = _controller(cluster, 0)
    await sync(ctrl.pods, ctrl.nodes)
    await ctrl.gc()
    await cluster.node("node")  # not synced into the controller's cache
    await cluster.clock.advance(41)
    await ctrl.gc()
    assert _names(client) == []


@pytest.mark.parametrize(("pods", "deleted"), [
    pytest.param([("a", "Failed", ""), ("b", "Succeeded", ""), ("c", "Running", "")], ["a", "b", "c"],
                 id="Unscheduled pod in any phase must be deleted"),
    pytest.param([("c", "Running", "node")], [], id="Scheduled pod in any phase must not be deleted"),
])
async def test_gc_unscheduled_terminating(cluster: Cluster, pods: list[tuple[str, str, str]],
                                          deleted: list[str]) -> None:
    await cluster.node("node")
    await _pods(cluster, pods, terminating=True)
    ctrl, client = _controller(cluster, 0)
    await sync(ctrl.pods, ctrl.nodes)
    await ctrl.gc_unscheduled_terminating(list(ctrl.pods.store.values()))
    assert _names(client) == deleted


OOS = [{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}]


async def test_gc_terminating(cluster: Cluster) -> None:
    """TestGCTerminating: only terminating pods on a not-Ready node with the out-of-service taint go."""
    await cluster.node("worker-0", "False", taints=OOS)
    await cluster.node("worker-1", "False")
    await cluster.node("worker-2", "True", taints=OOS)
    await _pods(cluster, [("a", "Running", "worker-0"), ("b", "Running", "worker-1"),
                          ("c", "Running", "worker-2")], terminating=True)
    await _pods(cluster, [("d", "Running", "worker-0")])
    ctrl, client = _controller(cluster, 0)
    await sync(ctrl.pods, ctrl.nodes)
    await ctrl.gc()
    assert _names(client) == ["a"]


async def test_gc_pass_deletes_unscheduled_terminating_pods(cluster: Cluster) -> None:
    """A whole pass (not only gcUnscheduledTerminating) finds them among its terminating candidates."""
    await cluster.node("node")
    await _pods(cluster, [("a", "Running", ""), ("b", "Running", "node")], terminating=True)
    ctrl, client = _controller(cluster, 0)
    await sync(ctrl.pods, ctrl.nodes)
    await ctrl.gc()
    assert _names(client) == ["a"]


def _scanned(ctrl: PodGCController) -> tuple[set[Key], set[Key], dict[Key, str]]:
    """The candidates as upstream's pass finds them: by looking at every cached pod."""
    pods = ctrl.pods.store
    return ({k for k, p in pods.items() if is_terminated(p)},
            {k for k, p in pods.items() if p["metadata"].get("deletionTimestamp")},
            {k: p["spec"]["nodeName"] for k, p in pods.items() if p["spec"].get("nodeName")})


@pytest.mark.parametrize("steps", [
    pytest.param([("create", "a", ""), ("bind", "a", "n1")], id="a pod bound after it was seen is filed by node"),
    pytest.param([("create", "a", "n1"), ("phase", "a", "Succeeded")], id="a pod that finished is a terminated one"),
    pytest.param([("create", "a", "n1"), ("phase", "a", "Failed"), ("delete", "a", "")],
                 id="a removed pod is a candidate of nothing"),
    pytest.param([("hold", "a", "n1"), ("delete", "a", "")], id="a pod being deleted is a terminating one"),
    pytest.param([("create", "a", "n1"), ("phase", "a", "Succeeded"), ("delete", "a", ""), ("create", "a", "n2")],
                 id="a pod recreated under the same name starts afresh"),
])
async def test_candidates_follow_each_pods_changes(cluster: Cluster, steps: list[tuple[str, str, str]]) -> None:
    """The handlers keep what a pass looks at equal to what a scan of every pod would find, after each change."""
    ctrl, _ = _controller(cluster, 0)
    await sync(ctrl.pods)
    for action, name, arg in steps:
        if action in ("create", "hold"):
            builder = make_pod(name).node(arg) if arg else make_pod(name)
            await cluster.client.create(PODS, (builder.finalizer("example.com/hold") if action == "hold"
                                               else builder).obj())
        elif action == "bind":
            await cluster.client.create(f"{PODS}/{name}/binding", {
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"kind": "Node", "name": arg}})
        elif action == "phase":
            await cluster.client.patch(f"{PODS}/{name}/status", {"status": {"phase": arg}})
        else:
            await cluster.client.delete(f"{PODS}/{name}")
        await sync(ctrl.pods)
        terminated, terminating, nodes = _scanned(ctrl)
        assert (set(ctrl._terminated), ctrl._terminating, ctrl._node_of) == (terminated, terminating, nodes), action
        assert ctrl._bound == {n: {k for k, m in nodes.items() if m == n} for n in set(nodes.values())}
