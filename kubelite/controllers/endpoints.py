"""The Endpoints controller: core/v1 Endpoints for every Service with a selector, as pkg/controller/endpoint.

Upstream still serves and fills Endpoints for clients that read them. Each selected pod with an
IP is an address (ready, or in notReadyAddresses; terminating pods only with
publishNotReadyAddresses), each Service port resolved per pod, and the subsets repacked by port
set (RepackSubsets). The Endpoints of a deleted Service are deleted. Not done: the 1000-address
truncation annotation and the last-change-trigger-time annotation.
"""

from __future__ import annotations

from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.informer import Handlers, Key
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers import endpointslice_utils as u
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.podutil import is_pod_ready
from kubelite.controllers.service_pods import ServicePodsController

Obj = dict[str, Any]


def _address(pod: Obj, service: Obj) -> Obj:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    addr: Obj = {"ip": pod["status"]["podIP"],
                 "targetRef": {"kind": "Pod", "namespace": meta.get("namespace", ""), "name": meta["name"],
                               "uid": meta.get("uid", "")}}
    if spec.get("nodeName"):
        addr["nodeName"] = spec["nodeName"]
    if spec.get("hostname") and spec.get("subdomain") == service["metadata"]["name"]:
        addr["hostname"] = spec["hostname"]
    return addr


def desired_subsets(service: Obj, pods: list[Obj]) -> list[Obj]:
    """syncService's subsets, repacked: one subset per port set, addresses sorted by IP then pod uid."""
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    has_ports = bool((service.get("spec") or {}).get("ports"))
    groups: dict[tuple[Any, ...], tuple[list[Obj], list[Obj], list[Obj]]] = {}
    for pod in pods:
        if not u.should_pod_be_in_endpoints(pod, include_terminating=publish):
            continue
        ports = u.endpoint_ports(service, pod)
        if has_ports and not ports:
            continue
        entry = groups.setdefault(u.port_key(ports), (ports, [], []))
        entry[1 if publish or is_pod_ready(pod) else 2].append(_address(pod, service))
    subsets = []
    for ports, ready, not_ready in groups.values():
        subset: Obj = {}
        for name, addrs in (("addresses", ready), ("notReadyAddresses", not_ready)):
            if addrs:
                subset[name] = sorted(addrs, key=lambda a: (a["ip"], a["targetRef"]["uid"]))
        if ports:
            subset["ports"] = sorted(ports, key=lambda p: (p["name"], p["port"], p["protocol"]))
        subsets.append(subset)
    return sorted(subsets, key=lambda s: str(s.get("ports")))


def endpoints_labels(service: Obj) -> dict[str, str]:
    labels = dict(service["metadata"].get("labels") or {})
    if (service.get("spec") or {}).get("clusterIP") == "None":
        labels[u.HEADLESS_LABEL] = ""
    return labels


class EndpointsController(ServicePodsController):
    name = "endpoint"

    def __init__(self, client: Client, clock: Clock) -> None:
        super().__init__(client, clock)
        self.endpoints = shared_informer(client, clock, "/api/v1/endpoints",
                                         Handlers(on_delete=lambda ep: self.runner.enqueue(
                                             (ep["metadata"]["namespace"], ep["metadata"]["name"]))))
        self.informers.append(self.endpoints)

    async def reconcile(self, key: Key) -> None:
        ns, name = key
        svc = self.services.get(ns, name)
        current = self.endpoints.get(ns, name)
        path = resource_path("endpoints", ns, name)
        if svc is None:
            if current is not None:
                try:
                    await self.client.delete(path, {"preconditions": {"uid": current["metadata"]["uid"]}})
                except ApiError as exc:
                    if exc.code != 404:
                        raise
            return
        if u.selects(svc) is None:
            return  # a Service without a selector: its Endpoints are the user's
        subsets = desired_subsets(svc, self.selected_pods(svc))
        labels = endpoints_labels(svc)
        if current is None:
            await self.client.create(resource_path("endpoints", ns), {
                "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "labels": labels},
                "subsets": subsets})
        elif (current.get("subsets") or []) != subsets or (current["metadata"].get("labels") or {}) != labels:
            body = {**current, "metadata": {**current["metadata"], "labels": labels}, "subsets": subsets}
            await self.client.request("PUT", path, body)
