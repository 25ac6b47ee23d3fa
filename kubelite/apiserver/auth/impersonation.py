"""Impersonation (k8s.io/apiserver/pkg/endpoints/filters/impersonation.go): a request made as another user.

`kubectl --as=U --as-group=G --as-uid=ID` sends `Impersonate-User`, `Impersonate-Group` (repeated),
`Impersonate-Uid` and `Impersonate-Extra-<key>` (the key percent-encoded) headers. After authentication
and before authorization, as upstream's handler chain runs WithImpersonation, each thing asked for is
authorized for the verb `impersonate` against the authenticated requester: `users` (or `serviceaccounts`
in the account's namespace, for a `system:serviceaccount:NS:NAME` user) and `groups` in the core group,
`uids` and `userextras/<key>` in authentication.k8s.io, each by name. The first refusal is upstream's
403; groups, uid or extras without a user are its plain-text 500. Once all are allowed the request goes
on as the impersonated user (authorization, SelfSubjectReview, SelfSubjectAccessReview all see it),
without the Impersonate-* headers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from kubelite.apiserver.auth import serviceaccount
from kubelite.apiserver.auth.authorizer import Authorizer, Decision, forbidden, sanitize
from kubelite.apiserver.auth.requestinfo import RequestAttributes, RequestInfo
from kubelite.apiserver.auth.user import ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS, UserInfo

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
UID_HEADER = "Impersonate-Uid"
EXTRA_PREFIX = "impersonate-extra-"  # compared with the lowercased header name
_PREFIX = "impersonate-"
_HEADERS = frozenset({USER_HEADER.lower(), GROUP_HEADER.lower(), UID_HEADER.lower()})
VERB = "impersonate"
AUTHENTICATION_V1 = "authentication.k8s.io/v1"
_RESOURCES = {"ServiceAccount": "serviceaccounts", "User": "users", "Group": "groups", "UserExtra": "userextras",
              "UID": "uids"}
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class Reference:
    """One of the v1.ObjectReferences buildImpersonationRequests makes: one thing the requester would act as."""

    kind: str
    name: str
    namespace: str = ""
    api_version: str = ""  # authentication.k8s.io/v1 for UserExtra and UID; the core group's "" otherwise
    field_path: str = ""  # a UserExtra's key (ObjectReference has no subresource: upstream uses FieldPath)

    def attributes(self, requestor: UserInfo) -> RequestAttributes:
        """The authorizer.AttributesRecord upstream asks about: `impersonate` this reference, by the requester."""
        group, _, version = self.api_version.rpartition("/")
        info = RequestInfo(True, "", VERB, api_group=group, api_version=version, namespace=self.namespace,
                           resource=_RESOURCES[self.kind], subresource=self.field_path, name=self.name)
        return RequestAttributes(requestor, info)

    def go_string(self) -> str:
        """Go's %v of the struct (its seven string fields, UID and ResourceVersion empty), for the 500's text."""
        fields = (self.kind, self.namespace, self.name, "", self.api_version, "", self.field_path)
        return "{" + " ".join(fields) + "}"


class WithoutUser(Exception):
    """Groups, extras or a uid asked for without a user: upstream answers responsewriters.InternalError."""

    def __init__(self, references: Iterable[Reference]) -> None:
        super().__init__("requested [" + " ".join(r.go_string() for r in references)
                         + "] without impersonating a user")


def requested(headers: Mapping[str, str]) -> bool:
    """Whether any Impersonate-* header is present: the test every request passes, so it looks at a name's first
    letter before lowering a slice of it, in a plain loop (kubectl's six headers: 0.37 µs, against 0.6 for the
    same test in `any` and 0.86 for `any` over every lowered slice)."""
    for name in headers:  # noqa: SIM110 - faster than any(), above
        if name[:1] in "Ii" and name[:12].lower() == _PREFIX:
            return True
    return False


def _is_impersonation_header(name: str) -> bool:
    lowered = name.lower()
    return lowered in _HEADERS or lowered.startswith(EXTRA_PREFIX)


def unescape_extra_key(encoded: str) -> str:
    """unescapeExtraKey: url.PathUnescape, or the key as sent when an escape is malformed (`%zz`). Bytes that are
    not UTF-8 become U+FFFD, as Go's JSON encoding of the resulting string writes them."""
    if _BAD_ESCAPE.search(encoded):
        return encoded
    return unquote_to_bytes(encoded).decode("utf-8", errors="replace")


