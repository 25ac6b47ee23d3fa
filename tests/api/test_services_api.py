"""core/v1 Services (ValidateService, the ClusterIP and NodePort allocators, update rules), EndpointSlices and the
`kubernetes` Service, against a real API server on SQLite."""

from __future__ import annotations

import asyncio
import copy
import ipaddress
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kubelite.api.errors import ApiError
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore
from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]
SVCS = "/api/v1/namespaces/default/services"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
MERGE = "application/merge-patch+json"


def svc(name: str = "web", **spec: Any) -> Obj:
    return {"metadata": {"name": name},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}], **spec}}


async def test_defaults_and_allocation(api: Client) -> None:
    out = await call(api, "POST", SVCS, svc(), expect=201)
    spec = out["spec"]
    assert ipaddress.IPv4Address(spec["clusterIP"]) in ipaddress.IPv4Network("10.96.0.0/12")
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert (spec["type"], spec["sessionAffinity"], spec["internalTrafficPolicy"]) == ("ClusterIP", "None", "Cluster")
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    assert spec["ports"] == [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]
    assert out["status"] == {"loadBalancer": {}}
    unset = await call(api, "POST", SVCS, {"metadata": {"name": "t"}, "spec": {"ports": [{"port": 53,
                                                                                           "protocol": "UDP"}]}},
                       expect=201)
    assert unset["spec"]["ports"][0]["targetPort"] == 53  # targetPort defaults to port
    np = await call(api, "POST", SVCS, svc("np", type="NodePort"), expect=201)
    assert 30000 <= np["spec"]["ports"][0]["nodePort"] <= 32767
    assert np["spec"]["externalTrafficPolicy"] == "Cluster"
    lb = await call(api, "POST", SVCS, svc("lb", type="LoadBalancer"), expect=201)
    assert lb["spec"]["ports"][0]["nodePort"] and lb["spec"]["allocateLoadBalancerNodePorts"] is True


async def test_kubernetes_service_exists_from_the_start(api: Client) -> None:
    kubernetes = await call(api, "GET", f"{SVCS}/kubernetes", expect=200)
    assert kubernetes["spec"]["clusterIP"] == "10.96.0.1"
    assert kubernetes["spec"]["ports"][0]["port"] == 443 and "selector" not in kubernetes["spec"]
    slice_ = await call(api, "GET", f"{SLICES}/kubernetes", expect=200)
    assert slice_["endpoints"][0]["addresses"] == ["127.0.0.1"]
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == "kubernetes"
    endpoints = await call(api, "GET", "/api/v1/namespaces/default/endpoints/kubernetes", expect=200)
    assert endpoints["subsets"][0]["ports"][0]["port"] == slice_["ports"][0]["port"]


def _with(mutate: Any, name: str = "web") -> Obj:
    body = svc(name)
    mutate(body["spec"])
    return body


def _ports(*ports: Obj) -> Any:
    return lambda s: s.update(ports=list(ports))


