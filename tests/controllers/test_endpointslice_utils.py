"""Port of k8s.io/endpointslice utils_test.go: TestNewEndpointSlice, TestPodToEndpoint, TestGetEndpointPorts,
and ShouldPodBeInEndpoints (k8s.io/endpointslice/util)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.controllers import endpointslice_utils as u
from kubelite.controllers.endpointslice import new_slice
from tests.controllers.endpointslice_fixtures import new_pod, new_service

Obj = dict[str, Any]
MANAGED = {u.SERVICE_NAME_LABEL: "foo", u.MANAGED_BY_LABEL: u.CONTROLLER_NAME}


@pytest.mark.parametrize(("name", "labels", "headless", "annotations", "expected"), [
    ("Service without labels", None, False, None, MANAGED),
    ("Service with labels", {"foo": "bar"}, False, None, {**MANAGED, "foo": "bar"}),
    ("Headless Service with labels", {"foo": "bar"}, True, None, {**MANAGED, u.HEADLESS_LABEL: "", "foo": "bar"}),
    ("Service with multiple labels", {"foo": "bar", "foo2": "bar2"}, False, None,
     {**MANAGED, "foo": "bar", "foo2": "bar2"}),
    ("Evil service hijacking endpoint slices labels", {u.SERVICE_NAME_LABEL: "bad", u.MANAGED_BY_LABEL: "actor",
                                                       "foo": "bar"}, False, None, {**MANAGED, "foo": "bar"}),
    ("Service with annotations", None, False, {"foo": "bar"}, MANAGED),
])
def test_new_endpoint_slice(name: str, labels: dict[str, str] | None, headless: bool,
                            annotations: dict[str, str] | None, expected: dict[str, str]) -> None:
    svc = new_service()
    if labels:
        svc["metadata"]["labels"] = labels
    if annotations:
        svc["metadata"]["annotations"] = annotations
    if headless:
        svc["spec"]["clusterIP"] = "None"
    ports = [{"name": "foo", "protocol": "TCP"}]
    got = new_slice(svc, ports, [])
    assert got["metadata"] == {"generateName": "foo-", "namespace": "test", "labels": expected,
                               "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "foo",
                                                    "uid": "svc-foo", "controller": True,
                                                    "blockOwnerDeletion": True}]}
    assert (got["addressType"], got["ports"], got["endpoints"]) == ("IPv4", ports, [])


def _hostname(pod: Obj) -> Obj:
    pod["spec"].update(subdomain="foo", hostname="example-hostname")
    return pod


NODE = {"metadata": {"name": "node-1", "labels": {"topology.kubernetes.io/zone": "us-central1-a",
                                                  "topology.kubernetes.io/region": "us-central1"}}}


@pytest.mark.parametrize(("name", "pod", "node", "publish", "conditions", "extra"), [
    ("Ready pod", new_pod(1), None, False, (True, True, False), {}),
    ("Ready pod + publishNotReadyAddresses", new_pod(1), None, True, (True, True, False), {}),
    ("Unready pod", new_pod(1, ready=False), None, False, (False, False, False), {}),
    ("Unready pod + publishNotReadyAddresses", new_pod(1, ready=False), None, True, (True, False, False), {}),
    ("Ready pod + node labels", new_pod(1), NODE, False, (True, True, False), {"zone": "us-central1-a"}),
    ("Ready pod + hostname", _hostname(new_pod(1)), NODE, False, (True, True, False),
     {"zone": "us-central1-a", "hostname": "example-hostname"}),
    ("Ready terminating pod", new_pod(1, terminating=True), None, False, (False, True, True), {}),
    ("Not ready terminating pod", new_pod(1, ready=False, terminating=True), None, False, (False, False, True), {}),
])
def test_pod_to_endpoint(name: str, pod: Obj, node: Obj | None, publish: bool,
                         conditions: tuple[bool, bool, bool], extra: Obj) -> None:
    svc = new_service(publishNotReadyAddresses=publish)
    ready, serving, terminating = conditions
    assert u.pod_to_endpoint(pod, node, svc) == {
        "addresses": ["1.2.3.5"], "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "nodeName": "node-1", "targetRef": {"kind": "Pod", "namespace": "test", "name": "pod1", "uid": "uid-1"},
        **extra}


HTTP = [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


@pytest.mark.parametrize(("name", "service_ports", "pod_ports", "expected"), [
    ("service with AppProtocol on one port",
     [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP", "appProtocol": "example.com/custom-protocol"}],
     [], [{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "example.com/custom-protocol"}]),
    ("service with named port and AppProtocol on one port",
     [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP", "appProtocol": "https"}], HTTP,
     [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "https"}]),
    ("service with named port for restartable init container",
     [{"name": "http-sidecar", "port": 8081, "targetPort": 8050, "protocol": "TCP"}], [],
     [{"name": "http-sidecar", "port": 8050, "protocol": "TCP"}]),
    ("named target port the pod does not have is left out",
     [{"name": "http", "port": 80, "targetPort": "web", "protocol": "TCP"}], HTTP, []),
    ("named target port with another protocol is left out",
     [{"name": "http", "port": 80, "targetPort": "http", "protocol": "UDP"}], HTTP, []),
])
def test_get_endpoint_ports(name: str, service_ports: list[Obj], pod_ports: list[Obj], expected: list[Obj]) -> None:
    assert u.endpoint_ports(new_service(ports=service_ports), new_pod(1, ports=pod_ports)) == expected


def _phase(phase: str) -> Obj:
    pod = new_pod(1)
    pod["status"]["phase"] = phase
    return pod


def _no_ip() -> Obj:
    pod = new_pod(1)
    del pod["status"]["podIP"]
    return pod


@pytest.mark.parametrize(("name", "pod", "include_terminating", "expected"), [
    ("all conditions satisfied", new_pod(1), False, True),
    ("no pod IPs", _no_ip(), False, False),
    ("Succeeded pod", _phase("Succeeded"), False, False),
    ("Failed pod", _phase("Failed"), False, False),
    ("Pending pod with an IP", _phase("Pending"), False, True),
    ("terminating pod, terminating not included", new_pod(1, terminating=True), False, False),
    ("terminating pod, terminating included", new_pod(1, terminating=True), True, True),
])
def test_should_pod_be_in_endpoints(name: str, pod: Obj, include_terminating: bool, expected: bool) -> None:
    assert u.should_pod_be_in_endpoints(pod, include_terminating) is expected
