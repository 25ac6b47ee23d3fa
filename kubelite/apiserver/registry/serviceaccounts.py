"""ServiceAccounts (core/v1) and the authentication.k8s.io/v1 kinds served beside them.

ServiceAccounts are stored as any object (the serviceaccount controller creates each namespace's
`default`). `serviceaccounts/token` (TokenRequest) and `selfsubjectreviews` are not stored: the API
server answers them itself (kubelite.apiserver.auth.tokenrequest, .reviews); they are catalogued
here so discovery and OpenAPI list them as upstream does.
"""

from __future__ import annotations

from kubelite.apiserver.registry.base import Resource, Strategy

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", True,
                            "V1ServiceAccount", short_names=("sa",), subresources=("token",))
SELF_SUBJECT_REVIEWS = Resource("authentication.k8s.io", "v1", "selfsubjectreviews", "selfsubjectreview",
                                "SelfSubjectReview", False, "V1SelfSubjectReview", verbs=("create",))


class ServiceAccountStrategy(Strategy):
    """Upstream's strategy adds nothing to the generic one: metadata validation (a DNS subdomain name)."""


class NotStoredStrategy(Strategy):
    """For kinds answered by the server itself; the generic handlers never write them (app.py routes them away)."""
