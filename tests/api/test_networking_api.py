"""networking.k8s.io/v1 Ingresses, IngressClasses and NetworkPolicies: validation, defaults, the DefaultIngressClass
admission and the Table columns, against a real server; and the real kubectl applying all three.

Validation cases are upstream's by name (pkg/apis/networking/validation/validation_test.go: TestValidateNetworkPolicy's
error cases, TestValidateIngress, TestValidateIngressCreate, TestValidateIngressClass), each checked through the API:
a 422 whose causes name the fields upstream's test expects.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call
from tests.conftest import SHARED_LOOP, ServerProcess

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]
GROUP = "/apis/networking.k8s.io/v1"
NETPOL = f"{GROUP}/namespaces/default/networkpolicies"
INGRESSES = f"{GROUP}/namespaces/default/ingresses"
CLASSES = f"{GROUP}/ingressclasses"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
INVALID_SELECTOR = {"NoUppercaseOrSpecialCharsLike=Equals": "b"}


async def refused_on(api: Client, path: str, body: Obj) -> list[str]:
    """The fields a create of `body` is refused on (422)."""
    out = await call(api, "POST", path, body, expect=422)
    return [c["field"] for c in out["details"]["causes"]]


# --- NetworkPolicy -----------------------------------------------------------------------------------------------

def policy(**spec: Any) -> Obj:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"generateName": "np-"},
            "spec": {"podSelector": {"matchLabels": {"a": "b"}}, **spec}}


def ingress_from(*peers: Obj, ports: list[Obj] | None = None) -> list[Obj]:
    return [{"from": list(peers), **({"ports": ports} if ports is not None else {})}]


def egress_to(*peers: Obj, ports: list[Obj] | None = None) -> list[Obj]:
    return [{"to": list(peers), **({"ports": ports} if ports is not None else {})}]


NS_SELECTOR = {"namespaceSelector": {"matchLabels": {"c": "d"}}}
IPV4 = {"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.3.0/24", "192.168.4.0/24"]}}


def port(protocol: str | None, number: int | str, end: int = 0) -> Obj:
    """makePort: a protocol (None: unset), a port number or name, an endPort (0: unset)."""
    return {**({"protocol": protocol} if protocol else {}), "port": number, **({"endPort": end} if end else {})}


NETWORK_POLICY_ERROR_CASES = [
    ("namespaceSelector and ipBlock", policy(ingress=ingress_from({**NS_SELECTOR, **IPV4})),
     ["spec.ingress[0].from[0]"]),
    ("podSelector and ipBlock", policy(egress=egress_to({"podSelector": {}, **IPV4})), ["spec.egress[0].to[0]"]),
    ("missing from and to type", policy(ingress=ingress_from({}), egress=egress_to({})),
     ["spec.egress[0].to[0]", "spec.ingress[0].from[0]"]),
    ("invalid spec.podSelector", policy(podSelector={"matchLabels": INVALID_SELECTOR}),
     ["spec.podSelector.matchLabels"]),
    ("invalid ingress.ports.protocol", policy(ingress=[{"ports": [port("ICMP", 80)]}]),
     ["spec.ingress[0].ports[0].protocol"]),
    ("invalid ingress.ports.port (int)", policy(ingress=[{"ports": [port("TCP", 123456789)]}]),
     ["spec.ingress[0].ports[0].port"]),
    ("invalid ingress.ports.port (str)", policy(ingress=[{"ports": [port("TCP", "!@#$")]}]),
     ["spec.ingress[0].ports[0].port"]),
    ("invalid ingress.from.podSelector",
     policy(ingress=ingress_from({"podSelector": {"matchLabels": INVALID_SELECTOR}})),
     ["spec.ingress[0].from[0].podSelector.matchLabels"]),
    ("invalid egress.to.podSelector", policy(egress=egress_to({"podSelector": {"matchLabels": INVALID_SELECTOR}})),
     ["spec.egress[0].to[0].podSelector.matchLabels"]),
    ("invalid egress.ports.protocol", policy(egress=[{"ports": [port("ICMP", 80)]}]),
     ["spec.egress[0].ports[0].protocol"]),
    ("invalid egress.ports.port (int)", policy(egress=[{"ports": [port("TCP", 123456789)]}]),
     ["spec.egress[0].ports[0].port"]),
    ("invalid ingress.from.namespaceSelector",
     policy(ingress=ingress_from({"namespaceSelector": {"matchLabels": INVALID_SELECTOR}})),
     ["spec.ingress[0].from[0].namespaceSelector.matchLabels"]),
    ("missing cidr field", policy(ingress=ingress_from({"ipBlock": {"cidr": ""}})),
     ["spec.ingress[0].from[0].ipBlock.cidr"]),
    ("invalid cidr format", policy(ingress=ingress_from({"ipBlock": {"cidr": "192.168.5.6"}})),
     ["spec.ingress[0].from[0].ipBlock.cidr"]),
    ("invalid ipv6 cidr format", policy(ingress=ingress_from({"ipBlock": {"cidr": "fd00:192:168::"}})),
     ["spec.ingress[0].from[0].ipBlock.cidr"]),
    ("except field is an empty string", policy(ingress=ingress_from({"ipBlock": {"cidr": "192.168.0.0/16",
                                                                                 "except": [""]}})),
     ["spec.ingress[0].from[0].ipBlock.except[0]"]),
    ("except field is an space string", policy(ingress=ingress_from({"ipBlock": {"cidr": "192.168.0.0/16",
                                                                                 "except": [" "]}})),
     ["spec.ingress[0].from[0].ipBlock.except[0]"]),
    ("except field is an invalid ip", policy(ingress=ingress_from({"ipBlock": {"cidr": "192.168.0.0/16",
                                                                               "except": ["300.300.300.300"]}})),
     ["spec.ingress[0].from[0].ipBlock.except[0]"]),
    ("except IP is outside of CIDR range", policy(ingress=ingress_from({"ipBlock": {"cidr": "192.168.8.0/24",
                                                                                    "except": ["192.168.9.1/32"]}})),
     ["spec.ingress[0].from[0].ipBlock.except[0]"]),
    ("except IP is not strictly within CIDR range",
     policy(ingress=ingress_from({"ipBlock": {"cidr": "192.168.0.0/24", "except": ["192.168.0.0/24"]}})),
     ["spec.ingress[0].from[0].ipBlock.except[0]"]),
    ("except IPv6 is outside of CIDR range",
     policy(ingress=ingress_from({"ipBlock": {"cidr": "fd00:192:168:1::/64", "except": ["fd00:192:168:2::/64"]}})),
     ["spec.ingress[0].from[0].ipBlock.except[0]"]),
    ("invalid policyTypes", policy(egress=egress_to(IPV4), policyTypes=["foo", "bar"]),
     ["spec.policyTypes[0]", "spec.policyTypes[1]"]),
    ("too many policyTypes", policy(egress=egress_to(IPV4), policyTypes=["foo", "bar", "baz"]), ["spec.policyTypes"]),
    ("multiple ports defined, one port range is invalid",
     policy(egress=egress_to(NS_SELECTOR, ports=[port("UDP", 35000, 32768), port(None, 32000, 32768)])),
     ["spec.egress[0].ports[0].endPort"]),
    ("endPort defined with named/string port",
     policy(egress=egress_to(NS_SELECTOR, ports=[port("UDP", "dns", 32768), port(None, 32000, 32768)])),
     ["spec.egress[0].ports[0].endPort"]),
    ("endPort defined without port defined", policy(egress=egress_to(NS_SELECTOR, ports=[port("TCP", 0, 32768)])),
     ["spec.egress[0].ports[0].port"]),
    ("port is greater than endPort", policy(egress=egress_to(NS_SELECTOR, ports=[port("SCTP", 35000, 32768)])),
     ["spec.egress[0].ports[0].endPort"]),
    ("multiple invalid port ranges defined", policy(egress=egress_to(NS_SELECTOR, ports=[
        port("UDP", 35000, 32768), port("TCP", 0, 32768), port("TCP", "https", 32768)])),
     ["spec.egress[0].ports[0].endPort", "spec.egress[0].ports[1].port", "spec.egress[0].ports[2].endPort"]),
    ("invalid endport range defined", policy(egress=egress_to(NS_SELECTOR, ports=[port("TCP", 30000, 65537)])),
     ["spec.egress[0].ports[0].endPort"]),
]


@SHARED_LOOP
@pytest.mark.parametrize(("name", "body", "fields"), [pytest.param(*c, id=c[0]) for c in NETWORK_POLICY_ERROR_CASES])
async def test_validate_network_policy_error_cases(shared_api: Client, name: str, body: Obj,
                                                   fields: list[str]) -> None:
    got = await refused_on(shared_api, NETPOL, body)
    assert sorted(set(got)) == sorted(fields), got


@SHARED_LOOP
@pytest.mark.parametrize(("spec", "want_types", "want_protocols"), [
    pytest.param({}, ["Ingress"], [], id="no rules: an Ingress policy (SetDefaults_NetworkPolicy)"),
    pytest.param({"egress": egress_to(IPV4, ports=[port(None, 53)])}, ["Ingress", "Egress"], ["TCP"],
                 id="egress rules: Ingress and Egress, an unset protocol TCP (SetDefaults_NetworkPolicyPort)"),
    pytest.param({"policyTypes": ["Egress"], "egress": egress_to(IPV4, ports=[port("UDP", 53)])}, ["Egress"], ["UDP"],
                 id="policy types and protocols given are kept"),
])
async def test_network_policy_defaults(shared_api: Client, spec: Obj, want_types: list[str],
                                       want_protocols: list[str]) -> None:
    out = await call(shared_api, "POST", NETPOL, policy(**spec), expect=201)
    assert out["spec"]["policyTypes"] == want_types
    assert [p["protocol"] for r in out["spec"].get("egress") or [] for p in r.get("ports") or []] == want_protocols


# --- Ingress -----------------------------------------------------------------------------------------------------

BACKEND = {"service": {"name": "defaultbackend", "port": {"number": 80}}}
RESOURCE = {"apiGroup": "example.com", "kind": "foo", "name": "bar"}
BASE_INGRESS: Obj = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"generateName": "ing-"},
                     "spec": {"defaultBackend": BACKEND, "rules": [{"host": "foo.bar.com", "http": {"paths": [
                         {"path": "/foo", "pathType": "ImplementationSpecific", "backend": BACKEND}]}}]}}


def tweaked(tweak: Callable[[Obj], Any]) -> Obj:
    ing = copy.deepcopy(BASE_INGRESS)
    tweak(ing["spec"])
    return ing


def _path(**fields: Any) -> Callable[[Obj], Any]:
    return lambda spec: spec["rules"][0]["http"]["paths"][0].update(fields)


def _host(host: str) -> Callable[[Obj], Any]:
    return lambda spec: spec["rules"][0].update(host=host)


INGRESS_CASES = [
    ("empty path (implementation specific)", _path(path=""), []),
    ("valid path", _path(path="/valid"), []),
    ("backend with no service", lambda s: s.update(defaultBackend={"service": {"name": "", "port": {"number": 80}}}),
     ["spec.defaultBackend.service.name"]),
    ("invalid path type", _path(pathType="foo"), ["spec.rules[0].http.paths[0].pathType"]),
    ("empty path (prefix)", _path(path="", pathType="Prefix"), ["spec.rules[0].http.paths[0].path"]),
    ("no paths", lambda s: s["rules"][0]["http"].update(paths=[]), ["spec.rules[0].http.paths"]),
    ("invalid host (foobar:80)", _host("foobar:80"), ["spec.rules[0].host"]),
    ("invalid host (127.0.0.1)", _host("127.0.0.1"), ["spec.rules[0].host"]),
    ("valid wildcard host", _host("*.bar.com"), []),
    ("invalid wildcard host (foo.*.bar.com)", _host("foo.*.bar.com"), ["spec.rules[0].host"]),
    ("invalid wildcard host (*)", _host("*"), ["spec.rules[0].host"]),
    ("path resource backend and service name are not allowed together",
     _path(backend={**BACKEND, "resource": RESOURCE}), ["spec.rules[0].http.paths[0].backend"]),
    ("spec.backend resource and service name are not allowed together",
     lambda s: s.update(defaultBackend={**BACKEND, "resource": RESOURCE}), ["spec.defaultBackend"]),
    # beyond upstream's table: the path rules of validateHTTPIngressPath, and neither backend nor rules
    ("a Prefix path may not hold a dot segment", _path(path="/a/../b", pathType="Prefix"),
     ["spec.rules[0].http.paths[0].path"]),
    ("an Exact path may not end in /.", _path(path="/a/.", pathType="Exact"), ["spec.rules[0].http.paths[0].path"]),
    ("a path needs a pathType", lambda s: s["rules"][0]["http"]["paths"][0].pop("pathType"),
     ["spec.rules[0].http.paths[0].pathType"]),
    ("neither a default backend nor rules", lambda s: s.clear(), ["spec"]),
    ("a service port needs a name or a number", lambda s: s.update(defaultBackend={"service": {"name": "a"}}),
     ["spec.defaultBackend"]),
]


@SHARED_LOOP
@pytest.mark.parametrize(("name", "tweak", "fields"), [pytest.param(*c, id=c[0]) for c in INGRESS_CASES])
async def test_validate_ingress(shared_api: Client, name: str, tweak: Callable[[Obj], Any], fields: list[str]) -> None:
    if not fields:
        await call(shared_api, "POST", INGRESSES, tweaked(tweak), expect=201)
        return
    assert await refused_on(shared_api, INGRESSES, tweaked(tweak)) == fields


@SHARED_LOOP
@pytest.mark.parametrize(("annotation", "class_name", "fields"), [
    pytest.param("foo", "foo", [], id="class field and annotation set with same value"),
    pytest.param("foo", "bar", ["annotations.kubernetes.io/ingress.class"],
                 id="class field and annotation set with different value"),
    pytest.param("foo", None, [], id="class annotation set, class field not set"),
])
async def test_validate_ingress_create(shared_api: Client, annotation: str, class_name: str | None,
                                       fields: list[str]) -> None:
    """TestValidateIngressCreate's class cases: the annotation and the field must agree when both are set."""
    body = copy.deepcopy(BASE_INGRESS)
    body["metadata"]["annotations"] = {"kubernetes.io/ingress.class": annotation}
    if class_name is not None:
        body["spec"]["ingressClassName"] = class_name
    if fields:
        assert await refused_on(shared_api, INGRESSES, body) == fields
    else:
        await call(shared_api, "POST", INGRESSES, body, expect=201)


