"""Pods to endpoints: a port of k8s.io/endpointslice/utils.go and pkg/api/v1/pod.FindPort.

Pure functions over pod and Service dicts, shared by the EndpointSlice and Endpoints
controllers (and table-tested as upstream's utils_test.go).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubelite.controllers.podutil import is_pod_ready

Obj = dict[str, Any]
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"
HEADLESS_LABEL = "service.kubernetes.io/headless"
ZONE_LABEL = "topology.kubernetes.io/zone"


def selects(service: Obj) -> Mapping[str, str] | None:
    """The Service's selector, or None when it has none (then its endpoints are the user's to write)."""
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return None
    return spec.get("selector") or None


def matches(selector: Mapping[str, str], pod: Obj) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def should_pod_be_in_endpoints(pod: Obj, include_terminating: bool) -> bool:
    """ShouldPodBeInEndpoints: not terminal, has an IP, and (unless asked) not terminating."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Failed", "Succeeded"):
        return False
    if not status.get("podIP"):
        return False
    return include_terminating or not pod["metadata"].get("deletionTimestamp")


def find_port(pod: Obj, service_port: Obj) -> int | None:
    """podutil.FindPort: a named targetPort is looked up in the pod's containers (name and protocol)."""
    target = service_port.get("targetPort")
    if isinstance(target, int) and not isinstance(target, bool):
        return target
    if not target:
        return service_port.get("port")
    protocol = service_port.get("protocol", "TCP")
    spec = pod.get("spec") or {}
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for port in container.get("ports") or []:
            if port.get("name") == target and port.get("protocol", "TCP") == protocol:
                number = port.get("containerPort")
                return number if isinstance(number, int) else None
    return None


def endpoint_ports(service: Obj, pod: Obj) -> list[Obj]:
    """getEndpointPorts: the Service's ports resolved for this pod; a port the pod lacks is left out."""
    out: list[Obj] = []
    for port in (service.get("spec") or {}).get("ports") or []:
        number = find_port(pod, port)
        if number is None:
            continue
        ep: Obj = {"name": port.get("name", ""), "port": number, "protocol": port.get("protocol", "TCP")}
        if port.get("appProtocol"):
            ep["appProtocol"] = port["appProtocol"]
        out.append(ep)
    return out


def port_key(ports: list[Obj]) -> tuple[tuple[str, int, str, str], ...]:
    """endpointutil.NewPortMapKey: slices group pods whose resolved ports are equal."""
    return tuple(sorted((p.get("name") or "", p.get("port") or 0, p.get("protocol", "TCP"), p.get("appProtocol", ""))
                        for p in ports))


def pod_to_endpoint(pod: Obj, node: Obj | None, service: Obj) -> Obj:
    """podToEndpoint: conditions ready/serving/terminating as upstream.

    serving is the pod's Ready condition (which the agent computes with readiness gates);
    ready additionally requires not terminating, unless publishNotReadyAddresses.
    """
    serving = is_pod_ready(pod)
    terminating = bool(pod["metadata"].get("deletionTimestamp"))
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    ready = publish or (serving and not terminating)
    meta, spec = pod["metadata"], pod.get("spec") or {}
    ep: Obj = {"addresses": [pod["status"]["podIP"]],
               "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
               "targetRef": {"kind": "Pod", "namespace": meta.get("namespace", ""), "name": meta["name"],
                             "uid": meta.get("uid", "")}}
    if spec.get("nodeName"):
        ep["nodeName"] = spec["nodeName"]
        zone = ((node or {}).get("metadata", {}).get("labels") or {}).get(ZONE_LABEL)
        if zone:
            ep["zone"] = zone
    if spec.get("hostname") and spec.get("subdomain") == service["metadata"]["name"]:
        ep["hostname"] = spec["hostname"]
    return ep


def slice_labels(service: Obj) -> dict[str, str]:
    """setEndpointSliceLabels: the Service's labels except the reserved ones, which the controller sets."""
    labels = {k: v for k, v in (service["metadata"].get("labels") or {}).items()
              if k not in (SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL)}
    labels[SERVICE_NAME_LABEL] = service["metadata"]["name"]
    labels[MANAGED_BY_LABEL] = CONTROLLER_NAME
    if (service.get("spec") or {}).get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    return labels


def endpoint_key(ep: Obj) -> tuple[tuple[str, ...], str, str, str]:
    """endpointHash's fields: addresses, hostname and the target pod. Pods here share the node's IP, so the
    address alone would fold every pod of a node into one endpoint."""
    ref = ep.get("targetRef") or {}
    return tuple(ep.get("addresses") or ()), ep.get("hostname", ""), ref.get("namespace", ""), ref.get("name", "")
