"""The RBAC authorizer (plugin/pkg/auth/authorizer/rbac) and its rule resolver (pkg/registry/rbac/validation).

Rules come from the bindings that name the user (by name, group, or service account): every
ClusterRoleBinding, then, for a namespaced request, the RoleBindings of that namespace (whose roleRef
is a Role of the namespace or a ClusterRole). A request is allowed when any rule allows it:
resource requests match verb, API group, resource (`*`, `res/sub`, `*/sub`) and resourceNames;
non-resource requests match verb and nonResourceURLs (`*`, a `prefix*`). RBAC never denies: without
a matching rule it has no opinion, and the union's all-NoOpinion is the denial.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kubelite.apiserver.auth.authorizer import Decision
from kubelite.apiserver.auth.requestinfo import RequestAttributes
from kubelite.apiserver.auth.user import SYSTEM_PRIVILEGED_GROUP, UserInfo
from kubelite.apiserver.registry.base import Lookup

Obj = dict[str, Any]
GROUP = "rbac.authorization.k8s.io"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def verb_matches(rule: Obj, verb: str) -> bool:
    verbs = rule.get("verbs") or []
    return "*" in verbs or verb in verbs


def api_group_matches(rule: Obj, group: str) -> bool:
    groups = rule.get("apiGroups") or []
    return "*" in groups or group in groups


def resource_matches(rule: Obj, combined: str, subresource: str) -> bool:
    """`*` matches all; `pods/status` the subresource; `*/status` that subresource of any resource."""
    for resource in rule.get("resources") or []:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: Obj, name: str) -> bool:
    names = rule.get("resourceNames") or []
    return not names or name in names


def non_resource_url_matches(rule: Obj, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or []:
        if url in ("*", path) or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(attributes: RequestAttributes, rule: Obj) -> bool:
    """validation.RuleAllows."""
    if attributes.info.is_resource_request:
        combined = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
        return (verb_matches(rule, attributes.verb) and api_group_matches(rule, attributes.api_group)
                and resource_matches(rule, combined, attributes.subresource)
                and resource_name_matches(rule, attributes.name))
    return verb_matches(rule, attributes.verb) and non_resource_url_matches(rule, attributes.path)


def service_account_username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def applies_to(user: UserInfo, subject: Obj, binding_namespace: str) -> bool:
    """appliesToUser: a User by name, a Group by membership, a ServiceAccount (namespace defaulting to the
    binding's) by its username."""
    kind, name = subject.get("kind"), str(subject.get("name", ""))
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and user.name == service_account_username(namespace, name)
    return False


@dataclass(frozen=True)
class Source:
    """Where a rule came from, for the reason of an Allow (as upstream's ruleCheckingVisitor describes it)."""

    binding_kind: str
    binding: str
    binding_namespace: str
    role_kind: str
    role: str
    subject: Obj

    def describe(self) -> str:
        where = f"{self.binding_namespace}/" if self.binding_namespace else ""
        subject = self.subject
        who = subject.get("name", "")
        if subject.get("kind") == "ServiceAccount":
            who = f"{subject.get('namespace') or self.binding_namespace}/{who}"
        return (f'RBAC: allowed by {self.binding_kind} "{where}{self.binding}" of {self.role_kind} "{self.role}" '
                f'to {subject.get("kind")} "{who}"')


@dataclass(frozen=True)
class RuleResolver:
    """validation.DefaultRuleResolver over the server's caches: the rules a user holds in a namespace."""

    lookup: Lookup

    def role_rules(self, role_ref: Obj, namespace: str) -> list[Obj] | None:
        """A roleRef's rules; None when the role does not exist."""
        kind, name = role_ref.get("kind"), role_ref.get("name", "")
        if kind == "ClusterRole":
            role = self.lookup.get("clusterroles", "", name)
        elif kind == "Role" and namespace:
            role = self.lookup.get("roles", namespace, name)
        else:
            return None
        return None if role is None else list(role.get("rules") or [])

    def visit(self, user: UserInfo, namespace: str) -> Iterator[tuple[Source, Obj] | str]:
        """Each rule the user holds (with its source), or an error string for a binding to a missing role."""
        bindings: list[tuple[str, Obj]] = [("ClusterRoleBinding", b) for b in self.lookup.list("clusterrolebindings")]
        if namespace:
            bindings += [("RoleBinding", b) for b in self.lookup.list("rolebindings", namespace)]
        for kind, binding in bindings:
            binding_ns = binding["metadata"].get("namespace", "") if kind == "RoleBinding" else ""
            subject = next((s for s in binding.get("subjects") or [] if applies_to(user, s, binding_ns)), None)
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            rules = self.role_rules(ref, binding_ns)
            if rules is None:
                role_kind = str(ref.get("kind", "")).lower()
                yield f'{role_kind}.{GROUP} "{ref.get("name", "")}" not found'
                continue
            source = Source(kind, binding["metadata"]["name"], binding_ns, str(ref.get("kind")), ref.get("name", ""),
                            subject)
            for rule in rules:
                yield source, rule

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Obj], list[str]]:
        """RulesFor: every rule the user holds in the namespace, and the errors met on the way."""
        rules, failures = [], []
        for item in self.visit(user, namespace):
            if isinstance(item, str):
                failures.append(item)
            else:
                rules.append(item[1])
        return rules, failures