def ingress_class(name: str, controller: str = "example.com/controller", default: bool = False, **spec: Any) -> Obj:
    annotations = {"ingressclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": name, "annotations": annotations}, "spec": {"controller": controller, **spec}}


@SHARED_LOOP
@pytest.mark.parametrize(("body", "fields"), [
    pytest.param(ingress_class("test123"), [], id="valid name, valid controller"),
    pytest.param(ingress_class("test*123"), ["metadata.name"], id="invalid name"),
    pytest.param(ingress_class("test1", controller=""), ["spec.controller"], id="valid name, empty controller"),
    pytest.param(ingress_class("test2", controller="foo.co/" + "a" * 243), [],
                 id="valid name, controller max length"),
    pytest.param(ingress_class("test3", controller="foo.co/" + "a" * 244), ["spec.controller"],
                 id="valid name, controller too long"),
    pytest.param(ingress_class("test4", parameters={"apiGroup": "example.com", "kind": "foo", "name": "bar",
                                                    "scope": "Namespace"}), ["spec.parameters.namespace"],
                 id="valid name, valid controller, invalid params (no namespace)"),
    pytest.param(ingress_class("test5", parameters={"apiGroup": "example.com", "kind": "foo", "name": "bar",
                                                    "scope": "Cluster", "namespace": "foo"}),
                 ["spec.parameters.namespace"],
                 id="valid name, valid controller, invalid params (namespace for Cluster)"),
    pytest.param(ingress_class("test6", parameters={"kind": "foo", "name": "bar", "scope": "foo"}),
                 ["spec.parameters.scope"], id="valid name, valid controller, invalid scope"),
])
async def test_validate_ingress_class(shared_api: Client, body: Obj, fields: list[str]) -> None:
    if fields:
        assert await refused_on(shared_api, CLASSES, body) == fields
    else:
        await call(shared_api, "POST", CLASSES, body, expect=201)


