"""rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding, ClusterRoleBinding.

Validation as pkg/apis/rbac/validation (names are path segments, so `system:node` is valid; a
binding's roleRef is immutable), and escalation prevention as pkg/registry/rbac/{role,rolebinding,…}/
policybased: a user may write a role only with rules it already holds (or the `escalate` verb on
it), and a binding only to a role whose rules it holds (or the `bind` verb on that role);
system:masters is always allowed. Without an authorizer configured (AlwaysAllow) nothing is checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.apiserver.auth import rbac
from kubelite.apiserver.auth.authorizer import Authorizer, Decision
from kubelite.apiserver.auth.context import CURRENT_USER
from kubelite.apiserver.auth.requestinfo import RequestAttributes, RequestInfo
from kubelite.apiserver.auth.user import SYSTEM_PRIVILEGED_GROUP, UserInfo
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

GROUP = rbac.GROUP
SUBJECT_KINDS = ["ServiceAccount", "User", "Group"]


@dataclass
class Escalation:
    """The authorizer the `escalate`/`bind` checks ask, and the resolver of the requester's own rules."""

    authorizer: Authorizer
    resolver: rbac.RuleResolver

    def allowed(self, user: UserInfo, verb: str, resource: str, namespace: str, name: str) -> bool:
        info = RequestInfo(True, "", verb, "apis", GROUP, "v1", namespace, resource, "", name)
        decision, _ = self.authorizer.authorize(RequestAttributes(user, info))
        return decision is Decision.ALLOW

    def refusals(self, user: UserInfo, namespace: str, rules: list[Obj]) -> list[str]:
        held, failures = self.resolver.rules_for(user, namespace)
        missing = rbac.uncovered(held, rules)
        return [rbac.escalation_message(user, missing, failures)] if missing else []


class RBACStrategy(Strategy):
    name_validator = staticmethod(v.is_path_segment_name)
    escalation: Escalation | None = None  # set by the API server when an authorizer is configured

    def _requester(self) -> UserInfo | None:
        """The user to check, or None when nothing is to be checked (no RBAC, no user, a superuser)."""
        user = CURRENT_USER.get()
        if self.escalation is None or user is None or SYSTEM_PRIVILEGED_GROUP in user.groups:
            return None
        return user

    def admit_update(self, new: Obj, old: Obj, lookup: Lookup) -> list[str]:
        return self.admit(new, lookup)


def _validate_rules(rules: object, namespaced: bool) -> list[Cause]:
    causes: list[Cause] = []
    if rules is None:
        return causes
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        path = f"rules[{i}]"
        if not rule.get("verbs"):
            causes.append(v.required(f"{path}.verbs", "verbs must contain at least one value"))
        urls, resources = rule.get("nonResourceURLs"), rule.get("resources")
        if urls and namespaced:
            causes.append(v.invalid(f"{path}.nonResourceURLs", urls, "namespaced rules cannot apply to "
                                                                     "non-resource URLs"))
        if urls and (resources or rule.get("apiGroups")):
            causes.append(v.invalid(f"{path}.nonResourceURLs", urls, "rules cannot apply to both regular "
                                                                     "resources and non-resource URLs"))
        if not urls:
            if not rule.get("apiGroups"):
                causes.append(v.required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
            if not resources:
                causes.append(v.required(f"{path}.resources", "resource rules must supply at least one resource"))
    return causes


class RoleStrategy(RBACStrategy):
    def admit(self, obj: Obj, lookup: Lookup) -> list[str]:
        user = self._requester()
        if user is None or self.escalation is None:
            return []
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") if self.resource.namespaced else ""
        if self.escalation.allowed(user, "escalate", self.resource.plural, namespace, meta.get("name", "")):
            return []
        return self.escalation.refusals(user, namespace, list(obj.get("rules") or []))

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        if obj.get("aggregationRule") and "rules" not in obj:
            obj["rules"] = []

    def validate(self, obj: Obj) -> list[Cause]:
        return super().validate(obj) + _validate_rules(obj.get("rules"), self.resource.namespaced)


class BindingStrategy(RBACStrategy):
    def admit(self, obj: Obj, lookup: Lookup) -> list[str]:
        user = self._requester()
        if user is None or self.escalation is None:
            return []
        meta, ref = obj["metadata"], obj.get("roleRef") or {}
        namespace = meta.get("namespace", "") if self.resource.namespaced else ""
        role_resource = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
        # BindingAuthorized asks in the binding's namespace, whatever the role's kind
        if self.escalation.allowed(user, "bind", role_resource, namespace, ref.get("name", "")):
            return []
        rules = self.escalation.resolver.role_rules(ref, namespace)
        if rules is None:
            return [f'{role_resource}.{GROUP} "{ref.get("name", "")}" not found']
        return self.escalation.refusals(user, namespace, rules)

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        ref = obj.get("roleRef") or {}
        kinds = ["Role", "ClusterRole"] if self.resource.namespaced else ["ClusterRole"]
        if ref.get("apiGroup") != GROUP:
            causes.append(v.not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), [GROUP]))
        if ref.get("kind") not in kinds:
            causes.append(v.not_supported("roleRef.kind", ref.get("kind", ""), kinds))
        if not ref.get("name"):
            causes.append(v.required("roleRef.name"))
        for i, subject in enumerate(obj.get("subjects") or []):
            path = f"subjects[{i}]"
            if not subject.get("name"):
                causes.append(v.required(f"{path}.name"))
            if subject.get("kind") not in SUBJECT_KINDS:
                causes.append(v.not_supported(f"{path}.kind", subject.get("kind", ""), SUBJECT_KINDS))
            elif subject["kind"] == "ServiceAccount" and not self.resource.namespaced \
                    and not subject.get("namespace"):
                causes.append(v.required(f"{path}.namespace"))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        if new.get("roleRef") != old.get("roleRef"):
            causes.append(v.invalid("roleRef", new.get("roleRef"), "cannot change roleRef"))
        return causes


ROLES = Resource(GROUP, "v1", "roles", "role", "Role", True, "V1Role")
CLUSTER_ROLES = Resource(GROUP, "v1", "clusterroles", "clusterrole", "ClusterRole", False, "V1ClusterRole")
ROLE_BINDINGS = Resource(GROUP, "v1", "rolebindings", "rolebinding", "RoleBinding", True, "V1RoleBinding")
CLUSTER_ROLE_BINDINGS = Resource(GROUP, "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding",
                                 False, "V1ClusterRoleBinding")
