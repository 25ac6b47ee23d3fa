"""The authentication API the server answers itself, never stored: SelfSubjectReview and TokenRequest."""

from __future__ import annotations

from aiohttp import web

from kubelite.api import errors
from kubelite.apiserver.auth import tokenrequest
from kubelite.apiserver.auth.reviews import self_subject_review
from kubelite.apiserver.auth.serviceaccount import ServiceAccountTokens
from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.handlers import respond
from kubelite.apiserver.registry.serviceaccounts import SELF_SUBJECT_REVIEWS
from kubelite.apiserver.request import Target, decode_body, media_type, read_body
from kubelite.apiserver.rest import Registry


def handles(target: Target) -> bool:
    return target.resource is SELF_SUBJECT_REVIEWS or target.subresource == "token"


async def serve(request: web.Request, target: Target, user: UserInfo, registry: Registry,
                tokens: ServiceAccountTokens | None, node_restriction: bool = False) -> web.StreamResponse:
    review = target.resource is SELF_SUBJECT_REVIEWS
    if review and target.name:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    if request.method != "POST":
        raise errors.method_not_allowed(request.method, "selfsubjectreviews" if review else "serviceaccounts/token")
    if review:  # the body says nothing the request does not
        return respond(self_subject_review(user, registry.now()), 201)
    if tokens is None or tokens.signing_key is None:  # as kube-apiserver without a signing key: not served
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    body = decode_body(await read_body(request), media_type(request))
    return respond(tokenrequest.create_token(registry, tokens, target.namespace, target.name, body,
                                             node_restriction), 201)
