"""API errors: one hierarchy, rendered as a Kubernetes `Status` at one edge.

Reasons, codes and message formats follow k8s.io/apimachinery/pkg/api/errors,
because kubectl prints `Error from server (<reason>): <message>` from the body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Cause:
    reason: str
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass
class ApiError(Exception):
    code: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    qr = _qualified(resource, group)
    return ApiError(404, "NotFound", f'{qr} "{name}" not found',
                    {"name": name, "group": group, "kind": resource} if group else {"name": name, "kind": resource})


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    qr = _qualified(resource, group)
    return ApiError(409, "AlreadyExists", f'{qr} "{name}" already exists', {"name": name, "kind": resource})


def conflict(resource: str, name: str, detail: str, group: str = "") -> ApiError:
    qr = _qualified(resource, group)
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qr} "{name}": {detail}',
                    {"name": name, "kind": resource})


def stale(resource: str, name: str, group: str = "") -> ApiError:
    return conflict(resource, name, "the object has been modified; please apply your changes "
                                    "to the latest version and try again", group)


def invalid(kind: str, name: str, causes: list[Cause], group: str = "") -> ApiError:
    parts = [f"{c.field}: {c.message}" for c in causes]  # Go prints ": msg" for the whole object (path "")
    detail = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qualified = f"{kind}.{group}" if group and kind else kind  # schema.GroupKind.String(), as NewInvalid prints it
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {detail}',
                    {"name": name, "group": group, "kind": kind, "causes": [c.to_dict() for c in causes]})


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def cannot_decode(kind: str, version: str, cause: Cause) -> ApiError:
    """A body that does not decode into the kind (upstream's codec error); the cause names the field."""
    return ApiError(400, "BadRequest", f'{kind} in version "{version}" cannot be handled as a {kind}: '
                                       f"{cause.message}",
                    {"causes": [cause.to_dict()]})


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(verb: str, resource: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource "
                                             f"({verb} {resource})")


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_many_requests(message: str, causes: list[Cause] | None = None) -> ApiError:
    details = {"causes": [c.to_dict() for c in causes]} if causes else {}
    return ApiError(429, "TooManyRequests", message, details)


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"{', '.join(accepted)} (got {content_type})")


class Unavailable(ApiError):
    """The API server could not be reached or did not answer: a refused or reset connection, a stall, a 503.

    Every transport failure maps to this one type at the client's edge, so long-running loops
    catch one thing and back off; it never means anything about the objects themselves.
    """


def unavailable(message: str) -> Unavailable:
    return Unavailable(503, "ServiceUnavailable", message)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def too_large_resource_version(requested: int, current: int) -> ApiError:
    """storage.NewTooLargeResourceVersionError: a 504 the client retries after a second."""
    return ApiError(504, "Timeout", f"Too large resource version: {requested}, current: {current}",
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                     "retryAfterSeconds": 1}, {"Retry-After": "1"})
