"""The access reviews (pkg/registry/authorization/*): ask the authorizer, answer in the status, store nothing.

SelfSubjectAccessReview asks for the requester (`kubectl auth can-i`), SubjectAccessReview and
LocalSubjectAccessReview for a user named in the spec, SelfSubjectRulesReview lists the requester's
RBAC rules in a namespace (`kubectl auth can-i --list`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from kubelite.api import errors
from kubelite.api.errors import Cause
from kubelite.apiserver.auth.authorizer import Authorizer, Decision
from kubelite.apiserver.auth.rbac import RuleResolver
from kubelite.apiserver.auth.requestinfo import RequestAttributes, RequestInfo
from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.handlers import respond
from kubelite.apiserver.registry.authorization import (
    LOCAL_SUBJECT_ACCESS_REVIEWS,
    REVIEWS,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_RULES_REVIEWS,
    SUBJECT_ACCESS_REVIEWS,
)
from kubelite.apiserver.request import Target, decode_body, media_type, read_body

Obj = dict[str, Any]


def handles(target: Target) -> bool:
    return target.resource in REVIEWS


def attributes_of(user: UserInfo, spec: Mapping[str, Any]) -> RequestAttributes:
    """authorizationutil.AuthorizationAttributesFrom: the spec's resource or non-resource attributes."""
    res = spec.get("resourceAttributes")
    if res is not None:
        info = RequestInfo(True, "", res.get("verb", ""), "apis" if res.get("group") else "api", res.get("group", ""),
                           res.get("version", ""), res.get("namespace", ""), res.get("resource", ""),
                           res.get("subresource", ""), res.get("name", ""))
    else:
        non = spec.get("nonResourceAttributes") or {}
        info = RequestInfo(False, non.get("path", ""), non.get("verb", ""))
    return RequestAttributes(user, info)


def _validate(kind: str, spec: Any, needs_user: bool) -> None:
    causes: list[Cause] = []
    if not isinstance(spec, dict):
        causes.append(Cause("FieldValueRequired", "Required value", "spec"))
    else:
        has_res, has_non = spec.get("resourceAttributes") is not None, spec.get("nonResourceAttributes") is not None
        if has_res == has_non:
            message = ("cannot be specified in combination with resourceAttributes" if has_res else
                       "exactly one of nonResourceAttributes or resourceAttributes must be specified")
            causes.append(Cause("FieldValueInvalid" if has_res else "FieldValueRequired",
                                ("Invalid value: \"null\": " if has_res else "Required value: ") + message,
                                "spec.nonResourceAttributes" if has_res else "spec.resourceAttributes"))
        if needs_user and not spec.get("user") and not spec.get("groups"):
            causes.append(Cause("FieldValueInvalid", 'Invalid value: "": at least one of user or group must be '
                                                     "specified", "spec.user"))
    if causes:
        raise errors.invalid(kind, "", causes, "authorization.k8s.io")


def review(authorizer: Authorizer, attributes: RequestAttributes) -> Obj:
    decision, reason = authorizer.authorize(attributes)
    status: Obj = {"allowed": decision is Decision.ALLOW}
    if decision is Decision.DENY:
        status["denied"] = True
    if reason:
        status["reason"] = reason
    return status


def rules_review(resolver: RuleResolver | None, user: UserInfo, namespace: str) -> Obj:
    """SelfSubjectRulesReview's status: the RBAC rules (incomplete when RBAC is not the authorizer)."""
    if resolver is None:
        return {"resourceRules": [], "nonResourceRules": [], "incomplete": True}
    rules, failures = resolver.rules_for(user, namespace)
    resource = [{k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if k in r}
                for r in rules if not r.get("nonResourceURLs")]
    non_resource = [{"verbs": r["verbs"], "nonResourceURLs": r["nonResourceURLs"]}
                    for r in rules if r.get("nonResourceURLs")]
    status: Obj = {"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": bool(failures)}
    if failures:
        status["evaluationError"] = ", ".join(failures)
    return status


def _spec_user(spec: Mapping[str, Any]) -> UserInfo:
    extra = {k: tuple(v) for k, v in (spec.get("extra") or {}).items()}
    return UserInfo(spec.get("user", ""), spec.get("uid", ""), tuple(spec.get("groups") or []), extra)


async def serve(request: web.Request, target: Target, user: UserInfo, authorizer: Authorizer,
                resolver: RuleResolver | None) -> web.StreamResponse:
    resource = target.resource
    assert resource is not None
    if target.name:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    if request.method != "POST":
        raise errors.method_not_allowed(request.method, resource.plural)
    body = decode_body(await read_body(request), media_type(request))
    if not isinstance(body, dict):
        raise errors.bad_request("the body must be an object")
    spec = body.get("spec")
    if resource is SELF_SUBJECT_RULES_REVIEWS:
        namespace = (spec or {}).get("namespace", "") if isinstance(spec, dict) else ""
        status = rules_review(resolver, user, namespace)
    else:
        subject = resource in (SUBJECT_ACCESS_REVIEWS, LOCAL_SUBJECT_ACCESS_REVIEWS)
        _validate(resource.kind, spec, subject)
        assert isinstance(spec, dict)
        if resource is LOCAL_SUBJECT_ACCESS_REVIEWS:
            namespace = (spec.get("resourceAttributes") or {}).get("namespace", "")
            if spec.get("resourceAttributes") is None or namespace != target.namespace:
                raise errors.invalid(resource.kind, "", [Cause(
                    "FieldValueInvalid", f'Invalid value: "{namespace}": must match metadata.namespace',
                    "spec.resourceAttributes.namespace")], resource.group)
        asker = _spec_user(spec) if subject else user
        status = review(authorizer, attributes_of(asker, spec))
        if resource is SELF_SUBJECT_ACCESS_REVIEWS:
            spec = {k: spec[k] for k in ("resourceAttributes", "nonResourceAttributes") if k in spec}
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    return respond({"kind": resource.kind, "apiVersion": resource.group_version, "metadata": metadata,
                    "spec": spec or {}, "status": status}, 201)