@pytest.mark.parametrize(("body", "field", "detail"), [
    pytest.param(_with(lambda s: s.update(type="Foo")), "spec.type", 'Unsupported value: "Foo"', id="invalid type"),
    pytest.param(_with(lambda s: s.pop("ports")), "spec.ports", "Required value", id="missing ports"),
    pytest.param(_with(_ports({"port": 80}, {"name": "b", "port": 81})), "spec.ports[0].name", "Required value",
                 id="empty port[0] name"),
    pytest.param(_with(_ports({"name": "-bad", "port": 80})), "spec.ports[0].name", "RFC 1123 label",
                 id="invalid port name"),
    pytest.param(_with(_ports({"name": "a", "port": 80}, {"name": "a", "port": 81})), "spec.ports[1].name",
                 "Duplicate value", id="dup port name"),
    pytest.param(_with(_ports({"port": 80, "protocol": "INVALID"})), "spec.ports[0].protocol",
                 'Unsupported value: "INVALID"', id="invalid protocol"),
    pytest.param(_with(_ports({"port": 0})), "spec.ports[0].port", "must be between 1 and 65535",
                 id="invalid port"),
    pytest.param(_with(_ports({"port": 80, "targetPort": 65536})), "spec.ports[0].targetPort",
                 "must be between 1 and 65535", id="invalid target port number"),
    pytest.param(_with(_ports({"port": 80, "targetPort": "-123-"})), "spec.ports[0].targetPort",
                 "must not begin or end with a hyphen", id="invalid target port name"),
    pytest.param(_with(_ports({"port": 80, "targetPort": "toolongportname-x"})), "spec.ports[0].targetPort",
                 "must be no more than 15 characters", id="target port name too long"),
    pytest.param(_with(_ports({"name": "a", "port": 80}, {"name": "b", "port": 80})), "spec.ports[1]",
                 "Duplicate value", id="duplicate port and protocol"),
    pytest.param(_with(_ports({"port": 80, "nodePort": 30100})), "spec.ports[0].nodePort",
                 "may not be used when `type` is 'ClusterIP'", id="invalid nodePort with clusterIP type"),
    pytest.param(_with(lambda s: s.update(type="ExternalName", externalName="a_b")), "spec.externalName",
                 "RFC 1123 subdomain", id="invalid externalName"),
    pytest.param(_with(lambda s: s.update(type="ExternalName")), "spec.externalName", "Required value",
                 id="missing externalName"),
    pytest.param(_with(lambda s: s.update(type="ExternalName", externalName="x.com", clusterIP="10.96.0.9")),
                 "spec.clusterIPs", "may not be set for ExternalName services", id="ExternalName with clusterIP"),
    pytest.param(_with(lambda s: s.update(type="NodePort", clusterIP="None")), "spec.clusterIPs[0]",
                 "may not be set to 'None' for NodePort services", id="headless NodePort"),
    pytest.param(_with(lambda s: s.update(sessionAffinity="Foo")), "spec.sessionAffinity", "Unsupported value",
                 id="invalid sessionAffinity"),
    pytest.param(_with(lambda s: s.update(sessionAffinity="None", sessionAffinityConfig={"clientIP": {
                     "timeoutSeconds": 90}})), "spec.sessionAffinityConfig",
                 "Forbidden: must not be set when session affinity is None", id="sessionAffinityConfig with None"),
    pytest.param(_with(lambda s: s.update(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {
                     "timeoutSeconds": 90000}})), "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                 "Invalid value: 90000: must be greater than 0 and less than 86400", id="ClientIP timeout too long"),
    pytest.param(_with(lambda s: s.update(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {
                     "timeoutSeconds": 0}})), "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                 "must be greater than 0", id="ClientIP timeout zero"),
    pytest.param(_with(lambda s: s.update(selector={"a b": "c"})), "spec.selector", "name part must consist",
                 id="invalid selector key"),
    pytest.param(_with(lambda s: s.update(clusterIP="10.0.0.5")), "spec.clusterIPs",
                 "the provided IP (10.0.0.5) is not in the valid range. The range of valid IPs is 10.96.0.0/12",
                 id="clusterIP out of range"),
    pytest.param(_with(lambda s: s.update(clusterIP="10.96.0.1")), "spec.clusterIPs",
                 'Invalid value: []string{"10.96.0.1"}: failed to allocate IP 10.96.0.1: provided IP is already '
                 "allocated", id="clusterIP already allocated"),
    pytest.param(_with(lambda s: s.update(type="NodePort", ports=[{"port": 80, "nodePort": 20000}])),
                 "spec.ports[0].nodePort", "provided port is not in the valid range. The range of valid ports is "
                                           "30000-32767", id="nodePort out of range"),
])
async def test_validate_service_create(api: Client, body: Obj, field: str, detail: str) -> None:
    out = await call(api, "POST", SVCS, body, expect=422)
    causes = out["details"]["causes"]
    assert any(c["field"] == field and detail in c["message"] for c in causes), causes


