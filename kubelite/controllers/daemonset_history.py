"""A DaemonSet's template history as ControllerRevisions (pkg/controller/daemon/update.go: constructHistory,
snapshot, dedupCurHistories, cleanupHistory).

A revision's data is the set's template as a strategic-merge patch (`{"spec": {"template": {..., "$patch":
"replace"}}}`, the StatefulSet's form: statefulset_utils.revision_patch), which is what `kubectl rollout undo
daemonset` applies back. Its name is `<set>-<hash>` and its `controller-revision-hash` label the hash the
set's pods carry; the hash is the Deployment's (revisions.compute_hash over the template and collisionCount).
"""

from __future__ import annotations

from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.interface import Client
from kubelite.controllers import ownership
from kubelite.controllers.daemonset_util import REVISION_LABEL
from kubelite.controllers.gojson import semantic
from kubelite.controllers.revisions import compute_hash
from kubelite.controllers.statefulset_utils import revision_patch

Obj = dict[str, Any]
MERGE = "application/merge-patch+json"


def matches(ds: Obj, revision: Obj) -> bool:
    """Match: the revision holds the set's current template."""
    return bool(semantic(revision.get("data")) == semantic(revision_patch(ds)))


def new_revision(ds: Obj, number: int) -> Obj:
    """The ControllerRevision snapshot makes: the template labels plus the hash, the set's annotations (so
    `kubectl rollout history` shows its change-cause), owned by the set."""
    template = (ds.get("spec") or {}).get("template") or {}
    hash_ = compute_hash(template, (ds.get("status") or {}).get("collisionCount"))
    labels = {**((template.get("metadata") or {}).get("labels") or {}), REVISION_LABEL: hash_}
    meta: Obj = {"name": f"{ds['metadata']['name']}-{hash_}", "namespace": ds["metadata"].get("namespace", "default"),
                 "labels": labels, "ownerReferences": [ownership.controller_ref(ds, "apps/v1", "DaemonSet")]}
    if ds["metadata"].get("annotations"):
        meta["annotations"] = dict(ds["metadata"]["annotations"])
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta, "data": revision_patch(ds),
            "revision": number}


def _number(revision: Obj) -> int:
    return int(revision.get("revision") or 0)


def _hash(revision: Obj) -> str:
    return str((revision["metadata"].get("labels") or {}).get(REVISION_LABEL, ""))


class History:
    """The set's revisions, written through the API."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def _path(self, ds: Obj, name: str = "") -> str:
        return resource_path("controllerrevisions", ds["metadata"].get("namespace", ""), name,
                             group_version="apps/v1")

    async def construct(self, ds: Obj, revisions: list[Obj], pods: list[Obj]) -> tuple[Obj, list[Obj]]:
        """constructHistory: (current revision, old revisions). Revisions without the hash label get their name
        as the label; the current one is created, or deduplicated and renumbered to follow the old ones."""
        current: list[Obj] = []
        old: list[Obj] = []
        for revision in revisions:
            if not _hash(revision):
                revision = await self.client.patch(self._path(ds, revision["metadata"]["name"]), {
                    "metadata": {"labels": {REVISION_LABEL: revision["metadata"]["name"]}}}, MERGE)
            (current if matches(ds, revision) else old).append(revision)
        number = max((_number(r) for r in old), default=0) + 1
        if not current:
            return await self._snapshot(ds, number), old
        keep = await self._dedup(ds, current, pods)
        if _number(keep) < number:
            keep = await self.client.patch(self._path(ds, keep["metadata"]["name"]), {"revision": number}, MERGE)
        return keep, old

    async def _dedup(self, ds: Obj, current: list[Obj], pods: list[Obj]) -> Obj:
        """dedupCurHistories: keep the newest of several revisions of the current template; pods labelled with
        another's hash are relabelled before it is deleted."""
        keep = max(current, key=_number)
        for dup in current:
            if dup is keep:
                continue
            for pod in pods:
                if (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) == _hash(dup):
                    await self.client.patch(
                        resource_path("pods", pod["metadata"].get("namespace", ""), pod["metadata"]["name"]),
                        {"metadata": {"labels": {REVISION_LABEL: _hash(keep)}}}, MERGE)
            await self._delete(ds, dup)
        return keep

    async def _snapshot(self, ds: Obj, number: int) -> Obj:
        """snapshot: create the revision; a name taken by an equal revision is that revision, one taken by
        another template bumps collisionCount (unless ours was stale) and fails the sync, to retry."""
        body = new_revision(ds, number)
        try:
            created: Obj = await self.client.create(self._path(ds), body)
            return created
        except ApiError as exc:
            if exc.code != 409 or exc.reason != "AlreadyExists":
                raise
            existing: Obj = await self.client.get(self._path(ds, body["metadata"]["name"]))
            if matches(ds, existing):
                return existing
            path = resource_path("daemonsets", ds["metadata"].get("namespace", ""), ds["metadata"]["name"],
                                 group_version="apps/v1")
            fresh = await self.client.get(path)
            count = (fresh.get("status") or {}).get("collisionCount")
            if count == (ds.get("status") or {}).get("collisionCount"):
                status = {**(fresh.get("status") or {}), "collisionCount": (count or 0) + 1}
                await self.client.request("PUT", f"{path}/status", {**fresh, "status": status})
            raise

    async def cleanup(self, ds: Obj, old: list[Obj], node_pods: dict[str, list[Obj]]) -> None:
        """cleanupHistory: delete the oldest old revisions beyond revisionHistoryLimit, never one whose hash a
        live pod carries."""
        excess = len(old) - int((ds.get("spec") or {}).get("revisionHistoryLimit", 10))
        if excess <= 0:
            return
        live = {(p["metadata"].get("labels") or {}).get(REVISION_LABEL) for pods in node_pods.values() for p in pods}
        for revision in sorted(old, key=_number):
            if excess <= 0:
                break
            if _hash(revision) in live:
                continue
            await self._delete(ds, revision)
            excess -= 1

    async def _delete(self, ds: Obj, revision: Obj) -> None:
        try:
            await self.client.delete(self._path(ds, revision["metadata"]["name"]))
        except ApiError as exc:
            if exc.code != 404:
                raise
