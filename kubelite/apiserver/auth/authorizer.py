"""The authorizer seam (k8s.io/apiserver/pkg/authorization/authorizer): a decision per request's attributes.

`AlwaysAllow` is the default until RBAC; a denial becomes upstream's Forbidden Status with the
message responsewriters.Forbidden writes (`User "u" cannot list resource "pods" in API group ""
in the namespace "ns"`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kubelite.api import errors
from kubelite.api.errors import ApiError
from kubelite.apiserver.auth.requestinfo import RequestAttributes


class Decision(enum.Enum):
    DENY = "Deny"
    ALLOW = "Allow"
    NO_OPINION = "NoOpinion"


class Authorizer(Protocol):
    def authorize(self, attributes: RequestAttributes) -> tuple[Decision, str]:
        """The decision and, for a denial or no opinion, a reason (appended to the Forbidden message)."""
        ...


class AlwaysAllow:
    def authorize(self, attributes: RequestAttributes) -> tuple[Decision, str]:
        return Decision.ALLOW, ""


@dataclass(frozen=True)
class Union:
    """authorizerfactory's union: the first Allow or Deny wins; all NoOpinion denies."""

    authorizers: Sequence[Authorizer]

    def authorize(self, attributes: RequestAttributes) -> tuple[Decision, str]:
        reasons = []
        for authorizer in self.authorizers:
            decision, reason = authorizer.authorize(attributes)
            if decision is not Decision.NO_OPINION:
                return decision, reason
            if reason:
                reasons.append(reason)
        return Decision.NO_OPINION, "\n".join(reasons)


def sanitize(text: str) -> str:
    """responsewriters' sanitizer: no error text that looks like HTML (quotes are fine)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def forbidden_message(attributes: RequestAttributes) -> str:
    """forbiddenMessage (sanitized by responsewriters.Forbidden before the reason is appended)."""
    return sanitize(_forbidden_message(attributes))


def _forbidden_message(attributes: RequestAttributes) -> str:
    user = attributes.user.name
    if not attributes.info.is_resource_request:
        return f'User "{user}" cannot {attributes.verb} path "{attributes.path}"'
    resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
    where = f'in the namespace "{attributes.namespace}"' if attributes.namespace else "at the cluster scope"
    return f'User "{user}" cannot {attributes.verb} resource "{resource}" in API group "{attributes.api_group}" {where}'


def admission_forbidden(attributes: RequestAttributes, reason: str) -> ApiError:
    """An admission plugin's refusal: `pods "p" is forbidden: REASON` (apierrors.NewForbidden)."""
    qualified = f"{attributes.resource}.{attributes.api_group}" if attributes.api_group else attributes.resource
    subject = f'{qualified} "{attributes.name}"' if attributes.name else qualified
    details = {k: v for k, v in (("name", attributes.name), ("group", attributes.api_group),
                                 ("kind", attributes.resource)) if v}
    return errors.ApiError(403, "Forbidden", f"{subject} is forbidden: {reason}", details)


def forbidden(attributes: RequestAttributes, reason: str) -> ApiError:
    """responsewriters.Forbidden: the message, then apierrors.NewForbidden over the group-resource and name."""
    message = forbidden_message(attributes) + (f": {reason}" if reason else "")
    resource, group, name = attributes.resource, attributes.api_group, attributes.name
    if not resource:
        return errors.ApiError(403, "Forbidden", f"forbidden: {message}")
    qualified = f"{resource}.{group}" if group else resource
    text = f'{qualified} "{name}" is forbidden: {message}' if name else f"{qualified} is forbidden: {message}"
    details = {k: v for k, v in (("name", name), ("group", group), ("kind", resource)) if v}  # Go's omitempty
    return errors.ApiError(403, "Forbidden", text, details)
