"""Objects that exist from the first start: the four system namespaces, the two system PriorityClasses
and the `kubernetes` Service (its endpoints: endpoint_reconciler.py).

(Namespace finalization is the namespace controller's, kubelite.controllers.namespace, as upstream.)
"""

from __future__ import annotations

from kubelite.apiserver.endpoint_reconciler import api_endpoint
from kubelite.apiserver.registry.core import NAMESPACES
from kubelite.apiserver.registry.scheduling import PRIORITY_CLASSES, SYSTEM_PRIORITY_CLASSES
from kubelite.apiserver.registry.services import SERVICES, ServiceStrategy
from kubelite.apiserver.rest import Registry

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


async def ensure_kubernetes_service(registry: Registry, server_address: str) -> None:
    """The `default/kubernetes` Service (the range's first ClusterIP, port 443), created once; its endpoints
    are every live server's (endpoint_reconciler.py)."""
    _, port = api_endpoint(server_address)
    if registry.caches[SERVICES].get("default", "kubernetes") is None:
        strategy = registry.strategies[SERVICES]
        assert isinstance(strategy, ServiceStrategy)
        await registry.create(SERVICES, "default", {
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": strategy.cluster_ips.first, "sessionAffinity": "None",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}})
