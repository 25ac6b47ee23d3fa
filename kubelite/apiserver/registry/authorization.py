"""authorization.k8s.io/v1: the access reviews, answered by the API server and never stored
(kubelite.apiserver.auth.accessreview); catalogued here for discovery and OpenAPI as upstream lists them."""

from __future__ import annotations

from kubelite.apiserver.registry.base import Resource

GROUP = "authorization.k8s.io"
SUBJECT_ACCESS_REVIEWS = Resource(GROUP, "v1", "subjectaccessreviews", "subjectaccessreview",
                                  "SubjectAccessReview", False, "V1SubjectAccessReview", verbs=("create",))
SELF_SUBJECT_ACCESS_REVIEWS = Resource(GROUP, "v1", "selfsubjectaccessreviews", "selfsubjectaccessreview",
                                       "SelfSubjectAccessReview", False, "V1SelfSubjectAccessReview",
                                       verbs=("create",))
SELF_SUBJECT_RULES_REVIEWS = Resource(GROUP, "v1", "selfsubjectrulesreviews", "selfsubjectrulesreview",
                                      "SelfSubjectRulesReview", False, "V1SelfSubjectRulesReview", verbs=("create",))
LOCAL_SUBJECT_ACCESS_REVIEWS = Resource(GROUP, "v1", "localsubjectaccessreviews", "localsubjectaccessreview",
                                        "LocalSubjectAccessReview", True, "V1LocalSubjectAccessReview",
                                        verbs=("create",))
REVIEWS = (SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_RULES_REVIEWS,
           LOCAL_SUBJECT_ACCESS_REVIEWS)
