"""Objects that exist from the first start: the four system namespaces, the two system PriorityClasses
and the `kubernetes` Service pointing at the API server.

(Namespace finalization is the namespace controller's, kubelite.controllers.namespace, as upstream.)
"""

from __future__ import annotations

import ipaddress

from kubelite.apiserver.registry.core import NAMESPACES
from kubelite.apiserver.registry.scheduling import PRIORITY_CLASSES, SYSTEM_PRIORITY_CLASSES
from kubelite.apiserver.registry.services import ENDPOINT_SLICES, ENDPOINTS, SERVICES, ServiceStrategy
from kubelite.apiserver.rest import Registry

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_DESCRIPTIONS = {
    "system-cluster-critical": "Used for system critical pods that must run in the cluster, but can be moved to "
                               "another node if necessary.",
    "system-node-critical": "Used for system critical pods that must not be moved from their current node.",
}


async def ensure_defaults(registry: Registry) -> None:
    for ns in SYSTEM_NAMESPACES:
        if registry.caches[NAMESPACES].get("", ns) is None:
            await registry.create(NAMESPACES, "", {"metadata": {"name": ns}})
    for name, value in SYSTEM_PRIORITY_CLASSES.items():
        if registry.caches[PRIORITY_CLASSES].get("", name) is None:
            await registry.create(PRIORITY_CLASSES, "", {"metadata": {"name": name}, "value": value,
                                                         "description": _DESCRIPTIONS[name]})


def _api_endpoint(server_address: str) -> tuple[str, int]:
    """Host and port kube-apiserver advertises; a name or wildcard falls back to loopback (pods share the host)."""
    host, _, port = server_address.rpartition(":")
    host = host.strip("[]")
    try:
        ip = ipaddress.IPv4Address(host)
    except ValueError:
        return "127.0.0.1", int(port)
    return ("127.0.0.1" if ip.is_unspecified else host), int(port)


async def ensure_kubernetes_service(registry: Registry, server_address: str) -> None:
    """The `default/kubernetes` Service (the range's first ClusterIP, port 443) and its endpoints.

    As the control plane's endpoint reconciler (pkg/controlplane/reconcilers) does at each start: the
    Service is created once; its EndpointSlice and Endpoints are rewritten when the address changed.
    """
    host, port = _api_endpoint(server_address)
    if registry.caches[SERVICES].get("default", "kubernetes") is None:
        strategy = registry.strategies[SERVICES]
        assert isinstance(strategy, ServiceStrategy)
        await registry.create(SERVICES, "default", {
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": strategy.cluster_ips.first, "sessionAffinity": "None",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}})
    slice_ = {"metadata": {"name": "kubernetes", "labels": {SERVICE_NAME_LABEL: "kubernetes"}},
              "addressType": "IPv4",
              "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
              "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
    endpoints = {"metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                 "subsets": [{"addresses": [{"ip": host}],
                              "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}
    for resource, body in ((ENDPOINT_SLICES, slice_), (ENDPOINTS, endpoints)):
        current = registry.caches[resource].get("default", "kubernetes")
        if current is None:
            await registry.create(resource, "default", body)
        elif {k: current.get(k) for k in body if k != "metadata"} != {k: v for k, v in body.items() if k != "metadata"}:
            await registry.update(resource, "default", "kubernetes", {**current, **{k: v for k, v in body.items()
                                                                                   if k != "metadata"}})
