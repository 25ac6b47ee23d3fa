"""Objects that exist from the first start, and namespace finalization.

The four system namespaces and the two system PriorityClasses are created if missing.
Namespace finalization runs here for now (upstream's namespace controller lives in
kube-controller-manager; it moves to `controllers/` when that package lands): a
terminating namespace has its content deleted through the ordinary delete path (pods
gracefully), then its `kubernetes` finalizer is removed, which removes it.
"""

from __future__ import annotations

import logging

from kubelite.api.errors import ApiError
from kubelite.apiserver.registry.base import Obj
from kubelite.apiserver.registry.core import NAMESPACES
from kubelite.apiserver.registry.scheduling import PRIORITY_CLASSES, SYSTEM_PRIORITY_CLASSES
from kubelite.apiserver.rest import Registry

log = logging.getLogger("kubelite.apiserver")

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
FINALIZE_INTERVAL = 1.0
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


async def namespace_finalizer(registry: Registry) -> None:
    while True:
        await registry.clock.sleep(FINALIZE_INTERVAL)
        for ns in registry.caches[NAMESPACES].list():
            if ns["metadata"].get("deletionTimestamp"):
                try:
                    await _finalize(registry, ns["metadata"]["name"])
                except ApiError as exc:  # raced with another writer; next round tries again
                    log.debug("finalizing namespace %s: %s", ns["metadata"]["name"], exc)


async def _finalize(registry: Registry, namespace: str) -> None:
    remaining = 0
    for resource, cache in registry.caches.by_resource.items():
        if not resource.namespaced:
            continue
        for obj in cache.list(namespace):
            remaining += 1
            if not obj["metadata"].get("deletionTimestamp"):
                await registry.delete(resource, namespace, obj["metadata"]["name"], {})
    if remaining:
        return

    def drop_finalizer(ns: Obj) -> Obj:
        ns.setdefault("spec", {})["finalizers"] = []
        return ns

    await registry.guaranteed_update(NAMESPACES, "", namespace, drop_finalizer)
