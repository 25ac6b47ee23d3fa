"""SelfSubjectReview (authentication.k8s.io/v1): the requester's own user info, for `kubectl auth whoami`."""

from __future__ import annotations

from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.registry.base import Obj


def self_subject_review(user: UserInfo, now: str) -> Obj:
    return {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": now}, "status": {"userInfo": user.to_api()}}
