"""The `default/kubernetes` Service's endpoints: every live API server, as upstream's lease endpoint
reconciler (pkg/controlplane/reconcilers/lease.go, kube-apiserver's default `--endpoint-reconciler-type=lease`).

Each server keeps a record of itself with a time to live and, every interval, rewrites the Service's
Endpoints and EndpointSlice to the servers whose records are alive — so with several servers on one
store (HA) in-pod clients reach any of them, and a server that died drops out within the TTL. Upstream
keeps the records under `/masterleases/` with an etcd TTL; here they are the API server identity Leases
upstream writes beside them (kube-system/apiserver-<hash>, label `apiserver.kubernetes.io/identity`),
annotated with the server's endpoint, so they work on every store and `kubectl get leases -n
kube-system` shows them. A record is alive while renewTime + leaseDurationSeconds is not past, read on
this server's clock (upstream trusts etcd's; servers' clocks must agree within the TTL's slack).

Upstream assumes every server listens on one port; servers on one machine (tests, `kubelite up` beside
another) differ by port, so endpoints are grouped by port: Endpoints gets a subset per port and the
EndpointSlice `kubernetes` holds this server's port, another port's servers an EndpointSlice
`kubernetes-<port>`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from collections import defaultdict
from typing import Any

from kubelite.apiserver.registry.core import LEASES
from kubelite.apiserver.registry.services import ENDPOINT_SLICES, ENDPOINTS
from kubelite.apiserver.rest import Registry
from kubelite.clock import Clock, micro_time, parse_rfc3339

log = logging.getLogger("kubelite.apiserver.endpoints")

Obj = dict[str, Any]
NAMESPACE = "default"
NAME = "kubernetes"
LEASE_NAMESPACE = "kube-system"
IDENTITY_LABEL = "apiserver.kubernetes.io/identity"
ENDPOINT_ANNOTATION = "kubelite.io/endpoint"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
INTERVAL = 10.0  # upstream's EndpointInterval
TTL = 15  # upstream's --master-endpoint-reconcile-ttl, seconds


def api_endpoint(server_address: str) -> tuple[str, int]:
    """Host and port kube-apiserver advertises; a name or wildcard falls back to loopback (pods share the host)."""
    host, _, port = server_address.rpartition(":")
    host = host.strip("[]")
    try:
        ip = ipaddress.IPv4Address(host)
    except ValueError:
        return "127.0.0.1", int(port)
    return ("127.0.0.1" if ip.is_unspecified else host), int(port)


def lease_name(endpoint: tuple[str, int]) -> str:
    """A stable name per endpoint (upstream hashes the host name; servers here may share one host)."""
    return "apiserver-" + hashlib.sha256(f"{endpoint[0]}:{endpoint[1]}".encode()).hexdigest()[:16]


def live_endpoints(leases: list[Obj], now: float) -> set[tuple[str, int]]:
    """The endpoints of identity Leases not yet expired at `now`."""
    out: set[tuple[str, int]] = set()
    for lease in leases:
        meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
        endpoint = (meta.get("annotations") or {}).get(ENDPOINT_ANNOTATION)
        if not endpoint or (meta.get("labels") or {}).get(IDENTITY_LABEL) != "kube-apiserver":
            continue
        try:
            renewed = parse_rfc3339(spec["renewTime"])
            host, port = api_endpoint(endpoint)
        except (KeyError, TypeError, ValueError):
            continue
        if renewed + float(spec.get("leaseDurationSeconds") or TTL) >= now:
            out.add((host, port))
    return out


def endpoint_objects(endpoints: set[tuple[str, int]], own_port: int) -> tuple[Obj, dict[str, Obj]]:
    """The Endpoints (a subset per port) and the EndpointSlices by name for these endpoints."""
    by_port: dict[int, list[str]] = defaultdict(list)
    for host, port in sorted(endpoints):
        by_port[port].append(host)
    ports = sorted(by_port)
    endpoints_obj = {"metadata": {"name": NAME, "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                     "subsets": [{"addresses": [{"ip": h} for h in by_port[p]],
                                  "ports": [{"name": "https", "port": p, "protocol": "TCP"}]} for p in ports]}
    slices = {(NAME if p == own_port else f"{NAME}-{p}"): {
        "metadata": {"name": NAME if p == own_port else f"{NAME}-{p}", "labels": {SERVICE_NAME_LABEL: NAME}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [h], "conditions": {"ready": True}} for h in by_port[p]],
        "ports": [{"name": "https", "port": p, "protocol": "TCP"}]} for p in ports}
    return endpoints_obj, slices


def unconditional(obj: Obj) -> Obj:
    """`obj` without its resourceVersion: every server writes the same content, so the last write wins
    instead of conflicting (upstream's reconciler writes unconditionally too)."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


class EndpointReconciler:
    """This server's identity Lease and the reconcile of the Service's endpoints (Start/Stop of upstream's
    controller: renew and reconcile every interval; on stop, remove this server and reconcile once)."""

    def __init__(self, registry: Registry, clock: Clock, server_address: str) -> None:
        self.registry = registry
        self.clock = clock
        self.endpoint = api_endpoint(server_address)
        self.name = lease_name(self.endpoint)

    async def run(self) -> None:
        """After the first reconcile (at start), renew and reconcile every interval until cancelled; a failed
        round (the store away, a write that lost a race) is logged and retried next interval."""
        while True:
            await self.clock.sleep(INTERVAL)
            try:
                await self.reconcile()
            except Exception:
                log.exception("reconciling the kubernetes Service's endpoints failed")

    async def reconcile(self) -> None:
        await self._renew()
        await self._write(live_endpoints(self.registry.caches[LEASES].list(LEASE_NAMESPACE), self.clock.now())
                          | {self.endpoint})

    async def remove(self) -> None:
        """On a clean stop: delete this server's Lease and write the endpoints without it, so clients move now."""
        try:
            await self.registry.delete(LEASES, LEASE_NAMESPACE, self.name, {})
            await self._write(live_endpoints(self.registry.caches[LEASES].list(LEASE_NAMESPACE), self.clock.now())
                              - {self.endpoint})
        except Exception as exc:  # best effort: a store already away leaves the record to expire
            log.warning("removing this server from the kubernetes Service's endpoints: %s", exc)

    async def _renew(self) -> None:
        host, port = self.endpoint
        body: Obj = {"metadata": {"name": self.name, "labels": {IDENTITY_LABEL: "kube-apiserver"},
                                  "annotations": {ENDPOINT_ANNOTATION: f"{host}:{port}"}},
                     "spec": {"holderIdentity": self.name, "leaseDurationSeconds": TTL,
                              "renewTime": micro_time(self.clock.now())}}
        current = self.registry.caches[LEASES].get(LEASE_NAMESPACE, self.name)
        if current is None:
            await self.registry.create(LEASES, LEASE_NAMESPACE, body)
        else:
            await self.registry.update(LEASES, LEASE_NAMESPACE, self.name, unconditional(
                {**current, "metadata": {**current["metadata"], **body["metadata"]}, "spec": body["spec"]}))

    async def _write(self, endpoints: set[tuple[str, int]]) -> None:
        if not endpoints:  # the last server leaving keeps its endpoints: nothing else could serve them
            return
        endpoints_obj, slices = endpoint_objects(endpoints, self.endpoint[1])
        await self._put(ENDPOINTS, endpoints_obj)
        for body in slices.values():
            await self._put(ENDPOINT_SLICES, body)
        for stale in self.registry.caches[ENDPOINT_SLICES].list(NAMESPACE):
            meta = stale.get("metadata") or {}
            if (meta.get("labels") or {}).get(SERVICE_NAME_LABEL) == NAME and meta.get("name") not in slices:
                await self.registry.delete(ENDPOINT_SLICES, NAMESPACE, meta["name"], {})

    async def _put(self, resource: Any, body: Obj) -> None:
        """Create, or update when what it says changed (not metadata)."""
        name = body["metadata"]["name"]
        current = self.registry.caches[resource].get(NAMESPACE, name)
        if current is None:
            await self.registry.create(resource, NAMESPACE, body)
        elif any(current.get(k) != v for k, v in body.items() if k != "metadata"):
            await self.registry.update(resource, NAMESPACE, name, unconditional(
                {**current, **{k: v for k, v in body.items() if k != "metadata"}}))
