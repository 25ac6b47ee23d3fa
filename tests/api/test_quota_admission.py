"""ResourceQuota admission: upstream's plugin/pkg/admission/resourcequota/admission_test.go cases, by their names,
against a real API server (in process, no quota controller: each quota's status is the one the case seeds)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.testing.builders import make_pod

Obj = dict[str, Any]
NS = "/api/v1/namespaces/default"


async def seed_quota(client: InProcessClient, name: str, hard: dict[str, str], used: dict[str, str],
                     namespace: str = "default", **spec: Any) -> None:
    """A quota whose status says `hard` and `used`, as the cases put it into the informer."""
    base = f"/api/v1/namespaces/{namespace}/resourcequotas"
    rq = await client.create(base, {"metadata": {"name": name}, "spec": {"hard": hard, **spec}})
    await client.request("PUT", f"{base}/{name}/status", {**rq, "status": {"hard": hard, "used": used}})


async def used(client: InProcessClient, name: str) -> dict[str, str]:
    rq = await client.get(f"{NS}/resourcequotas/{name}")
    return dict(rq["status"]["used"])


async def refused(client: InProcessClient, path: str, body: Obj) -> str:
    with pytest.raises(ApiError) as caught:
        await client.create(path, body)
    assert caught.value.code == 403
    return caught.value.message


@pytest.fixture
def client(inprocess_server: ApiServer) -> InProcessClient:
    return InProcessClient(inprocess_server)


COMPUTE = {"cpu": "3", "memory": "100Gi", "pods": "5"}
COMPUTE_USED = {"cpu": "1", "memory": "50Gi", "pods": "3"}


async def test_admit_below_quota_limit(client: InProcessClient) -> None:
    """TestAdmitBelowQuotaLimit: a pod when created has its usage reflected on the quota."""
    await seed_quota(client, "quota", COMPUTE, COMPUTE_USED)
    await client.create(f"{NS}/pods", make_pod("allowed-pod").req(cpu="100m", memory="2Gi").obj())
    assert await used(client, "quota") == {"cpu": "1100m", "memory": "52Gi", "pods": "4"}


async def test_admit_dry_run(client: InProcessClient) -> None:
    """TestAdmitDryRun: a dry run is checked, refused when it would exceed, and never charged."""
    await seed_quota(client, "quota", COMPUTE, COMPUTE_USED)
    pods = f"{NS}/pods?dryRun=All"
    await client.request("POST", pods, make_pod("allowed-pod").req(cpu="100m", memory="2Gi").obj())
    with pytest.raises(ApiError) as caught:
        await client.request("POST", pods, make_pod("too-large-pod").req(cpu="100m", memory="60Gi").obj())
    assert caught.value.code == 403
    assert await used(client, "quota") == COMPUTE_USED


async def test_admit_exceed_quota_limit(client: InProcessClient) -> None:
    """TestAdmitExceedQuotaLimit."""
    await seed_quota(client, "quota", COMPUTE, COMPUTE_USED)
    message = await refused(client, f"{NS}/pods", make_pod("not-allowed-pod").req(cpu="3", memory="2Gi").obj())
    assert message == ('pods "not-allowed-pod" is forbidden: exceeded quota: quota, requested: cpu=3, used: cpu=1, '
                       'limited: cpu=3')


async def test_admit_enforce_quota_constraints(client: InProcessClient) -> None:
    """TestAdmitEnforceQuotaConstraints: a quota on limits.memory makes every container state a memory limit."""
    await seed_quota(client, "quota", {**COMPUTE, "limits.cpu": "4", "limits.memory": "100Gi"},
                     {**COMPUTE_USED, "limits.cpu": "2", "limits.memory": "20Gi"})
    pod = make_pod("not-allowed-pod").req(cpu="100m", memory="2Gi").lim(cpu="200m").obj()
    message = await refused(client, f"{NS}/pods", pod)
    assert message == 'pods "not-allowed-pod" is forbidden: failed quota: quota: must specify limits.memory for: main'


async def test_admit_pod_in_namespace_without_quota(client: InProcessClient) -> None:
    """TestAdmitPodInNamespaceWithoutQuota: another namespace's quota does not apply."""
    await client.create("/api/v1/namespaces", {"metadata": {"name": "other"}})
    await seed_quota(client, "quota", COMPUTE, {"cpu": "3", "memory": "100Gi", "pods": "5"}, namespace="other")
    await client.create(f"{NS}/pods", make_pod("allowed-pod").req(cpu="100m", memory="2Gi").obj())


