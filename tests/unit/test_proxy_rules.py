"""Services and slices to proxy rules (kubelite.agent.proxy.rules): which endpoints carry traffic."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.agent.proxy.rules import Backend, render, service_ports

Obj = dict[str, Any]


def service(ports: list[Obj], ip: str = "10.96.0.10", kind: str = "ClusterIP") -> Obj:
    return {"metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": kind, "clusterIP": ip, "ports": ports}}


def es(endpoints: list[Obj], ports: list[Obj], service_name: str = "web", address_type: str = "IPv4") -> Obj:
    return {"metadata": {"name": f"{service_name}-x", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": address_type, "endpoints": endpoints, "ports": ports}


def ep(ip: str, ready: bool | None = True, terminating: bool = False, serving: bool | None = None) -> Obj:
    conditions: Obj = {"terminating": terminating}
    if ready is not None:
        conditions["ready"] = ready
    if serving is not None:
        conditions["serving"] = serving
    return {"addresses": [ip], "conditions": conditions}


HTTP = [{"name": "http", "port": 80, "protocol": "TCP"}]
SLICE_HTTP = [{"name": "http", "port": 8080, "protocol": "TCP"}]


@pytest.mark.parametrize(("name", "svc", "slices", "expected"), [
    ("ready endpoints carry traffic", service(HTTP), [es([ep("1.1.1.1"), ep("1.1.1.2")], SLICE_HTTP)],
     (Backend("1.1.1.1", 8080), Backend("1.1.1.2", 8080))),
    ("not ready endpoints carry none", service(HTTP), [es([ep("1.1.1.1", ready=False)], SLICE_HTTP)], ()),
    ("terminating endpoints carry none, even serving ones", service(HTTP),
     [es([ep("1.1.1.1", ready=False, terminating=True, serving=True)], SLICE_HTTP)], ()),
    ("ready unset means ready", service(HTTP), [es([ep("1.1.1.1", ready=None)], SLICE_HTTP)],
     (Backend("1.1.1.1", 8080),)),
    ("the slice port is matched by name", service(HTTP),
     [es([ep("1.1.1.1")], [{"name": "other", "port": 9090, "protocol": "TCP"}])], ()),
    ("the slice port is matched by protocol", service(HTTP),
     [es([ep("1.1.1.1")], [{"name": "http", "port": 8080, "protocol": "UDP"}])], ()),
    ("endpoints from several slices, with their own port numbers, deduplicated", service(HTTP),
     [es([ep("1.1.1.1")], SLICE_HTTP), es([ep("1.1.1.1"), ep("1.1.1.1")], [{"name": "http", "port": 8081}])],
     (Backend("1.1.1.1", 8080), Backend("1.1.1.1", 8081))),
    ("another Service's slices are not used", service(HTTP), [es([ep("1.1.1.1")], SLICE_HTTP, "other")], ()),
    ("IPv6 slices are not used", service(HTTP), [es([ep("::1")], SLICE_HTTP, address_type="IPv6")], ()),
])
def test_backends(name: str, svc: Obj, slices: list[Obj], expected: tuple[Backend, ...]) -> None:
    (sp,) = service_ports([svc], slices)
    assert sp.backends == expected


@pytest.mark.parametrize(("name", "svc", "count"), [
    ("headless Services get no rules", service(HTTP, ip="None"), 0),
    ("ExternalName Services get no rules", service(HTTP, ip="", kind="ExternalName"), 0),
    ("a NodePort Service without a ClusterIP is still served on its node port",
     service([{"port": 80, "nodePort": 30080}], ip=""), 1),
    ("SCTP and UDP ports are served, unknown protocols not",
     service([{"name": "a", "port": 1, "protocol": "UDP"}, {"name": "b", "port": 2, "protocol": "SCTP"},
              {"name": "c", "port": 3, "protocol": "XTP"}]), 2),
])
def test_which_services_get_rules(name: str, svc: Obj, count: int) -> None:
    assert len(service_ports([svc], [])) == count


def test_render_rejects_services_without_endpoints_and_dnats_the_others() -> None:
    ports = service_ports([service(HTTP), {**service(HTTP, ip="10.96.0.11"),
                                           "metadata": {"name": "empty", "namespace": "default"}}],
                          [es([ep("1.1.1.1"), ep("1.1.1.2")], SLICE_HTTP)])
    script = render("t", ports)
    assert script.startswith("add table ip t\ndelete table ip t\ntable ip t {")  # one atomic replacement
    assert "10.96.0.10 . tcp . 80 : goto svc-" in script
    assert "dnat ip to numgen random mod 2 map { 0 : 1.1.1.1 . 8080, 1 : 1.1.1.2 . 8080 }" in script
    assert "10.96.0.11 . tcp . 80 : goto reject-chain" in script
    assert render("t", ports) == script  # deterministic: an unchanged cluster is not re-applied
