"""Serving the resources CustomResourceDefinitions define, while the server runs and again after a restart.

One in-process controller follows the CRDs in the watch cache and does what apiextensions-apiserver's controllers
do: the naming controller's NamesAccepted (a name another CRD of the group, or a built-in resource of it, already
uses is refused), the establishing controller's Established, and the finalizer's cleanup (a deleted CRD's custom
resources are deleted, then its `customresourcecleanup` finalizer removed). An Established CRD's served versions
are registered with the registry (its caches and strategies) and with `served`, which routing, discovery and
OpenAPI read; a CRD's change re-registers them, its deletion unregisters them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any

import orjson

from kubelite.api import errors
from kubelite.apiserver import metrics_api
from kubelite.apiserver.cache import Watcher
from kubelite.apiserver.customresources import definitions
from kubelite.apiserver.customresources.definitions import CLEANUP_FINALIZER
from kubelite.apiserver.customresources.strategy import CustomResource, CustomResourceStrategy
from kubelite.apiserver.nesting import copy_obj
from kubelite.apiserver.registry import RESOURCES
from kubelite.apiserver.registry.apiextensions import CUSTOM_RESOURCE_DEFINITIONS as CRDS
from kubelite.apiserver.registry.base import Obj
from kubelite.apiserver.request import Target, parse_target_in
from kubelite.apiserver.rest import Registry

log = logging.getLogger("kubelite.apiserver.customresources")

CLEANUP_RETRY = 0.5  # seconds between passes over a deleted CRD's custom resources that still wait on finalizers
_NAME_FIELDS = (("plural", "PluralConflict"), ("singular", "SingularConflict"), ("kind", "KindConflict"),
                ("listKind", "ListKindConflict"))


def version_key(version: str) -> tuple[int, int, int, str]:
    """Kubernetes' version priority (apimachinery's CompareKubeAwareVersionStrings): GA before beta before
    alpha, higher numbers first, other names last in alphabetical order; sort ascending by this key."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if m is None:
        return (3, 0, 0, version)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    return ({None: 0, "beta": 1, "alpha": 2}[stage], -major, -minor, "")


def _builtin_names(group: str) -> dict[str, set[str]]:
    """The names the group's built-in resources use, by kind of name (plural, singular, kind, listKind, short)."""
    names: dict[str, set[str]] = {"plural": set(), "singular": set(), "kind": set(), "listKind": set(),
                                  "shortNames": set()}
    for r in (*RESOURCES, *metrics_api.RESOURCES):  # metrics.k8s.io: served by kubelite, as by metrics-server
        if r.group == group:
            names["plural"].add(r.plural)
            names["singular"].add(r.singular)
            names["kind"].add(r.kind)
            names["listKind"].add(r.kind + "List")
            names["shortNames"].update(r.short_names)
    return names


def _condition(kind: str, status: bool, reason: str, message: str, now: str, old: Obj | None) -> Obj:
    """A condition whose lastTransitionTime moves only when its status does."""
    value = "True" if status else "False"
    since = old["lastTransitionTime"] if old is not None and old.get("status") == value and \
        old.get("lastTransitionTime") else now
    return {"type": kind, "status": value, "lastTransitionTime": since, "reason": reason, "message": message}