async def test_admit_below_terminating_quota_limit(client: InProcessClient) -> None:
    """TestAdmitBelowTerminatingQuotaLimit: a pod with activeDeadlineSeconds is charged to Terminating quotas only."""
    await seed_quota(client, "quota-non-terminating", COMPUTE, COMPUTE_USED, scopes=["NotTerminating"])
    await seed_quota(client, "quota-terminating", COMPUTE, COMPUTE_USED, scopes=["Terminating"])
    pod = make_pod("allowed-pod").req(cpu="100m", memory="2Gi").lim(cpu="200m", memory="2Gi").spec(
        activeDeadlineSeconds=60).obj()
    await client.create(f"{NS}/pods", pod)
    assert await used(client, "quota-terminating") == {"cpu": "1100m", "memory": "52Gi", "pods": "4"}
    assert await used(client, "quota-non-terminating") == COMPUTE_USED


async def test_admit_below_best_effort_quota_limit(client: InProcessClient) -> None:
    """TestAdmitBelowBestEffortQuotaLimit: a BestEffort pod is charged to BestEffort quotas only."""
    await seed_quota(client, "quota-besteffort", {"pods": "5"}, {"pods": "3"}, scopes=["BestEffort"])
    await seed_quota(client, "quota-not-besteffort", {"pods": "5"}, {"pods": "3"}, scopes=["NotBestEffort"])
    await client.create(f"{NS}/pods", make_pod("allowed-pod").obj())
    assert await used(client, "quota-besteffort") == {"pods": "4"}
    assert await used(client, "quota-not-besteffort") == {"pods": "3"}


async def test_admit_best_effort_quota_limit_ignores_burstable(client: InProcessClient) -> None:
    """TestAdmitBestEffortQuotaLimitIgnoresBurstable."""
    await seed_quota(client, "quota-besteffort", {"pods": "5"}, {"pods": "3"}, scopes=["BestEffort"])
    await client.create(f"{NS}/pods", make_pod("allowed-pod").req(cpu="100m", memory="1Gi").obj())
    assert await used(client, "quota-besteffort") == {"pods": "3"}


async def test_admit_when_unrelated_resource_exceeds_quota(client: InProcessClient) -> None:
    """TestAdmitWhenUnrelatedResourceExceedsQuota: services over their limit do not stop a pod."""
    await seed_quota(client, "quota", {"services": "3", "pods": "4"}, {"services": "4", "pods": "1"})
    await client.create(f"{NS}/pods", make_pod("allowed-pod").obj())
    assert await used(client, "quota") == {"services": "4", "pods": "2"}


async def test_admit_below_quota_limit_with_scope_selector(client: InProcessClient) -> None:
    """TestAdmitBelowQuotaLimitWithScopeSelector / TestAdmitLimitedScopeWithCoverQuota: PriorityClass In [high]."""
    await client.create("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "high"}, "value": 1000})
    selector = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}
    await seed_quota(client, "quota-high", {"pods": "1"}, {"pods": "0"}, scopeSelector=selector)
    await client.create(f"{NS}/pods", make_pod("low").obj())  # not in the scope
    await client.create(f"{NS}/pods", make_pod("high-1").priority_class("high").obj())
    message = await refused(client, f"{NS}/pods", make_pod("high-2").priority_class("high").obj())
    assert message.endswith("exceeded quota: quota-high, requested: pods=1, used: pods=1, limited: pods=1")


