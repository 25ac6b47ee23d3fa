"""A scenario's workloads and faults as API objects and API calls (what a user or kubectl would send)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.sim.scenario import Arrival, Workload

Obj = dict[str, Any]
_PATHS = {"Pod": "/api/v1/namespaces/{ns}/pods", "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
          "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets", "Job": "/apis/batch/v1/namespaces/{ns}/jobs"}
_API = {"Pod": "v1", "Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}
DRAIN_RETRY = 5.0  # kubectl drain retries a refused (429) eviction every 5 s


def collection(kind: str, namespace: str) -> str:
    return _PATHS[kind].format(ns=namespace)


def _pod_spec(w: Workload, arrival: Arrival) -> Obj:
    spec = copy.deepcopy(w.spec)
    resources = spec.pop("resources", None)
    run = arrival.overrides.get("run")
    if "cpu" in arrival.overrides or "memory" in arrival.overrides:
        resources = {"requests": {k: arrival.overrides[k] for k in ("cpu", "memory") if k in arrival.overrides}}
    command = w.behaviour.command(float(run) if run is not None else None)
    containers = spec.get("containers") or [{"name": "main"}]
    for c in containers:
        c.setdefault("image", "hollow")
        c.setdefault("command", command)
        if resources and "resources" not in c:
            c["resources"] = resources
    spec["containers"] = containers
    for c in spec.get("initContainers") or []:  # an init container finishes at once; a sidecar runs on
        c.setdefault("image", "hollow")
        c.setdefault("command", ["hollow"] if c.get("restartPolicy") == "Always" else ["hollow", "--run", "0"])
    if w.kind == "Job":
        spec.setdefault("restartPolicy", "Never")
    return spec


def manifest(w: Workload, index: int, arrival: Arrival) -> Obj:
    """The object for one arrival of a workload (named `name`, or `name-N` when it arrives several times)."""
    name = w.name if len(w.arrivals) == 1 else f"{w.name}-{index}"
    labels = dict(w.labels)
    meta: Obj = {"name": name, "namespace": w.namespace, "labels": labels}
    spec = _pod_spec(w, arrival)
    if w.kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if len(w.arrivals) > 1:  # each instance selects its own pods
        labels["sim-instance"] = name
    template = {"metadata": {"labels": labels}, "spec": spec}
    body: Obj = {"template": template}
    if w.kind == "Job":
        body.update({"completions": w.replicas, "parallelism": w.replicas, **w.extra})
    else:
        body.update({"replicas": w.replicas, "selector": {"matchLabels": labels}})
        if w.kind == "StatefulSet":
            body.update({"serviceName": name, "podManagementPolicy": "Parallel"})
    return {"apiVersion": _API[w.kind], "kind": w.kind, "metadata": meta, "spec": body}


async def apply(client: Client, path: str, obj: Obj) -> None:
    """Create, or replace what is there (kubectl apply, roughly)."""
    try:
        await client.create(path, obj)
    except ApiError as exc:
        if exc.code != 409:
            raise
        current = await client.get(f"{path}/{obj['metadata']['name']}")
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
        await client.request("PUT", f"{path}/{obj['metadata']['name']}", obj)


def pdb(spec: Obj) -> tuple[str, Obj]:
    """A PodDisruptionBudget from a fault's `pdb:` mapping (name, namespace, matchLabels, minAvailable|…)."""
    ns = str(spec.get("namespace", "default"))
    body: Obj = {"selector": {"matchLabels": dict(spec.get("matchLabels") or {})}}
    for key in ("minAvailable", "maxUnavailable"):
        if key in spec:
            body[key] = spec[key]
    obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": str(spec["name"]), "namespace": ns}, "spec": body}
    return f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", obj


async def drain(client: Client, clock: Clock, node: str, pods: list[Obj], evicted: Callable[[Obj], None]) -> None:
    """kubectl drain: cordon, then evict every pod on the node, retrying the ones a PDB refuses."""
    await client.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})
    waiting = sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
    while waiting:
        refused = []
        for pod in waiting:
            meta = pod["metadata"]
            try:
                await client.create(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction",
                                    {"apiVersion": "policy/v1", "kind": "Eviction",
                                     "metadata": {"name": meta["name"], "namespace": meta["namespace"]}})
                evicted(pod)
            except ApiError as exc:
                if exc.code == 429:
                    refused.append(pod)
                elif exc.code != 404:
                    raise
        waiting = refused
        if waiting:
            await clock.sleep(DRAIN_RETRY)
