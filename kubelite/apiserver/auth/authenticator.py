"""The authenticator seam: one protocol, a union chain, bearer tokens, anonymous.

Mirrors k8s.io/apiserver/pkg/authentication: each authenticator answers None when the request
carries no credential of its kind, a `UserInfo` when it does and it is valid, and raises
`InvalidCredential` when it does but it is not. The union tries each in turn (a later one may
still accept), adds `system:authenticated`, and falls back to anonymous only when no
authenticator saw a credential at all (union.NewFailOnError): a bad token is a 401, never anonymous.
With anonymous authentication off, `anonymous_paths` still admit credential-less requests to those
paths as `system:anonymous` (upstream's AuthenticationConfiguration `anonymous.conditions`, which
kubeadm documents for `kube-public/cluster-info`); RBAC still decides what anonymous may do there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kubelite.apiserver.auth.user import ALL_AUTHENTICATED, ANONYMOUS_USER, UserInfo

log = logging.getLogger("kubelite.apiserver.auth")


class InvalidCredential(Exception):
    """A credential of the authenticator's kind that does not authenticate (its message is logged, never sent)."""


@dataclass(frozen=True)
class AuthRequest:
    """What authenticators read of a request: its headers and the verified TLS client certificate (DER)."""

    headers: Mapping[str, str]
    peer_certificate: bytes | None = None
    path: str = "/"


class Authenticator(Protocol):
    def authenticate(self, request: AuthRequest) -> UserInfo | None: ...


class TokenAuthenticator(Protocol):
    def authenticate_token(self, token: str) -> UserInfo | None: ...


def bearer_token(request: AuthRequest) -> str | None:
    """The token of `Authorization: Bearer TOKEN`, as bearertoken.Authenticator reads it (None without one)."""
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


@dataclass(frozen=True)
class BearerToken:
    """Adapts token authenticators to requests (bearertoken.New); several token kinds share one header."""

    tokens: Sequence[TokenAuthenticator]

    def authenticate(self, request: AuthRequest) -> UserInfo | None:
        token = bearer_token(request)
        if token is None:
            return None
        failures: list[str] = []
        for authenticator in self.tokens:
            try:
                user = authenticator.authenticate_token(token)
            except InvalidCredential as exc:
                failures.append(str(exc))
                continue
            if user is not None:
                return user
        raise InvalidCredential("; ".join(failures) or "invalid bearer token")


@dataclass(frozen=True)
class Union:
    """union.New + group.AuthenticatedGroupAdder + anonymous (FailOnError): the whole request authentication."""

    authenticators: Sequence[Authenticator]
    anonymous: bool = False
    anonymous_paths: frozenset[str] = frozenset()

    def authenticate(self, request: AuthRequest) -> UserInfo | None:
        """The user, or None: 401. Anonymous is returned only when no credential was presented at all."""
        failures: list[str] = []
        for authenticator in self.authenticators:
            try:
                user = authenticator.authenticate(request)
            except InvalidCredential as exc:
                failures.append(str(exc))
                continue
            if user is not None:
                return user.with_group(ALL_AUTHENTICATED)
        if failures:
            log.info("unable to authenticate the request to %s: %s", request.path, "; ".join(failures))
            return None
        return ANONYMOUS_USER if self.anonymous or request.path in self.anonymous_paths else None
