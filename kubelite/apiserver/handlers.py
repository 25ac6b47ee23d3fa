"""REST handlers for resources: verbs map to registry calls, results to JSON or Tables."""

from __future__ import annotations

import base64
import re
import ssl
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from kubelite.api import errors
from kubelite.api.errors import Cause
from kubelite.api.selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from kubelite.apiserver import (
    listoptions,
    logs,
    negotiation,
    nesting,
    node_connection,
    patch,
    protobuf,
    scale,
    schema,
    streaming,
    subresources,
    tables,
    typecheck,
    versions,
    watch,
)
from kubelite.apiserver.cache import decode
from kubelite.apiserver.customresources.strategy import CustomResource
from kubelite.apiserver.registry.base import Obj, Resource
from kubelite.apiserver.registry.pods import ephemeral_containers_update
from kubelite.apiserver.request import (
    APPLY_PATCH,
    JSON,
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    PROTOBUF,
    STRATEGIC_PATCH,
    YAML,
    Target,
    decode_body,
    decode_request_body,
    media_type,
    parse_bool,
    parse_int,
    read_body,
    wants_table,
)
from kubelite.apiserver.rest import Registry, status_success
from kubelite.store.interface import Compacted, FutureRevision

_VALIDATION = ("Strict", "Warn", "Ignore")
# Kinds whose field selectors upstream converts by a function of their own (pkg/apis/core/v1/conversion.go), which
# refuses a field as "field label not supported: F"; the others' default says `"F" is not a known field selector`.
_FIELD_LABEL_FUNCS = frozenset(("", kind) for kind in ("Pod", "Node", "ReplicationController", "Event", "Namespace",
                                                       "Secret", "Service"))
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


_OBJECT: web.ResponseKey[Any] = web.ResponseKey("object")  # what a JSON answer carries, for protobuf
# Subresources that answer in their own media types (text logs, upgraded streams): Accept is not negotiated
_STREAMING = frozenset({"log", "exec", "attach", "portforward", "proxy"})


