"""networking.k8s.io/v1 Ingresses, IngressClasses and NetworkPolicies: stored, defaulted and validated.

As upstream's API server does, kubelite only keeps these objects: an ingress controller (or a network plugin, for
NetworkPolicies) outside it acts on them, and none is part of kubelite. Serving them lets manifests that carry them
apply as a whole, and lets such a controller run against kubelite. Ports pkg/apis/networking/validation and
pkg/apis/networking/v1's defaults, with upstream's messages.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy
from kubelite.apiserver.registry.services import is_valid_port_name

INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]
INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
INVALID_PATH_SUFFIXES = ("/..", "/.")
PROTOCOLS = ["TCP", "UDP", "SCTP"]
POLICY_TYPES = ["Ingress", "Egress"]
MAX_CONTROLLER_LENGTH = 250
PARAMETER_SCOPES = ["Cluster", "Namespace"]
PORT_RANGE = "must be between 1 and 65535, inclusive"
CIDR_MESSAGE = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
WILDCARD_MESSAGE = ("a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
                    "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character "
                    "(e.g. '*.example.com', regex used for validation is "
                    "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def _port_number(value: Any) -> list[str]:
    """IsValidPortNum."""
    return [] if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535 else [PORT_RANGE]


def _host(path: str, host: str) -> list[Cause]:
    """A rule's or a TLS entry's host: a DNS subdomain, or a wildcard one (IsWildcardDNS1123Subdomain)."""
    if "*" in host:
        rest = host[2:] if host.startswith("*.") else ""
        return [] if rest and not v.is_dns1123_subdomain(rest) else [v.invalid(path, host, WILDCARD_MESSAGE)]
    return [v.invalid(path, host, msg) for msg in v.is_dns1123_subdomain(host)]


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# --- Ingress -----------------------------------------------------------------------------------------------------

def validate_ingress_backend(backend: Obj, path: str) -> list[Cause]:
    """validateIngressBackend: exactly one of a Service (a name and a port name or number) and a resource."""
    resource, service = backend.get("resource"), backend.get("service")
    if resource is not None and service is not None:
        return [v.invalid(path, "", "cannot set both resource and service backends")]
    if resource is not None:
        ref = _dict(resource)
        causes = [] if ref.get("kind") else [v.required(f"{path}.resource.kind")]
        return causes + ([] if ref.get("name") else [v.required(f"{path}.resource.name")])
    if service is None:
        return [v.invalid(path, "", "resource or service backend is required")]
    service = _dict(service)
    name, port = service.get("name") or "", _dict(service.get("port"))
    causes = ([v.required(f"{path}.service.name")] if not name else
              [v.invalid(f"{path}.service.name", name, msg) for msg in v.is_dns1035_label(str(name))])
    port_name, number = port.get("name") or "", port.get("number") or 0
    if port_name and number:
        causes.append(v.invalid(path, "", "cannot set both port name & port number"))
    elif port_name:
        causes += [v.invalid(f"{path}.service.port.name", port_name, msg) for msg in is_valid_port_name(port_name)]
    elif number:
        causes += [v.invalid(f"{path}.service.port.number", number, msg) for msg in _port_number(number)]
    else:
        causes.append(v.required(path, "port name or number is required"))
    return causes


def _validate_http_path(entry: Obj, path: str) -> list[Cause]:
    """validateHTTPIngressPath: a pathType, an absolute path without dot segments or encoded slashes."""
    path_type, value = entry.get("pathType"), entry.get("path") or ""
    if path_type is None:
        return [v.required(f"{path}.pathType", "pathType must be specified")]
    causes: list[Cause] = []
    if path_type in ("Exact", "Prefix"):
        if not value.startswith("/"):
            causes.append(v.invalid(f"{path}.path", value, "must be an absolute path"))
        causes += [v.invalid(f"{path}.path", value, f"must not contain '{seq}'")
                   for seq in INVALID_PATH_SEQUENCES if seq in value]
        causes += [v.invalid(f"{path}.path", value, f"cannot end with '{suffix}'")
                   for suffix in INVALID_PATH_SUFFIXES if value.endswith(suffix)]
    elif path_type == "ImplementationSpecific":
        if value and not value.startswith("/"):
            causes.append(v.invalid(f"{path}.path", value, "must be an absolute path"))
    else:
        causes.append(v.not_supported(f"{path}.pathType", path_type, PATH_TYPES))
    return causes + validate_ingress_backend(_dict(entry.get("backend")), f"{path}.backend")


def _validate_rules(rules: list[Any]) -> list[Cause]:
    """validateIngressRules: hosts are DNS names (a wildcard allowed), each HTTP rule has paths."""
    causes: list[Cause] = []
    for i, rule in enumerate(rules):
        rule, path = _dict(rule), f"spec.rules[{i}]"
        host = rule.get("host") or ""
        if host:
            if _is_ip(host):
                causes.append(v.invalid(f"{path}.host", host, "must be a DNS name, not an IP address"))
            causes += _host(f"{path}.host", host)
        http = rule.get("http")
        if http is not None:
            paths = _list(_dict(http).get("paths"))
            if not paths:
                causes.append(v.required(f"{path}.http.paths"))
            for j, entry in enumerate(paths):
                causes += _validate_http_path(_dict(entry), f"{path}.http.paths[{j}]")
    return causes


def validate_ingress_spec(spec: Obj) -> list[Cause]:
    """ValidateIngressSpec."""
    rules, backend = _list(spec.get("rules")), spec.get("defaultBackend")
    causes: list[Cause] = []
    if not rules and backend is None:
        causes.append(v.invalid("spec", rules, "either `defaultBackend` or `rules` must be specified"))
    if backend is not None:
        causes += validate_ingress_backend(_dict(backend), "spec.defaultBackend")
    causes += _validate_rules(rules)
    for i, tls in enumerate(_list(spec.get("tls"))):
        tls = _dict(tls)
        for j, host in enumerate(_list(tls.get("hosts"))):
            causes += _host(f"spec.tls[{i}].hosts[{j}]", str(host))
        secret = tls.get("secretName") or ""
        causes += [v.invalid(f"spec.tls[{i}].secretName", secret, msg) for msg in
                   (v.is_dns1123_subdomain(secret) if secret else [])]
    class_name = spec.get("ingressClassName")
    if class_name is not None:
        causes += [v.invalid("spec.ingressClassName", class_name, msg)
                   for msg in v.is_dns1123_subdomain(str(class_name))]
    return causes


def _validate_load_balancer(status: Obj) -> list[Cause]:
    """ValidateIngressLoadBalancerStatus: each entry's ip is an IP, its hostname a DNS name and not an IP."""
    causes: list[Cause] = []
    for i, entry in enumerate(_list(_dict(status.get("loadBalancer")).get("ingress"))):
        entry, path = _dict(entry), f"status.loadBalancer.ingress[{i}]"
        ip, hostname = entry.get("ip") or "", entry.get("hostname") or ""
        if ip and not _is_ip(ip):
            causes.append(v.invalid(f"{path}.ip", ip, "must be a valid IP address"))
        if hostname:
            causes += [v.invalid(f"{path}.hostname", hostname, msg) for msg in v.is_dns1123_subdomain(hostname)]
            if _is_ip(hostname):
                causes.append(v.invalid(f"{path}.hostname", hostname, "must be a DNS name, not an IP address"))
    return causes