@dataclass(frozen=True)
class RBACAuthorizer:
    resolver: RuleResolver

    def authorize(self, attributes: RequestAttributes) -> tuple[Decision, str]:
        failures: list[str] = []
        for item in self.resolver.visit(attributes.user, attributes.namespace):
            if isinstance(item, str):
                failures.append(item)
            elif rule_allows(attributes, item[1]):
                return Decision.ALLOW, item[0].describe()
        if failures:  # upstream appends the resolution errors to the reason
            return Decision.NO_OPINION, "RBAC: " + ", ".join(failures)
        return Decision.NO_OPINION, ""


class PrivilegedGroups:
    """authorizerfactory.NewPrivilegedGroups(system:masters): the cluster's superusers, before any other mode."""

    def authorize(self, attributes: RequestAttributes) -> tuple[Decision, str]:
        if SYSTEM_PRIVILEGED_GROUP in attributes.user.groups:
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""


# --- escalation checks (validation.ConfirmNoEscalation / Covers) -------------------------------------------


def _has_all(owner: Sequence[str], wanted: Sequence[str]) -> bool:
    return "*" in owner or set(wanted) <= set(owner)


def _resource_covers(owner: Sequence[str], resource: str) -> bool:
    if "*" in owner or resource in owner:
        return True
    _, slash, sub = resource.partition("/")
    return bool(slash) and f"*/{sub}" in owner


def _url_covers(owner: Sequence[str], url: str) -> bool:
    return any(o in ("*", url) or (o.endswith("*") and url.startswith(o[:-1])) for o in owner)


def rule_covers(owner: Obj, sub: Obj) -> bool:
    """ruleCovers: `owner` grants everything the (atomic) rule `sub` does."""
    owner_names = owner.get("resourceNames") or []
    return (_has_all(owner.get("verbs") or [], sub.get("verbs") or [])
            and _has_all(owner.get("apiGroups") or [], sub.get("apiGroups") or [])
            and all(_resource_covers(owner.get("resources") or [], r) for r in sub.get("resources") or [])
            and all(_url_covers(owner.get("nonResourceURLs") or [], u) for u in sub.get("nonResourceURLs") or [])
            # stricter than upstream's hasAll: names granted never cover an unnamed (all-names) rule
            and (not owner_names or (bool(sub.get("resourceNames")) and set(sub["resourceNames"]) <= set(owner_names))))


def breakdown(rule: Obj) -> list[Obj]:
    """BreakdownRule: one rule per verb x group x resource x name (or verb x URL)."""
    out: list[Obj] = []
    verbs = rule.get("verbs") or []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            names = rule.get("resourceNames") or []
            for verb in verbs:
                if names:
                    out += [{"apiGroups": [group], "resources": [resource], "verbs": [verb], "resourceNames": [n]}
                            for n in names]
                else:
                    out.append({"apiGroups": [group], "resources": [resource], "verbs": [verb]})
    for url in rule.get("nonResourceURLs") or []:
        out += [{"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs]
    return out


def uncovered(owner_rules: Sequence[Obj], servant_rules: Sequence[Obj]) -> list[Obj]:
    """Covers: the atomic servant rules no owner rule covers (empty: covered)."""
    return [sub for rule in servant_rules for sub in breakdown(rule)
            if not any(rule_covers(o, sub) for o in owner_rules)]


def _go_list(values: Sequence[str]) -> str:
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def compact_string(rule: Obj) -> str:
    """PolicyRule's CompactString: `{APIGroups:["" ], Resources:["pods"], Verbs:["create"]}`."""
    parts = []
    for key, title in (("apiGroups", "APIGroups"), ("resources", "Resources"), ("resourceNames", "ResourceNames"),
                       ("nonResourceURLs", "NonResourceURLs"), ("verbs", "Verbs")):
        if rule.get(key):
            parts.append(f"{title}:{_go_list(rule[key])}")
    return "{" + ", ".join(parts) + "}"


def escalation_message(user: UserInfo, missing: Sequence[Obj], failures: Sequence[str]) -> str:
    """ConfirmNoEscalation's error text."""
    groups = "[" + " ".join(f'"{g}"' for g in user.groups) + "]"
    text = (f'user "{user.name}" (groups={groups}) is attempting to grant RBAC permissions not currently held:\n'
            + "\n".join(compact_string(r) for r in missing))
    if failures:
        text += "; resolution errors: [" + " ".join(failures) + "]"
    return text
