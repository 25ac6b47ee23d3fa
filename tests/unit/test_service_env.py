"""Service links: ports of pkg/kubelet/envvars TestFromServices and kubelet_pods_test TestMakeEnvironmentVariables'
service cases (which Services a pod sees)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.agent.container import environment
from kubelite.agent.service_env import NodeEnv, service_env, service_variables, visible_services

Obj = dict[str, Any]


def svc(name: str, ns: str = "test", ip: str = "1.2.3.1", ports: list[Obj] | None = None) -> Obj:
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": ports if ports is not None else [{"port": 8080, "protocol": "TCP"}]}}


def test_from_services() -> None:
    """envvars_test.go TestFromServices: the first port unnamed, named ports get _SERVICE_PORT_<NAME>, UDP, and
    Services without a ClusterIP ("None", "") give nothing."""
    services = [
        svc("foo-bar", ip="1.2.3.4", ports=[{"port": 8080, "protocol": "TCP"}]),
        svc("abc-123", ip="5.6.7.8", ports=[{"name": "u-d-p", "port": 8081, "protocol": "UDP"},
                                           {"name": "t-c-p", "port": 8081, "protocol": "TCP"}]),
        svc("q-u-u-x", ip="9.8.7.6", ports=[{"port": 8082, "protocol": "TCP"},
                                           {"name": "8083", "port": 8083, "protocol": "TCP"}]),
        svc("svrn-di-py", ip="None", ports=[{"port": 8082, "protocol": "TCP"}]),
        svc("kube-dns", ip="", ports=[{"port": 53, "protocol": "TCP"}]),
    ]
    got = service_env({"metadata": {"namespace": "test"}, "spec": {}}, services)
    assert got == {
        "ABC_123_SERVICE_HOST": "5.6.7.8", "ABC_123_SERVICE_PORT": "8081",
        "ABC_123_SERVICE_PORT_U_D_P": "8081", "ABC_123_SERVICE_PORT_T_C_P": "8081",
        "ABC_123_PORT": "udp://5.6.7.8:8081",
        "ABC_123_PORT_8081_UDP": "udp://5.6.7.8:8081", "ABC_123_PORT_8081_UDP_PROTO": "udp",
        "ABC_123_PORT_8081_UDP_PORT": "8081", "ABC_123_PORT_8081_UDP_ADDR": "5.6.7.8",
        "ABC_123_PORT_8081_TCP": "tcp://5.6.7.8:8081", "ABC_123_PORT_8081_TCP_PROTO": "tcp",
        "ABC_123_PORT_8081_TCP_PORT": "8081", "ABC_123_PORT_8081_TCP_ADDR": "5.6.7.8",
        "FOO_BAR_SERVICE_HOST": "1.2.3.4", "FOO_BAR_SERVICE_PORT": "8080", "FOO_BAR_PORT": "tcp://1.2.3.4:8080",
        "FOO_BAR_PORT_8080_TCP": "tcp://1.2.3.4:8080", "FOO_BAR_PORT_8080_TCP_PROTO": "tcp",
        "FOO_BAR_PORT_8080_TCP_PORT": "8080", "FOO_BAR_PORT_8080_TCP_ADDR": "1.2.3.4",
        "Q_U_U_X_SERVICE_HOST": "9.8.7.6", "Q_U_U_X_SERVICE_PORT": "8082", "Q_U_U_X_SERVICE_PORT_8083": "8083",
        "Q_U_U_X_PORT": "tcp://9.8.7.6:8082",
        "Q_U_U_X_PORT_8082_TCP": "tcp://9.8.7.6:8082", "Q_U_U_X_PORT_8082_TCP_PROTO": "tcp",
        "Q_U_U_X_PORT_8082_TCP_PORT": "8082", "Q_U_U_X_PORT_8082_TCP_ADDR": "9.8.7.6",
        "Q_U_U_X_PORT_8083_TCP": "tcp://9.8.7.6:8083", "Q_U_U_X_PORT_8083_TCP_PROTO": "tcp",
        "Q_U_U_X_PORT_8083_TCP_PORT": "8083", "Q_U_U_X_PORT_8083_TCP_ADDR": "9.8.7.6",
    }


KUBERNETES = svc("kubernetes", ns="default", ip="10.96.0.1",
                 ports=[{"name": "https", "port": 443, "protocol": "TCP"}])
SERVICES = [KUBERNETES, svc("test", ns="test", ip="1.2.3.1"), svc("other", ns="other", ip="1.2.3.2"),
            svc("kubernetes", ns="kubernetes", ip="1.2.3.3"), svc("headless", ns="test", ip="None")]


@pytest.mark.parametrize(("name", "namespace", "links", "expected"), [
    ("api server = Y, kubelet = Y (service links on)", "test", True, [("default", "kubernetes"), ("test", "test")]),
    ("master service only when enableServiceLinks is false", "test", False, [("default", "kubernetes")]),
    ("pod in default namespace sees the master service once", "default", True, [("default", "kubernetes")]),
    ("a namespace's own Service named kubernetes wins over the master one", "kubernetes", True,
     [("kubernetes", "kubernetes")]),
])
def test_visible_services(name: str, namespace: str, links: bool, expected: list[tuple[str, str]]) -> None:
    pod = {"metadata": {"namespace": namespace}, "spec": {"enableServiceLinks": links}}
    got = visible_services(pod, SERVICES)
    assert [(s["metadata"]["namespace"], s["metadata"]["name"]) for s in got] == expected


def test_kubernetes_service_variables() -> None:
    assert service_variables(KUBERNETES)["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert service_variables(KUBERNETES)["KUBERNETES_SERVICE_PORT"] == "443"
    assert service_variables(KUBERNETES)["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"


def test_container_env_overrides_and_expands_service_links() -> None:
    """The container's env comes after the service links: it may override them and $(refer) to them."""
    pod = {"metadata": {"namespace": "test", "name": "p"}, "spec": {"containers": []}}
    container = {"name": "c", "env": [{"name": "TEST_SERVICE_HOST", "value": "overridden"},
                                      {"name": "URL", "value": "http://$(TEST_PORT_8080_TCP_ADDR):8080"}]}
    env = environment(pod, container, "127.0.0.1", NodeEnv({"PATH": "/bin"}, lambda: SERVICES), {})
    assert env["TEST_SERVICE_HOST"] == "overridden"
    assert env["URL"] == "http://1.2.3.1:8080"
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert env["PATH"] == "/bin"
    assert "KUBERNETES_SERVICE_HOST" not in environment(pod, container, "127.0.0.1", {"PATH": "/bin"}, {})