def respond(data: Any, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    resp = web.Response(body=nesting.dumps(data), status=status, content_type="application/json")
    resp[_OBJECT] = data
    for w in warnings or []:  # control characters become spaces, as Go writes header values
        escaped = _CONTROL.sub(" ", w).replace("\\", "\\\\").replace('"', '\\"')
        resp.headers.add("Warning", f'299 - "{escaped}"')
    return resp


class ResourceHandlers:
    def __init__(self, registry: Registry, agent_tls: ssl.SSLContext | None = None) -> None:
        self.registry = registry
        self.agent_tls = agent_tls or node_connection.client_context()  # no client certificate: agents say 401
        self.caches = registry.caches
        self.clock = registry.clock

    async def handle(self, request: web.Request, target: Target) -> web.StreamResponse:
        if target.subresource not in _STREAMING:
            negotiation.check_acceptable(request.headers.get("Accept", ""))
        return negotiate(request, await self._handle(request, target))

    async def handle_custom(self, request: web.Request, target: Target) -> web.StreamResponse:
        """A custom resource's request (routed here by its own catalogue, so built-in requests pay nothing for it):
        answered as a built-in's, its objects shown as the requested version shows them (`CustomResource.view`)."""
        r = target.resource
        assert isinstance(r, CustomResource)
        try:
            resp = await self.handle(request, target)
        except KeyError:
            if r in self.registry.strategies:
                raise
            # its CRD was deleted or changed while the request ran: what upstream answers for an unserved path
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource") from None
        if _OBJECT in resp and isinstance(resp, web.Response):
            data = resp[_OBJECT]
            viewed = _viewed(r, data)
            if viewed is not data:
                resp[_OBJECT] = viewed
                resp.body = nesting.dumps(viewed)
        return resp

    async def _handle(self, request: web.Request, target: Target) -> web.StreamResponse:
        if target.resource is None:  # POST /api/v1/namespaces/NS/bindings
            if request.method != "POST":
                raise errors.method_not_allowed(request.method, "bindings")
            return await self._binding(request, target.namespace, None)
        r, method, sub = target.resource, request.method, target.subresource
        conversion = versions.CONVERSIONS.get(r)
        if conversion is not None:  # a version served by conversion to the stored one
            return await versions.serve(self, request, target, conversion)
        if sub:  # the subresources served by handlers of their own (an object's or its status's requests are not)
            if sub == "log":
                if method != "GET":
                    raise errors.method_not_allowed(method, "pods/log")
                return await logs.proxy(request, self.registry, self.agent_tls, target.namespace, target.name)
            if sub in streaming.SUBRESOURCES:
                return await streaming.proxy(request, self.registry, self.agent_tls, target)
            if sub in ("binding", "eviction"):
                if method != "POST":
                    raise errors.method_not_allowed(method, f"{r.plural}/{sub}")
                if sub == "binding":
                    return await self._binding(request, target.namespace, target.name)
                return await self._eviction(request, target)
            if sub == "scale":
                paths = scale.ScalePaths.of_custom(r.scale) if isinstance(r, CustomResource) and r.scale \
                    else scale.WORKLOADS
                return respond(await scale.handle(request, self.registry, target, _dry_run(request), paths))
            if sub == "ephemeralcontainers":
                return await self._ephemeral_containers(request, target)
            if sub == "finalize":
                if method != "PUT":
                    raise errors.method_not_allowed(method, f"{r.plural}/finalize")
                body = await decode_request_body(await read_body(request), media_type(request))
                return respond(await subresources.finalize(self.registry, target.name, body, _dry_run(request)))
        if not target.name:
            if method == "GET":
                return await self._list(request, target)
            if method == "POST":
                return await self._create(request, target)
            # upstream serves deletecollection on a namespaced resource's namespace path only
            if method == "DELETE" and "deletecollection" in r.verbs and (target.namespace or not r.namespaced):
                return await self._delete_collection(request, target)
            raise errors.method_not_allowed(method, r.plural)
        if method == "GET":
            await listoptions.wait_fresh(self.caches, self.clock,
                                         listoptions.parse_resource_version(request.query.get("resourceVersion", "")))
            obj = self.registry.current(r, target.namespace, target.name)
            if wants_table(request):
                return respond(tables.table(r.kind, [obj], self.clock.now(), _include(request),
                                            obj["metadata"]["resourceVersion"], printer=_printer(r)))
            return respond(obj)
        if method == "PUT":
            return await self._update(request, target)
        if method == "PATCH":
            return await self._patch(request, target)
        if method == "DELETE":
            return await self._delete(request, target)
        raise errors.method_not_allowed(method, r.plural)

    # --- reads -----------------------------------------------------------------------------------

    def _selectors(self, request: web.Request, r: Resource) -> tuple[LabelSelector, FieldSelector]:
        labels = parse_label_selector(request.query.get("labelSelector", ""))
        fields = parse_field_selector(request.query.get("fieldSelector", ""), r.fields,
                                      "" if (r.group, r.kind) in _FIELD_LABEL_FUNCS else r.plural)
        return labels, fields

    async def _list(self, request: web.Request, target: Target) -> web.StreamResponse:
        r = target.resource
        assert r is not None
        q = request.query
        watching = parse_bool(q.get("watch"), "watch")
        initial_events = listoptions.validate(q, watching)
        matches, fields = self._matcher(request, r)
        if watching:
            encoder = watch.table_encoder(r.kind, _include(request), self.clock, _printer(r), r.version) \
                if wants_table(request) else watch.protobuf_event if _protobuf_watch(request, r) \
                else watch.json_encoder(r.view if isinstance(r, CustomResource) else None, r.group_version)
            # 0 is no timeout, as none (handlers/get.go: `if timeout == 0 && minRequestTimeout > 0`)
            timeout = parse_int(q.get("timeoutSeconds"), "timeoutSeconds")
            return await watch.serve(request, self.caches, r, target.namespace, matches, encoder,
                                     q.get("resourceVersion", ""), float(timeout) if timeout else None,
                                     parse_bool(q.get("allowWatchBookmarks"), "allowWatchBookmarks"), self.clock,
                                     _trigger(fields, self.caches[r].trigger_field), initial_events)
        items, revision, token, remaining = await self._page(request, target, matches)
        if wants_table(request):
            return respond(tables.table(r.kind, items, self.clock.now(), _include(request), str(revision), token,
                                       remaining=remaining, printer=_printer(r)))
        return respond(_list_of(r, items, revision, token, remaining))

    def _matcher(self, request: web.Request, r: Resource) -> tuple[Callable[[Obj], bool] | None, FieldSelector]:
        """The request's label and field selectors as one predicate (None: they select everything)."""
        labels, fields = self._selectors(request, r)
        if labels.empty and not fields.requirements:
            return None, fields

        def matches(o: Obj) -> bool:
            return labels.matches(o["metadata"].get("labels")) and fields.matches(o)

        return matches, fields

    async def _page(self, request: web.Request, target: Target,
                    matches: Callable[[Obj], bool] | None) -> tuple[list[Obj], int, str, int | None]:
        """A list request's items (one page of them, with its continue token) at the revision it is served at, and
        how many items follow the page: etcd3 store.go's remainingItemCount, only for a list without selectors
        (upstream counts keys, which a selector would make inexact)."""
        r = target.resource
        assert r is not None
        q = request.query
        items, revision = await self._items(r, target.namespace, q.get("resourceVersion", ""),
                                            q.get("resourceVersionMatch", ""))
        if matches is not None:
            items = [o for o in items if matches(o)]
        page, token, start = _paginate(items, q.get("continue", ""), parse_int(q.get("limit"), "limit"), revision)
        remaining = len(items) - start - len(page) if token and matches is None else None
        return page, revision, token, remaining

    async def _items(self, r: Resource, namespace: str, rv: str, match: str) -> tuple[list[Obj], int]:
        revision = listoptions.parse_resource_version(rv)
        if match == "Exact" and revision:
            try:
                prefix = r.key_prefix + (f"{namespace}/" if namespace else "")
                listed = await self.registry.store.list(prefix, revision)
            except Compacted as exc:
                raise errors.gone(f"too old resource version: {exc.requested} ({exc.compacted})") from None
            except FutureRevision as exc:
                raise errors.too_large_resource_version(exc.requested, exc.current) from None
            return [decode(kv) for kv in listed.items], listed.revision
        await listoptions.wait_fresh(self.caches, self.clock, revision)
        return self.caches[r].list(namespace), self.caches.revision

    # --- writes ----------------------------------------------------------------------------------

    async def _decode_object(self, request: web.Request, r: Resource) -> tuple[Obj, list[str] | None, list[str]]:
        """Body → object with GVK defaulted from the URL, and the warnings of its unknown fields per fieldValidation
        — or None, when their pruning is left to the type check's walk (`_checked`): every mode but Strict, whose
        400 for them comes before the handler's other checks — and Warn's warnings of its duplicate JSON fields
        (`_duplicate_warnings`)."""
        body = await read_body(request)
        ctype = media_type(request)
        obj = await decode_request_body(body, ctype)
        if not isinstance(obj, dict):
            raise errors.bad_request(f"the body of the request must be a {r.kind} object")
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind in (None, r.kind) and isinstance(api_version, str) \
                and (mismatch := versions.version_mismatch(r, api_version)):
            raise errors.bad_request(mismatch)
        if (kind and kind != r.kind) or (api_version and api_version != r.group_version):
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {r.kind}): "
                                     f"{api_version}, Kind={kind}")
        obj["kind"], obj["apiVersion"] = r.kind, r.group_version
        if _validation_mode(request) != "Strict":
            return obj, None, _duplicate_warnings(request, body) if ctype == JSON else []
        return obj, self._field_validation(request, r, obj, body if ctype == JSON else None), []

    def _checked(self, request: web.Request, r: Resource, obj: Obj, warnings: list[str] | None) -> list[str]:
        """Type-check a decoded object as the registry would (`Registry.check_types`), pruning it in the same walk
        if `_decode_object` left that (`warnings` None); the unknown fields' warnings."""
        if warnings is not None:
            self.registry.check_types(r, obj)
            return warnings
        unknown: list[str] = []
        self.registry.check_types(r, obj, unknown=unknown)
        return _unknown_field_warnings(request, unknown)

    def _field_validation(self, request: web.Request, r: Resource, obj: Obj, raw_json: bytes | None,
                          patched: bool = False) -> list[str]:
        """Prune unknown fields as `fieldValidation` says: their warnings, or Strict's 400. A `patched` object (a
        patch's result, a dict) is type-checked too, in the same walk unless Strict (`Registry.check_types`)."""
        mode = _validation_mode(request)
        if patched and mode != "Strict":
            unknown: list[str] = []
            self.registry.check_types(r, obj, patch=True, unknown=unknown)
            return _unknown_field_warnings(request, unknown)
        problems = [f'unknown field "{p}"' for p in r.prune_unknown(obj)]
        if mode == "Strict" and raw_json is not None:
            problems += [f'duplicate field "{d}"' for d in schema.duplicate_fields(raw_json)]
        if not problems or mode == "Ignore":
            problems = []
        elif mode == "Strict":
            raise errors.bad_request(f'{r.kind} in version "{r.version}" cannot be handled as a {r.kind}: strict '
                                     f"decoding error: {', '.join(problems)}")
        if patched:
            self.registry.check_types(r, obj, patch=True)
        return problems

    def _check_namespace(self, obj: Obj, target: Target) -> None:
        meta = obj.get("metadata")
        ns = meta.get("namespace") if isinstance(meta, dict) else None  # a malformed one fails its type check
        if target.resource is not None and target.resource.namespaced and ns and ns != target.namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")

    async def _create(self, request: web.Request, target: Target) -> web.StreamResponse:
        r = target.resource
        assert r is not None
        if r.namespaced and not target.namespace:
            raise errors.method_not_allowed("POST", r.plural)
        obj, pruned, duplicates = await self._decode_object(request, r)
        self._check_namespace(obj, target)
        dry_run = _dry_run(request)
        warnings = self._checked(request, r, obj, pruned) + duplicates
        created = await self.registry.create(r, target.namespace, obj, dry_run, warnings, checked=True)
        return respond(created, 201, warnings)

    async def _update(self, request: web.Request, target: Target) -> web.StreamResponse:
        r = target.resource
        assert r is not None
        obj, pruned, duplicates = await self._decode_object(request, r)
        self._check_namespace(obj, target)
        dry_run = _dry_run(request)
        warnings = self._checked(request, r, obj, pruned) + duplicates
        updated = await self.registry.update(r, target.namespace, target.name, obj, target.subresource, dry_run,
                                             warnings, checked=True)
        return respond(updated, 200, warnings)

    async def _patch(self, request: web.Request, target: Target) -> web.StreamResponse:
        r = target.resource
        assert r is not None
        ctype = media_type(request)
        if ctype == STRATEGIC_PATCH and not r.model:  # no Go type, no struct tags: as for custom resources
            raise errors.unsupported_media_type(ctype, [t for t in PATCH_TYPES if t != STRATEGIC_PATCH])
        body = await read_body(request)
        patch_doc = await decode_request_body(body, ctype, PATCH_TYPES)
        dry_run = _dry_run(request)
        if ctype == APPLY_PATCH:
            return await self._apply(request, target, patch_doc, dry_run)
        warnings: list[str] = []
        duplicates = _duplicate_warnings(request, body)  # said before the unknown fields, as upstream
        # A strategic merge puts the document's values into its result, which the update then changes (pruning,
        # strategies): each attempt gets a document of its own, the one decoded for the first, the body decoded
        # again for a retry after a conflict. (A merge patch and a JSON patch copy the values they take.)
        documents = [patch_doc]

        def apply(cur: Obj) -> Obj:
            if ctype == JSON_PATCH:
                out: Obj = patch.json_patch(cur, patch_doc)
            elif ctype == MERGE_PATCH:
                out = patch.merge_patch(cur, patch_doc)
            else:
                doc = documents.pop() if documents else decode_body(body, ctype, PATCH_TYPES)
                out = patch.strategic_merge_patch(cur, doc, r.model)
            try:
                nesting.check_depth(out)  # operations on nested paths may build what no single document could
            except ValueError as exc:
                raise errors.bad_request(f"the patched object could not be stored: {exc}") from None
            warnings[:] = duplicates + self._field_validation(request, r, out, None, patched=isinstance(out, dict))
            return out

        admitted: list[str] = []
        # JSON patch and strategic merge copy the object first; a merge patch builds new maps along its own paths and
        # copies its lists: what `apply` returns is the attempt's own. It type-checks it (with the pruning, one walk).
        patched = await self.registry.patch(r, target.namespace, target.name, apply, target.subresource, dry_run,
                                            admitted, copies=ctype != MERGE_PATCH, fresh=True, checked=True)
        return respond(patched, 200, warnings + admitted)

    async def _apply(self, request: web.Request, target: Target, doc: Any, dry_run: bool) -> web.StreamResponse:
        """Server-side apply as an upsert plus strategic merge (no managedFields or conflict detection yet)."""
        r = target.resource
        assert r is not None
        if not request.query.get("fieldManager"):
            raise errors.bad_request("PATCH, application/apply-patch+yaml requires fieldManager to be set")
        if not isinstance(doc, dict):
            raise errors.bad_request("apply patch must be an object")
        self.registry.check_types(r, doc)
        warnings = self._field_validation(request, r, doc, None)
        if self.caches[r].get(target.namespace, target.name) is None:
            doc.setdefault("metadata", {})["name"] = target.name
            return respond(await self.registry.create(r, target.namespace, doc, dry_run, warnings), 201, warnings)
        admitted: list[str] = []
        patched = await self.registry.patch(r, target.namespace, target.name,
                                            lambda cur: patch.strategic_merge_patch(cur, doc, r.model),
                                            target.subresource, dry_run, admitted, copies=True)
        return respond(patched, 200, warnings + admitted)

    async def _delete_options(self, request: web.Request) -> tuple[Obj, bool]:
        """DeleteOptions from the body and the query (the query's win), and whether the delete is a dry run."""
        body = await read_body(request)
        options: Obj = {}
        if body.strip():
            decoded = await decode_request_body(body, media_type(request), (JSON, YAML, PROTOBUF))
            if not isinstance(decoded, dict):
                raise errors.bad_request("DeleteOptions must be an object")
            _check_types(decoded, "V1DeleteOptions", "DeleteOptions")
            options = decoded
        grace = parse_int(request.query.get("gracePeriodSeconds"), "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if request.query.get("propagationPolicy"):
            options["propagationPolicy"] = request.query["propagationPolicy"]
        if request.query.get("orphanDependents"):
            options["orphanDependents"] = parse_bool(request.query["orphanDependents"], "orphanDependents")
        for key in ("uid", "resourceVersion"):
            if request.query.get(f"preconditions.{key}"):
                options.setdefault("preconditions", {})[key] = request.query[f"preconditions.{key}"]
        return options, _dry_run(request) or "All" in (options.get("dryRun") or [])

    async def _delete(self, request: web.Request, target: Target) -> web.StreamResponse:
        r = target.resource
        assert r is not None
        options, dry_run = await self._delete_options(request)
        obj, _ = await self.registry.delete(r, target.namespace, target.name, options, dry_run)
        warnings = self.registry.strategies[r].delete_warnings(obj, options)
        if r.kind == "Pod" or obj["metadata"].get("deletionTimestamp"):
            return respond(obj, 200, warnings)
        return respond(status_success(r, obj), 200, warnings)

    async def _delete_collection(self, request: web.Request, target: Target) -> web.StreamResponse:
        """Store.DeleteCollection: list with the request's ListOptions, delete each item as a delete of its own
        would (grace periods, finalizers, propagation; one already gone is skipped), answer the list as it was
        read: the items before their deletion, as kube-apiserver 1.32 answers. With `limit`, one page only."""
        r = target.resource
        assert r is not None
        listoptions.validate(request.query, False)
        matches, _ = self._matcher(request, r)
        options, dry_run = await self._delete_options(request)
        items, revision, token, remaining = await self._page(request, target, matches)
        warnings: list[str] = []
        for obj in items:
            meta = obj["metadata"]
            try:
                deleted, _ = await self.registry.delete(r, meta.get("namespace", ""), meta["name"], dict(options),
                                                        dry_run)
            except errors.ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            warnings += [w for w in self.registry.strategies[r].delete_warnings(deleted, options) if w not in warnings]
        return respond(_list_of(r, items, revision, token, remaining), 200, warnings)

    # --- subresources ----------------------------------------------------------------------------

    async def _ephemeral_containers(self, request: web.Request, target: Target) -> web.StreamResponse:
        """pods/ephemeralcontainers (EphemeralContainersREST): GET answers the pod; PUT and PATCH (every patch type,
        kubectl debug's strategic merge) are updates of the pod under podEphemeralContainersStrategy's rules
        (registry/pods.py), which keep all of it but spec.ephemeralContainers."""
        r = target.resource
        assert r is not None
        pod = self.registry.current(r, target.namespace, target.name)  # 404 first: an apply never creates here
        if request.method == "GET":
            return respond(pod)
        if request.method not in ("PUT", "PATCH"):
            raise errors.method_not_allowed(request.method, f"{r.plural}/ephemeralcontainers")
        with ephemeral_containers_update():
            if request.method == "PUT":
                return await self._update(request, target)
            return await self._patch(request, target)

    async def _binding(self, request: web.Request, namespace: str, name: str | None) -> web.StreamResponse:
        binding = await decode_request_body(await read_body(request), media_type(request))
        if not isinstance(binding, dict):
            raise errors.bad_request("the body must be a Binding")
        _check_types(binding, "V1Binding", "Binding")
        meta = binding.setdefault("metadata", {})
        if name is not None:
            if meta.get("name") and meta["name"] != name:
                raise errors.bad_request("name in URL does not match name in Binding object")
            meta["name"] = name
        await subresources.bind(self.registry, namespace, binding, _dry_run(request))
        return respond({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
                       201)

    async def _eviction(self, request: web.Request, target: Target) -> web.StreamResponse:
        eviction = await decode_request_body(await read_body(request), media_type(request))
        if not isinstance(eviction, dict):
            raise errors.bad_request("the body must be an Eviction")
        _check_types(eviction, "V1Eviction", "Eviction")
        name = (eviction.get("metadata") or {}).get("name")
        if name and name != target.name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        result = await subresources.evict(self.registry, target.namespace, target.name, eviction, _dry_run(request))
        return respond(result, 201)


def _printer(r: Resource) -> tables.Printer | None:
    """A custom resource's table printer (its additionalPrinterColumns); None: the kind's own."""
    return r.printer if isinstance(r, CustomResource) else None


def _viewed(r: CustomResource, data: Any) -> Any:
    """An answer's object, or a list's items, as version `r` shows them; `data` itself when none changes."""
    if not isinstance(data, dict):
        return data
    items = data.get("items")
    if isinstance(items, list) and data.get("kind") != "Table":
        viewed = [r.view(o) if isinstance(o, dict) else o for o in items]
        return {**data, "items": viewed} if any(v is not o for v, o in zip(viewed, items, strict=True)) else data
    if data.get("kind") == r.kind:
        return r.view(data)
    return data


def _list_of(r: Resource, items: list[Obj], revision: int, token: str, remaining: int | None) -> Obj:
    kind = r.list_kind if isinstance(r, CustomResource) else f"{r.kind}List"  # a CRD names its list kind
    return {"kind": kind, "apiVersion": r.group_version,
            "metadata": tables.list_meta(str(revision), token, remaining), "items": items}


def _validation_mode(request: web.Request) -> str:
    mode = request.query.get("fieldValidation", "Warn")
    if mode not in _VALIDATION:
        raise errors.bad_request(f"fieldValidation parameter unsupported: {mode}")
    return mode


def _duplicate_warnings(request: web.Request, body: bytes) -> list[str]:
    """fieldValidation=Warn's warnings for the fields a JSON body (an object, or a patch of JSON) gives twice:
    sigs.k8s.io/json's strict errors, said as warnings. Not looked for in an in-process client's body (a
    serialized dict has none; the scan costs a second parse). Strict's 400 for them is `_field_validation`'s."""
    if _validation_mode(request) != "Warn" or request.get(watch.LOOPBACK):
        return []
    return [f'duplicate field "{d}"' for d in schema.duplicate_fields(body)]


def _unknown_field_warnings(request: web.Request, unknown: list[str]) -> list[str]:
    """Warn's warnings for the unknown fields pruned (Ignore: none; never Strict, whose 400 comes first)."""
    if not unknown or _validation_mode(request) == "Ignore":
        return []
    return [f'unknown field "{p}"' for p in unknown]


def _check_types(body: Obj, model: str, kind: str) -> None:
    """Options and subresource bodies decode into their Go types upstream, as objects do."""
    mismatch = typecheck.check(body, model)
    if mismatch is not None:
        raise errors.cannot_decode(kind, "v1", Cause("FieldValueInvalid", mismatch.error, mismatch.path))


def _trigger(fields: FieldSelector, trigger_field: str | None) -> str | None:
    """The value a watch's field selector requires of the resource's indexed trigger field, if it does."""
    return next((req.value for req in fields.requirements if req.field == trigger_field and req.equal), None)


def _dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise errors.bad_request(f'unsupported dry run option "{v}": only "All" is supported')
    return bool(values)


def _include(request: web.Request) -> str:
    value = request.query.get("includeObject", "Metadata")
    if value not in ("None", "Metadata", "Object"):
        raise errors.bad_request(f"includeObject must be None, Metadata or Object, not {value!r}")
    return value


def _paginate(items: list[Obj], token: str, limit: int | None, revision: int) -> tuple[list[Obj], str, int]:
    """limit/continue: the token names the last key returned; later pages are served from current state.
    Returns the page, the next page's token ("" for the last page) and where the page starts in `items`."""
    start = 0
    if token:
        try:
            state = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            last = (state["ns"], state["name"])
        except (ValueError, KeyError, TypeError):
            last = None
        if last is None or not all(isinstance(part, str) for part in last):  # forged or truncated
            raise errors.bad_request("continue key is not valid")
        start = next((i for i, o in enumerate(items)
                      if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > last), len(items))
    if not limit or limit <= 0 or start + limit >= len(items):
        return items[start:], "", start
    page = items[start:start + limit]
    tail = page[-1]["metadata"]
    state = {"rv": revision, "ns": tail.get("namespace", ""), "name": tail["name"]}
    return page, base64.urlsafe_b64encode(orjson.dumps(state)).decode(), start


def negotiate(request: web.Request, resp: web.StreamResponse) -> web.StreamResponse:
    """Re-encode a `respond()` answer as protobuf when Accept prefers it and the object has a message (else JSON),
    or as YAML when Accept ranks it first (negotiation.py; sigs.k8s.io/yaml's keys sorted, as kubectl's -o yaml).
    Every resource answer passes here; other handlers that build answers with respond() can too."""
    if _OBJECT not in resp or not isinstance(resp, web.Response):
        return resp
    accept = request.headers.get("Accept", "")
    if protobuf.prefers_protobuf(accept):
        body = protobuf.encode(resp[_OBJECT])
        if body is not None:
            resp.body = body
            resp.content_type = protobuf.MEDIA_TYPE
    elif negotiation.output_media_type(accept) == negotiation.YAML:
        resp.body = negotiation.to_yaml(resp[_OBJECT])
        resp.content_type = negotiation.YAML
    return resp


def _protobuf_watch(request: web.Request, r: Resource) -> bool:
    return protobuf.prefers_protobuf(request.headers.get("Accept", "")) and \
        protobuf.has_message(r.group_version, r.kind)
