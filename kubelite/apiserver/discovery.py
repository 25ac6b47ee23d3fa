"""Discovery (`/api`, `/apis`, per group-version lists, aggregated v2), `/version` and `/openapi/v3`.

All of it is derived from the resource catalogue, so a new resource shows up everywhere
at once; the OpenAPI documents are built by `openapi` from the client's models. The custom
resources served at the time (`extra`, from the CRDs) follow the built-in ones.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from functools import cache, lru_cache
from typing import Any

import orjson

from kubelite.apiserver import metrics_api, openapi
from kubelite.apiserver.registry import SERVED
from kubelite.apiserver.registry.base import Resource

log = logging.getLogger("kubelite.apiserver")
Obj = dict[str, Any]

VERSION: Obj = {
    "major": "1", "minor": "32", "gitVersion": "v1.32.0+kubelite", "gitCommit": "0" * 40,
    "gitTreeState": "clean", "buildDate": "2026-11-22T00:00:00Z", "goVersion": "go1.23", "compiler": "gc",
    "platform": "linux/amd64",
}
AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

_SUB_KIND = {"binding": ("", "v1", "Binding"), "eviction": ("policy", "v1", "Eviction"),
             "scale": ("autoscaling", "v1", "Scale")}
_SUB_VERBS = {"status": ["get", "patch", "update"], "binding": ["create"], "eviction": ["create"],
              "log": ["get"], "scale": ["get", "patch", "update"], "finalize": ["update"],
              "exec": ["create", "get"], "attach": ["create", "get"], "portforward": ["create", "get"],
              "ephemeralcontainers": ["get", "patch", "update"]}
_SUB_KIND["token"] = ("authentication.k8s.io", "v1", "TokenRequest")  # serviceaccounts/token
_SUB_VERBS["token"] = ["create"]
_SUB_VERBS["approval"] = ["get", "patch", "update"]  # certificatesigningrequests/approval


Extra = tuple[Resource, ...]


def groups(extra: Extra = ()) -> dict[str, list[Resource]]:
    """Resources by group-version, in the order discovery lists them (a group's preferred version first)."""
    out: dict[str, list[Resource]] = {}
    for r in (*SERVED, *metrics_api.RESOURCES, *extra):  # metrics.k8s.io: served by metrics_api, not stored
        out.setdefault(r.group_version, []).append(r)
    return out


def _sub_kind(r: Resource, sub: str) -> tuple[str, str, str]:
    return _SUB_KIND.get(sub, (r.group, r.version, r.kind))


def resource_list(group_version: str, extra: Extra = ()) -> Obj | None:
    members = groups(extra).get(group_version)
    if members is None:
        return None
    resources: list[Obj] = []
    for r in members:
        entry: Obj = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
                      "verbs": list(r.verbs)}
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        resources.append(entry)
        for sub in r.subresources:
            group, version, kind = _sub_kind(r, sub)
            item: Obj = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced, "kind": kind,
                         "verbs": _SUB_VERBS[sub]}
            if (group, version) != (r.group, r.version):
                item["group"], item["version"] = group, version
            resources.append(item)
    if group_version == "v1":
        resources.append({"name": "bindings", "singularName": "binding", "namespaced": True, "kind": "Binding",
                          "verbs": ["create"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def api_versions(server_address: str) -> Obj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_names(extra: Extra = ()) -> list[str]:
    """The built-in groups in name order, then the custom resources' groups (as upstream lists CRD groups last)."""
    builtin = sorted({gv.split("/")[0] for gv in groups() if "/" in gv})
    return builtin + sorted({r.group for r in extra} - set(builtin))


def api_group(name: str, extra: Extra = ()) -> Obj | None:
    versions = [gv for gv in groups(extra) if gv.startswith(name + "/")]
    if not versions:
        return None
    refs = [{"groupVersion": gv, "version": gv.split("/")[1]} for gv in versions]  # the preferred (stored) first
    return {"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": refs, "preferredVersion": refs[0]}


def api_group_list(extra: Extra = ()) -> Obj:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [{k: v for k, v in (api_group(n, extra) or {}).items() if k not in ("kind", "apiVersion")}
                       for n in _group_names(extra)]}


def _aggregated_item(name: str, gvs: Iterable[str], extra: Extra = ()) -> Obj:
    versions = []
    members = groups(extra)
    for gv in gvs:
        resources = []
        for r in members[gv]:
            subs = [{"subresource": s, "responseKind": dict(zip(("group", "version", "kind"), _sub_kind(r, s),
                                                                strict=True)),
                     "verbs": _SUB_VERBS[s]} for s in r.subresources]
            entry: Obj = {"resource": r.plural,
                          "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                          "scope": "Namespaced" if r.namespaced else "Cluster", "singularResource": r.singular,
                          "verbs": list(r.verbs)}
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            if r.categories:
                entry["categories"] = list(r.categories)
            if subs:
                entry["subresources"] = subs
            resources.append(entry)
        versions.append({"version": gv.split("/")[-1], "freshness": "Current", "resources": resources})
    meta: Obj = {"creationTimestamp": None}
    if name:
        meta["name"] = name
    return {"metadata": meta, "versions": versions}


def aggregated(core: bool, extra: Extra = ()) -> Obj:
    if core:
        items = [_aggregated_item("", ["v1"])]
    else:
        items = [_aggregated_item(n, [gv for gv in groups(extra) if gv.startswith(n + "/")], extra)
                 for n in _group_names(extra)]
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}


# --- OpenAPI v3 ----------------------------------------------------------------------------------

def _openapi_path(gv: str) -> str:
    return "api/v1" if gv == "v1" else f"apis/{gv}"


def openapi_document(path: str, extra: Extra = ()) -> Obj | None:
    """A group-version's document; one with custom resources is built anew (their schemas change with the CRDs)."""
    gv = "v1" if path == "api/v1" else path.removeprefix("apis/")
    members = groups(extra).get(gv)
    if members is None:
        return None
    if any(r in extra for r in members):
        return _custom_document(gv, tuple(members))
    return openapi.document(gv, tuple(members))


# A group-version with custom resources: built once per set of served resources (a CRD's change serves new ones),
# the last few remembered — the index hashes every document at each request for it.
_custom_document = lru_cache(maxsize=32)(openapi.build_document)


def _index_entry(gv: str, extra: Extra) -> Obj:
    doc = orjson.dumps(openapi_document(_openapi_path(gv), extra))
    digest = hashlib.sha512(doc).hexdigest()[:16].upper()
    return {"serverRelativeURL": f"/openapi/v3/{_openapi_path(gv)}?hash={digest}"}


@cache
def _builtin_index() -> Obj:
    return {_openapi_path(gv): _index_entry(gv, ()) for gv in groups()}


def openapi_index(extra: Extra = ()) -> Obj:
    """Each document's URL carries a hash of its content, as upstream's, so clients may cache it."""
    paths = dict(_builtin_index())
    for gv in dict.fromkeys(r.group_version for r in extra):
        try:
            paths[_openapi_path(gv)] = _index_entry(gv, extra)
        except orjson.JSONEncodeError as exc:  # a CRD's schema too deep to encode: its group-version is left out,
            # never the whole index (kubectl apply reads it for every kind)
            log.warning("openapi: %s left out of the index: %s", gv, exc)
    return {"paths": paths}
