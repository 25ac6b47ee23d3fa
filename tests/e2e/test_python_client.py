"""The official `kubernetes` Python client against a real `kubelite server` (HTTPS + token)."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def v1(server: ServerProcess) -> client.CoreV1Api:
    api_client = config.new_client_from_config(config_file=str(server.kubeconfig))
    return client.CoreV1Api(api_client)


def _pod(name: str, node: str | None = None, labels: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name, labels=labels),
                        spec=client.V1PodSpec(node_name=node, containers=[
                            client.V1Container(name="main", image="busybox", command=["sleep", "60"])]))


def test_crud(v1: client.CoreV1Api) -> None:
    created = v1.create_namespaced_pod("default", _pod("py1"))
    assert created.metadata.uid and created.spec.restart_policy == "Always"
    got = v1.read_namespaced_pod("py1", "default")
    assert got.metadata.resource_version == created.metadata.resource_version
    got.metadata.labels = {"a": "b"}
    replaced = v1.replace_namespaced_pod("py1", "default", got)
    assert replaced.metadata.labels == {"a": "b"}
    with pytest.raises(ApiException) as stale:
        v1.replace_namespaced_pod("py1", "default", got)
    assert stale.value.status == 409
    names = [p.metadata.name for p in v1.list_namespaced_pod("default", label_selector="a=b").items]
    assert names == ["py1"]
    v1.delete_namespaced_pod("py1", "default")
    with pytest.raises(ApiException) as missing:
        v1.read_namespaced_pod("py1", "default")
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["reason"] == "NotFound"


def test_status_patch_merges_conditions(v1: client.CoreV1Api) -> None:
    v1.create_namespaced_pod("default", _pod("py2", node="n1"))
    v1.patch_namespaced_pod_status("py2", "default", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}})
    pod = v1.patch_namespaced_pod_status("py2", "default", {"status": {"conditions": [
        {"type": "ContainersReady", "status": "True"}]}})
    assert pod.status.phase == "Running"
    assert [c.type for c in pod.status.conditions] == ["Ready", "ContainersReady"]
    v1.delete_namespaced_pod("py2", "default", grace_period_seconds=0)


def test_binding(v1: client.CoreV1Api) -> None:
    v1.create_namespaced_pod("default", _pod("py3"))
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="py3"),
                            target=client.V1ObjectReference(api_version="v1", kind="Node", name="node-9"))
    # The client cannot deserialize upstream's Status reply into V1Binding (a known client issue),
    # so read the raw response, as research/kubectl-compat.md §9.2 describes.
    resp = v1.create_namespaced_pod_binding("py3", "default", body, _preload_content=False)
    assert resp.status == 201
    assert v1.read_namespaced_pod("py3", "default").spec.node_name == "node-9"
    v1.delete_namespaced_pod("py3", "default", grace_period_seconds=0)


def test_eviction(v1: client.CoreV1Api) -> None:
    policy = client.PolicyV1Api(v1.api_client)
    v1.create_namespaced_pod("default", _pod("py4", node="n1", labels={"app": "py"}))
    v1.patch_namespaced_pod_status("py4", "default", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}})
    policy.create_namespaced_pod_disruption_budget("default", client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="py-pdb"),
        spec=client.V1PodDisruptionBudgetSpec(min_available=1, selector=client.V1LabelSelector(
            match_labels={"app": "py"}))))
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="py4", namespace="default"))
    with pytest.raises(ApiException) as refused:
        v1.create_namespaced_pod_eviction("py4", "default", eviction)
    assert refused.value.status == 429
    policy.delete_namespaced_pod_disruption_budget("py-pdb", "default")
    v1.create_namespaced_pod_eviction("py4", "default", eviction)
    pod = v1.read_namespaced_pod("py4", "default")
    assert pod.metadata.deletion_timestamp is not None
    assert any(c.type == "DisruptionTarget" for c in pod.status.conditions)
    v1.delete_namespaced_pod("py4", "default", grace_period_seconds=0)


def test_watch(v1: client.CoreV1Api) -> None:
    rv = v1.list_namespaced_pod("default").metadata.resource_version
    v1.create_namespaced_pod("default", _pod("py5"))
    v1.patch_namespaced_pod("py5", "default", {"metadata": {"labels": {"w": "1"}}})
    v1.delete_namespaced_pod("py5", "default")
    seen = []
    for event in watch.Watch().stream(v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=2,
                                      allow_watch_bookmarks=True):
        if event["type"] != "BOOKMARK":
            seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 3:
            break
    assert seen == [("ADDED", "py5"), ("MODIFIED", "py5"), ("DELETED", "py5")]


def test_autoscaling_v1_reads_a_new_hpa(v1: client.CoreV1Api) -> None:
    """AutoscalingV1Api's models require status.currentReplicas, which a new HPA's v1 view writes as 0."""
    hpas = client.AutoscalingV1Api(v1.api_client)
    hpas.create_namespaced_horizontal_pod_autoscaler("default", client.V1HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="pyhpa"), spec=client.V1HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V1CrossVersionObjectReference(api_version="apps/v1", kind="Deployment",
                                                                  name="web"),
            max_replicas=3, target_cpu_utilization_percentage=50)))
    got = hpas.read_namespaced_horizontal_pod_autoscaler("pyhpa", "default")
    assert (got.status.current_replicas, got.status.desired_replicas, got.spec.max_replicas) == (0, 0, 3)
    listed = hpas.list_namespaced_horizontal_pod_autoscaler("default")
    assert [h.metadata.name for h in listed.items] == ["pyhpa"]
    hpas.delete_namespaced_horizontal_pod_autoscaler("pyhpa", "default")
