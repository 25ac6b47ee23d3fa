"""Pods, Services and slices as upstream's endpointslice tests build them (newPod, newServiceAndEndpointMeta)."""

from __future__ import annotations

from typing import Any

from kubelite.controllers import endpointslice_utils as u
from kubelite.controllers.ownership import controller_ref

Obj = dict[str, Any]
NS = "test"


def new_pod(i: int, ready: bool = True, terminating: bool = False, ns: str = NS, ip: str | None = None,
            ports: list[Obj] | None = None) -> Obj:
    meta: Obj = {"name": f"pod{i}", "namespace": ns, "uid": f"uid-{i}", "labels": {"foo": "bar"}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta,
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "ports": ports or []}]},
            "status": {"phase": "Running", "podIP": ip or f"1.2.{3 + (4 + i) // 256}.{(4 + i) % 256}",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def new_service(name: str = "foo", ns: str = NS, **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "uid": f"svc-{name}"},
            "spec": {"selector": {"foo": "bar"}, "clusterIP": "1.1.1.1",
                     "ports": [{"name": "foo", "port": 80, "targetPort": 80, "protocol": "TCP"}], **spec}}


def existing_slice(n: int, service: Obj, pods: list[Obj]) -> Obj:
    """newEmptyEndpointSlice plus endpoints: a slice as the API returned it (name, uid, resourceVersion)."""
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service['metadata']['name']}-{n}", "namespace": NS, "uid": f"slice-{n}",
                         "resourceVersion": str(n + 1), "labels": u.slice_labels(service),
                         "ownerReferences": [controller_ref(service, "v1", "Service")]},
            "addressType": "IPv4", "endpoints": [u.pod_to_endpoint(p, None, service) for p in pods],
            "ports": u.endpoint_ports(service, pods[0]) if pods else []}
