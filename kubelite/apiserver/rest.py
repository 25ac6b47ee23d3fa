"""The generic registry store: create, update, patch, delete with upstream's rules.

Mirrors k8s.io/apiserver/pkg/registry/generic/registry/store.go: optimistic concurrency
on resourceVersion (GuaranteedUpdate retries a conflict from a fresh read unless the
client pinned a version), status-subresource separation, finalizers, and the two-phase
graceful delete of rest.BeforeDelete. Every write waits until the watch cache has seen
its revision, so clients read their own writes.
"""

from __future__ import annotations

import builtins
import random
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from kubelite.api import errors
from kubelite.api.errors import ApiError, Cause
from kubelite.apiserver import deletion, nesting, omitempty, schema, typecheck
from kubelite.apiserver.admission.resourcequota import ResourceQuotaAdmission
from kubelite.apiserver.cache import Caches, decode
from kubelite.apiserver.nesting import copy_obj
from kubelite.apiserver.registry import STRATEGIES
from kubelite.apiserver.registry.base import Obj, Resource, Strategy
from kubelite.apiserver.registry.core import NAMESPACES
from kubelite.clock import Clock, parse_rfc3339, rfc3339
from kubelite.store.interface import KeyExists, KeyNotFound, KeyValue, RevisionMismatch, Store

MAX_OBJECT_BYTES = 1536 * 1024  # etcd's --max-request-bytes default
LAST_TIMESTAMP = 253402300799.0  # 9999-12-31T23:59:59Z
MAX_RETRIES = 1000  # upstream GuaranteedUpdate retries unpinned conflicts without bound
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
MAX_GENERATED_NAME_LENGTH = 63 - 5  # storage/names: a generated name fits a DNS label

Mutate = Callable[[Obj], Obj]
# What an update's body cannot change: the stored object's values (or their absence) are kept, in this order
_KEPT_ON_UPDATE = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                   "generation", "resourceVersion")


def _generated_name(base: str) -> str:
    """SimpleNameGenerator.GenerateName: the base cut to MAX_GENERATED_NAME_LENGTH, then five characters from the
    process's generator (a simulation seeds it): names need uniqueness, not secrecy, as upstream's math/rand."""
    return base[:MAX_GENERATED_NAME_LENGTH] + "".join(random.choices(_NAME_CHARS, k=5))


def encode(obj: Obj) -> bytes:
    """Stored form: resourceVersion lives in the store's revision, not in the value.

    An object over etcd's default request limit is refused as kube-apiserver refuses it, whatever built it
    (a large body, a patch that grew the object)."""
    meta = obj["metadata"]
    rv = meta.pop("resourceVersion", None)
    try:
        data = nesting.dumps_kept(obj)
    finally:
        if rv is not None:
            meta["resourceVersion"] = rv
    if len(data) > MAX_OBJECT_BYTES:
        raise errors.ApiError(413, "RequestEntityTooLarge", "etcdserver: request is too large")
    return data


def _deadline(ts: float) -> str:
    """A deletion deadline; a grace period of 10^12 s (valid int64) ends at the last representable second."""
    return rfc3339(min(ts, LAST_TIMESTAMP))


def _with_rv(obj: Obj, rev: int) -> Obj:
    obj["metadata"]["resourceVersion"] = str(rev)
    return obj