class CustomResources:
    """The served custom resources (`served`: (group-version, plural) → resource) and their controller."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.served: dict[tuple[str, str], CustomResource] = {}
        self._by_crd: dict[str, tuple[tuple[Any, ...], list[CustomResource]]] = {}  # name → (what built them, them)
        self._watcher = Watcher("", None)
        self._tasks: list[asyncio.Task[None]] = []
        self._cleanups: dict[str, asyncio.Task[None]] = {}  # CRD name → its finalizer's work: it is terminating

    # --- what routing and discovery read -----------------------------------------------------------------

    def target(self, method: str, path: str) -> Target | None:
        """The custom resource `path` addresses, if any; a create of one whose CRD is being deleted is a 405, as the
        crdHandler answers it."""
        target = parse_target_in(path, self.served) if self.served else None
        if target is not None and method == "POST" and isinstance(target.resource, CustomResource) and \
                target.resource.crd in self._cleanups:
            raise errors.ApiError(405, "MethodNotAllowed",
                                  "create not allowed while custom resource definition is terminating")
        return target

    def resources(self) -> tuple[CustomResource, ...]:
        """Every served version, each group's versions in priority order (the first is the preferred one)."""
        return tuple(sorted(self.served.values(), key=lambda r: (r.group, version_key(r.version), r.plural)))

    # --- lifecycle ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve every CRD the store holds before the server is ready (a restart serves them again), then follow
        their changes."""
        cache = self.registry.caches[CRDS]
        cache.add(self._watcher)
        for crd in cache.list():
            await self._guarded(crd)
        self._tasks.append(asyncio.create_task(self._run(), name="customresourcedefinitions"))

    async def stop(self) -> None:
        self.registry.caches[CRDS].discard(self._watcher)
        tasks = [*self._tasks, *self._cleanups.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            waiter = self._watcher.waiter()
            if waiter is not None:
                await waiter
            cache = self.registry.caches[CRDS]
            if self._watcher.closed:  # the watch cache relisted (its events in between are unknown): all again
                self._watcher = Watcher("", None)
                cache.add(self._watcher)
                for name in [n for n in self._by_crd if cache.get("", n) is None]:
                    self._unserve(name)
                for crd in cache.list():
                    await self._guarded(crd)
                continue
            events, self._watcher.pending = self._watcher.pending, []
            for ev in events:
                if ev.type == "DELETED":
                    self._unserve(ev.obj["metadata"]["name"])
                    await self._retry_refused(ev.obj["spec"].get("group"))
                elif cache.get("", ev.obj["metadata"]["name"]) is ev.obj:  # older events are superseded
                    await self._guarded(ev.obj)

    async def _retry_refused(self, group: str | None) -> None:
        """A deleted CRD frees its names: the group's CRDs whose names were not accepted are synced again (the
        naming controller requeues a group's CRDs on any change of one)."""
        for crd in self.registry.caches[CRDS].list():
            if crd["spec"].get("group") == group and not definitions.is_true(crd, "NamesAccepted"):
                await self._guarded(crd)

    async def _guarded(self, crd: Obj) -> None:
        """`_sync`, logging its failure: one CRD's must not stop the others being served."""
        try:
            await self._sync(crd)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("customresourcedefinition %s could not be synced", crd["metadata"].get("name"))

    # --- one CRD ----------------------------------------------------------------------------------------------

    async def _sync(self, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        if crd["metadata"].get("deletionTimestamp"):
            if CLEANUP_FINALIZER in (crd["metadata"].get("finalizers") or []) and name not in self._cleanups:
                self._cleanups[name] = asyncio.create_task(self._cleanup(name), name=f"crd-cleanup-{name}")
            return
        status = self._status(crd)
        if status != crd.get("status"):
            await self._write_status(name, status)
            return  # its event brings the CRD back here, with the status it is served by
        if definitions.is_true(crd, "Established"):
            self._serve(crd)

    def _status(self, crd: Obj) -> Obj:
        """The naming and establishing controllers' status: acceptedNames and NamesAccepted, then Established."""
        status = copy_obj(crd.get("status") or {})
        spec = crd["spec"]
        now = self.registry.now()
        conflict = self._conflict(crd)
        accepted = definitions.condition(crd, "NamesAccepted")
        established = definitions.condition(crd, "Established")
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in ("NamesAccepted",
                                                                                          "Established")]
        if conflict is None:
            status["acceptedNames"] = copy_obj(spec["names"])
            conditions.append(_condition("NamesAccepted", True, "NoConflicts", "no conflicts found", now, accepted))
            conditions.append(_condition("Established", True, "InitialNamesAccepted",
                                         "the initial names have been accepted", now, established))
        else:
            reason, message = conflict
            conditions.append(_condition("NamesAccepted", False, reason, message, now, accepted))
            if established is None or established.get("status") != "True":
                conditions.append(_condition("Established", False, "NotAccepted", "not all names are accepted",
                                             now, established))
            else:
                conditions.append(established)
        status["conditions"] = conditions
        return status

    def _conflict(self, crd: Obj) -> tuple[str, str] | None:
        """The first of the CRD's names another CRD of its group (by its accepted names) or a built-in resource
        of the group already uses: (reason, message) as the naming controller says it."""
        spec = crd["spec"]
        group, names = spec["group"], spec["names"]
        taken = _builtin_names(group)
        for other in self.registry.caches[CRDS].list():
            if other["metadata"]["name"] == crd["metadata"]["name"] or other["spec"].get("group") != group:
                continue
            theirs = (other.get("status") or {}).get("acceptedNames") or {}
            for field, _ in _NAME_FIELDS:
                if theirs.get(field):
                    taken[field].add(theirs[field])
            taken["shortNames"].update(theirs.get("shortNames") or [])
        for field, reason in _NAME_FIELDS:  # upstream's order: plural, singular, shortNames, kind, listKind
            value = names.get(field)
            if value and (value in taken[field] or (field in ("plural", "singular") and value in
                                                    taken["shortNames"])):
                return reason, f'"{value}" is already in use'
            if field == "singular":
                for short in names.get("shortNames") or []:
                    if short in taken["shortNames"] or short in taken["plural"] or short in taken["singular"]:
                        return "ShortNamesConflict", f'"{short}" is already in use'
        return None

    async def _write_status(self, name: str, status: Obj) -> None:
        try:
            await self.registry.update(CRDS, "", name, {"apiVersion": CRDS.group_version, "kind": CRDS.kind,
                                                        "metadata": {"name": name}, "status": status}, "status")
        except errors.ApiError as exc:  # gone, or invalid: the next event says what to do
            log.warning("customresourcedefinition %s: status not written: %s", name, exc)

    def _serve(self, crd: Obj) -> None:
        """Register the CRD's served versions (again, when what they are built from changed)."""
        name, spec = crd["metadata"]["name"], crd["spec"]
        accepted = orjson.dumps(crd.get("status", {}).get("acceptedNames"), option=orjson.OPT_SORT_KEYS)
        built_from = (crd["metadata"].get("generation"), accepted)
        current = self._by_crd.get(name)
        if current is not None and current[0] == built_from:
            return
        self._unserve(name)
        names = {**spec["names"], **(crd.get("status", {}).get("acceptedNames") or {})}  # served as accepted
        builtin = _builtin_names(spec["group"])["plural"]
        if not names.get("plural") or not names.get("kind") or {names["plural"], spec["names"]["plural"]} & builtin:
            # no accepted names yet, or names (a status written by hand) a built-in resource of the group has:
            # serving them would read and write the built-in's objects
            log.warning("customresourcedefinition %s: not served (names %s/%s)", name, spec["group"],
                        names.get("plural"))
            return
        storage = definitions.storage_version(crd)
        resources = []
        for version in spec["versions"]:
            if not version.get("served"):
                continue
            subresources = version.get("subresources") or {}
            resource = CustomResource(
                spec["group"], version["name"], names["plural"], names.get("singular", ""), names["kind"],
                spec["scope"] == "Namespaced", "", short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=tuple(s for s in ("status", "scale") if s in subresources),
                crd=name, list_kind=names.get("listKind") or names["kind"] + "List",
                schema=(version.get("schema") or {}).get("openAPIV3Schema") or {}, storage=storage,
                columns=tuple(version.get("additionalPrinterColumns") or ()), scale=subresources.get("scale"))
            self.registry.register(resource, CustomResourceStrategy(resource, "status" in subresources))
            self.served[(resource.group_version, resource.plural)] = resource
            resources.append(resource)
        self._by_crd[name] = (built_from, resources)
        log.info("serving %s (%s)", name, ", ".join(r.version for r in resources))

    def _unserve(self, name: str) -> None:
        _, resources = self._by_crd.pop(name, ((), []))
        for resource in resources:
            self.served.pop((resource.group_version, resource.plural), None)
            self.registry.unregister(resource)

    async def _cleanup(self, name: str) -> None:
        """The finalizer: delete every custom resource of the CRD (as many passes as their own finalizers make
        necessary), stop serving them, then remove the cleanup finalizer, which lets the CRD go."""
        try:
            while True:
                crd = self.registry.caches[CRDS].get("", name)
                if crd is None:
                    return
                remaining = await self._delete_all(crd)
                if not remaining:
                    break
                await self.registry.clock.sleep(CLEANUP_RETRY)
            self._unserve(name)

            def without_finalizer(cur: Obj) -> Obj:
                meta = cur["metadata"]
                meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != CLEANUP_FINALIZER]
                if not meta["finalizers"]:
                    del meta["finalizers"]
                return cur

            await self.registry.guaranteed_update(CRDS, "", name, without_finalizer)
        except errors.ApiError as exc:
            if exc.code != 404:
                log.warning("customresourcedefinition %s: cleanup failed: %s", name, exc)
        finally:
            self._cleanups.pop(name, None)

    async def _delete_all(self, crd: Obj) -> int:
        """One deletion pass; how many custom resources were left (deleting ones included)."""
        _, resources = self._by_crd.get(crd["metadata"]["name"], ((), []))
        if not resources:  # never served (or not since a restart): serve it to reach its objects
            self._serve(crd)
            _, resources = self._by_crd.get(crd["metadata"]["name"], ((), []))
            if not resources:
                return 0
        resource = resources[0]
        items = self.registry.caches[resource].list()
        for obj in items:
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            with contextlib.suppress(errors.ApiError):  # gone already, or still finalizing
                await self.registry.delete(resource, meta.get("namespace", ""), meta["name"], {})
        return len(self.registry.caches[resource].list())

