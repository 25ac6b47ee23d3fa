"""core/v1 Services, discovery.k8s.io/v1 EndpointSlices and core/v1 Endpoints.

Services follow pkg/registry/core/service and pkg/apis/core/validation (ValidateService):
defaults (type ClusterIP, protocol TCP, targetPort = port, sessionAffinity None, traffic
policies), ClusterIP allocation from the service CIDR (or "None": headless), NodePorts for
NodePort and LoadBalancer Services (LoadBalancer is accepted; with no cloud its ingress stays
pending), ExternalName, an immutable ClusterIP, and the status subresource. EndpointSlices
and Endpoints are written by the controllers (kubelite.controllers.endpointslice) and
checked for shape only, as upstream's registry does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelite.api import errors
from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.api.selectors import COMMON_FIELDS, path_getter
from kubelite.apiserver.allocators import (
    DEFAULT_SERVICE_CIDR,
    AllocationError,
    ClusterIPAllocator,
    NodePortAllocator,
)
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy
from kubelite.clock import Clock, RealClock

SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
_SERVICE_FIELDS = {**COMMON_FIELDS, "spec.clusterIP": path_getter("spec", "clusterIP"),
                   "spec.type": path_getter("spec", "type")}  # upstream's ServiceToSelectableFields
PROTOCOLS = ["SCTP", "TCP", "UDP"]
ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]
MAX_SLICE_ENDPOINTS = 1000  # validation's limit; the controller writes at most 100 per slice
MAX_SLICE_PORTS = 100

# core.DefaultClientIPServiceAffinitySeconds (3 hours) and MaxClientIPServiceAffinitySeconds (a day)
DEFAULT_CLIENT_IP_AFFINITY_SECONDS = 10800
MAX_CLIENT_IP_AFFINITY_SECONDS = 86400


def is_valid_port_name(name: str) -> list[str]:
    """IsValidPortName (IANA_SVC_NAME): what a named targetPort or container port may be."""
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 characters")
    if not all(c.isdigit() or "a" <= c <= "z" or c == "-" for c in name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if not any("a" <= c <= "z" for c in name):
        errs.append("must contain at least one letter (a-z)")
    if name.startswith("-") or name.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _port_number(path: str, value: Any) -> list[Cause]:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
        return []
    return [v.invalid(path, value, "must be between 1 and 65535, inclusive")]


def _is_headless(spec: Obj) -> bool:
    return spec.get("clusterIP") == "None"


def _node_ports_wanted(spec: Obj) -> bool:
    if spec.get("type") == "NodePort":
        return True
    return spec.get("type") == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True) is not False


class ServiceStrategy(Strategy):
    has_status = True
    name_validator = staticmethod(v.is_dns1035_label)  # ValidateServiceName

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource)
        self.configure(RealClock(), DEFAULT_SERVICE_CIDR)

    def configure(self, clock: Clock, service_cidr: str) -> None:
        """Set the ClusterIP range (`--service-cluster-ip-range`) and the clock reservations expire on."""
        self._lookup: Lookup | None = None
        self.cluster_ips = ClusterIPAllocator(service_cidr, self._ips_in_use, clock)
        self.node_ports = NodePortAllocator(self._ports_in_use, clock)

    def _services(self) -> Iterator[Obj]:
        yield from self._lookup.list("services") if self._lookup is not None else []

    def _ips_in_use(self) -> Iterator[str]:
        for svc in self._services():
            yield from (svc.get("spec") or {}).get("clusterIPs") or []

    def _ports_in_use(self) -> Iterator[int]:
        for svc in self._services():
            for port in (svc.get("spec") or {}).get("ports") or []:
                if isinstance(port.get("nodePort"), int):
                    yield port["nodePort"]

    # --- create ----------------------------------------------------------------------------------

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        spec = obj.setdefault("spec", {})
        _set_defaults(spec)
        obj["status"] = {"loadBalancer": {}}

    def admit(self, obj: Obj, lookup: Lookup) -> list[str]:
        """Allocation (upstream's BeginCreate): runs once the object is defaulted; bad values are 422s."""
        self._lookup = lookup
        if not self.validate(obj):  # allocate only for an object that will be stored
            self._allocate(obj["metadata"]["name"], obj["spec"], None)
        return []

    # --- update ----------------------------------------------------------------------------------

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
        _drop_type_dependent_fields(spec, old_spec)
        _set_defaults(spec)
        _patch_allocated_values(spec, old_spec)

    def admit_update(self, new: Obj, old: Obj, lookup: Lookup) -> list[str]:
        self._lookup = lookup
        if not self.validate_update(new, old):
            self._allocate(new["metadata"]["name"], new["spec"], old.get("spec") or {})
        return []

    def _allocate(self, name: str, spec: Obj, old: Obj | None) -> None:
        """Allocate what `spec` lacks (all or nothing: a refusal releases this call's reservations)."""
        causes: list[Cause] = []
        taken_ips: list[str] = []
        taken_ports: list[int] = []
        try:
            if spec.get("type") == "ExternalName":
                spec.pop("clusterIP", None)
                spec.pop("clusterIPs", None)
            elif old is None or old.get("type") == "ExternalName":
                causes += self._allocate_cluster_ip(spec, taken_ips)
            if _node_ports_wanted(spec):
                kept = {p.get("nodePort") for p in (old or {}).get("ports") or []}
                for i, port in enumerate(spec.get("ports") or []):
                    causes += self._allocate_node_port(port, i, kept, taken_ports)
            else:
                for port in spec.get("ports") or []:
                    port.pop("nodePort", None)
            if causes:
                raise errors.invalid("Service", name, causes)
        except errors.ApiError:
            for ip in taken_ips:
                self.cluster_ips.release(ip)
            for p in taken_ports:
                self.node_ports.release(p)
            raise

    def _allocate_cluster_ip(self, spec: Obj, taken: list[str]) -> list[Cause]:
        wanted = spec.get("clusterIP") or ((spec.get("clusterIPs") or [""])[0])
        if wanted == "None":
            spec["clusterIP"], spec["clusterIPs"] = "None", ["None"]
            return []
        if not wanted:
            try:
                ip = self.cluster_ips.allocate_next()
            except AllocationError as exc:  # upstream: an internal error, not the client's
                raise errors.internal(f"failed to allocate a serviceIP: {exc}") from None
        else:
            try:
                ip = self.cluster_ips.allocate(wanted)
            except AllocationError as exc:
                return [v.invalid("spec.clusterIPs", [wanted], f"failed to allocate IP {wanted}: {exc}", v.STRINGS)]
        taken.append(ip)
        spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
        return []

    def _allocate_node_port(self, port: Obj, i: int, kept: set[Any], taken: list[int]) -> list[Cause]:
        wanted = port.get("nodePort")
        if wanted and wanted in kept:
            return []  # kept from the stored object
        try:
            port["nodePort"] = self.node_ports.allocate(wanted) if wanted else self.node_ports.allocate_next()
        except AllocationError as exc:
            return [v.invalid(f"spec.ports[{i}].nodePort", wanted, str(exc))]
        taken.append(port["nodePort"])
        return []

    # --- validation ------------------------------------------------------------------------------

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        return causes + validate_service_spec(obj.get("spec") or {})

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        crossing = "ExternalName" in (spec.get("type"), old_spec.get("type"))
        old_ips = old_spec.get("clusterIPs") or []
        if not crossing and old_ips and (spec.get("clusterIPs") or []) != old_ips:
            causes.append(v.invalid("spec.clusterIPs[0]", spec.get("clusterIPs") or [], "may not change once set",
                                    v.STRINGS))
        return causes


def _set_defaults(spec: Obj) -> None:
    """SetDefaults_Service and the registry's defaulting of the ClusterIP family fields."""
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    client_ip = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {})
    if spec["sessionAffinity"] == "ClientIP" and client_ip.get("timeoutSeconds") is None:
        spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": DEFAULT_CLIENT_IP_AFFINITY_SECONDS}}
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    if spec["type"] == "ExternalName":
        return
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if spec["type"] == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    elif spec.get("clusterIPs") and not spec.get("clusterIP"):
        spec["clusterIP"] = spec["clusterIPs"][0]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")


