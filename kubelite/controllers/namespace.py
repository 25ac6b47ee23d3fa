"""The namespace controller: empties a terminating namespace, then lets it go.

A port of pkg/controller/namespace (deletion/namespaced_resources_deleter.go). Deleting a namespace
makes it Terminating (the API server then refuses new content in it); this controller
deletes everything in it through the ordinary API — every deletable namespaced kind, found
by discovery, with the default propagation, pods gracefully (never forced: a node that is
unreachable holds the namespace, as seed 002 accepts) — and re-checks until nothing is
left. Then it removes the `kubernetes` finalizer through the `finalize` subresource, and the
API server removes the namespace.

Each pass says how it went in the namespace's status conditions, as upstream's deleter does
(deletion/status_condition_utils.go), so `kubectl describe ns` shows why a deletion is stuck:
NamespaceDeletionDiscoveryFailure, NamespaceDeletionGroupVersionParsingFailure,
NamespaceDeletionContentFailure, NamespaceContentRemaining and NamespaceFinalizersRemaining — True
with the reason and what is left, or False with upstream's "all well" reason and message.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.informer import Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_rfc3339, rfc3339
from kubelite.controllers.discovery import ApiResource, Discovery, discover_deletable
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.namespace")

Obj = dict[str, Any]
FINALIZER = "kubernetes"
RECHECK = 1.0  # content still terminating: look again after this long
WORKERS = 2  # --concurrent-namespace-syncs is 10
FINALIZER_ESTIMATE = 15  # finalizerEstimateSeconds: the wait assumed for objects held by finalizers

DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GV_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"
# conditionTypes, in upstream's order, with okReasons and okMessages: the False condition of a pass that went well.
CONDITIONS_OK = {
    DISCOVERY_FAILURE: ("ResourcesDiscovered", "All resources successfully discovered"),
    GV_PARSING_FAILURE: ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
    CONTENT_FAILURE: ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    CONTENT_REMAINING: ("ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}


def terminating(ns: Obj) -> bool:
    return bool(ns["metadata"].get("deletionTimestamp")) and \
        FINALIZER in ((ns.get("spec") or {}).get("finalizers") or [])


def condition(kind: str, status: str, reason: str, message: str, now: float) -> Obj:
    return {"type": kind, "status": status, "lastTransitionTime": rfc3339(now), "reason": reason, "message": message}


@dataclass
class Content:
    """deleteAllContent's tally: the longest wait expected (seconds), what remains per `resource.group` and per
    finalizer, and the errors met (each a message)."""

    estimate: int = 0
    remaining: dict[str, int] = field(default_factory=dict)
    finalizers: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)


def discovery_conditions(found: Discovery, now: float) -> list[Obj]:
    """ProcessDiscoverResourcesErr and ProcessGroupVersionErr."""
    out = []
    if found.error or found.failed:
        groups = ", ".join(sorted(f"{gv}: {why}" for gv, why in found.failed.items()))
        message = found.error or (f"Discovery failed for some groups, {len(found.failed)} failing: "
                                  f"unable to retrieve the complete list of server APIs: {groups}")
        out.append(condition(DISCOVERY_FAILURE, "True", "DiscoveryFailed", message, now))
    if found.unparsable:
        out.append(condition(GV_PARSING_FAILURE, "True", "GroupVersionParsingFailed",
                             f"unexpected GroupVersion string: {found.unparsable[0]}", now))
    return out


def content_totals_conditions(remaining: dict[str, int], finalizers: dict[str, int], now: float) -> list[Obj]:
    """ProcessContentTotals: what is left, by `resource.group` (a core resource's group is empty: `pods.`), and by
    finalizer, sorted for stable updates."""
    out = []
    if remaining:
        left = sorted(f"{resource} has {n} resource instances" for resource, n in remaining.items() if n)
        out.append(condition(CONTENT_REMAINING, "True", "SomeResourcesRemain",
                             f"Some resources are remaining: {', '.join(left)}", now))
    if finalizers:
        held = sorted(f"{finalizer} in {n} resource instances" for finalizer, n in finalizers.items() if n)
        out.append(condition(FINALIZERS_REMAINING, "True", "SomeFinalizersRemain",
                             f"Some content in the namespace has finalizers remaining: {', '.join(held)}", now))
    return out


def delete_content_condition(errors: list[str], now: float) -> Obj | None:
    """makeDeleteContentCondition."""
    if not errors:
        return None
    return condition(CONTENT_FAILURE, "True", "ContentDeletionFailed",
                     f"Failed to delete all resource types, {len(errors)} remaining: {', '.join(sorted(errors))}", now)


def update_conditions(status: Obj, new: list[Obj], now: float) -> bool:
    """updateConditions: each of the deleter's condition types takes its new value (or the successful one);
    one that changes status gets a new lastTransitionTime; other conditions are left alone. Whether any changed."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    changed = False
    for kind, (ok_reason, ok_message) in CONDITIONS_OK.items():
        want = next((c for c in new if c["type"] == kind), None) or condition(kind, "False", ok_reason, ok_message,
                                                                              now)
        old = next((c for c in conditions if c.get("type") == kind), None)
        if old is None:
            conditions.append(want)
            changed = True
        elif any(old.get(k, "") != want[k] for k in ("status", "message", "reason")):
            if old.get("status") != want["status"]:
                old["lastTransitionTime"] = rfc3339(now)
            old.update({k: want[k] for k in ("type", "status", "reason", "message")})
            changed = True
    return changed


def pod_estimate(pods: list[Obj], deleted_at: float, now: float) -> int:
    """estimateGracefulTermination for pods: the longest grace period of a pod not yet terminal, or 0 once that
    long has passed since the namespace was deleted."""
    estimate = max((int((p.get("spec") or {}).get("terminationGracePeriodSeconds") or 0) for p in pods
                    if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")), default=0)
    return 0 if now - deleted_at >= estimate else estimate


class NamespaceController:
    def __init__(self, client: Client, clock: Clock, workers: int = WORKERS) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[Key] = Runner("namespace", self.sync, clock, workers)
        self.namespaces = shared_informer(client, clock, "/api/v1/namespaces",
                                          Handlers(self._changed, lambda old, new: self._changed(new)))

    def _changed(self, ns: Obj) -> None:
        if terminating(ns):
            self.runner.enqueue(key_of(ns))

    async def run(self) -> None:
        await run_synced((self.namespaces,), (self.runner.run,))

    async def sync(self, key: Key) -> None:
        ns = self.namespaces.store.get(key)
        if ns is None or not terminating(ns):
            return
        name = ns["metadata"]["name"]
        now = self.clock.now()
        found = await discover_deletable(self.client)
        content = await self.delete_content(name, found.resources, parse_rfc3339(ns["metadata"]["deletionTimestamp"]),
                                            now)
        new = [*discovery_conditions(found, now),
               *content_totals_conditions(content.remaining, content.finalizers, now)]
        failure = delete_content_condition(content.errors, now)
        if failure is not None:
            new.append(failure)
        ns = await self._write_conditions(ns, new, now)
        if content.estimate or content.errors or found.error or found.failed or found.unparsable:
            log.debug("namespace %s: content remains (%s)", name, content)
            self.runner.queue.add_after(key, RECHECK)
            return
        spec = ns.get("spec") or {}
        body = {**ns, "spec": {**spec, "finalizers": [f for f in spec.get("finalizers") or [] if f != FINALIZER]}}
        try:
            await self.client.request("PUT", f"/api/v1/namespaces/{name}/finalize", body)
        except ApiError as exc:
            if exc.code != 404:
                raise

    async def _write_conditions(self, ns: Obj, new: list[Obj], now: float) -> Obj:
        """The namespace with its deletion conditions updated (written only if they changed). A failed write is
        logged, as upstream's: the next pass writes them again."""
        status = {**(ns.get("status") or {}), "conditions": [dict(c) for c in (ns.get("status") or {}).get(
            "conditions") or []]}
        if not update_conditions(status, new, now):
            return ns
        try:
            written: Obj = await self.client.request("PUT", f"/api/v1/namespaces/{ns['metadata']['name']}/status",
                                                     {**ns, "status": status})
        except ApiError as exc:
            log.warning("namespace %s: updating its deletion conditions failed: %s", ns["metadata"]["name"], exc)
            return ns
        return written

    async def delete_content(self, namespace: str, resources: list[ApiResource], deleted_at: float,
                             now: float) -> Content:
        """deleteAllContent: delete every object of every namespaced resource that is not already being deleted,
        and tally what remains."""
        content = Content()
        for resource in resources:
            if resource.namespaced:
                await self._delete_resource(content, resource, namespace, deleted_at, now)
        return content

    async def _delete_resource(self, content: Content, resource: ApiResource, namespace: str, deleted_at: float,
                               now: float) -> None:
        """deleteAllContentForGroupVersionResource: objects that remain are expected to go if graceful pods are
        within their grace period or finalizers hold them (15 s assumed); otherwise their remaining is an error."""
        try:
            items = (await self.client.get(resource.collection(namespace))).get("items") or []
        except ApiError as exc:
            content.errors.append(exc.message)
            return
        estimate = pod_estimate(items, deleted_at, now) if (resource.group_version, resource.plural) == (
            "v1", "pods") else 0
        content.estimate = max(content.estimate, estimate)
        left = []
        for obj in items:
            if not obj["metadata"].get("deletionTimestamp"):
                try:
                    obj = await self.client.delete(resource.path(namespace, obj["metadata"]["name"]),
                                                   {"propagationPolicy": "Background"})
                except ApiError as exc:
                    if exc.code not in (404, 405):  # gone already, or not deletable: as upstream, not an error
                        content.errors.append(exc.message)
                        return
                    continue
                if not (obj.get("metadata") or {}).get("deletionTimestamp"):
                    continue  # gone now (a Status, or the object as it was removed)
            left.append(obj)
        if not left:
            return
        content.remaining[f"{resource.plural}.{resource.group}"] = len(left)
        held = Counter(f for obj in left for f in obj["metadata"].get("finalizers") or [])
        content.finalizers.update(held)
        if estimate == 0 and held:
            content.estimate = max(content.estimate, FINALIZER_ESTIMATE)
        elif estimate == 0:
            content.errors.append(f"unexpected items still remain in namespace: {namespace} for gvr: {resource.gvr()}")