def references(headers: CIMultiDictProxy[str]) -> list[Reference]:
    """buildImpersonationRequests: the user (a ServiceAccount when its name splits as one), each group, each
    extra value (extras in the order their headers first appear: Go's is a map's), then the uid."""
    out: list[Reference] = []
    user = headers.get(USER_HEADER, "")
    if user:
        account = serviceaccount.split_username(user)
        out.append(Reference("ServiceAccount", account[1], account[0]) if account else Reference("User", user))
    groups = headers.getall(GROUP_HEADER, [])
    out += [Reference("Group", g) for g in groups]
    extras: dict[str, list[str]] = {}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered.startswith(EXTRA_PREFIX):
            extras.setdefault(unescape_extra_key(lowered[len(EXTRA_PREFIX):]), []).append(value)
    out += [Reference("UserExtra", value, api_version=AUTHENTICATION_V1, field_path=key)
            for key, values in extras.items() for value in values]
    uid = headers.get(UID_HEADER, "")
    if uid:
        out.append(Reference("UID", uid, api_version=AUTHENTICATION_V1))
    if (groups or extras or uid) and not user:
        raise WithoutUser(out)
    return out


def impersonate(requestor: UserInfo, headers: CIMultiDictProxy[str], authorizer: Authorizer) -> UserInfo | None:
    """WithImpersonation's user, None when nothing is asked for. Every reference must be allowed (else the first
    refusal's 403, an ApiError); then the groups asked for or, without any, a service account's;
    `system:authenticated` added unless the groups include it or `system:unauthenticated`; `system:anonymous`
    gets `system:unauthenticated` instead."""
    refs = references(headers)
    if not refs:
        return None
    groups_specified = bool(headers.getall(GROUP_HEADER, []))
    username = uid = ""
    groups: list[str] = []
    extra: dict[str, tuple[str, ...]] = {}
    for ref in refs:
        attributes = ref.attributes(requestor)
        decision, reason = authorizer.authorize(attributes)
        if decision is not Decision.ALLOW:
            raise forbidden(attributes, reason)
        if ref.kind == "ServiceAccount":
            username = serviceaccount.username(ref.namespace, ref.name)
            if not groups_specified:
                groups = list(serviceaccount.groups(ref.namespace))
        elif ref.kind == "User":
            username = ref.name
        elif ref.kind == "Group":
            groups.append(ref.name)
        elif ref.kind == "UserExtra":
            extra[ref.field_path] = (*extra.get(ref.field_path, ()), ref.name)
        else:
            uid = ref.name
    if username != ANONYMOUS:
        if ALL_AUTHENTICATED not in groups and ALL_UNAUTHENTICATED not in groups:
            groups.append(ALL_AUTHENTICATED)
    elif ALL_UNAUTHENTICATED not in groups:
        groups.append(ALL_UNAUTHENTICATED)
    return UserInfo(username, uid, tuple(groups), extra)


def without_headers(headers: Mapping[str, str]) -> CIMultiDict[str]:
    """The request's headers less Impersonate-User, -Group, -Uid and -Extra-*, as upstream deletes them once the
    request acts as the impersonated user."""
    return CIMultiDict((k, v) for k, v in headers.items() if not _is_impersonation_header(k))


def internal_error(request_uri: str, error: Exception) -> web.Response:
    """responsewriters.InternalError: http.Error's plain text `Internal Server Error: "URI": ERROR`, sanitized
    (json.dumps quotes a URI, which is ASCII on the wire, as Go's %q does)."""
    text = sanitize(f"Internal Server Error: {json.dumps(request_uri)}: {error}") + "\n"
    return web.Response(status=500, text=text, content_type="text/plain", charset="utf-8",
                        headers={"X-Content-Type-Options": "nosniff"})
