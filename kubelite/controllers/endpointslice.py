"""The EndpointSlice controller: a port of pkg/controller/endpointslice (reconciler.go).

For every Service with a selector, the pods it selects become endpoints (endpointslice_utils:
conditions ready/serving/terminating, named targetPorts resolved per pod) grouped into slices
by their resolved ports, at most `max_endpoints` (100) per slice. The reconciler changes as
few slices as it can, as upstream's: endpoints that are gone are removed from their slice,
new ones fill slices already being updated, then whole new slices, and a last partial batch
goes into the fullest unchanged slice it fits in. A Service without endpoints keeps one
placeholder slice. Slices carry the managed-by and service-name labels and a controller
reference to their Service (the garbage collector deletes them with it).

A slice tracker (upstream's endpointSliceTracker) remembers what this controller last wrote;
while the informer has not caught up with it the Service is retried shortly, so a lagging
cache never makes the controller write a duplicate slice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.informer import Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers import endpointslice_utils as u
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.ownership import controller_ref
from kubelite.controllers.service_pods import ServicePodsController

log = logging.getLogger("kubelite.controllers")

Obj = dict[str, Any]
MAX_ENDPOINTS_PER_SLICE = 100  # kube-controller-manager's --max-endpoints-per-slice default
GROUP_VERSION = "discovery.k8s.io/v1"
NodeLookup = Callable[[str], Obj | None]  # node name → Node (for the endpoint's zone)
MANAGED_SLICES_INDEX = "endpointslice-controller/service"  # shared cache: a name of its own
STALE_RETRY = 0.05  # seconds before a Service whose slices the informer has not caught up with is retried


@dataclass
class Plan:
    """The writes one reconcile makes."""

    create: list[Obj] = field(default_factory=list)
    update: list[Obj] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.create or self.update or self.delete)


def new_slice(service: Obj, ports: list[Obj], endpoints: list[Obj]) -> Obj:
    """newEndpointSlice: generateName from the Service, its labels, an owner reference to it."""
    meta = service["metadata"]
    return {"apiVersion": GROUP_VERSION, "kind": "EndpointSlice",
            "metadata": {"generateName": f"{meta['name']}-", "namespace": meta.get("namespace", ""),
                         "labels": u.slice_labels(service),
                         "ownerReferences": [controller_ref(service, "v1", "Service")]},
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports}


def desired_endpoints(service: Obj, pods: Iterable[Obj], node: NodeLookup = lambda name: None
                      ) -> dict[tuple[Any, ...], tuple[list[Obj], dict[Any, Obj]]]:
    """Port set → (its ports, endpoint key → endpoint) for the selected pods (terminating ones included)."""
    out: dict[tuple[Any, ...], tuple[list[Obj], dict[Any, Obj]]] = {}
    for pod in pods:
        if not u.should_pod_be_in_endpoints(pod, include_terminating=True):
            continue
        ports = u.endpoint_ports(service, pod)
        ep = u.pod_to_endpoint(pod, node((pod.get("spec") or {}).get("nodeName", "")), service)
        entry = out.setdefault(u.port_key(ports), (ports, {}))
        entry[1][u.endpoint_key(ep)] = ep
    return out


def reconcile_slices(service: Obj, pods: Iterable[Obj], existing: list[Obj], max_endpoints: int =
                     MAX_ENDPOINTS_PER_SLICE, node: NodeLookup = lambda name: None) -> Plan:
    """reconciler.reconcile for one address type: the creates, updates and deletes that make `existing`
    (this controller's slices of `service`) hold exactly the endpoints of `pods`."""
    plan = Plan()
    uid = service["metadata"].get("uid")
    plan.delete = [s for s in existing if not _owned_by(s, uid)]
    existing = [s for s in existing if _owned_by(s, uid)]
    desired = desired_endpoints(service, pods, node)
    by_ports: dict[tuple[Any, ...], list[Obj]] = {}
    for s in existing:
        by_ports.setdefault(u.port_key(s.get("ports") or []), []).append(s)
    labels = u.slice_labels(service)
    for key in list(desired) + [k for k in by_ports if k not in desired]:
        ports, want = desired.get(key, ([], {}))
        _reconcile_port_set(service, ports, want, by_ports.get(key, []), labels, max_endpoints, plan)
    _keep_placeholder(service, existing, plan)
    _recycle(uid, plan)
    return plan


def _recycle(uid: str | None, plan: Plan) -> None:
    """finalize: a slice to create replaces, as an update, an owned slice that would be deleted (fewer writes)."""
    keep = []
    for old in plan.delete:
        if plan.create and _owned_by(old, uid):
            new = plan.create.pop()
            meta = {k: v for k, v in new["metadata"].items() if k != "generateName"}
            meta.update({k: old["metadata"][k] for k in ("name", "uid", "resourceVersion") if k in old["metadata"]})
            plan.update.append({**new, "metadata": meta})
        else:
            keep.append(old)
    plan.delete = keep


def _reconcile_port_set(service: Obj, ports: list[Obj], want: dict[Any, Obj], slices: list[Obj],
                        labels: dict[str, str], max_endpoints: int, plan: Plan) -> None:
    """reconcileByPortMapping."""
    placed: set[Any] = set()
    to_update: list[Obj] = []
    unchanged: list[Obj] = []
    for s in slices:
        kept = []
        for ep in s.get("endpoints") or []:
            k = u.endpoint_key(ep)
            if k in want and k not in placed:
                kept.append(want[k])
                placed.add(k)
        if not kept:
            plan.delete.append(s)
            continue
        changed = kept != (s.get("endpoints") or []) or (s["metadata"].get("labels") or {}) != labels
        new = {**s, "metadata": {**s["metadata"], "labels": labels}, "endpoints": kept, "ports": ports}
        (to_update if changed else unchanged).append(new)
    remaining = [ep for k, ep in want.items() if k not in placed]
    # 1. fill the slices that are being written anyway, fullest first
    for s in sorted(to_update, key=lambda s: -len(s["endpoints"])):
        room = max_endpoints - len(s["endpoints"])
        if room > 0 and remaining:
            s["endpoints"] = s["endpoints"] + remaining[:room]
            remaining = remaining[room:]
    # 2. whole new slices
    while len(remaining) >= max_endpoints:
        plan.create.append(new_slice(service, ports, remaining[:max_endpoints]))
        remaining = remaining[max_endpoints:]
    # 3. the last partial batch: into the fullest unchanged slice it fits in, else a new slice
    if remaining:
        fits = [s for s in unchanged if len(s["endpoints"]) + len(remaining) <= max_endpoints]
        if fits:
            target = max(fits, key=lambda s: len(s["endpoints"]))
            unchanged.remove(target)
            target["endpoints"] = target["endpoints"] + remaining
            to_update.append(target)
        else:
            plan.create.append(new_slice(service, ports, remaining))
    plan.update.extend(to_update)


def _owned_by(es: Obj, uid: str | None) -> bool:
    return any(r.get("uid") == uid and r.get("kind") == "Service" for r in es["metadata"].get("ownerReferences") or [])


def _keep_placeholder(service: Obj, owned: list[Obj], plan: Plan) -> None:
    """A Service with no endpoints keeps exactly one empty placeholder slice (upstream's placeholderSliceCompare)."""
    remaining = [s for s in owned if not any(s is d for d in plan.delete)]
    if plan.create or plan.update or remaining:
        return
    placeholder = next((s for s in owned if not s.get("endpoints") and not s.get("ports")), None)
    if placeholder is not None:
        plan.delete = [d for d in plan.delete if d is not placeholder]
    else:
        plan.create.append(new_slice(service, [], []))


class SliceTracker:
    """endpointSliceTracker: the resourceVersion this controller last wrote per slice (None: deleted)."""

    def __init__(self) -> None:
        self.expected: dict[Key, dict[str, int | None]] = {}

    def wrote(self, service: Key, obj: Obj) -> None:
        self.expected.setdefault(service, {})[obj["metadata"]["name"]] = int(obj["metadata"]["resourceVersion"])

    def deleted(self, service: Key, name: str) -> None:
        self.expected.setdefault(service, {})[name] = None

    def stale(self, service: Key, cached: Mapping[str, Obj]) -> bool:
        """Whether the cache is older than this controller's own writes (then reconciling would undo them)."""
        pending = self.expected.get(service, {})
        for name, rv in list(pending.items()):
            have = cached.get(name)
            seen = int(have["metadata"]["resourceVersion"]) if have is not None else None
            if seen is None if rv is None else seen is not None and seen >= rv:
                del pending[name]
        if not pending:
            self.expected.pop(service, None)
        return bool(pending)

    def gone(self, service: Key, name: str) -> None:
        pending = self.expected.get(service, {})
        pending.pop(name, None)
        if not pending:
            self.expected.pop(service, None)

    def forget(self, service: Key) -> None:
        self.expected.pop(service, None)


class EndpointSliceController(ServicePodsController):
    name = "endpointslice"

    def __init__(self, client: Client, clock: Clock, max_endpoints: int = MAX_ENDPOINTS_PER_SLICE) -> None:
        super().__init__(client, clock)
        self.max_endpoints = max_endpoints
        self.tracker = SliceTracker()
        # Every slice (the shared informer; the garbage collector watches them too), this controller's picked
        # out by their managed-by label as upstream's handlers and lister do.
        self.slices = shared_informer(client, clock, "/apis/discovery.k8s.io/v1/endpointslices",
                                      Handlers(self._slice_changed, self._slice_updated, self._slice_deleted))
        self.slices.add_index(MANAGED_SLICES_INDEX, _managed_slice_service)
        self.nodes = shared_informer(client, clock, "/api/v1/nodes")  # zones; like upstream, a node change alone
        self.informers += [self.slices, self.nodes]  # does not resync Services

    def service_deleted(self, svc: Obj) -> None:
        self.tracker.forget(key_of(svc))

    def _slice_updated(self, old: Obj, new: Obj) -> None:
        """onEndpointSliceUpdate: a slice that stopped being this controller's is re-synced too (its Service may
        need a replacement)."""
        if _managed(old) and not _managed(new):
            self._slice_deleted(old)
        else:
            self._slice_changed(new)

    def _slice_deleted(self, es: Obj) -> None:
        """HandleDeletion: a deleted slice is nothing to wait for, whoever deleted it."""
        if not _managed(es):
            return
        service = (es["metadata"].get("labels") or {}).get(u.SERVICE_NAME_LABEL)
        if service:
            self.tracker.gone((es["metadata"].get("namespace", ""), service), es["metadata"]["name"])
        self._slice_changed(es)

    def _slice_changed(self, es: Obj) -> None:
        if not _managed(es):
            return
        service = (es["metadata"].get("labels") or {}).get(u.SERVICE_NAME_LABEL)
        if service:
            self.runner.enqueue((es["metadata"].get("namespace", ""), service))

    async def reconcile(self, key: Key) -> None:
        svc = self.services.get(*key)
        if svc is None or u.selects(svc) is None:
            return  # deleted: the garbage collector removes owned slices; selector-less: the user's slices
        existing = [es for es in self.slices.by_index(MANAGED_SLICES_INDEX, f"{key[0]}/{key[1]}")
                    if not es["metadata"].get("deletionTimestamp")]
        if self.tracker.stale(key, {es["metadata"]["name"]: es for es in existing}):
            self.runner.queue.add_after(key, STALE_RETRY)
            return
        plan = reconcile_slices(svc, self.selected_pods(svc), existing, self.max_endpoints,
                                lambda name: self.nodes.get("", name))
        await self._apply(key, plan)

    async def _apply(self, key: Key, plan: Plan) -> None:
        """Creates first, then updates, then deletes, as upstream's finalize (fewest endpoints missing)."""
        ns = key[0]
        for body in plan.create:
            self.tracker.wrote(key, await self.client.create(_path(ns), body))
        for body in plan.update:
            self.tracker.wrote(key, await self.client.request("PUT", _path(ns, body["metadata"]["name"]), body))
        for body in plan.delete:
            name = body["metadata"]["name"]
            try:
                await self.client.delete(_path(ns, name), {"preconditions": {"uid": body["metadata"]["uid"]}})
            except ApiError as exc:
                if exc.code != 404:
                    raise
            self.tracker.deleted(key, name)


def _path(namespace: str, name: str = "") -> str:
    return resource_path("endpointslices", namespace, name, group_version=GROUP_VERSION)


def _managed(es: Obj) -> bool:
    return (es["metadata"].get("labels") or {}).get(u.MANAGED_BY_LABEL) == u.CONTROLLER_NAME


def _managed_slice_service(es: Obj) -> list[str]:
    """The index of this controller's slices by "namespace/service"."""
    name = (es["metadata"].get("labels") or {}).get(u.SERVICE_NAME_LABEL)
    return [f"{es['metadata'].get('namespace', '')}/{name}"] if name and _managed(es) else []
