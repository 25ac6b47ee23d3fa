"""`kubectl get svc,endpointslices,endpoints` rows, as printers_test.go TestPrintService, TestPrintEndpointSlice and
TestPrintEndpoint."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.apiserver.tables import column_definitions, row

Obj = dict[str, Any]
META = {"name": "test1", "creationTimestamp": "2026-11-22T12:00:00Z"}
NOW = 1_700_000_000.0


def svc(spec: Obj, status: Obj | None = None) -> Obj:
    return {"metadata": META, "spec": spec, "status": status or {}}


@pytest.mark.parametrize(("name", "obj", "cells"), [
    ("Test print service (ClusterIP)", svc({"type": "ClusterIP", "ports": [{"protocol": "TCP", "port": 2233}],
                                            "clusterIP": "10.9.8.7", "selector": {"foo": "bar"}}),
     ["test1", "ClusterIP", "10.9.8.7", "<none>", "2233/TCP", "foo=bar"]),
    ("Test print service (NodePort)", svc({"type": "NodePort", "ports": [{"protocol": "TCP", "port": 8888,
                                                                          "nodePort": 9999}],
                                           "clusterIP": "10.9.8.7"}),
     ["test1", "NodePort", "10.9.8.7", "<none>", "8888:9999/TCP", "<none>"]),
    ("Test print service (LoadBalancer, pending)", svc({"type": "LoadBalancer", "ports": [
        {"protocol": "TCP", "port": 8888}], "clusterIP": "10.9.8.7"}, {"loadBalancer": {}}),
     ["test1", "LoadBalancer", "10.9.8.7", "<pending>", "8888/TCP", "<none>"]),
    ("Test print service (LoadBalancer with ingress and external IPs)", svc({
        "type": "LoadBalancer", "ports": [{"protocol": "TCP", "port": 8888}], "clusterIP": "10.9.8.7",
        "externalIPs": ["80.11.12.10"]}, {"loadBalancer": {"ingress": [{"ip": "3.4.5.6"}, {"hostname": "lb.x"}]}}),
     ["test1", "LoadBalancer", "10.9.8.7", "3.4.5.6,lb.x,80.11.12.10", "8888/TCP", "<none>"]),
    ("Test print service (ExternalName)", svc({"type": "ExternalName", "externalName": "my.database.example.com"}),
     ["test1", "ExternalName", "<none>", "my.database.example.com", "<none>", "<none>"]),
    ("Test print service (headless, two ports)", svc({"type": "ClusterIP", "clusterIP": "None", "ports": [
        {"protocol": "TCP", "port": 80}, {"protocol": "UDP", "port": 53}]}),
     ["test1", "ClusterIP", "None", "<none>", "80/TCP,53/UDP", "<none>"]),
])
def test_print_service(name: str, obj: Obj, cells: list[Any]) -> None:
    got = row("Service", obj, NOW, "Metadata")["cells"]
    assert got[:5] + got[6:] == cells


def es(endpoints: list[Obj], ports: list[Obj]) -> Obj:
    return {"metadata": META, "addressType": "IPv4", "endpoints": endpoints, "ports": ports}


@pytest.mark.parametrize(("name", "obj", "cells"), [
    ("abcslice.123 (empty)", es([], []), ["test1", "IPv4", "<unset>", "<unset>"]),
    ("four endpoints, two ports", es([{"addresses": [f"10.1.2.{i}"]} for i in range(4)],
                                     [{"port": 80}, {"port": 443}]),
     ["test1", "IPv4", "80,443", "10.1.2.0,10.1.2.1,10.1.2.2 + 1 more..."]),
    ("port without number", es([{"addresses": ["10.1.2.3"]}], [{"name": "x"}]),
     ["test1", "IPv4", "<unset>", "10.1.2.3"]),
])
def test_print_endpoint_slice(name: str, obj: Obj, cells: list[Any]) -> None:
    assert row("EndpointSlice", obj, NOW, "Metadata")["cells"][:4] == cells


@pytest.mark.parametrize(("name", "obj", "cell"), [
    ("no subsets", {"metadata": META}, "<none>"),
    ("addresses with ports", {"metadata": META, "subsets": [{"addresses": [{"ip": "127.0.0.1"}, {"ip": "10.0.0.1"}],
                                                             "ports": [{"port": 8080}, {"port": 9090}]}]},
     "127.0.0.1:8080,127.0.0.1:9090,10.0.0.1:8080 + 1 more..."),
    ("addresses without ports", {"metadata": META, "subsets": [{"addresses": [{"ip": "1.2.3.4"}]}]}, "1.2.3.4"),
])
def test_print_endpoints(name: str, obj: Obj, cell: str) -> None:
    assert row("Endpoints", obj, NOW, "Metadata")["cells"][1] == cell


def test_columns() -> None:
    assert [c["name"] for c in column_definitions("Service")] == ["Name", "Type", "Cluster-IP", "External-IP",
                                                                  "Port(s)", "Age", "Selector"]
    assert [c["name"] for c in column_definitions("EndpointSlice")] == ["Name", "AddressType", "Ports", "Endpoints",
                                                                        "Age"]
