"""The Endpoints controller's subsets (pkg/controller/endpoint endpoints_controller_test.go cases)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.controllers.endpoints import desired_subsets, endpoints_labels
from tests.controllers.endpointslice_fixtures import new_pod, new_service

Obj = dict[str, Any]


def addr(i: int) -> Obj:
    return {"ip": f"1.2.3.{4 + i}", "nodeName": "node-1",
            "targetRef": {"kind": "Pod", "namespace": "test", "name": f"pod{i}", "uid": f"uid-{i}"}}


PORT = [{"name": "foo", "port": 80, "protocol": "TCP"}]


@pytest.mark.parametrize(("name", "service", "pods", "expected"), [
    ("TestSyncEndpointsProtocolTCP: one ready pod", new_service(), [new_pod(0)],
     [{"addresses": [addr(0)], "ports": PORT}]),
    ("ready and not-ready pods: notReadyAddresses", new_service(), [new_pod(0), new_pod(1, ready=False)],
     [{"addresses": [addr(0)], "notReadyAddresses": [addr(1)], "ports": PORT}]),
    ("terminating pods are left out", new_service(), [new_pod(0), new_pod(1, terminating=True)],
     [{"addresses": [addr(0)], "ports": PORT}]),
    ("publishNotReadyAddresses: not ready and terminating pods are addresses",
     new_service(publishNotReadyAddresses=True), [new_pod(0, ready=False), new_pod(1, terminating=True)],
     [{"addresses": [addr(0), addr(1)], "ports": PORT}]),
    ("pods whose named port differs go to separate subsets",
     new_service(ports=[{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]),
     [new_pod(0, ports=[{"name": "http", "containerPort": 8080}]),
      new_pod(1, ports=[{"name": "http", "containerPort": 8081}]), new_pod(2)],
     [{"addresses": [addr(0)], "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]},
      {"addresses": [addr(1)], "ports": [{"name": "http", "port": 8081, "protocol": "TCP"}]}]),
    ("headless Service without ports: addresses only", new_service(clusterIP="None", ports=[]), [new_pod(0)],
     [{"addresses": [addr(0)]}]),
    ("no pods: no subsets", new_service(), [], []),
])
def test_desired_subsets(name: str, service: Obj, pods: list[Obj], expected: list[Obj]) -> None:
    assert desired_subsets(service, pods) == expected


def test_endpoints_labels() -> None:
    """TestSyncEndpointsItemsWithLabels, plus the headless label for headless Services."""
    service = new_service(clusterIP="None")
    service["metadata"]["labels"] = {"foo": "bar"}
    assert endpoints_labels(service) == {"foo": "bar", "service.kubernetes.io/headless": ""}