async def test_admit_services_by_type(client: InProcessClient) -> None:
    """The services evaluator: a NodePort Service uses a node port per port, a LoadBalancer also a balancer."""
    await seed_quota(client, "quota", {"services": "10", "services.nodeports": "1", "services.loadbalancers": "0"},
                     {"services": "0", "services.nodeports": "0", "services.loadbalancers": "0"})
    svc = {"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
    await client.create(f"{NS}/services", svc)
    assert await used(client, "quota") == {"services": "1", "services.nodeports": "1", "services.loadbalancers": "0"}
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                                               "allocateLoadBalancerNodePorts": False}}
    message = await refused(client, f"{NS}/services", lb)
    assert message.endswith("exceeded quota: quota, requested: services.loadbalancers=1, "
                            "used: services.loadbalancers=0, limited: services.loadbalancers=0")


async def test_admit_handles_old_objects(client: InProcessClient) -> None:
    """TestAdmitHandlesOldObjects: an update is charged what it uses beyond the stored version (a LoadBalancer
    becoming a NodePort gains a node port; the balancer it no longer uses is not subtracted)."""
    await seed_quota(client, "quota", {"services": "10", "services.loadbalancers": "10", "services.nodeports": "10"},
                     {"services": "0", "services.loadbalancers": "0", "services.nodeports": "0"})
    svc = {"metadata": {"name": "service"}, "spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False,
                                                     "ports": [{"port": 1234}]}}
    created = await client.create(f"{NS}/services", svc)
    assert await used(client, "quota") == {"services": "1", "services.loadbalancers": "1", "services.nodeports": "0"}
    spec = {**created["spec"], "type": "NodePort"}
    spec.pop("allocateLoadBalancerNodePorts")
    await client.request("PUT", f"{NS}/services/service", {**created, "spec": spec})
    assert await used(client, "quota") == {"services": "1", "services.loadbalancers": "1", "services.nodeports": "1"}


async def test_an_update_beyond_the_quota_is_refused(client: InProcessClient) -> None:
    """A ClusterIP Service patched into a LoadBalancer is held to services.loadbalancers."""
    await seed_quota(client, "quota", {"services.loadbalancers": "0"}, {"services.loadbalancers": "0"})
    await client.create(f"{NS}/services", {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
    with pytest.raises(ApiError) as caught:
        await client.patch(f"{NS}/services/web", {"spec": {"type": "LoadBalancer"}},
                           "application/merge-patch+json")
    assert caught.value.code == 403
    assert caught.value.message == ('services "web" is forbidden: exceeded quota: quota, requested: '
                                    'services.loadbalancers=1, used: services.loadbalancers=0, '
                                    'limited: services.loadbalancers=0')


async def test_admit_persistent_volume_claims_by_storage_class(client: InProcessClient) -> None:
    """The claims evaluator: requests.storage, and per class `<class>.storageclass.storage.k8s.io/…`."""
    gold = "gold.storageclass.storage.k8s.io/requests.storage"
    await seed_quota(client, "quota", {"requests.storage": "10Gi", "persistentvolumeclaims": "5", gold: "1Gi"},
                     {"requests.storage": "0", "persistentvolumeclaims": "0", gold: "0"})

    def claim(name: str, size: str, storage_class: str) -> Obj:
        return {"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                     "storageClassName": storage_class,
                                                     "resources": {"requests": {"storage": size}}}}

    await client.create(f"{NS}/persistentvolumeclaims", claim("a", "2Gi", "silver"))
    assert await used(client, "quota") == {"requests.storage": "2Gi", "persistentvolumeclaims": "1", gold: "0"}
    message = await refused(client, f"{NS}/persistentvolumeclaims", claim("b", "2Gi", "gold"))
    assert message.endswith(f"requested: {gold}=2Gi, used: {gold}=0, limited: {gold}=1Gi")
