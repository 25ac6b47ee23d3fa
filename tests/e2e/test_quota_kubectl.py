"""ResourceQuotas and LimitRanges with the real kubectl against a real `kubelite server` (its quota controller
running): `kubectl create quota`, a pod beyond it refused with upstream's message, `describe quota`, `get quota`;
a LimitRange defaulting a pod's requests, `describe limits`; the official Python client."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e


def wait_for(server: ServerProcess, namespace: str, jsonpath: str, want: str, *what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = server.kubectl("-n", namespace, "get", *what, "-o", f"jsonpath={jsonpath}", check=False).stdout
        if got == want:
            return
        time.sleep(0.2)
    raise AssertionError(f"{' '.join(what)} {jsonpath} never became {want!r} (last {got!r})")


def test_create_quota_refuses_the_pod_beyond_it(server: ServerProcess) -> None:
    server.kubectl("create", "namespace", "team-a")
    server.kubectl("-n", "team-a", "create", "quota", "q", "--hard=pods=1,requests.cpu=1,limits.memory=1Gi")
    wait_for(server, "team-a", "{.status.used.pods}", "0", "quota", "q")  # measured by the controller
    server.kubectl("-n", "team-a", "run", "a", "--image=busybox", "--overrides", json.dumps({"spec": {
        "containers": [{"name": "a", "image": "busybox", "resources": {
            "requests": {"cpu": "250m"}, "limits": {"memory": "128Mi"}}}]}}))
    res = server.kubectl("-n", "team-a", "run", "b", "--image=busybox", "--overrides", json.dumps({"spec": {
        "containers": [{"name": "b", "image": "busybox", "resources": {
            "requests": {"cpu": "250m"}, "limits": {"memory": "128Mi"}}}]}}), check=False)
    assert res.returncode != 0
    assert 'Error from server (Forbidden): pods "b" is forbidden: exceeded quota: q, requested: pods=1, ' \
           'used: pods=1, limited: pods=1' in res.stderr
    res = server.kubectl("-n", "team-a", "run", "c", "--image=busybox", check=False)
    assert 'pods "c" is forbidden: failed quota: q: must specify limits.memory for: c; requests.cpu for: c' \
        in res.stderr

    table = server.kubectl("-n", "team-a", "get", "quota").stdout.splitlines()
    assert table[0].split() == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert "pods: 1/1, requests.cpu: 250m/1" in table[1] and "limits.memory: 128Mi/1Gi" in table[1]
    described = server.kubectl("-n", "team-a", "describe", "quota", "q").stdout
    lines = [line.split() for line in described.splitlines()]
    assert ["Resource", "Used", "Hard"] in lines
    assert ["pods", "1", "1"] in lines and ["requests.cpu", "250m", "1"] in lines

    server.kubectl("-n", "team-a", "delete", "pod", "a", "--wait=false")  # unscheduled: deleted at once
    wait_for(server, "team-a", "{.status.used.pods}", "0", "quota", "q")  # released by the controller


def test_limit_range_defaults_a_pods_requests(server: ServerProcess) -> None:
    server.kubectl("create", "namespace", "team-b")
    manifest = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"}, "spec": {"limits": [
        {"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "64Mi"},
         "default": {"cpu": "500m", "memory": "256Mi"}, "max": {"cpu": "1"}}]}}
    server.kubectl("-n", "team-b", "apply", "-f", "-", stdin=json.dumps(manifest))
    server.kubectl("-n", "team-b", "run", "web", "--image=busybox")
    pod = json.loads(server.kubectl("-n", "team-b", "get", "pod", "web", "-o", "json").stdout)
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                         "limits": {"cpu": "500m", "memory": "256Mi"}}
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web"
    res = server.kubectl("-n", "team-b", "run", "big", "--image=busybox", "--overrides", json.dumps({"spec": {
        "containers": [{"name": "big", "image": "busybox", "resources": {"limits": {"cpu": "2"}}}]}}), check=False)
    assert 'pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2' in res.stderr
    assert server.kubectl("-n", "team-b", "get", "limits").stdout.split()[:3] == ["NAME", "CREATED", "AT"]
    described = [line.split() for line in server.kubectl("-n", "team-b", "describe", "limits").stdout.splitlines()]
    assert ["Container", "cpu", "-", "1", "100m", "500m", "-"] in described


def test_the_official_client_reads_quota_status_and_is_refused(server: ServerProcess) -> None:
    """The `kubernetes` Python client: typed ResourceQuota and LimitRange objects, and the 403 a Forbidden quota
    refusal is to it (a `Status` with reason Forbidden)."""
    v1 = client.CoreV1Api(config.new_client_from_config(config_file=str(server.kubeconfig)))
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team-c")))
    v1.create_namespaced_resource_quota("team-c", client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="cm"), spec=client.V1ResourceQuotaSpec(hard={"configmaps": "2"})))
    deadline = time.monotonic() + 30
    while ((v1.read_namespaced_resource_quota("cm", "team-c").status or client.V1ResourceQuotaStatus()).used
           or {}).get("configmaps") != "1":  # kube-root-ca.crt, published into every namespace
        assert time.monotonic() < deadline, "the quota was never measured"
        time.sleep(0.2)
    v1.create_namespaced_config_map("team-c", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="one")))
    with pytest.raises(ApiException) as refused:
        v1.create_namespaced_config_map("team-c", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="two")))
    assert refused.value.status == 403 and json.loads(refused.value.body)["reason"] == "Forbidden"
    status = v1.read_namespaced_resource_quota_status("cm", "team-c").status
    assert (status.hard, status.used) == ({"configmaps": "2"}, {"configmaps": "2"})
    v1.create_namespaced_limit_range("team-c", client.V1LimitRange(
        metadata=client.V1ObjectMeta(name="lr"), spec=client.V1LimitRangeSpec(limits=[
            client.V1LimitRangeItem(type="Container", max={"memory": "1Gi"})])))
    item = v1.list_namespaced_limit_range("team-c").items[0].spec.limits[0]
    assert (item.default, item.default_request) == ({"memory": "1Gi"}, {"memory": "1Gi"})  # defaulted from max
