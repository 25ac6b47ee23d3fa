"""Controller references: who owns an object, adopting orphans and releasing strays by selector.

A port of pkg/controller/controller_ref_manager.go (ClaimPods / ClaimReplicaSets) and the
ownerReference helpers of controller_utils.go. A controller owns the objects whose controller
reference (the one ownerReference with `controller: true`) carries its uid. It adopts a
matching object that has no controller (a patch adding its reference, guarded by the object's
uid), and releases an object it owns that no longer matches its selector (a patch deleting its
reference). It never touches objects another controller owns, never adopts while it is being
deleted itself, and never adopts or releases an object that is being deleted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.api.selectors import LabelSelector
from kubelite.client.interface import Client

Obj = dict[str, Any]
STRATEGIC = "application/strategic-merge-patch+json"
ORPHAN_INDEX = "orphan"  # objects without a controller, by namespace: candidates for adoption


def controller_of(obj: Obj) -> Obj | None:
    """metav1.GetControllerOf."""
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def orphans_by_namespace(obj: Obj) -> list[str]:
    """An informer index: objects without a controller reference, under their namespace."""
    return [obj["metadata"].get("namespace", "")] if controller_of(obj) is None else []


def controller_ref(owner: Obj, api_version: str = "", kind: str = "") -> Obj:
    """metav1.NewControllerRef: controller=true and blockOwnerDeletion=true. The group-version and kind come
    from the owner unless given (as NewControllerRef takes them), for owners read without them."""
    return {"apiVersion": api_version or owner["apiVersion"], "kind": kind or owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def adopt_patch(owner: Obj, obj: Obj) -> Obj:
    return {"metadata": {"ownerReferences": [controller_ref(owner)], "uid": obj["metadata"]["uid"]}}


def remove_refs_patch(uid: str, owner_uids: list[str]) -> Obj:
    """deleteOwnerRefStrategicMergePatch: drop the references to these owners, if the object is still `uid`."""
    return {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": u} for u in owner_uids], "uid": uid}}


def release_patch(owner: Obj, obj: Obj) -> Obj:
    return remove_refs_patch(obj["metadata"]["uid"], [owner["metadata"]["uid"]])


class RefManager:
    """BaseControllerRefManager over one owner: claims a list of candidate objects.

    `path_of(obj)` is the object's API path; `can_adopt()` re-reads the owner from the API (not
    the cache) once before the first adoption, as RecheckDeletionTimestamp, so an owner deleted
    meanwhile adopts nothing. `belongs(obj)` narrows the selector as ClaimPods' filter (a
    StatefulSet claims only pods named after it).
    """

    def __init__(self, client: Client, owner: Obj, selector: LabelSelector, path_of: Callable[[Obj], str],
                 can_adopt: Callable[[], Awaitable[bool]], belongs: Callable[[Obj], bool] = lambda obj: True
                 ) -> None:
        self.client = client
        self.owner = owner
        self.uid = owner["metadata"]["uid"]
        self.selector = selector
        self.path_of = path_of
        self._can_adopt = can_adopt
        self._belongs = belongs
        self._adopt_checked: bool | None = None

    async def claim(self, candidates: list[Obj]) -> list[Obj]:
        """ClaimObject for each candidate: the objects this owner now owns (adopted ones included)."""
        claimed: list[Obj] = []
        for obj in candidates:
            ref = controller_of(obj)
            matches = self.selector.matches(obj["metadata"].get("labels")) and self._belongs(obj)
            deleting = bool(obj["metadata"].get("deletionTimestamp"))
            if ref is not None:
                if ref.get("uid") != self.uid:
                    continue  # owned by another controller
                if matches:
                    claimed.append(obj)
                elif not deleting and not self.owner["metadata"].get("deletionTimestamp"):
                    await self._patch(obj, release_patch(self.owner, obj))
                continue
            if not matches or deleting or self.owner["metadata"].get("deletionTimestamp"):
                continue
            if not await self._adoptable():
                continue
            adopted = await self._patch(obj, adopt_patch(self.owner, obj))
            if adopted is not None:
                claimed.append(adopted)
        return claimed

    async def _adoptable(self) -> bool:
        if self._adopt_checked is None:
            self._adopt_checked = await self._can_adopt()
        return self._adopt_checked

    async def _patch(self, obj: Obj, body: Obj) -> Obj | None:
        """A patch that finds the object gone (404) or replaced (uid precondition, 409) claims nothing."""
        try:
            patched: Obj = await self.client.patch(self.path_of(obj), body, STRATEGIC)
            return patched
        except ApiError as exc:
            if exc.code in (404, 409, 422):
                return None
            raise


def recheck_owner(client: Client, path: str, uid: str) -> Callable[[], Awaitable[bool]]:
    """RecheckDeletionTimestamp: adoption is allowed only if a fresh read of the owner shows the same
    uid and no deletionTimestamp."""

    async def check() -> bool:
        try:
            fresh = await client.get(path)
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        return bool(fresh["metadata"].get("uid") == uid and not fresh["metadata"].get("deletionTimestamp"))

    return check