def _drop_type_dependent_fields(spec: Obj, old: Obj) -> None:
    """dropTypeDependentFields: a type change drops the old type's allocations the client sent back unchanged."""
    if _node_ports_wanted(old) and not _node_ports_wanted(spec):
        old_ports = [p.get("nodePort") for p in old.get("ports") or []]
        if [p.get("nodePort") for p in spec.get("ports") or []] == old_ports:
            for port in spec.get("ports") or []:
                port.pop("nodePort", None)
    if spec.get("type") == "ExternalName" and old.get("type") != "ExternalName" and \
            spec.get("clusterIPs", spec.get("clusterIP") and [spec["clusterIP"]]) == old.get("clusterIPs"):
        for f in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy"):
            spec.pop(f, None)


def _patch_allocated_values(spec: Obj, old: Obj) -> None:
    """patchAllocatedValues: an update that leaves out the ClusterIP or NodePorts keeps the stored ones."""
    if spec.get("type") != "ExternalName" and old.get("type") != "ExternalName" and not spec.get("clusterIP"):
        for f in ("clusterIP", "clusterIPs"):
            if f in old:
                spec[f] = old[f]
    if _node_ports_wanted(spec) and _node_ports_wanted(old):
        by_port = {(p.get("port"), p.get("protocol")): p.get("nodePort") for p in old.get("ports") or []}
        for port in spec.get("ports") or []:
            if not port.get("nodePort") and by_port.get((port.get("port"), port.get("protocol"))):
                port["nodePort"] = by_port[(port.get("port"), port.get("protocol"))]


