"""RequestInfo from a method, path and query, as k8s.io/apiserver/pkg/endpoints/request.RequestInfoFactory.

Computed for every request before authorization, from the URL alone (never from the catalogue of
served resources), so an authorizer sees the same attributes kube-apiserver would give it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubelite.apiserver.auth.user import UserInfo

API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_API_PREFIXES = frozenset({"api"})
_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_SPECIAL_VERBS_NO_SUBRESOURCES = frozenset({"proxy"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                 "DELETE": "delete"}


@dataclass(frozen=True)
class RequestInfo:
    is_resource_request: bool
    path: str
    verb: str
    api_prefix: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: tuple[str, ...] = ()


def _watch_requested(query: Mapping[str, str]) -> bool:
    """ListOptions.Watch as the parameter codec decodes it; an unparsable value counts as true, as upstream's
    fallback (anything but "false" or "0")."""
    value = query.get("watch")
    return value is not None and value.lower() not in ("false", "0", "")


def _exact_name(field_selector: str) -> str | None:
    """fields.Selector.RequiresExactMatch("metadata.name") over a selector that parses; None otherwise."""
    name = None
    for term in field_selector.split(","):
        if not term:
            continue
        for op in ("==", "!=", "="):
            if op in term:
                key, _, value = term.partition(op)
                if key.strip() == "metadata.name" and op != "!=":
                    name = value.strip()
                break
        else:
            return None  # "foo": not a selector term; the whole selector is invalid
    return name


def _valid_path_segment(name: str) -> bool:
    return name not in (".", "..") and "/" not in name and "%" not in name


def new_request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """RequestInfoFactory.NewRequestInfo with APIPrefixes {api, apis} and GrouplessAPIPrefixes {api}."""
    non_resource = RequestInfo(False, path, method.lower())
    parts = [p for p in path.strip("/").split("/")] if path.strip("/") else []
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return non_resource
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_API_PREFIXES:
        if len(parts) < 3:
            return non_resource
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]
    if parts[0] in _SPECIAL_VERBS:
        if len(parts) < 2:  # upstream: an error and a 500; here a path request, which routing answers with a 404
            return non_resource
        verb, parts = parts[0], parts[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) == 2 and verb == "patch":
        pass  # server-side apply creating a namespace: PATCH /namespaces/NEW names no namespace the request is in
    elif parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = name = subresource = ""
    if len(parts) >= 3 and verb not in _SPECIAL_VERBS_NO_SUBRESOURCES:
        subresource = parts[2]
    if len(parts) >= 2:
        name = parts[1]
    if len(parts) >= 1:
        resource = parts[0]
    if not name and verb == "get":
        verb = "watch" if _watch_requested(query) else "list"
        selected = _exact_name(query.get("fieldSelector", ""))
        if selected and _valid_path_segment(selected):
            name = selected
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(True, path, verb, prefix, group, version, namespace, resource, subresource, name,
                       tuple(parts))


@dataclass(frozen=True)
class RequestAttributes:
    """authorizer.AttributesRecord: who asks to do what to which object."""

    user: UserInfo
    info: RequestInfo

    @property
    def verb(self) -> str:
        return self.info.verb

    @property
    def namespace(self) -> str:
        return self.info.namespace

    @property
    def api_group(self) -> str:
        return self.info.api_group

    @property
    def resource(self) -> str:
        return self.info.resource

    @property
    def subresource(self) -> str:
        return self.info.subresource

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def path(self) -> str:
        return self.info.path