class IngressStrategy(Strategy):
    has_status = True
    has_spec_generation = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        """The status reset as upstream's (an empty IngressStatus, which Go writes as `{loadBalancer: {}}`), and the
        DefaultIngressClass admission plugin: an Ingress naming no class (field or annotation) gets the IngressClass
        marked default; of several, the newest (the first name of those created at once)."""
        super().prepare_create(obj, lookup)
        obj["status"] = {"loadBalancer": {}}
        spec = obj.setdefault("spec", {})
        annotations = obj["metadata"].get("annotations") or {}
        if not isinstance(spec, dict) or spec.get("ingressClassName") or INGRESS_CLASS_ANNOTATION in annotations:
            return
        defaults = [c for c in lookup.list("ingressclasses")
                    if ((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"]
        if defaults:
            newest = max(c["metadata"].get("creationTimestamp", "") for c in defaults)
            spec["ingressClassName"] = min(c["metadata"]["name"] for c in defaults
                                           if c["metadata"].get("creationTimestamp", "") == newest)

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj) + validate_ingress_spec(_dict(obj.get("spec")))
        annotation = (obj["metadata"].get("annotations") or {}).get(INGRESS_CLASS_ANNOTATION)
        class_name = _dict(obj.get("spec")).get("ingressClassName")
        if annotation is not None and class_name is not None and annotation != class_name:
            causes.append(v.invalid(f"annotations.{INGRESS_CLASS_ANNOTATION}", annotation,
                                    "must match `ingressClassName` when both are specified"))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        """ValidateIngressUpdate: the spec validated again (the annotation/field check is the create's alone)."""
        return super().validate(new) + validate_ingress_spec(_dict(new.get("spec")))

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        return super().validate_status_update(new, old) + _validate_load_balancer(_dict(new.get("status")))


# --- IngressClass ------------------------------------------------------------------------------------------------

def _validate_parameters(params: Obj) -> list[Cause]:
    """validateIngressClassParametersReference."""
    path = "spec.parameters"
    causes = [] if params.get("kind") else [v.required(f"{path}.kind", "kind is required")]
    causes += [] if params.get("name") else [v.required(f"{path}.name", "name is required")]
    scope, namespace = params.get("scope"), params.get("namespace")
    if scope is None:
        causes.append(v.required(f"{path}.scope", ""))
    elif scope not in PARAMETER_SCOPES:
        causes.append(v.not_supported(f"{path}.scope", scope, PARAMETER_SCOPES))
    elif scope == "Namespace" and not namespace:
        causes.append(v.required(f"{path}.namespace", "`parameters.scope` is set to 'Namespace'"))
    elif scope == "Cluster" and namespace:
        causes.append(v.forbidden(f"{path}.namespace", "`parameters.scope` is set to 'Cluster'"))
    return causes


def default_ingress_class(obj: Obj) -> None:
    """SetDefaults_IngressClass: parameters without a scope are cluster-scoped."""
    params = _dict(obj.get("spec")).get("parameters")
    if isinstance(params, dict) and params.get("scope") is None:
        params["scope"] = "Cluster"


class IngressClassStrategy(Strategy):
    has_spec_generation = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        default_ingress_class(obj)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        default_ingress_class(new)

    def validate(self, obj: Obj) -> list[Cause]:
        """ValidateIngressClass: a domain-prefixed controller of at most 250 bytes, parameters that name a kind."""
        causes = super().validate(obj)
        spec = _dict(obj.get("spec"))
        controller = spec.get("controller") or ""
        if not controller:
            causes.append(v.required("spec.controller"))
        elif len(controller) > MAX_CONTROLLER_LENGTH:
            causes.append(Cause("FieldValueTooLong", f"Too long: may not be more than {MAX_CONTROLLER_LENGTH} bytes",
                                "spec.controller"))
        else:
            domain, _, rest = controller.partition("/")
            if not rest:
                causes.append(v.invalid("spec.controller", controller, "must be a domain-prefixed path (such as "
                                                                       "\"acme.io/foo\")"))
            else:
                causes += [v.invalid("spec.controller", domain, msg) for msg in v.is_dns1123_subdomain(domain)]
        if spec.get("parameters") is not None:
            causes += _validate_parameters(_dict(spec.get("parameters")))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        if _dict(new.get("spec")).get("controller") != _dict(old.get("spec")).get("controller"):
            causes.append(v.invalid("spec.controller", _dict(new.get("spec")).get("controller"),
                                    "field is immutable"))
        return causes


# --- NetworkPolicy -----------------------------------------------------------------------------------------------

def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _validate_ip_block(block: Obj, path: str) -> list[Cause]:
    """ValidateIPBlock: a CIDR, and exceptions that are strict subsets of it."""
    cidr = block.get("cidr") or ""
    if not cidr:
        return [v.required(f"{path}.cidr")]
    network = _network(str(cidr)) if "/" in str(cidr) else None
    causes = [] if network is not None else [v.invalid(f"{path}.cidr", cidr, CIDR_MESSAGE)]
    for i, text in enumerate(_list(block.get("except"))):
        except_path = f"{path}.except[{i}]"
        excepted = _network(str(text)) if "/" in str(text) else None
        if excepted is None:
            causes.append(v.invalid(except_path, text, CIDR_MESSAGE))
            continue
        if network is not None and (excepted.version != network.version or excepted.network_address not in network
                                    or network.prefixlen >= excepted.prefixlen):
            causes.append(v.invalid(except_path, text, "must be a strict subset of `cidr`"))
    return causes


def _validate_peer(peer: Obj, path: str) -> list[Cause]:
    """ValidateNetworkPolicyPeer: at least one of the selectors and ipBlock, ipBlock alone."""
    causes: list[Cause] = []
    for key in ("podSelector", "namespaceSelector"):
        if peer.get(key) is not None:
            causes += v.validate_label_selector(_dict(peer[key]), f"{path}.{key}")
    if peer.get("ipBlock") is not None:
        causes += _validate_ip_block(_dict(peer["ipBlock"]), f"{path}.ipBlock")
    count = sum(peer.get(k) is not None for k in ("podSelector", "namespaceSelector", "ipBlock"))
    if count == 0:
        causes.append(v.required(path, "must specify a peer"))
    elif count > 1 and peer.get("ipBlock") is not None:
        causes.append(v.forbidden(path, "may not specify both ipBlock and another peer"))
    return causes


def _validate_port(port: Obj, path: str) -> list[Cause]:
    """ValidateNetworkPolicyPort: a known protocol, a port number or name, an endPort only after a number."""
    causes: list[Cause] = []
    if port.get("protocol") is not None and port["protocol"] not in PROTOCOLS:
        causes.append(v.not_supported(f"{path}.protocol", port["protocol"], PROTOCOLS))
    number, end = port.get("port"), port.get("endPort")
    if number is None:
        if end is not None:
            causes.append(v.invalid(f"{path}.endPort", end, "may not be specified when `port` is not specified"))
    elif isinstance(number, str):
        if end is not None:
            causes.append(v.invalid(f"{path}.endPort", end, "may not be specified when `port` is non-numeric"))
        causes += [v.invalid(f"{path}.port", number, msg) for msg in is_valid_port_name(number)]
    else:
        causes += [v.invalid(f"{path}.port", number, msg) for msg in _port_number(number)]
        if end is not None:
            if isinstance(end, int) and isinstance(number, int) and end < number:
                causes.append(v.invalid(f"{path}.endPort", number, "must be greater than or equal to `port`"))
            causes += [v.invalid(f"{path}.endPort", end, msg) for msg in _port_number(end)]
    return causes


def validate_network_policy_spec(spec: Obj) -> list[Cause]:
    """ValidateNetworkPolicySpec."""
    causes = v.validate_label_selector(_dict(spec.get("podSelector")), "spec.podSelector")
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(_list(spec.get(direction))):
            rule, path = _dict(rule), f"spec.{direction}[{i}]"
            for j, port in enumerate(_list(rule.get("ports"))):
                causes += _validate_port(_dict(port), f"{path}.ports[{j}]")
            for j, peer in enumerate(_list(rule.get(peers))):
                causes += _validate_peer(_dict(peer), f"{path}.{peers}[{j}]")
    types = _list(spec.get("policyTypes"))
    if len(types) > len(POLICY_TYPES):
        return [*causes, v.invalid("spec.policyTypes", types, "may not specify more than two policyTypes",
                                   v.STRINGS)]
    causes += [v.not_supported(f"spec.policyTypes[{i}]", t, POLICY_TYPES)
               for i, t in enumerate(types) if t not in POLICY_TYPES]
    return causes


def default_network_policy(obj: Obj) -> None:
    """SetDefaults_NetworkPolicy and SetDefaults_NetworkPolicyPort: TCP ports; Ingress, and Egress when there
    are egress rules, as the policy types of a policy that names none."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("podSelector", {})  # a struct value: Go always writes it
    for direction in ("ingress", "egress"):
        for rule in _list(spec.get(direction)):
            for port in _list(_dict(rule).get("ports")):
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress", *(["Egress"] if spec.get("egress") else [])]


class NetworkPolicyStrategy(Strategy):
    has_spec_generation = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        default_network_policy(obj)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        default_network_policy(new)

    def validate(self, obj: Obj) -> list[Cause]:
        return super().validate(obj) + validate_network_policy_spec(_dict(obj.get("spec")))

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        return self.validate(new)


INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", True, "V1Ingress",
                     short_names=("ing",), subresources=("status",))
INGRESS_CLASSES = Resource("networking.k8s.io", "v1", "ingressclasses", "ingressclass", "IngressClass", False,
                           "V1IngressClass")
NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", True,
                            "V1NetworkPolicy", short_names=("netpol",))