def validate_service_spec(spec: Obj) -> list[Cause]:
    """ValidateService's spec rules, with upstream's paths and messages."""
    causes: list[Cause] = []
    kind = spec.get("type", "ClusterIP")
    if kind not in SERVICE_TYPES:
        return [v.not_supported("spec.type", kind, SERVICE_TYPES)]
    ports = spec.get("ports") or []
    if not ports and not _is_headless(spec) and kind != "ExternalName":
        causes.append(v.required("spec.ports"))
    if kind == "ExternalName":
        name = spec.get("externalName") or ""
        if not name:
            causes.append(v.required("spec.externalName"))
        else:
            causes += [v.invalid("spec.externalName", name, e) for e in v.is_dns1123_subdomain(name.rstrip("."))]
        if spec.get("clusterIPs") or spec.get("clusterIP"):
            causes.append(v.forbidden("spec.clusterIPs", "may not be set for ExternalName services"))
    elif _is_headless(spec) and kind in ("NodePort", "LoadBalancer"):
        causes.append(v.invalid("spec.clusterIPs[0]", "None", f"may not be set to 'None' for {kind} services"))
    causes += _validate_ports(ports, kind, _is_headless(spec))
    causes += v.validate_labels(spec.get("selector"), "spec.selector")
    causes += _validate_session_affinity(spec)
    for f in ("internalTrafficPolicy", "externalTrafficPolicy"):
        if spec.get(f) is not None and spec[f] not in ("Cluster", "Local"):
            causes.append(v.not_supported(f"spec.{f}", spec[f], ["Cluster", "Local"]))
    return causes


def _validate_session_affinity(spec: Obj) -> list[Cause]:
    """ValidateService's session affinity: ClientIP needs a timeout in (0, 86400] (validateClientIPAffinityConfig,
    validateAffinityTimeout; the defaults give 10800), None takes no config."""
    affinity = spec.get("sessionAffinity", "None")
    path = "spec.sessionAffinityConfig"
    if affinity not in ("ClientIP", "None"):
        return [v.not_supported("spec.sessionAffinity", affinity, ["ClientIP", "None"])]
    config = spec.get("sessionAffinityConfig")
    if affinity == "None":
        return [] if config is None else [v.forbidden(path, "must not be set when session affinity is None")]
    when = "when session affinity type is ClientIP"
    if config is None:
        return [v.required(path, when)]
    if config.get("clientIP") is None:
        return [v.required(f"{path}.clientIP", when)]
    timeout = config["clientIP"].get("timeoutSeconds")
    if timeout is None:
        return [v.required(f"{path}.clientIP.timeoutSeconds", when)]
    if not 0 < timeout <= MAX_CLIENT_IP_AFFINITY_SECONDS:
        return [v.invalid(f"{path}.clientIP.timeoutSeconds", timeout,
                          f"must be greater than 0 and less than {MAX_CLIENT_IP_AFFINITY_SECONDS}")]
    return []


