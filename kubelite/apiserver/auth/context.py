"""The user of the request being served, for registry code that decides by who asks (RBAC's escalation checks).

Set by the API server around each authorized request (`serving_as`); the registry's strategies only
see objects, so this is how upstream's `request.UserFrom(ctx)` reaches them here.
"""

from __future__ import annotations

from contextvars import ContextVar

from kubelite.apiserver.auth.user import UserInfo

CURRENT_USER: ContextVar[UserInfo | None] = ContextVar("kubelite_current_user", default=None)


class serving_as:
    """Sets CURRENT_USER for the block. A class, not @contextlib.contextmanager: it wraps every request the
    server serves, and a generator-based manager (a generator made, stepped twice) costs 1.3 µs where this
    costs 0.4."""

    __slots__ = ("_token", "_user")

    def __init__(self, user: UserInfo) -> None:
        self._user = user

    def __enter__(self) -> None:
        self._token = CURRENT_USER.set(self._user)

    def __exit__(self, *exc: object) -> None:
        CURRENT_USER.reset(self._token)
