"""The user of the request being served, for registry code that decides by who asks (RBAC's escalation checks).

Set by the API server around each authorized request (`serving_as`); the registry's strategies only
see objects, so this is how upstream's `request.UserFrom(ctx)` reaches them here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from kubelite.apiserver.auth.user import UserInfo

CURRENT_USER: ContextVar[UserInfo | None] = ContextVar("kubelite_current_user", default=None)


@contextlib.contextmanager
def serving_as(user: UserInfo) -> Iterator[None]:
    token = CURRENT_USER.set(user)
    try:
        yield
    finally:
        CURRENT_USER.reset(token)
