"""Port of k8s.io/endpointslice reconciler_test.go: which slices a reconcile creates, updates and deletes.

`apply` plays a Plan against an in-memory list as the fake clientset does, so a second reconcile
sees what the first wrote.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubelite.controllers import endpointslice_utils as u
from kubelite.controllers.endpointslice import Plan, reconcile_slices
from tests.controllers.endpointslice_fixtures import existing_slice, new_pod, new_service

Obj = dict[str, Any]


def apply(slices: list[Obj], plan: Plan) -> list[Obj]:
    by_name = {s["metadata"]["name"]: s for s in slices}
    for s in plan.delete:
        del by_name[s["metadata"]["name"]]
    for s in plan.update:
        assert s["metadata"]["name"] in by_name, "an update of a slice that does not exist"
        by_name[s["metadata"]["name"]] = {**s, "metadata": {**s["metadata"], "resourceVersion": "100"}}
    for i, s in enumerate(plan.create):
        name = f"{s['metadata']['generateName']}new{len(by_name)}-{i}"
        by_name[name] = {**s, "metadata": {**s["metadata"], "name": name, "uid": name, "resourceVersion": "1"}}
    return list(by_name.values())


def counts(plan: Plan) -> tuple[int, int, int]:
    return len(plan.create), len(plan.update), len(plan.delete)


def lengths(slices: list[Obj]) -> list[int]:
    return sorted(len(s["endpoints"]) for s in slices)


def pods(n: int) -> list[Obj]:
    """Upstream's pod sets: every third pod not ready."""
    return [new_pod(i, ready=i % 3 != 0) for i in range(n)]


def test_reconcile_empty() -> None:
    """TestReconcileEmpty: no pods still gets one placeholder slice, without ports or endpoints."""
    svc = new_service()
    plan = reconcile_slices(svc, [], [])
    assert counts(plan) == (1, 0, 0)
    created = plan.create[0]
    assert created["metadata"]["generateName"] == "foo-"
    assert (created["endpoints"], created["ports"]) == ([], [])


def test_reconcile_existing_placeholder_is_kept() -> None:
    """TestReconcile1EndpointSlice "Existing placeholder that's the same": no writes."""
    svc = new_service()
    placeholder = existing_slice(1, svc, [])
    assert counts(reconcile_slices(svc, [], [placeholder])) == (0, 0, 0)


@pytest.mark.parametrize(("name", "pod", "conditions"), [
    ("ready pod", new_pod(1), {"ready": True, "serving": True, "terminating": False}),
    ("unready pod", new_pod(1, ready=False), {"ready": False, "serving": False, "terminating": False}),
    ("terminating pod", new_pod(1, terminating=True), {"ready": False, "serving": True, "terminating": True}),
])
def test_reconcile_1_pod(name: str, pod: Obj, conditions: Obj) -> None:
    """TestReconcile1Pod: one create holding the pod's endpoint with its conditions and the resolved ports."""
    plan = reconcile_slices(new_service(), [pod], [])
    assert counts(plan) == (1, 0, 0)
    (ep,) = plan.create[0]["endpoints"]
    assert ep["conditions"] == conditions
    assert plan.create[0]["ports"] == [{"name": "foo", "port": 80, "protocol": "TCP"}]


def test_reconcile_many_pods() -> None:
    """TestReconcileManyPods: 250 pods, no slices: 3 creates, two full."""
    plan = reconcile_slices(new_service(), pods(250), [])
    assert counts(plan) == (3, 0, 0)
    assert lengths(plan.create) == [50, 100, 100]


def test_reconcile_endpoint_slices_some_preexisting() -> None:
    """TestReconcileEndpointSlicesSomePreexisting: 127 to add: one new full slice, 27 into the fullest that fits."""
    svc, all_pods = new_service(), pods(250)
    s1 = existing_slice(1, svc, all_pods[1:246:4])
    s2 = existing_slice(2, svc, all_pods[3:246:4])
    plan = reconcile_slices(svc, all_pods, [s1, s2])
    assert counts(plan) == (1, 1, 0)
    assert lengths(apply([s1, s2], plan)) == [61, 89, 100]


def test_reconcile_endpoint_slices_some_preexisting_worse_allocation() -> None:
    """TestReconcileEndpointSlicesSomePreexistingWorseAllocation: 52 left over fit no slice: 2 creates."""
    svc, all_pods = new_service(), pods(300)
    s1 = existing_slice(1, svc, all_pods[1:296:4])
    s2 = existing_slice(2, svc, all_pods[3:296:4])
    plan = reconcile_slices(svc, all_pods, [s1, s2])
    assert counts(plan) == (2, 0, 0)
    assert lengths(apply([s1, s2], plan)) == [52, 74, 74, 100]


def test_reconcile_endpoint_slices_updating() -> None:
    """TestReconcileEndpointSlicesUpdating: a target port change updates the 3 slices in place (recycled)."""
    svc, all_pods = new_service(), pods(250)
    slices = apply([], reconcile_slices(svc, all_pods, []))
    svc["spec"]["ports"][0]["targetPort"] = 81
    plan = reconcile_slices(svc, all_pods, slices)
    assert counts(plan) == (0, 3, 0)
    slices = apply(slices, plan)
    assert lengths(slices) == [50, 100, 100]
    assert {s["ports"][0]["port"] for s in slices} == {81}