def _validate_ports(ports: list[Obj], kind: str, headless: bool) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    seen: set[tuple[Any, Any]] = set()
    node_ports: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        path = f"spec.ports[{i}]"
        name = port.get("name") or ""
        if not name and len(ports) > 1:
            causes.append(v.required(f"{path}.name"))
        elif name:
            causes += [v.invalid(f"{path}.name", name, e) for e in v.is_dns1123_label(name)]
            if name in names:
                causes.append(v.duplicate(f"{path}.name", name))
            names.add(name)
        causes += _port_number(f"{path}.port", port.get("port"))
        protocol = port.get("protocol", "TCP")
        if protocol not in PROTOCOLS:
            causes.append(v.not_supported(f"{path}.protocol", protocol, PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, str):
            causes += [v.invalid(f"{path}.targetPort", target, e) for e in is_valid_port_name(target)]
        elif target is not None:
            causes += _port_number(f"{path}.targetPort", target)
        if (port.get("port"), protocol) in seen:
            causes.append(v.duplicate(path, f"{port.get('port')}/{protocol}"))
        seen.add((port.get("port"), protocol))
        node_port = port.get("nodePort")
        if node_port:
            if kind in ("ClusterIP", "ExternalName"):
                causes.append(v.forbidden(f"{path}.nodePort", f"may not be used when `type` is '{kind}'"))
            else:
                causes += _port_number(f"{path}.nodePort", node_port)
                if (node_port, protocol) in node_ports:
                    causes.append(v.duplicate(f"{path}.nodePort", node_port))
                node_ports.add((node_port, protocol))
    return causes


class EndpointSliceStrategy(Strategy):
    def validate(self, obj: Obj) -> list[Cause]:
        """ValidateEndpointSlice: address type, endpoint and port counts, addresses and port names."""
        causes = super().validate(obj)
        kind = obj.get("addressType")
        if kind not in ADDRESS_TYPES:
            causes.append(v.not_supported("addressType", kind, ADDRESS_TYPES) if kind else v.required("addressType"))
        endpoints = obj.get("endpoints") or []
        if len(endpoints) > MAX_SLICE_ENDPOINTS:
            causes.append(Cause("FieldValueTooMany", f"Too many: {len(endpoints)}: must have at most "
                                                     f"{MAX_SLICE_ENDPOINTS} items", "endpoints"))
        for i, ep in enumerate(endpoints):
            addresses = ep.get("addresses") or []
            if not 1 <= len(addresses) <= 100:
                causes.append(v.required(f"endpoints[{i}].addresses", "must contain at least 1 address")
                              if not addresses else v.invalid(f"endpoints[{i}].addresses", len(addresses),
                                                              "must contain at most 100 addresses"))
        ports = obj.get("ports") or []
        if len(ports) > MAX_SLICE_PORTS:
            causes.append(Cause("FieldValueTooMany", f"Too many: {len(ports)}: must have at most {MAX_SLICE_PORTS} "
                                                     "items", "ports"))
        for i, port in enumerate(ports):
            if port.get("name"):
                causes += [v.invalid(f"ports[{i}].name", port["name"], e) for e in v.is_dns1123_label(port["name"])]
            if port.get("protocol", "TCP") not in PROTOCOLS:
                causes.append(v.not_supported(f"ports[{i}].protocol", port.get("protocol"), PROTOCOLS))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        if new.get("addressType") != old.get("addressType"):
            causes.append(v.immutable("addressType"))
        return causes


class EndpointsStrategy(Strategy):
    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        for i, subset in enumerate(obj.get("subsets") or []):
            for j, port in enumerate(subset.get("ports") or []):
                causes += _port_number(f"subsets[{i}].ports[{j}].port", port.get("port"))
        return causes


SERVICES = Resource("", "v1", "services", "service", "Service", True, "V1Service", short_names=("svc",),
                    categories=("all",), subresources=("status",), fields=_SERVICE_FIELDS)
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", True,
                           "V1EndpointSlice")
ENDPOINTS = Resource("", "v1", "endpoints", "endpoints", "Endpoints", True, "V1Endpoints", short_names=("ep",))


def configure_services(strategies: Mapping[Resource, Strategy], clock: Clock, service_cidr: str) -> None:
    """Give the Service strategy its ClusterIP range and clock (the API server's options)."""
    strategy = strategies[SERVICES]
    assert isinstance(strategy, ServiceStrategy)
    strategy.configure(clock, service_cidr)