async def test_an_ingress_class_controller_is_immutable(api: Client) -> None:
    await call(api, "POST", CLASSES, ingress_class("c"), expect=201)
    out = await call(api, "PATCH", f"{CLASSES}/c", {"spec": {"controller": "example.com/other"}},
                     ctype="application/merge-patch+json", expect=422)
    assert [c["field"] for c in out["details"]["causes"]] == ["spec.controller"]


async def test_default_ingress_class_admission(api: Client) -> None:
    """DefaultIngressClass: an Ingress naming no class gets the class marked default; one naming a class (field or
    annotation) keeps it; without a default, none is set."""
    assert "ingressClassName" not in (await call(api, "POST", INGRESSES, BASE_INGRESS, expect=201))["spec"]
    await call(api, "POST", CLASSES, ingress_class("nginx", default=True), expect=201)
    assert (await call(api, "POST", INGRESSES, BASE_INGRESS, expect=201))["spec"]["ingressClassName"] == "nginx"
    named = copy.deepcopy(BASE_INGRESS)
    named["spec"]["ingressClassName"] = "other"
    assert (await call(api, "POST", INGRESSES, named, expect=201))["spec"]["ingressClassName"] == "other"
    annotated = copy.deepcopy(BASE_INGRESS)
    annotated["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "legacy"}
    assert "ingressClassName" not in (await call(api, "POST", INGRESSES, annotated, expect=201))["spec"]


async def test_tables(api: Client) -> None:
    """printIngress (hosts, ports with TLS, a long address cut), printIngressClass, printNetworkPolicy."""
    ing = copy.deepcopy(BASE_INGRESS)
    ing["metadata"] = {"name": "web"}
    ing["spec"]["tls"] = [{"hosts": ["foo.bar.com"]}]
    ing["spec"]["rules"] += [{"host": f"h{i}.example.com"} for i in range(3)]
    await call(api, "POST", INGRESSES, ing, expect=201)
    await call(api, "PUT", f"{INGRESSES}/web/status", {**await call(api, "GET", f"{INGRESSES}/web"), "status": {
        "loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"hostname": "lb.example.com"}]}}})
    await call(api, "POST", CLASSES, ingress_class("c", parameters={"apiGroup": "k8s.example.com", "kind": "P",
                                                                    "name": "p", "scope": "Cluster"}), expect=201)
    await call(api, "POST", NETPOL, {**policy(), "metadata": {"name": "np"}}, expect=201)
    rows = {}
    for path in (INGRESSES, CLASSES, NETPOL):
        resp = await api.get(path, headers={"Accept": TABLE})
        table = await resp.json()
        rows[path] = ([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"][:-1])
    assert rows[INGRESSES] == (["Name", "Class", "Hosts", "Address", "Ports", "Age"],
                               ["web", "<none>", "foo.bar.com,h0.example.com,h1.example.com + 1 more...",
                                "10.0.0.1,lb.e...", "80, 443"])
    assert rows[CLASSES] == (["Name", "Controller", "Parameters", "Age"],
                             ["c", "example.com/controller", "P.k8s.example.com/p"])
    assert rows[NETPOL] == (["Name", "Pod-Selector", "Age"], ["np", "a=b"])


@pytest.mark.e2e
def test_kubectl_applies_ingresses_and_network_policies(server: ServerProcess) -> None:
    """A manifest with all three kinds applies as a whole (it failed on "no matches for kind"), kubectl's short
    names work and `describe ingress` reads the rules back."""
    items = [ingress_class("nginx", default=True), {**BASE_INGRESS, "metadata": {"name": "web"}},
             {**policy(egress=egress_to(IPV4)), "metadata": {"name": "deny"}}]
    applied = server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(items))
    assert applied.stdout.split("\n")[:3] == ["ingressclass.networking.k8s.io/nginx created",
                                              "ingress.networking.k8s.io/web created",
                                              "networkpolicy.networking.k8s.io/deny created"]
    assert server.kubectl("get", "ing", "web", "-o", "jsonpath={.spec.ingressClassName}").stdout == "nginx"
    assert server.kubectl("get", "netpol", "deny", "-o", "jsonpath={.spec.policyTypes}").stdout == \
        '["Ingress","Egress"]'
    described = server.kubectl("describe", "ingress", "web").stdout
    assert "foo.bar.com" in described and "/foo" in described and "Ingress Class:    nginx" in described
