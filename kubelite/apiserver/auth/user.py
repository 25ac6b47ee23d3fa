"""Who made a request: k8s.io/apiserver/pkg/authentication/user.Info and the well-known names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ANONYMOUS = "system:anonymous"
ALL_AUTHENTICATED = "system:authenticated"
ALL_UNAUTHENTICATED = "system:unauthenticated"
SYSTEM_PRIVILEGED_GROUP = "system:masters"
UNSECURED = "system:unsecured"  # the old insecure port's user: plain HTTP on loopback (--insecure)


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def with_group(self, group: str) -> UserInfo:
        return self if group in self.groups else UserInfo(self.name, self.uid, (*self.groups, group), self.extra)

    def to_api(self) -> dict[str, Any]:
        """authentication.k8s.io/v1 UserInfo (empty fields omitted, as Go's omitempty)."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ANONYMOUS_USER = UserInfo(ANONYMOUS, groups=(ALL_UNAUTHENTICATED,))
UNSECURED_USER = UserInfo(UNSECURED, groups=(SYSTEM_PRIVILEGED_GROUP, ALL_AUTHENTICATED))
