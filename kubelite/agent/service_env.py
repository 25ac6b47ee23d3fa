"""Service links: the environment variables kubelet gives every container for Services.

A port of pkg/kubelet/kubelet_pods.go getServiceEnvVarMap and pkg/kubelet/envvars: for each
Service with a ClusterIP in the pod's namespace (when `enableServiceLinks`, the default) and
always for `default/kubernetes`, `FOO_SERVICE_HOST`, `FOO_SERVICE_PORT`, `FOO_SERVICE_PORT_<NAME>`
per named port, and the Docker-link variables `FOO_PORT`, `FOO_PORT_80_TCP`, `…_PROTO`, `…_PORT`,
`…_ADDR`. The container's own `env` comes after them, so it overrides them and may refer to them.

The agent's Services reach the env builder (container.environment) inside its base environment,
a `NodeEnv`: the node's base variables plus a view of the agent's Service informer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Obj = dict[str, Any]
MASTER_NAMESPACE = "default"
MASTER_SERVICES = frozenset({"kubernetes"})


class NodeEnv(dict[str, str]):
    """The node's base environment, carrying where Services come from (the agent's informer, which has
    listed them before any pod starts, as kubelet waits for its service informer)."""

    def __init__(self, base: Mapping[str, str], services: Callable[[], Iterable[Obj]]) -> None:
        super().__init__(base)
        self.services = services


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def _ip_set(svc: Obj) -> bool:
    ip = (svc.get("spec") or {}).get("clusterIP")
    return bool(ip) and ip != "None"


def visible_services(pod: Obj, services: Iterable[Obj]) -> list[Obj]:
    """getServiceEnvVarMap's choice: the master Services always, the namespace's with enableServiceLinks."""
    ns = pod["metadata"].get("namespace", "")
    links = (pod.get("spec") or {}).get("enableServiceLinks", True) is not False
    chosen: dict[str, Obj] = {}
    for svc in services:
        if not _ip_set(svc):
            continue
        meta = svc["metadata"]
        if meta.get("namespace") == MASTER_NAMESPACE and meta["name"] in MASTER_SERVICES:
            chosen.setdefault(meta["name"], svc)
        elif meta.get("namespace") == ns and links:
            chosen[meta["name"]] = svc
    return [chosen[name] for name in sorted(chosen)]


def service_variables(svc: Obj) -> dict[str, str]:
    """envvars.FromServices for one Service."""
    spec = svc.get("spec") or {}
    ports = spec.get("ports") or []
    if not ports:
        return {}
    prefix, ip = _env_name(svc["metadata"]["name"]), spec["clusterIP"]
    out = {f"{prefix}_SERVICE_HOST": ip, f"{prefix}_SERVICE_PORT": str(ports[0].get("port"))}
    for p in ports:
        if p.get("name"):
            out[f"{prefix}_SERVICE_PORT_{_env_name(p['name'])}"] = str(p.get("port"))
    for i, p in enumerate(ports):
        protocol = (p.get("protocol") or "TCP").lower()
        url = f"{protocol}://{ip}:{p.get('port')}"
        if i == 0:
            out[f"{prefix}_PORT"] = url
        port_prefix = f"{prefix}_PORT_{p.get('port')}_{protocol.upper()}"
        out.update({port_prefix: url, f"{port_prefix}_PROTO": protocol, f"{port_prefix}_PORT": str(p.get("port")),
                    f"{port_prefix}_ADDR": ip})
    return out


def service_env(pod: Obj, services: Iterable[Obj]) -> dict[str, str]:
    out: dict[str, str] = {}
    for svc in visible_services(pod, services):
        out.update(service_variables(svc))
    return out


def with_service_links(pod: Obj, base: Mapping[str, str]) -> dict[str, str]:
    """`base` followed by the pod's service variables; a plain mapping (no Services known) adds none."""
    if not isinstance(base, NodeEnv):
        return dict(base)
    return {**base, **service_env(pod, base.services())}
