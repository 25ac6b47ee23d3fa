"""Kinds served at a second version by conversion at the handler boundary (autoscaling/v1 HorizontalPodAutoscalers).

Upstream decodes every request body into the internal type and encodes every answer in the version asked for.
kubelite stores and handles one version per kind (the storage version); a `Conversion` names another version it
serves and the two functions between them. A request at that version is served by the storage version's handling
with its bodies converted on the way in and its answers on the way out:
- create and update: the body is decoded, pruned and type-checked as the served version's type, then converted;
- patch: the patch applies to the current object as the served version shows it (merge, JSON and strategic merge
  patches; server-side apply is refused with 415 here);
- reads, deletes and watches: the stored objects are converted as they are answered. Tables are the storage
  version's: the printer reads the stored object, as upstream's prints the internal one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kubelite.api import errors
from kubelite.apiserver import handlers as h
from kubelite.apiserver import listoptions, nesting, patch, watch
from kubelite.apiserver.registry import autoscaling
from kubelite.apiserver.registry.base import Obj, Resource
from kubelite.apiserver.request import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    Target,
    decode_body,
    decode_request_body,
    media_type,
    parse_bool,
    parse_int,
    read_body,
    wants_table,
)


@dataclass(frozen=True, eq=False)
class Conversion:
    served: Resource  # the version a client names
    storage: Resource  # the version stored and handled
    to_storage: Callable[[Obj], Obj]
    from_storage: Callable[[Obj], Obj]

    def answer(self, data: Any) -> Any:
        """An answer of the storage version's handling as the served version: its object, or a list's items."""
        if not isinstance(data, dict) or data.get("apiVersion") != self.storage.group_version:
            return data
        if data.get("kind") == self.storage.kind:
            return self.from_storage(data)
        if data.get("kind") == f"{self.storage.kind}List":
            return {**data, "apiVersion": self.served.group_version,
                    "items": [self.from_storage(o) for o in data.get("items") or []]}
        return data


CONVERSIONS: dict[Resource, Conversion] = {
    autoscaling.HPAS_V1: Conversion(autoscaling.HPAS_V1, autoscaling.HPAS, autoscaling.from_v1, autoscaling.to_v1),
}


def version_mismatch(r: Resource, api_version: str) -> str:
    """create.go's 400 message for a body of another version kubelite serves `r`'s kind at (decoded by upstream's
    scheme, then refused), or "" when `api_version` is not one."""
    for c in CONVERSIONS.values():
        if r in (c.served, c.storage) and api_version in (c.served.group_version, c.storage.group_version) \
                and api_version != r.group_version:
            return (f"the API version in the data ({api_version}) does not match the expected API version "
                    f"({r.group_version})")
    return ""


async def serve(handlers: h.ResourceHandlers, request: web.Request, target: Target,
                conversion: Conversion) -> web.StreamResponse:
    """Serve `target` (at conversion.served) through the storage version's handling."""
    stored = Target(conversion.storage, target.namespace, target.name, target.subresource,
                    conversion.storage.group_version)
    method = request.method
    if method == "PUT" and not target.name:  # a collection is not replaced
        raise errors.method_not_allowed(method, conversion.served.plural)
    if method in ("POST", "PUT"):
        return await _write(handlers, request, target, stored, conversion)
    if method == "PATCH" and target.name:
        return await _patch(handlers, request, stored, conversion)
    if method == "GET" and not target.name and parse_bool(request.query.get("watch"), "watch") \
            and not wants_table(request):
        return await _watch(handlers, request, stored, conversion)
    resp = await handlers._handle(request, stored)
    if isinstance(resp, web.Response) and h._OBJECT in resp and not wants_table(request):
        converted = h.respond(conversion.answer(resp[h._OBJECT]), resp.status)
        for warning in resp.headers.getall("Warning", []):
            converted.headers.add("Warning", warning)
        return converted
    return resp


async def _write(handlers: h.ResourceHandlers, request: web.Request, target: Target, stored: Target,
                 conversion: Conversion) -> web.StreamResponse:
    """Create (POST) or update (PUT, the object or its status) with a body of the served version."""
    served = conversion.served
    if served.namespaced and not target.namespace:
        raise errors.method_not_allowed(request.method, served.plural)
    obj, pruned, duplicates = await handlers._decode_object(request, served)
    handlers._check_namespace(obj, target)
    warnings = handlers._checked(request, served, obj, pruned) + duplicates
    body = conversion.to_storage(obj)
    if request.method == "POST":
        created = await handlers.registry.create(conversion.storage, target.namespace, body, h._dry_run(request),
                                                 warnings)
        return h.respond(conversion.from_storage(created), 201, warnings)
    updated = await handlers.registry.update(conversion.storage, stored.namespace, stored.name, body,
                                             stored.subresource, h._dry_run(request), warnings)
    return h.respond(conversion.from_storage(updated), 200, warnings)


async def _patch(handlers: h.ResourceHandlers, request: web.Request, stored: Target,
                 conversion: Conversion) -> web.StreamResponse:
    """A merge, JSON or strategic merge patch of the object as the served version shows it."""
    ctype = media_type(request)
    if ctype == APPLY_PATCH:
        raise errors.unsupported_media_type(ctype, [t for t in PATCH_TYPES if t != APPLY_PATCH])
    body = await read_body(request)
    document = await decode_request_body(body, ctype, PATCH_TYPES)
    served = conversion.served
    warnings: list[str] = []
    duplicates = h._duplicate_warnings(request, body)  # said before the unknown fields, as upstream

    def apply(cur: Obj) -> Obj:
        view = conversion.from_storage(cur)
        if ctype == JSON_PATCH:
            out: Any = patch.json_patch(view, document)
        elif ctype == MERGE_PATCH:
            out = patch.merge_patch(view, document)
        else:
            out = patch.strategic_merge_patch(view, decode_body(body, ctype, PATCH_TYPES), served.model)
        if not isinstance(out, dict):
            raise errors.bad_request("patch produced an object without metadata")
        nesting.check_depth(out)
        # pruned, type-checked and refused or warned of as fieldValidation says, as the storage version's patch
        warnings[:] = duplicates + handlers._field_validation(request, served, out, None, patched=True)
        return conversion.to_storage(out)

    admitted: list[str] = []
    patched = await handlers.registry.patch(conversion.storage, stored.namespace, stored.name, apply,
                                            stored.subresource, h._dry_run(request), admitted)
    return h.respond(conversion.from_storage(patched), 200, warnings + admitted)


async def _watch(handlers: h.ResourceHandlers, request: web.Request, stored: Target,
                 conversion: Conversion) -> web.StreamResponse:
    """A watch whose events and bookmarks carry the objects as the served version, in JSON or protobuf as the
    storage version's watch chooses."""
    q = request.query
    initial_events = listoptions.validate(q, True)
    matches, _ = handlers._matcher(request, conversion.storage)
    served = conversion.served
    encode = watch.protobuf_encoder(conversion.answer, served.group_version) if h._protobuf_watch(request, served) \
        else watch.json_encoder(conversion.answer, served.group_version)

    timeout = parse_int(q.get("timeoutSeconds"), "timeoutSeconds")
    return await watch.serve(request, handlers.caches, conversion.storage, stored.namespace, matches, encode,
                             q.get("resourceVersion", ""), float(timeout) if timeout else None,
                             parse_bool(q.get("allowWatchBookmarks"), "allowWatchBookmarks"), handlers.clock,
                             None, initial_events, served)
