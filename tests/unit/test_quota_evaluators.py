"""The quota evaluators: upstream's pkg/quota/v1/evaluator/core/pods_test.go tables (TestPodConstraintsFunc,
TestPodEvaluatorUsage, TestPodEvaluatorMatchingScopes) and the resource list arithmetic they rest on."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.api import quota
from kubelite.clock import rfc3339

Obj = dict[str, Any]
NOW = 1_800_000_000.0


def pod(*containers: Obj, init: tuple[Obj, ...] = (), **spec: Any) -> Obj:
    body: Obj = {"metadata": {"name": "p", "namespace": "test"}, "spec": {"containers": list(containers), **spec}}
    if init:
        body["spec"]["initContainers"] = list(init)
    return body


def ctr(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, name: str = "",
        **fields: Any) -> Obj:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"name": name, "resources": resources, **fields}


def wire(rl: quota.ResourceList) -> dict[str, str]:
    return quota.to_wire(rl)


@pytest.mark.parametrize(("p", "required", "error"), [
    pytest.param(pod(ctr({"memory": "1Mi"}, name="main"), init=(ctr({"cpu": "1m"}, {"cpu": "2m"}, name="init"),)),
                 ["memory"],
                 "must specify memory for: init", id="init container resource missing"),
    pytest.param(pod(ctr({"cpu": "1m"}, {"cpu": "2m"}, name="main")), ["memory"], "must specify memory for: main",
                 id="container resource missing"),
    pytest.param(pod(ctr({"memory": "1Mi"}, name="main")), ["memory"], "", id="container resource present"),
    pytest.param(pod(ctr({"cpu": "1m"}, name="a"), ctr({"cpu": "1m"}, name="b")), ["limits.cpu", "memory"],
                 "must specify limits.cpu for: a,b; memory for: a,b", id="multiple containers, multiple resources"),
    pytest.param(pod(ctr(name="main")), ["requests.ephemeral-storage", "pods"], "",
                 id="resources outside the validation set are not required"),
])
def test_pod_constraints_func(p: Obj, required: list[str], error: str) -> None:
    assert quota.PodEvaluator().constraints(required, p) == error


@pytest.mark.parametrize(("p", "usage"), [
    pytest.param(pod(ctr(), init=(ctr({"cpu": "1m"}, {"cpu": "2m"}),)),
                 {"count/pods": "1", "cpu": "1m", "limits.cpu": "2m", "pods": "1", "requests.cpu": "1m"},
                 id="init container CPU"),
    pytest.param(pod(ctr({"cpu": "1m"}, {"cpu": "2m"})),
                 {"count/pods": "1", "cpu": "1m", "limits.cpu": "2m", "pods": "1", "requests.cpu": "1m"},
                 id="container CPU"),
    pytest.param(pod(ctr({"memory": "1m"}, {"memory": "2m"})),
                 {"count/pods": "1", "limits.memory": "2m", "memory": "1m", "pods": "1", "requests.memory": "1m"},
                 id="container MEM"),
    pytest.param(pod(ctr({"ephemeral-storage": "32Mi"}, {"ephemeral-storage": "64Mi"})),
                 {"count/pods": "1", "ephemeral-storage": "32Mi", "limits.ephemeral-storage": "64Mi", "pods": "1",
                  "requests.ephemeral-storage": "32Mi"}, id="container local ephemeral storage"),
    pytest.param(pod(ctr({"hugepages-2Mi": "100Mi"}, {"hugepages-2Mi": "100Mi"})),
                 {"count/pods": "1", "hugepages-2Mi": "100Mi", "pods": "1", "requests.hugepages-2Mi": "100Mi"},
                 id="container hugepages"),
    pytest.param(pod(ctr({"example.com/dongle": "3"}, {"example.com/dongle": "3"})),
                 {"count/pods": "1", "pods": "1", "requests.example.com/dongle": "3"},
                 id="container extended resources"),
    pytest.param(pod(ctr({"cpu": "1"}), status={"phase": "Failed"}), {"count/pods": "1"},
                 id="terminated generic count still appears"),
    pytest.param(pod(ctr({"cpu": "1"}, {"cpu": "2"}), ctr({"cpu": "1"}, {"cpu": "2"}),
                     init=(ctr({"cpu": "3"}, {"cpu": "5"}),)),
                 {"count/pods": "1", "cpu": "3", "limits.cpu": "5", "pods": "1", "requests.cpu": "3"},
                 id="init container maximums override sum of containers"),
    pytest.param(pod(ctr({"cpu": "1"}), init=(ctr({"cpu": "2"}, restartPolicy="Always"), ctr({"cpu": "2"}))),
                 {"count/pods": "1", "cpu": "4", "pods": "1", "requests.cpu": "4"},
                 id="sidecar containers are added to the init container that follows them"),
    pytest.param(pod(ctr({"cpu": "1"}, {"cpu": "2"}), overhead={"cpu": "250m", "memory": "64Mi"}),
                 {"count/pods": "1", "cpu": "1250m", "limits.cpu": "2250m", "memory": "64Mi", "pods": "1",
                  "requests.cpu": "1250m", "requests.memory": "64Mi"},
                 id="pod overhead: added to every request, to the limits that are set"),
])
def test_pod_evaluator_usage(p: Obj, usage: dict[str, str]) -> None:
    status = p["spec"].pop("status", None)
    if status:
        p["status"] = status
    assert wire(quota.PodEvaluator().usage(p, NOW)) == usage


def test_pod_deletion_timestamp_exceeded() -> None:
    """QuotaV1Pod: a pod still deleting past its grace period is no longer charged for compute."""
    p = pod(ctr({"cpu": "1"}))
    p["metadata"].update(deletionTimestamp=rfc3339(NOW - 60), deletionGracePeriodSeconds=30)
    assert wire(quota.PodEvaluator().usage(p, NOW)) == {"count/pods": "1"}
    p["metadata"]["deletionGracePeriodSeconds"] = 120
    assert wire(quota.PodEvaluator().usage(p, NOW))["pods"] == "1"


BEST_EFFORT_POD = pod(ctr())
BURSTABLE_POD = pod(ctr({"cpu": "1"}), priorityClassName="high", activeDeadlineSeconds=30)


@pytest.mark.parametrize(("p", "selectors", "matched"), [
    pytest.param(BEST_EFFORT_POD, [{"scopeName": "BestEffort", "operator": "Exists"},
                                   {"scopeName": "NotTerminating", "operator": "Exists"}],
                 [True, True], id="EmptyPod"),
    pytest.param(BURSTABLE_POD, [{"scopeName": "NotBestEffort", "operator": "Exists"},
                                 {"scopeName": "Terminating", "operator": "Exists"},
                                 {"scopeName": "BestEffort", "operator": "Exists"}],
                 [True, True, False], id="Burstable terminating pod"),
    pytest.param(BURSTABLE_POD, [{"scopeName": "PriorityClass", "operator": "In", "values": ["high", "low"]},
                                 {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]},
                                 {"scopeName": "PriorityClass", "operator": "Exists"},
                                 {"scopeName": "PriorityClass", "operator": "DoesNotExist"}],
                 [True, False, True, False], id="PriorityClass selectors"),
    pytest.param(BEST_EFFORT_POD, [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]},
                                   {"scopeName": "PriorityClass", "operator": "DoesNotExist"}],
                 [True, True], id="no PriorityClass"),
    pytest.param(pod(ctr(), affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "namespaces": ["other"]}]}}),
        [{"scopeName": "CrossNamespacePodAffinity", "operator": "Exists"}], [True], id="cross namespace affinity"),
])
def test_pod_evaluator_matching_scopes(p: Obj, selectors: list[Obj], matched: list[bool]) -> None:
    assert [quota.PodEvaluator().matches_scope(s, p) for s in selectors] == matched


@pytest.mark.parametrize(("a", "b", "total"), [
    pytest.param({"memory": "1Gi"}, {"memory": "512Mi"}, {"memory": "1536Mi"}, id="binary stays binary"),
    pytest.param({"cpu": "0"}, {"cpu": "500m"}, {"cpu": "500m"}, id="a zero takes the other's format"),
    pytest.param({"memory": "1G"}, {"memory": "1Gi"}, {"memory": "2073741824"}, id="the first operand's format"),
    pytest.param({"pods": "1"}, {"services": "2"}, {"pods": "1", "services": "2"}, id="disjoint names"),
])
def test_add(a: dict[str, str], b: dict[str, str], total: dict[str, str]) -> None:
    assert wire(quota.add(quota.parse_list(a), quota.parse_list(b))) == total


def test_less_than_or_equal_names_what_exceeds() -> None:
    fits, exceeded = quota.less_than_or_equal(quota.parse_list({"pods": "3", "cpu": "1", "memory": "1Gi"}),
                                              quota.parse_list({"pods": "2", "cpu": "2"}))
    assert (fits, exceeded) == (False, ["pods"])


def test_calculate_usage_sums_the_objects_in_scope() -> None:
    """quota.CalculateUsage: every evaluator that tracks a hard resource, masked to the hard resources."""
    rq = {"metadata": {"name": "q"}, "spec": {"scopes": ["NotBestEffort"]}}
    pods = [pod(ctr({"cpu": "500m"})), pod(ctr({"cpu": "250m"})), pod(ctr())]
    hard = quota.parse_list({"pods": "10", "requests.cpu": "4", "count/configmaps": "3"})

    def objects(group: str, resource: str) -> list[Obj] | None:
        return {("", "pods"): pods, ("", "configmaps"): [{"metadata": {"name": "c"}}]}.get((group, resource))

    assert wire(quota.calculate_usage(rq, hard, objects, NOW)) == {"count/configmaps": "0", "pods": "2",
                                                                   "requests.cpu": "750m"}  # no scope fits them
    rq["spec"] = {}
    assert wire(quota.calculate_usage(rq, hard, objects, NOW)) == {"count/configmaps": "1", "pods": "3",
                                                                   "requests.cpu": "750m"}


@pytest.mark.parametrize(("spec", "usage"), [
    pytest.param({"ports": [{"port": 80}]},
                 {"count/services": "1", "services": "1", "services.loadbalancers": "0", "services.nodeports": "0"},
                 id="ClusterIP"),
    pytest.param({"type": "NodePort", "ports": [{"port": 80}, {"port": 443}]},
                 {"count/services": "1", "services": "1", "services.loadbalancers": "0", "services.nodeports": "2"},
                 id="NodePort: a node port per port"),
    pytest.param({"type": "LoadBalancer", "ports": [{"port": 80}]},
                 {"count/services": "1", "services": "1", "services.loadbalancers": "1", "services.nodeports": "1"},
                 id="LoadBalancer"),
    pytest.param({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False,
                  "ports": [{"port": 80}, {"port": 443, "nodePort": 30443}]},
                 {"count/services": "1", "services": "1", "services.loadbalancers": "1", "services.nodeports": "1"},
                 id="LoadBalancer without node port allocation: only explicit node ports"),
])
def test_service_evaluator_usage(spec: Obj, usage: dict[str, str]) -> None:
    """TestServiceEvaluatorUsage."""
    assert wire(quota.ServiceEvaluator().usage({"metadata": {"name": "s"}, "spec": spec}, NOW)) == usage


@pytest.mark.parametrize(("spec", "annotations", "usage"), [
    pytest.param({"resources": {"requests": {"storage": "10Gi"}}}, {},
                 {"count/persistentvolumeclaims": "1", "persistentvolumeclaims": "1", "requests.storage": "10Gi"},
                 id="pvc-usage"),
    pytest.param({"storageClassName": "gold", "resources": {"requests": {"storage": "10Gi"}}}, {},
                 {"count/persistentvolumeclaims": "1", "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1",
                  "gold.storageclass.storage.k8s.io/requests.storage": "10Gi", "persistentvolumeclaims": "1",
                  "requests.storage": "10Gi"}, id="pvc-usage-by-class"),
    pytest.param({"resources": {"requests": {"storage": "1Gi"}}}, {"volume.beta.kubernetes.io/storage-class": "gold"},
                 {"count/persistentvolumeclaims": "1", "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1",
                  "gold.storageclass.storage.k8s.io/requests.storage": "1Gi", "persistentvolumeclaims": "1",
                  "requests.storage": "1Gi"}, id="pvc-usage-by-beta-annotation"),
    pytest.param({"resources": {"requests": {"storage": "1500m"}}}, {},
                 {"count/persistentvolumeclaims": "1", "persistentvolumeclaims": "1", "requests.storage": "2"},
                 id="pvc-usage-rounded"),
])
def test_persistent_volume_claim_evaluator_usage(spec: Obj, annotations: dict[str, str], usage: dict[str, str]) -> None:
    """TestPersistentVolumeClaimEvaluatorUsage."""
    claim = {"metadata": {"name": "c", "annotations": annotations}, "spec": spec}
    assert wire(quota.PersistentVolumeClaimEvaluator().usage(claim, NOW)) == usage


def test_claim_usage_is_at_least_its_allocated_storage() -> None:
    """RecoverVolumeExpansionFailure (on in 1.32): a claim whose request was lowered after a failed expansion is
    charged what was allocated."""
    claim = {"metadata": {"name": "c"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}},
             "status": {"allocatedResources": {"storage": "2Gi"}}}
    assert wire(quota.PersistentVolumeClaimEvaluator().usage(claim, NOW))["requests.storage"] == "2Gi"
