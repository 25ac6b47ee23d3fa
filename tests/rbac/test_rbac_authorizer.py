"""RBAC rule matching, subject matching, the authorizer over bindings and the escalation coverage checks,
as upstream's tables (pkg/registry/rbac/validation/rule_test.go, policy_comparator_test.go,
plugin/pkg/auth/authorizer/rbac/rbac_test.go), case names kept."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.apiserver.auth.authorizer import Decision
from kubelite.apiserver.auth.rbac import (
    PrivilegedGroups,
    RBACAuthorizer,
    RuleResolver,
    applies_to,
    compact_string,
    rule_allows,
    uncovered,
)
from kubelite.apiserver.auth.requestinfo import RequestAttributes, RequestInfo, new_request_info
from kubelite.apiserver.auth.user import UserInfo

Obj = dict[str, Any]


def res(verb: str, group: str, resource: str, sub: str = "", name: str = "", ns: str = "ns1",
        user: UserInfo | None = None) -> RequestAttributes:
    info = RequestInfo(True, "", verb, "apis", group, "v1", ns, resource, sub, name)
    return RequestAttributes(user or UserInfo("alice"), info)


def nonres(verb: str, path: str, user: UserInfo | None = None) -> RequestAttributes:
    return RequestAttributes(user or UserInfo("alice"), RequestInfo(False, path, verb))


def rule(verbs: list[str], groups: list[str] | None = None, resources: list[str] | None = None,
         names: list[str] | None = None, urls: list[str] | None = None) -> Obj:
    out: Obj = {"verbs": verbs}
    for key, value in (("apiGroups", groups), ("resources", resources), ("resourceNames", names),
                       ("nonResourceURLs", urls)):
        if value is not None:
            out[key] = value
    return out


RULE_MATCHES = [  # TestRuleMatches
    ("star verb, exact match other", rule(["*"], ["group1"], ["resource1"]), res("get", "group1", "resource1"), True),
    ("star group, exact match other", rule(["get"], ["*"], ["resource1"]), res("get", "group1", "resource1"), True),
    ("star resource, exact match other", rule(["get"], ["group1"], ["*"]), res("get", "group1", "resource1"), True),
    ("tuple match", rule(["get"], ["group1"], ["resource1"]), res("get", "group1", "resource1"), True),
    ("verb mismatch", rule(["get"], ["group1"], ["resource1"]), res("list", "group1", "resource1"), False),
    ("group mismatch", rule(["get"], ["group1"], ["resource1"]), res("get", "group2", "resource1"), False),
    ("resource mismatch", rule(["get"], ["group1"], ["resource1"]), res("get", "group1", "resource2"), False),
    ("resource with subresource, exact match", rule(["get"], ["group1"], ["resource1/subresource1"]),
     res("get", "group1", "resource1", "subresource1"), True),
    ("resource without subresource does not match its subresource", rule(["get"], ["group1"], ["resource1"]),
     res("get", "group1", "resource1", "subresource1"), False),
    ("star subresource, matches any resource's", rule(["get"], ["group1"], ["*/subresource1"]),
     res("get", "group1", "resource2", "subresource1"), True),
    ("star subresource, not the resource itself", rule(["get"], ["group1"], ["*/subresource1"]),
     res("get", "group1", "resource2"), False),
    ("star resource matches subresources", rule(["get"], ["group1"], ["*"]),
     res("get", "group1", "resource1", "subresource1"), True),
    ("resource name match", rule(["get"], ["group1"], ["resource1"], ["foo"]),
     res("get", "group1", "resource1", name="foo"), True),
    ("resource name mismatch", rule(["get"], ["group1"], ["resource1"], ["foo"]),
     res("get", "group1", "resource1", name="bar"), False),
    ("resource names and a request without a name (list)", rule(["list"], ["group1"], ["resource1"], ["foo"]),
     res("list", "group1", "resource1"), False),
    ("nonresource url exact match", rule(["get"], urls=["/foo"]), nonres("get", "/foo"), True),
    ("nonresource url star", rule(["get"], urls=["*"]), nonres("get", "/foo/bar"), True),
    ("nonresource url prefix", rule(["get"], urls=["/foo/*"]), nonres("get", "/foo/bar"), True),
    ("nonresource url prefix mismatch", rule(["get"], urls=["/foo/*"]), nonres("get", "/foobar"), False),
    ("nonresource url mismatch", rule(["get"], urls=["/foo"]), nonres("get", "/foo/"), False),
    ("nonresource verb mismatch", rule(["get"], urls=["/foo"]), nonres("post", "/foo"), False),
    ("resource rule never matches a nonresource request", rule(["*"], ["*"], ["*"]), nonres("get", "/foo"), False),
    ("nonresource rule never matches a resource request", rule(["*"], urls=["*"]), res("get", "", "pods"), False),
]


@pytest.mark.parametrize("name,rule_,attrs,allowed", RULE_MATCHES, ids=[c[0] for c in RULE_MATCHES])
def test_rule_matches(name: str, rule_: Obj, attrs: RequestAttributes, allowed: bool) -> None:
    assert rule_allows(attrs, rule_) is allowed


def user_subject(name: str) -> Obj:
    return {"kind": "User", "name": name}


APPLIES_TO = [  # TestAppliesTo
    ("single subject that matches username", [user_subject("foobar")], UserInfo("foobar"), "", True),
    ("multiple subjects, one that matches username", [user_subject("barfoo"), user_subject("foobar")],
     UserInfo("foobar"), "", True),
    ("multiple subjects, none that match username", [user_subject("barfoo"), user_subject("foobar")],
     UserInfo("zimzam"), "", False),
    ("multiple subjects, one that match group", [user_subject("barfoo"), {"kind": "Group", "name": "foobar"}],
     UserInfo("zimzam", groups=("foobar",)), "", True),
    ("multiple subjects, one that match group, should ignore namespace",
     [user_subject("barfoo"), {"kind": "Group", "name": "foobar", "namespace": "kube-system"}],
     UserInfo("zimzam", groups=("foobar",)), "", True),
    ("multiple subjects, one that match group", [{"kind": "ServiceAccount", "name": "default",
                                                   "namespace": "kube-system"}, {"kind": "Group", "name": "foobar"}],
     UserInfo("zimzam", groups=("foobar",)), "", True),
    ("single subject that matches service account", [{"kind": "ServiceAccount", "name": "default",
                                                       "namespace": "kube-system"}],
     UserInfo("system:serviceaccount:kube-system:default"), "", True),
    ("service account without namespace takes the binding's", [{"kind": "ServiceAccount", "name": "default"}],
     UserInfo("system:serviceaccount:ns1:default"), "ns1", True),
    ("service account without namespace in a cluster binding matches no one",
     [{"kind": "ServiceAccount", "name": "default"}], UserInfo("system:serviceaccount::default"), "", False),
    ("service account of another namespace", [{"kind": "ServiceAccount", "name": "default", "namespace": "ns2"}],
     UserInfo("system:serviceaccount:ns1:default"), "ns1", False),
    ("a user named like a group is not its member", [{"kind": "Group", "name": "foobar"}], UserInfo("foobar"),
     "", False),
]


@pytest.mark.parametrize("name,subjects,user,namespace,applies", APPLIES_TO, ids=[c[0] for c in APPLIES_TO])
def test_applies_to(name: str, subjects: list[Obj], user: UserInfo, namespace: str, applies: bool) -> None:
    assert any(applies_to(user, s, namespace) for s in subjects) is applies


class FakeLookup:
    """The caches as the resolver reads them: (resource, namespace) -> objects."""

    def __init__(self, objects: dict[tuple[str, str], list[Obj]]) -> None:
        self.objects = objects

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return next((o for o in self.objects.get((resource, namespace), []) if o["metadata"]["name"] == name), None)

    def list(self, resource: str, namespace: str = "") -> list[Obj]:
        return list(self.objects.get((resource, namespace), []))


def role(name: str, *rules: Obj, namespace: str = "") -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "rules": list(rules)}


def binding(name: str, kind: str, role_name: str, *subjects: Obj, namespace: str = "") -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "subjects": list(subjects),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name}}


LOOKUP = FakeLookup({
    ("clusterroles", ""): [role("admin", rule(["*"], ["*"], ["*"])),
                           role("non-resource-get", rule(["get"], urls=["/apis/*", "/version"])),
                           role("pod-reader", rule(["get", "list", "watch"], [""], ["pods"]))],
    ("roles", "ns1"): [role("secret-getter", rule(["get"], [""], ["secrets"], ["mine"]), namespace="ns1")],
    ("clusterrolebindings", ""): [binding("root", "ClusterRole", "admin", user_subject("root")),
                                  binding("urls", "ClusterRole", "non-resource-get", {"kind": "Group", "name": "all"}),
                                  binding("dangling", "ClusterRole", "missing", user_subject("ghost"))],
    ("rolebindings", "ns1"): [binding("readers", "ClusterRole", "pod-reader", user_subject("alice"), namespace="ns1"),
                              binding("secrets", "Role", "secret-getter", {"kind": "ServiceAccount", "name": "sa"},
                                      namespace="ns1")],
})
ALICE, ROOT, SA = UserInfo("alice"), UserInfo("root"), UserInfo("system:serviceaccount:ns1:sa")

AUTHORIZER = [  # TestAuthorizer's shape: who, what, allowed
    ("cluster role binding allows everything everywhere", res("delete", "apps", "deployments", ns="x", user=ROOT),
     True),
    ("cluster-wide request by a cluster-wide binding", res("list", "", "nodes", ns="", user=ROOT), True),
    ("role binding to a cluster role allows in its namespace", res("list", "", "pods", user=ALICE), True),
    ("role binding does not reach other namespaces", res("list", "", "pods", ns="ns2", user=ALICE), False),
    ("role binding does not reach cluster scope", res("list", "", "pods", ns="", user=ALICE), False),
    ("read-only role refuses create", res("create", "", "pods", user=ALICE), False),
    ("role binding with a namespace-less service account subject", res("get", "", "secrets", name="mine", user=SA),
     True),
    ("resourceNames limit the object", res("get", "", "secrets", name="yours", user=SA), False),
    ("group binding allows nonresource prefix", nonres("get", "/apis/apps", UserInfo("x", groups=("all",))), True),
    ("group binding allows nonresource exact", nonres("get", "/version", UserInfo("x", groups=("all",))), True),
    ("nonresource path outside the prefix", nonres("get", "/api", UserInfo("x", groups=("all",))), False),
    ("binding to a missing role allows nothing", res("get", "", "pods", user=UserInfo("ghost")), False),
]


@pytest.mark.parametrize("name,attrs,allowed", AUTHORIZER, ids=[c[0] for c in AUTHORIZER])
def test_authorizer(name: str, attrs: RequestAttributes, allowed: bool) -> None:
    decision, _ = RBACAuthorizer(RuleResolver(LOOKUP)).authorize(attrs)
    assert decision is (Decision.ALLOW if allowed else Decision.NO_OPINION)


def test_allow_reason_names_binding_and_role() -> None:
    decision, reason = RBACAuthorizer(RuleResolver(LOOKUP)).authorize(res("list", "", "pods", user=ALICE))
    assert decision is Decision.ALLOW
    assert reason == 'RBAC: allowed by RoleBinding "ns1/readers" of ClusterRole "pod-reader" to User "alice"'


def test_missing_role_is_reported_in_reason() -> None:
    _, reason = RBACAuthorizer(RuleResolver(LOOKUP)).authorize(res("get", "", "pods", user=UserInfo("ghost")))
    assert reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found'


PRIVILEGED = [
    ("system:masters is always allowed", UserInfo("x", groups=("system:masters",)), Decision.ALLOW),
    ("others get no opinion", UserInfo("x", groups=("system:authenticated",)), Decision.NO_OPINION),
]


@pytest.mark.parametrize("name,user,decision", PRIVILEGED, ids=[c[0] for c in PRIVILEGED])
def test_privileged_groups(name: str, user: UserInfo, decision: Decision) -> None:
    attrs = RequestAttributes(user, new_request_info("DELETE", "/api/v1/nodes/n1", {}))
    assert PrivilegedGroups().authorize(attrs)[0] is decision


COVERS = [  # TestCoversExactMatch .. (policy_comparator_test.go)
    ("exact match", [rule(["get"], ["v1"], ["builds"])], [rule(["get"], ["v1"], ["builds"])], True),
    ("sub-verb match", [rule(["get", "list"], ["v1"], ["builds"])], [rule(["get"], ["v1"], ["builds"])], True),
    ("multiple rules match", [rule(["get"], ["v1"], ["builds"]), rule(["list"], ["v1"], ["builds"])],
     [rule(["get", "list"], ["v1"], ["builds"])], True),
    ("verb star match", [rule(["*"], ["v1"], ["builds"])], [rule(["get", "delete"], ["v1"], ["builds"])], True),
    ("resource star match", [rule(["get"], ["v1"], ["*"])], [rule(["get"], ["v1"], ["builds", "pods"])], True),
    ("group star match", [rule(["get"], ["*"], ["builds"])], [rule(["get"], ["a", "b"], ["builds"])], True),
    ("resource names covered by no names", [rule(["get"], ["v1"], ["builds"])],
     [rule(["get"], ["v1"], ["builds"], ["foo"])], True),
    ("resource names covered by the same names", [rule(["get"], ["v1"], ["builds"], ["foo", "bar"])],
     [rule(["get"], ["v1"], ["builds"], ["foo"])], True),
    ("resource names not covered by other names", [rule(["get"], ["v1"], ["builds"], ["foo"])],
     [rule(["get"], ["v1"], ["builds"], ["bar"])], False),
    ("all names not covered by some names", [rule(["get"], ["v1"], ["builds"], ["foo"])],
     [rule(["get"], ["v1"], ["builds"])], False),
    ("star subresource covers a subresource", [rule(["get"], ["v1"], ["*/status"])],
     [rule(["get"], ["v1"], ["pods/status"])], True),
    ("verb mismatch", [rule(["get"], ["v1"], ["builds"])], [rule(["create"], ["v1"], ["builds"])], False),
    ("resource mismatch", [rule(["get"], ["v1"], ["builds"])], [rule(["get"], ["v1"], ["pods"])], False),
    ("nonresource star covers", [rule(["get"], urls=["*"])], [rule(["get"], urls=["/foo", "/bar"])], True),
    ("nonresource prefix covers", [rule(["get"], urls=["/foo/*"])], [rule(["get"], urls=["/foo/bar"])], True),
    ("nonresource prefix does not cover a broader prefix", [rule(["get"], urls=["/foo/bar*"])],
     [rule(["get"], urls=["/foo/*"])], False),
    ("resource rules do not cover nonresource", [rule(["*"], ["*"], ["*"])], [rule(["get"], urls=["/foo"])],
     False),
]


@pytest.mark.parametrize("name,owner,servant,covered", COVERS, ids=[c[0] for c in COVERS])
def test_covers(name: str, owner: list[Obj], servant: list[Obj], covered: bool) -> None:
    assert (not uncovered(owner, servant)) is covered


def test_compact_string_as_upstream() -> None:
    assert compact_string(rule(["create"], [""], ["pods"])) == '{APIGroups:[""], Resources:["pods"], Verbs:["create"]}'