def test_reconcile_endpoint_slices_services_labels_updating() -> None:
    """TestReconcileEndpointSlicesServicesLabelsUpdating: new Service labels reach every slice (3 updates)."""
    svc, all_pods = new_service(), pods(250)
    slices = apply([], reconcile_slices(svc, all_pods, []))
    svc["metadata"]["labels"] = {"foo": "bar"}
    plan = reconcile_slices(svc, all_pods, slices)
    assert counts(plan) == (0, 3, 0)
    assert all(s["metadata"]["labels"]["foo"] == "bar" for s in apply(slices, plan))


def test_reconcile_endpoint_slices_services_reserved_labels() -> None:
    """TestReconcileEndpointSlicesServicesReservedLabels: reserved label keys on the Service change nothing."""
    svc, all_pods = new_service(), pods(250)
    slices = apply([], reconcile_slices(svc, all_pods, []))
    svc["metadata"]["labels"] = {u.SERVICE_NAME_LABEL: "bad", u.MANAGED_BY_LABEL: "actor", u.HEADLESS_LABEL: "invalid"}
    assert counts(reconcile_slices(svc, all_pods, slices)) == (0, 0, 0)


def test_reconcile_endpoint_slices_recycling() -> None:
    """TestReconcileEndpointSlicesRecycling: 10 slices of 30; no-op, then a port change repacks into 3 (3 updates +
    7 deletes)."""
    svc, all_pods = new_service(), pods(300)
    slices = [existing_slice(n, svc, all_pods[n * 30:(n + 1) * 30]) for n in range(10)]
    assert counts(reconcile_slices(svc, all_pods, slices)) == (0, 0, 0)
    svc["spec"]["ports"][0]["targetPort"] = 81
    plan = reconcile_slices(svc, all_pods, slices)
    assert counts(plan) == (0, 3, 7)
    assert lengths(apply(slices, plan)) == [100, 100, 100]


def test_reconcile_removes_gone_pods_and_updates_conditions() -> None:
    """A pod that goes is removed from its slice, a pod that turns unready is updated in place (one update)."""
    svc, all_pods = new_service(), pods(5)
    slices = apply([], reconcile_slices(svc, all_pods, []))
    changed = copy.deepcopy(all_pods[1:])
    changed[0]["status"]["conditions"][0]["status"] = "False"
    plan = reconcile_slices(svc, changed, slices)
    assert counts(plan) == (0, 1, 0)
    (ep1, *_) = plan.update[0]["endpoints"]
    assert len(plan.update[0]["endpoints"]) == 4
    assert ep1["conditions"]["ready"] is False


def test_reconcile_last_pod_gone_leaves_placeholder() -> None:
    """All pods gone: the slice is recycled into the placeholder rather than deleted and recreated."""
    svc = new_service()
    slices = apply([], reconcile_slices(svc, pods(3), []))
    plan = reconcile_slices(svc, [], slices)
    assert counts(plan) == (0, 1, 0)
    assert (plan.update[0]["endpoints"], plan.update[0]["ports"]) == ([], [])


def test_reconcile_pods_sharing_the_node_ip_are_separate_endpoints() -> None:
    """Pods here share the host's IP: two pods are two endpoints (told apart by targetRef), and pods whose named
    targetPort resolves to different numbers land in different slices."""
    svc = new_service(ports=[{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}])
    a = new_pod(1, ip="10.0.0.1", ports=[{"name": "http", "containerPort": 8081}])
    b = new_pod(2, ip="10.0.0.1", ports=[{"name": "http", "containerPort": 8082}])
    c = new_pod(3, ip="10.0.0.1", ports=[{"name": "http", "containerPort": 8082}])
    plan = reconcile_slices(svc, [a, b, c], [])
    assert sorted((s["ports"][0]["port"], len(s["endpoints"])) for s in plan.create) == [(8081, 1), (8082, 2)]


def test_reconcile_deletes_slices_owned_by_another_service_object() -> None:
    """A managed slice labelled for this Service but owned by a previous incarnation (another uid) is deleted."""
    svc = new_service()
    stale = existing_slice(1, svc, [new_pod(1)])
    stale["metadata"]["ownerReferences"][0]["uid"] = "old-uid"
    plan = reconcile_slices(svc, [new_pod(1)], [stale])
    assert counts(plan) == (1, 0, 1)


def test_reconcile_endpoint_zone_from_node() -> None:
    """Endpoints carry their node's topology.kubernetes.io/zone (TestReconcile1Pod's node labels case)."""
    node = {"metadata": {"name": "node-1", "labels": {"topology.kubernetes.io/zone": "us-central1-a"}}}
    plan = reconcile_slices(new_service(), [new_pod(1)], [], node=lambda name: node if name == "node-1" else None)
    assert plan.create[0]["endpoints"][0]["zone"] == "us-central1-a"