class Registry:
    """Writes and reads for every resource; implements `Lookup` for admission."""

    def __init__(self, store: Store, caches: Caches, clock: Clock) -> None:
        self.store = store
        self.caches = caches
        self.clock = clock
        self.strategies: dict[Resource, Strategy] = {r: cls(r) for r, cls in STRATEGIES.items()}
        self.by_plural = {r.plural: r for r in STRATEGIES}
        self.quota = ResourceQuotaAdmission(self, clock)  # validating admission that writes: after validation

    def register(self, resource: Resource, strategy: Strategy) -> None:
        """Serve a resource defined at run time (a custom resource's version), from its key prefix's cache."""
        self.strategies[resource] = strategy
        self.caches.register(resource)

    def unregister(self, resource: Resource) -> None:
        self.strategies.pop(resource, None)
        self.caches.unregister(resource)

    # --- Lookup ----------------------------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self.caches[self.by_plural[resource]].get(namespace, name)

    def list(self, resource: str, namespace: str = "") -> builtins.list[Obj]:
        return self.caches[self.by_plural[resource]].list(namespace)

    # --- helpers ---------------------------------------------------------------------------------

    def now(self) -> str:
        return rfc3339(self.clock.now())

    def current(self, resource: Resource, namespace: str, name: str) -> Obj:
        obj = self.caches[resource].get(namespace, name)
        if obj is None:
            raise errors.not_found(resource.plural, name, resource.group)
        return obj

    async def _fresh(self, resource: Resource, namespace: str, name: str) -> Obj:
        kv = await self.store.get(resource.key(namespace, name))
        if kv is None:
            raise errors.not_found(resource.plural, name, resource.group)
        return decode(kv)

    def _check_namespace(self, resource: Resource, namespace: str, name: str) -> None:
        """NamespaceLifecycle admission: the namespace must exist and not be terminating."""
        if not resource.namespaced:
            return
        ns = self.caches[NAMESPACES].get("", namespace)
        if ns is None:
            raise errors.not_found("namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp") and resource.plural != "events":
            raise self._forbidden(resource, name, f"unable to create new content in namespace {namespace} because "
                                                  "it is being terminated")

    @staticmethod
    def _forbidden(resource: Resource, name: str, reason: str) -> ApiError:
        plural = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        return errors.forbidden(f'{plural} "{name}" is forbidden: {reason}')

    # --- create ----------------------------------------------------------------------------------

    async def create(self, resource: Resource, namespace: str, obj: Obj, dry_run: bool = False,
                     warnings: builtins.list[str] | None = None, checked: bool = False) -> Obj:
        """Store a new object; the strategy's warnings about it are appended to `warnings`. `checked`: the caller
        has type-checked `obj` (`check_types`) since it last changed it."""
        strategy = self.strategies[resource]
        if not checked:
            self.check_types(resource, obj)
        omitempty.omit_empty(obj, resource.model)  # decoded as Go decodes: an empty value is no value
        meta = obj.setdefault("metadata", {})
        if resource.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        obj["apiVersion"], obj["kind"] = resource.group_version, resource.kind
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                      "selfLink", "managedFields"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.now()
        generate = not meta.get("name") and meta.get("generateName")
        if generate:
            meta["name"] = _generated_name(meta["generateName"])
        self._check_namespace(resource, namespace, meta.get("name", ""))
        if not meta.get("name"):  # strategies may rely on a name; upstream's validation says the same
            self._raise_invalid(resource, obj, [Cause("FieldValueRequired", "Required value: name or generateName "
                                                                            "is required", "metadata.name")])
        strategy.prepare_create(obj, self)
        refusals = strategy.admit(obj, self)
        if refusals:
            raise self._forbidden(resource, meta.get("name", ""), "; ".join(refusals))
        self._raise_invalid(resource, obj, strategy.validate(obj))
        refusals = strategy.admit_validated(obj, None, self)  # validating admission: ResourceQuota's last
        if refusals:
            raise self._forbidden(resource, meta["name"], "; ".join(refusals))
        refusal = await self.quota.admit(resource, obj, None, dry_run)
        if refusal:
            raise self._forbidden(resource, meta["name"], refusal)
        if warnings is not None:
            warnings += strategy.warnings(obj, None)
        omitempty.omit_empty(obj, resource.model)  # encoded as Go encodes: the strategy's empty values too
        meta = obj["metadata"]
        if dry_run:
            if self.caches[resource].get(namespace, meta["name"]) is not None:
                raise errors.already_exists(resource.plural, meta["name"], resource.group)
            return obj
        for _ in range(5):
            key = resource.key(namespace, meta["name"])
            try:
                kv = await self._write(key, obj)
                break
            except KeyExists:
                if not generate:
                    raise errors.already_exists(resource.plural, meta["name"], resource.group) from None
                meta["name"] = _generated_name(meta["generateName"])
        else:
            raise errors.already_exists(resource.plural, meta["name"], resource.group)
        return _with_rv(obj, kv.mod_revision)

    async def _write(self, key: str, obj: Obj, expected: int | None = None) -> KeyValue:
        """Store `obj` at `key` (created, or updated from revision `expected`) and wait until the watch cache has
        it, so the writer reads its own write. The cache keeps `obj` itself (`Caches.adopt`): the registry's objects
        are its own copies and plain JSON values, and nothing changes them after this but their resourceVersion."""
        data = encode(obj)
        self.caches.adopt(key, data, obj)
        try:
            kv = await (self.store.create(key, data) if expected is None else
                        self.store.update(key, data, expected))
            await self.caches.wait_for(kv.mod_revision)
        finally:
            self.caches.forget(key, data)
        return kv

    @staticmethod
    def check_types(resource: Resource, obj: Obj, patch: bool = False,
                    unknown: builtins.list[str] | None = None) -> None:
        """Decode as upstream: a wrong JSON type is a 400 naming the field, or after a patch a 422 on `patch`.

        With `unknown`, unknown fields are pruned by the same walk and their paths appended, as
        `schema.prune_unknown` before the check would (fieldValidation's Warn and Ignore: their warnings are
        dropped with the request when the types are wrong). The object in a patch's message is shown pruned."""
        mismatch = typecheck.check(obj, resource.model, unknown)
        if mismatch is None and not resource.model:  # a custom resource: its metadata typed, its schema prunes
            mismatch = resource.check_metadata(obj, unknown)
            if mismatch is None and unknown is not None:
                unknown += resource.prune_unknown(obj)
        if mismatch is None:
            return
        if unknown is not None:  # the walk stopped at the mismatch: prune the rest, as the two walks did
            schema.prune_unknown(obj, resource.model)
        if patch:  # apiserver/pkg/endpoints/handlers/patch.go: field.Invalid(field.NewPath("patch"), patchedObjJS, err)
            shown = orjson.dumps(nesting.dumps(obj).decode()).decode()
            raise errors.invalid("", "", [Cause("FieldValueInvalid", f"Invalid value: {shown}: {mismatch.error}",
                                                "patch")])
        raise errors.cannot_decode(resource.kind, resource.version,
                                   Cause("FieldValueInvalid", mismatch.error, mismatch.path))

    def _raise_invalid(self, resource: Resource, obj: Obj, causes: builtins.list[Cause]) -> None:
        if causes:
            raise errors.invalid(resource.kind, obj.get("metadata", {}).get("name", ""), causes, resource.group)

    # --- update ----------------------------------------------------------------------------------

    async def guaranteed_update(self, resource: Resource, namespace: str, name: str, mutate: Mutate,
                                dry_run: bool = False, reads_only: bool = False, admit: bool = False) -> Obj:
        """Read, mutate, compare-and-swap; on a lost race re-read from the store and try again.

        An update that empties a deleting object's finalizers deletes it (store.go's errEmptiedFinalizers); that
        delete is conditional on the revision read too, and a write in between retries the whole mutation on the
        fresh object, which may keep it (upstream's Delete retries against ValidateAllObjectFunc: the re-run
        mutation is at least as strict).

        With `admit` (an update of the main resource), quota admission charges what the new object uses beyond the
        current one before the write (a lost race charges again, as upstream's admission inside GuaranteedUpdate;
        the quota controller's recalculation returns any excess).

        `mutate` raises a Conflict itself when the client pinned a resourceVersion. It is given a copy of the
        current object to change, or with `reads_only` (a mutation that never writes into its argument, though
        what it returns may share parts of it) the watch cache's object itself: a deep copy less per update.
        Cached objects are never changed in place, so sharing their parts is safe.
        """
        cur = self.current(resource, namespace, name)
        for _ in range(MAX_RETRIES):
            new = mutate(cur if reads_only else copy_obj(cur))
            new["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]  # (first: metadata compares equal)
            if new is not cur:  # encoded as Go encodes (the hooks' empty values too), before the no-op check
                omitempty.omit_empty(new, resource.model, cur)
            if new == cur:
                return cur
            refusal = await self.quota.admit(resource, new, cur, dry_run) if admit else ""
            if refusal:  # an update of the main resource: quota admission, after the mutation's validation
                raise self._forbidden(resource, name, refusal)
            if dry_run:
                return new
            key, expected = resource.key(namespace, name), int(cur["metadata"]["resourceVersion"])
            try:
                if self._should_delete_during_update(new):  # a lost race here is retried as a write's is
                    return await self._delete_now(resource, new)
                kv = await self._write(key, new, expected)
            except RevisionMismatch:
                cur = await self._fresh(resource, namespace, name)
                continue
            except KeyNotFound:
                raise errors.not_found(resource.plural, name, resource.group) from None
            return _with_rv(new, kv.mod_revision)
        raise errors.stale(resource.plural, name, resource.group)

    @staticmethod
    def _should_delete_during_update(obj: Obj) -> bool:
        meta = obj["metadata"]
        return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers") and \
            not (obj.get("spec") or {}).get("finalizers") and meta.get("deletionGracePeriodSeconds") == 0

    def _update_mutation(self, resource: Resource, body: Obj, subresource: str,
                         warnings: builtins.list[str] | None = None, owned: bool = False) -> Mutate:
        """The mutation of an update to `body`: reads the current object, never writes into it (`reads_only`);
        the strategies' hooks read theirs (`old`) alike. The new object is a copy of `body`, or with `owned` (a
        body made for this one attempt, sharing nothing the attempt must not change) `body` itself."""
        pinned = str(body.get("metadata", {}).get("resourceVersion") or "")

        def mutate(cur: Obj) -> Obj:
            return self._updated(resource, body, subresource, warnings, owned, pinned, cur)

        return mutate

    def _updated(self, resource: Resource, body: Obj, subresource: str, warnings: builtins.list[str] | None,
                 owned: bool, pinned: str, cur: Obj) -> Obj:
        """One attempt of `_update_mutation`'s mutation (`pinned`: the body's resourceVersion, "" for none). A patch
        calls it directly with the object its attempt built: no closure made per attempt."""
        strategy = self.strategies[resource]
        meta = body.setdefault("metadata", {})
        name = cur["metadata"]["name"]
        if pinned and pinned != cur["metadata"]["resourceVersion"]:
            raise errors.stale(resource.plural, name, resource.group)
        if meta.get("uid") and meta["uid"] != cur["metadata"]["uid"]:
            raise errors.conflict(resource.plural, name, f"Precondition failed: UID in precondition: "
                                                         f"{cur['metadata']['uid']}, UID in object meta: "
                                                         f"{meta['uid']}", resource.group)
        if meta.get("name", name) != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on "
                                     f"the URL ({name})")
        new = body if owned else copy_obj(body)
        if subresource != "status":  # decoded as Go decodes, before the hooks compare with `cur` (a status update
            omitempty.omit_empty(new, resource.model, cur)  # takes the body's status alone: walked as it is stored)
        new["apiVersion"], new["kind"] = resource.group_version, resource.kind
        cur_meta, new_meta = cur["metadata"], new["metadata"]
        for field in _KEPT_ON_UPDATE:
            if field in cur_meta:
                new_meta[field] = cur_meta[field]
            else:
                new_meta.pop(field, None)
        if cur_meta.get("deletionTimestamp"):
            # Finalizers may only be removed once deletion has started (upstream: no new ones).
            added = set(new_meta.get("finalizers") or []) - set(cur_meta.get("finalizers") or [])
            if added:  # ValidateNoNewFinalizers: the new ones sorted, as Go's %#v prints a []string
                found = ", ".join(orjson.dumps(f).decode() for f in sorted(added))
                detail = f"no new finalizers can be added if the object is being deleted, found new finalizers " \
                         f"[]string{{{found}}}"
                raise errors.invalid(resource.kind, name, [Cause("FieldValueForbidden", f"Forbidden: {detail}",
                                                                 "metadata.finalizers")], resource.group)
        if subresource == "status":
            new = strategy.prepare_status_update(new, cur)
            causes = strategy.validate_status_update(new, cur)
        else:
            strategy.prepare_update(new, cur)
            refusals = strategy.admit_update(new, cur, self)
            if refusals:
                raise self._forbidden(resource, name, "; ".join(refusals))
            causes = strategy.validate_update(new, cur)
            if warnings is not None:  # a retried mutation replaces what an earlier attempt said
                warnings[:] = strategy.warnings(new, cur)
        self._raise_invalid(resource, new, causes)
        if subresource != "status" and (refusals := strategy.admit_validated(new, cur, self)):
            raise self._forbidden(resource, name, "; ".join(refusals))
        return new

    async def update(self, resource: Resource, namespace: str, name: str, body: Obj, subresource: str = "",
                     dry_run: bool = False, warnings: builtins.list[str] | None = None, checked: bool = False) -> Obj:
        """`checked`: as `create`'s."""
        if not checked:
            self.check_types(resource, body)
        return await self.guaranteed_update(resource, namespace, name,
                                            self._update_mutation(resource, body, subresource, warnings), dry_run,
                                            reads_only=True, admit=not subresource)

    async def patch(self, resource: Resource, namespace: str, name: str, apply_patch: Callable[[Obj], Obj],
                    subresource: str = "", dry_run: bool = False, warnings: builtins.list[str] | None = None,
                    copies: bool = False, fresh: bool = False, checked: bool = False) -> Obj:
        """Apply a patch to the current object and store it as an update (no-op patches write nothing).

        `apply_patch` is given a copy of the current object, or with `copies` (it copies what it is given before
        changing any of it: strategic merge and JSON patch) the watch cache's object itself. With `fresh` (what it
        returns is the attempt's own: it shares no part with the watch cache's object, nor with anything another
        attempt uses — the handlers' merge, JSON and strategic merge patches), what it returns becomes the new
        object as it is, not copied again. Each saves one deep copy of the object.
        With `checked`, `apply_patch` has type-checked what it returns itself (`check_types(patch=True)`).
        """

        def mutate(cur: Obj) -> Obj:
            patched = apply_patch(cur if copies else copy_obj(cur))
            if isinstance(patched, dict) and not checked:
                self.check_types(resource, patched, patch=True)
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                raise errors.bad_request("patch produced an object without metadata")
            patched_rv = patched["metadata"].get("resourceVersion")
            if patched_rv not in (None, cur["metadata"]["resourceVersion"]):
                raise errors.stale(resource.plural, cur["metadata"]["name"], resource.group)
            patched["metadata"].pop("resourceVersion", None)
            return self._updated(resource, patched, subresource, warnings, fresh, "", cur)

        return await self.guaranteed_update(resource, namespace, name, mutate, dry_run, reads_only=True,
                                            admit=not subresource)

    # --- delete ----------------------------------------------------------------------------------

    async def delete(self, resource: Resource, namespace: str, name: str, options: Obj,
                     dry_run: bool = False) -> tuple[Obj, bool]:
        """Returns (object, deleted-now). Graceful deletes set deletionTimestamp and leave the object."""
        strategy = self.strategies[resource]
        deletion.validate_options(options)
        grace_req = options.get("gracePeriodSeconds")
        if grace_req is not None:
            if not isinstance(grace_req, int) or isinstance(grace_req, bool):
                raise errors.bad_request("gracePeriodSeconds must be an integer")
            grace_req = max(grace_req, 1) if grace_req < 0 else grace_req  # negative → 1, as upstream
        pre = options.get("preconditions") or {}
        for _ in range(MAX_RETRIES):
            cur = self.current(resource, namespace, name)
            meta = cur["metadata"]
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise errors.conflict(resource.plural, name, f"the UID in the precondition ({pre['uid']}) does not "
                                                             f"match the UID in record ({meta.get('uid')}). The "
                                                             "object might have been deleted and then recreated",
                                      resource.group)
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise errors.conflict(resource.plural, name, "the ResourceVersion in the precondition "
                                                             f"({pre['resourceVersion']}) does not match the "
                                                             f"ResourceVersion in record ({meta['resourceVersion']})."
                                                             " The object might have been modified", resource.group)
            new = self._plan_delete(strategy, cur, grace_req, options)
            if new is cur:  # graceful deletion already pending with an equal or shorter period
                return cur, False
            if dry_run:
                return (new or cur), new is None
            try:
                if new is None:
                    return await self._delete_now(resource, cur), True
                key, expected = resource.key(namespace, name), int(meta["resourceVersion"])
                kv = await self._write(key, new, expected)
                return _with_rv(new, kv.mod_revision), False
            except RevisionMismatch:
                await self.caches.wait_for(self.store.revision)
            except KeyNotFound:
                raise errors.not_found(resource.plural, name, resource.group) from None
        raise errors.stale(resource.plural, name, resource.group)

    def _plan_delete(self, strategy: Strategy, cur: Obj, grace_req: int | None, options: Obj) -> Obj | None:
        """rest.BeforeDelete: None = remove now; `cur` = nothing to do; a new object = store it.

        The propagation policy's finalizer (deletion.py) is set first; namespaces keep their own
        spec finalizer and take none of these."""
        meta = cur["metadata"]
        changed = None if strategy.resource is NAMESPACES else deletion.gc_finalizers(
            meta, options, strategy.orphans_by_default)
        base = cur
        if changed is not None:
            base = copy_obj(cur)
            base["metadata"]["finalizers"] = changed
            if not changed:
                del base["metadata"]["finalizers"]
        finalizers = strategy.pending_finalizers(base)
        if meta.get("deletionTimestamp"):
            period = meta.get("deletionGracePeriodSeconds")
            if not period:
                return base if finalizers else None
            if grace_req is None or grace_req >= period:
                return base
            new = copy_obj(base)
            deadline = parse_rfc3339(meta["deletionTimestamp"])
            started = deadline - period if deadline < LAST_TIMESTAMP else self.clock.now()  # clamped: start unknown
            new["metadata"]["deletionTimestamp"] = _deadline(started + grace_req)
            new["metadata"]["deletionGracePeriodSeconds"] = grace_req
            if grace_req == 0 and not finalizers:
                return None
            return new
        grace = strategy.graceful_period(cur, grace_req)
        if not grace and not finalizers:
            return None
        new = copy_obj(base)
        new["metadata"]["deletionTimestamp"] = _deadline(self.clock.now() + (grace or 0))
        new["metadata"]["deletionGracePeriodSeconds"] = grace or 0
        if new["metadata"].get("generation", 0) > 0:
            new["metadata"]["generation"] += 1
        if strategy.resource is NAMESPACES:
            new.setdefault("status", {})["phase"] = "Terminating"
        strategy.mark_deleting(new)
        return new

    async def _delete_now(self, resource: Resource, cur: Obj) -> Obj:
        meta = cur["metadata"]
        try:
            kv = await self.store.delete(resource.key(meta.get("namespace", ""), meta["name"]),
                                         int(meta["resourceVersion"]))
        except KeyNotFound:
            raise errors.not_found(resource.plural, meta["name"], resource.group) from None
        await self.caches.wait_for(kv.mod_revision)
        return _with_rv(copy_obj(cur), kv.mod_revision)


def status_success(resource: Resource, obj: Obj, code: int = 200) -> dict[str, Any]:
    meta = obj["metadata"]
    details: dict[str, Any] = {"name": meta["name"], "kind": resource.plural, "uid": meta.get("uid", "")}
    if resource.group:
        details["group"] = resource.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code,
            "details": details}
