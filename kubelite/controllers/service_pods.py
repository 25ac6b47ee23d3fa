"""What the EndpointSlice and Endpoints controllers share: Services and pods in informers, and a
Service queued whenever it or a pod it selects (before or after the change) changes in a way its
endpoints depend on (upstream's podEndpointsChanged). Every informer is the controller manager's
shared one for its collection (kubelite.controllers.informers), as upstream's controllers take theirs
from the SharedInformerFactory: a pod write is decoded and cached once for all controllers."""

from __future__ import annotations

from typing import Any

from kubelite.client.informer import NAMESPACE_INDEX, Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers import endpointslice_utils as u
from kubelite.controllers.informers import SharedInformerHandle, shared_informer
from kubelite.controllers.podutil import is_pod_ready
from kubelite.controllers.runner import Runner, run_synced

Obj = dict[str, Any]


def pod_fingerprint(pod: Obj) -> tuple[Any, ...]:
    """podEndpointsChanged: what of a pod its endpoints depend on."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    ports = [c.get("ports") for c in spec.get("containers") or []]
    return (meta.get("labels"), bool(meta.get("deletionTimestamp")), status.get("podIP"), status.get("phase"),
            is_pod_ready(pod), spec.get("nodeName"), spec.get("hostname"), spec.get("subdomain"), ports)


class ServicePodsController:
    """Informers on Services and pods feeding a runner keyed by Service; subclasses reconcile."""

    name = ""

    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[Key] = Runner(self.name, self.reconcile, clock)
        self.services = shared_informer(client, clock, "/api/v1/services",
                                        Handlers(self.service_changed, lambda o, n: self.service_changed(n),
                                                 self.service_deleted))
        self.pods = shared_informer(client, clock, "/api/v1/pods",
                                    Handlers(lambda p: self._pod_changed(None, p), self._pod_changed,
                                             lambda p: self._pod_changed(p, None)))
        self.informers: list[SharedInformerHandle] = [self.services, self.pods]

    def service_changed(self, svc: Obj) -> None:
        self.runner.enqueue(key_of(svc))

    def service_deleted(self, svc: Obj) -> None:
        self.runner.enqueue(key_of(svc))

    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        pod = new if new is not None else old
        assert pod is not None
        # Services with a selector in the pod's namespace first: most pod changes (in a simulation, every
        # one) have none to concern, and the fingerprints were most of this handler's cost.
        selecting = [(svc, selector) for svc in self.services.by_index(NAMESPACE_INDEX,
                                                                       pod["metadata"].get("namespace", ""))
                     if (selector := u.selects(svc)) is not None]
        if not selecting or (old is not None and new is not None and pod_fingerprint(old) == pod_fingerprint(new)):
            return
        for svc, selector in selecting:
            if any(p is not None and u.matches(selector, p) for p in (old, new)):
                self.runner.enqueue(key_of(svc))

    def selected_pods(self, svc: Obj) -> list[Obj]:
        selector = u.selects(svc) or {}
        return [p for p in self.pods.by_index(NAMESPACE_INDEX, svc["metadata"].get("namespace", ""))
                if u.matches(selector, p)]

    async def run(self) -> None:
        await run_synced(self.informers, (self.runner.run,))

    async def reconcile(self, key: Key) -> None:
        raise NotImplementedError
