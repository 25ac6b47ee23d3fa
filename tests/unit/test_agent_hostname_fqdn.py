"""`setHostnameAsFQDN`: the sandbox's hostname as kubelet makes it (GeneratePodHostNameAndDomain, then
GetNodenameForKernel), what the container sees as HOSTNAME, and a sandbox that cannot be configured (an FQDN over
64 characters): a FailedCreatePodSandBox event, no container started, each waiting as ContainerCreating."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.config import parse
from kubelite.agent.container import SandboxError, environment, nodename_for_kernel
from tests.unit.test_pod_worker import Harness, _c, _pod, _start

Obj = dict[str, Any]


# kubelet's TestGetNodenameForKernel (pkg/kubelet/util/util_test.go), by name
@pytest.mark.parametrize("hostname,host_domain,as_fqdn,want", [
    pytest.param("test.pod.hostname", "", False, "test.pod.hostname", id="no hostDomain, setHostnameAsFQDN false"),
    pytest.param("test.pod.hostname", "", True, "test.pod.hostname", id="no hostDomain, setHostnameAsFQDN true"),
    pytest.param("test.pod.hostname", "svc.subdomain.local", False, "test.pod.hostname",
                 id="valid hostDomain, setHostnameAsFQDN false"),
    pytest.param("test.pod.hostname", "svc.subdomain.local", True, "test.pod.hostname.svc.subdomain.local",
                 id="valid hostDomain, setHostnameAsFQDN true"),
    pytest.param("1234567.1234567", "1234567.1234567.1234567.1234567.1234567.1234567.1234567", False,
                 "1234567.1234567", id="FQDN is too long, setHostnameAsFQDN false"),
    pytest.param("1234567.1234567", "1234567.1234567.1234567.1234567.1234567.1234567.1234567", True, None,
                 id="FQDN is too long, setHostnameAsFQDN true"),
])
def test_nodename_for_kernel(hostname: str, host_domain: str, as_fqdn: bool, want: str | None) -> None:
    if want is None:
        with pytest.raises(SandboxError, match=r"^failed to construct FQDN from pod hostname and cluster domain, FQDN "
                                               r"1234567\.1234567\.1234567.* is too long \(64 characters is the max, "
                                               r"71 characters requested\)$"):
            nodename_for_kernel(hostname, host_domain, as_fqdn)
    else:
        assert nodename_for_kernel(hostname, host_domain, as_fqdn) == want


def _pod_spec(name: str = "web-3", **spec: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": "shop", "uid": "u"}, "spec": spec}


@pytest.mark.parametrize("pod,domain,want", [
    pytest.param(_pod_spec(subdomain="web", setHostnameAsFQDN=True), "cluster.local",
                 "web-3.web.shop.svc.cluster.local", id="the pod's name, subdomain, namespace and cluster domain"),
    pytest.param(_pod_spec(hostname="db", subdomain="web", setHostnameAsFQDN=True), "example.org",
                 "db.web.shop.svc.example.org",
                 id="spec.hostname and the node's clusterDomain"),
    pytest.param(_pod_spec(setHostnameAsFQDN=True), "cluster.local", "web-3",
                 id="no subdomain: no domain, the plain hostname"),
    pytest.param(_pod_spec(subdomain="web"), "cluster.local", "web-3", id="a subdomain without setHostnameAsFQDN"),
    pytest.param(_pod_spec(subdomain="web", setHostnameAsFQDN=True, hostNetwork=True), "cluster.local",
                 socket.gethostname(), id="a hostNetwork pod: the node's hostname, no FQDN"),
])
def test_hostname_env(pod: Obj, domain: str, want: str) -> None:
    container = {"name": "c"}
    assert environment(pod, container, "10.0.0.1", {}, {}, cluster_domain=domain)["HOSTNAME"] == want


@pytest.mark.parametrize("raw,want", [
    pytest.param({}, "cluster.local", id="no clusterDomain: cluster.local, as every cluster sets it"),
    pytest.param({"clusterDomain": "example.org."}, "example.org", id="clusterDomain, without a trailing dot"),
])
def test_cluster_domain_config(raw: Obj, want: str) -> None:
    assert parse({"kind": "KubeletConfiguration", **raw}).cluster_domain == want


async def test_fqdn_too_long_fails_the_sandbox(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    pod = _pod([_c("a"), _c("b")])
    pod["metadata"]["name"] = "h" * 40
    pod["spec"].update(subdomain="web", setHostnameAsFQDN=True)
    _, task = await _start(h, pod)
    await h.clock.advance(30)
    fqdn = f"{'h' * 40}.web.default.svc.cluster.local"
    # one event for the pod (not one per container), kuberuntime's createPodSandbox words
    assert [(reason, message) for _, reason, message in h.events] == [
        ("FailedCreatePodSandBox", f"Failed to create pod sandbox: failed to construct FQDN from pod hostname and "
                                   f"cluster domain, FQDN {fqdn} is too long (64 characters is the max, 70 characters "
                                   f"requested)")]
    assert [h.container(n)["state"] for n in ("a", "b")] == [{"waiting": {"reason": "ContainerCreating"}}] * 2
    assert h.phase() == "Pending"
    task.cancel()