@pytest.mark.parametrize(("body", "check"), [
    pytest.param(svc("hl", clusterIP="None", ports=[]), lambda s: s["clusterIPs"] == ["None"],
                 id="valid headless without ports"),
    pytest.param(svc("ext", type="ExternalName", externalName="example.com."), lambda s: "clusterIP" not in s,
                 id="valid ExternalName (trailing dot)"),
    pytest.param(svc("named", ports=[{"name": "http", "port": 80, "targetPort": "http"}]),
                 lambda s: s["ports"][0]["targetPort"] == "http", id="valid named targetPort"),
    pytest.param(svc("fixed", clusterIP="10.96.0.99"), lambda s: s["clusterIP"] == "10.96.0.99",
                 id="valid requested clusterIP"),
    pytest.param(svc("sticky", sessionAffinity="ClientIP"),
                 lambda s: s["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}},
                 id="ClientIP affinity defaults its timeout to 3 hours"),
    pytest.param(svc("sticky-day", sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {
                     "timeoutSeconds": 86400}}),
                 lambda s: s["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] == 86400,
                 id="ClientIP affinity timeout of a day"),
])
async def test_valid_services(api: Client, body: Obj, check: Any) -> None:
    out = await call(api, "POST", SVCS, body, expect=201)
    assert check(out["spec"])


async def test_update_rules(api: Client) -> None:
    created = await call(api, "POST", SVCS, svc("web", type="NodePort"), expect=201)
    ip, node_port = created["spec"]["clusterIP"], created["spec"]["ports"][0]["nodePort"]
    out = await call(api, "PATCH", f"{SVCS}/web", {"spec": {"clusterIP": "10.96.0.77", "clusterIPs": ["10.96.0.77"]}},
                     MERGE, expect=422)
    assert "may not change once set" in out["message"]
    body = copy.deepcopy(created)
    for f in ("clusterIP", "clusterIPs"):
        del body["spec"][f]
    del body["spec"]["ports"][0]["nodePort"]
    body["metadata"]["labels"] = {"x": "y"}
    out = await call(api, "PUT", f"{SVCS}/web", body, expect=200)  # a replace without them keeps the allocations
    assert (out["spec"]["clusterIP"], out["spec"]["ports"][0]["nodePort"]) == (ip, node_port)
    out = await call(api, "PATCH", f"{SVCS}/web", {"spec": {"type": "ClusterIP"}}, MERGE, expect=200)
    assert "nodePort" not in out["spec"]["ports"][0]  # dropTypeDependentFields
    out = await call(api, "PATCH", f"{SVCS}/web", {"spec": {"type": "ExternalName", "externalName": "a.example"}},
                     MERGE, expect=200)
    assert "clusterIP" not in out["spec"]
    status = await call(api, "PUT", f"{SVCS}/web/status",
                        {**out, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}, expect=200)
    assert status["status"]["loadBalancer"]["ingress"] == [{"ip": "1.2.3.4"}]


async def test_endpoint_slice_validation(api: Client) -> None:
    out = await call(api, "POST", SLICES, {"metadata": {"name": "x"}, "addressType": "IPv5", "endpoints": []},
                     expect=422)
    assert out["details"]["causes"][0]["field"] == "addressType"
    out = await call(api, "POST", SLICES, {"metadata": {"name": "x"}, "addressType": "IPv4",
                                           "endpoints": [{"addresses": []}]}, expect=422)
    assert out["details"]["causes"][0]["field"] == "endpoints[0].addresses"
    made = await call(api, "POST", SLICES, {"metadata": {"name": "x"}, "addressType": "IPv4",
                                            "endpoints": [{"addresses": ["10.0.0.1"]}]}, expect=201)
    out = await call(api, "PUT", f"{SLICES}/x", {**made, "addressType": "FQDN"}, expect=422)
    assert "field is immutable" in out["message"]


async def _server(path: Path, cidr: str) -> tuple[SQLiteStore, ApiServer, InProcessClient]:
    store = await SQLiteStore.open(path)
    server = ApiServer(store, RealClock(), service_cidr=cidr)
    await server.start()
    return store, server, InProcessClient(server)


async def test_concurrent_creates_never_share_an_ip_and_a_full_range_says_so(tmp_path: Path) -> None:
    """A /28 has 14 usable addresses, the first the kubernetes Service's: 13 concurrent creates all succeed with
    distinct IPs, the 14th finds the range full (a 500, as upstream: the client did nothing wrong)."""
    store, server, client = await _server(tmp_path / "state.db", "10.0.0.0/28")
    try:
        made = await asyncio.gather(*(client.create(SVCS, svc(f"s{i}")) for i in range(13)))
        ips = {m["spec"]["clusterIP"] for m in made}
        assert len(ips) == 13 and "10.0.0.1" not in ips
        with pytest.raises(ApiError) as err:
            await client.create(SVCS, svc("one-too-many"))
        assert (err.value.code, err.value.message) == (500, "Internal error occurred: failed to allocate a serviceIP: "
                                                            "range is full")
    finally:
        await server.stop()
        await store.close()


async def test_allocations_survive_a_restart(tmp_path: Path) -> None:
    store, server, client = await _server(tmp_path / "state.db", "10.0.0.0/28")
    first = await client.create(SVCS, svc("first", type="NodePort"))
    await server.stop()
    await store.close()
    store, server, client = await _server(tmp_path / "state.db", "10.0.0.0/28")
    try:
        with pytest.raises(ApiError, match="provided IP is already allocated"):
            await client.create(SVCS, svc("same-ip", clusterIP=first["spec"]["clusterIP"]))
        with pytest.raises(ApiError, match="provided port is already allocated"):
            await client.create(SVCS, svc("same-port", type="NodePort", ports=[
                {"port": 80, "nodePort": first["spec"]["ports"][0]["nodePort"]}]))
        made = await asyncio.gather(*(client.create(SVCS, svc(f"s{i}")) for i in range(12)))
        assert first["spec"]["clusterIP"] not in {m["spec"]["clusterIP"] for m in made}
        await client.delete(f"{SVCS}/first")
        again = await client.create(SVCS, svc("again", clusterIP=first["spec"]["clusterIP"]))  # freed by delete
        assert again["spec"]["clusterIP"] == first["spec"]["clusterIP"]
    finally:
        await server.stop()
        await store.close()


async def test_field_selectors(api: Client) -> None:
    await call(api, "POST", SVCS, svc("np", type="NodePort"), expect=201)
    got = await call(api, "GET", f"{SVCS}?fieldSelector=spec.type%3DNodePort", expect=200)
    assert [s["metadata"]["name"] for s in got["items"]] == ["np"]
    got = await call(api, "GET", f"{SVCS}?fieldSelector=spec.clusterIP%3D10.96.0.1", expect=200)
    assert [s["metadata"]["name"] for s in got["items"]] == ["kubernetes"]
    await call(api, "GET", f"{SVCS}?fieldSelector=spec.selector%3Dx", expect=400)
