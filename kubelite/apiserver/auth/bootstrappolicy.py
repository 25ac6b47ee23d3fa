"""The default roles and bindings (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), reconciled at start.

As the API server's rbac/bootstrap-roles post-start hook: a missing default is created; one that
exists and is annotated `rbac.authorization.kubernetes.io/autoupdate: "true"` gets back the rules
(or aggregationRule) and subjects the defaults have and it lacks (extra ones are kept, as `kubectl
auth reconcile` without --remove-extra-permissions). Setting the annotation to "false" leaves an
object alone. admin/edit/view are aggregated (their rules come from the system:aggregate-to-*
roles through the clusterrole-aggregation controller).

The per-controller `system:controller:*` roles are in controllerpolicy. Partial: a subset of upstream's
roles (kube-proxy's, kube-dns's and the monitoring roles are not defined); kubelite-only additions are marked.
"""

from __future__ import annotations

import copy
import logging

from kubelite.api.errors import ApiError
from kubelite.apiserver.auth.bootstraptoken import DEFAULT_NODE_GROUP
from kubelite.apiserver.auth.controllerpolicy import (
    controller_role_bindings,
    controller_roles,
    namespace_role_bindings,
    namespace_roles,
)
from kubelite.apiserver.auth.openidmetadata import JWKS_PATH, OPENID_CONFIG_PATH
from kubelite.apiserver.auth.policyrules import (
    AGGREGATE_TO,
    APPS,
    AUTHN,
    AUTHZ,
    AUTOUPDATE,
    BATCH,
    CERTIFICATES,
    COORDINATION,
    DISCOVERY,
    KUBELITE,
    LEGACY,
    POLICY,
    RBAC_GROUP,
    READ,
    READ_WRITE,
    SCHEDULING,
    STORAGE,
    WRITE,
    Obj,
    event_rules,
    labelled,
    rule,
    urls,
)
from kubelite.apiserver.auth.serviceaccount import ALL_SERVICE_ACCOUNTS
from kubelite.apiserver.registry.base import Resource
from kubelite.apiserver.registry.rbac import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES
from kubelite.apiserver.rest import Registry

log = logging.getLogger("kubelite.apiserver.rbac")
GET_NODES_ROLE = "kubeadm:get-nodes"


def _role(name: str, rules: list[Obj], labels: dict[str, str] | None = None,
          aggregate: list[str] | None = None) -> Obj:
    role: Obj = labelled({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
                          "metadata": {"name": name, "labels": labels or {}}})
    if aggregate is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO + a: "true"}}
                                                            for a in aggregate]}
        role["rules"] = []
    else:
        role["rules"] = rules
    return role


def _aggregated_into(*names: str) -> dict[str, str]:
    return {AGGREGATE_TO + n: "true" for n in names}


def node_rules() -> list[Obj]:
    """NodeRules(): what any node may do; the Node authorizer narrows reads and writes to the node's own objects."""
    return [
        rule(["create"], [AUTHN], ["tokenreviews"]),
        rule(["create"], [AUTHZ], ["subjectaccessreviews", "localsubjectaccessreviews"]),
        rule(READ, [LEGACY], ["services"]),
        rule(["create", "get", "list", "watch"], [LEGACY], ["nodes"]),
        rule(["update", "patch"], [LEGACY], ["nodes/status"]),
        rule(["update", "patch"], [LEGACY], ["nodes"]),
        *event_rules(),
        rule(READ, [LEGACY], ["pods"]),
        rule(["create", "delete"], [LEGACY], ["pods"]),
        rule(["update", "patch"], [LEGACY], ["pods/status"]),
        rule(["create"], [LEGACY], ["pods/eviction"]),
        rule(["get"], [LEGACY], ["secrets", "configmaps"]),
        rule(["get"], [LEGACY], ["persistentvolumeclaims", "persistentvolumes"]),
        rule(["get"], [LEGACY], ["endpoints"]),
        rule(["create", "get", "list", "watch"], [CERTIFICATES], ["certificatesigningrequests"]),
        rule(["get", "create", "update", "patch", "delete"], [COORDINATION], ["leases"]),
        rule(READ, [STORAGE], ["csidrivers", "csinodes"]),
        rule(["create"], [LEGACY], ["serviceaccounts/token"]),
        rule(READ, ["node.k8s.io"], ["runtimeclasses"]),
        rule(["list", "watch"], [DISCOVERY], ["endpointslices"])]  # kubelite: the agent's service proxy


def cluster_roles() -> list[Obj]:
    """ClusterRoles(): the default ClusterRoles, in upstream's order."""
    return [
        _role("cluster-admin", [rule(["*"], ["*"], ["*"]), urls(["*"], ["*"])]),
        _role("system:discovery", [urls(["get"], ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                                  "/openapi", "/openapi/*", "/readyz", "/version", "/version/"])]),
        _role("system:monitoring", [urls(["get"], ["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics",
                                                   "/metrics/slis", "/readyz", "/readyz/*"])]),
        _role("system:basic-user", [
            rule(["create"], [AUTHN], ["selfsubjectreviews"]),
            rule(["create"], [AUTHZ], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"])]),
        _role("system:public-info-viewer", [urls(["get"], ["/healthz", "/livez", "/readyz", "/version",
                                                           "/version/"])]),
        _role("admin", [], aggregate=["admin"]),
        _role("edit", [], _aggregated_into("admin"), aggregate=["edit"]),
        _role("view", [], _aggregated_into("edit"), aggregate=["view"]),
        _role("system:aggregate-to-admin", [
            rule(["create"], [AUTHZ], ["localsubjectaccessreviews"]),
            rule(READ_WRITE, [RBAC_GROUP], ["roles", "rolebindings"])], _aggregated_into("admin")),
        _role("system:aggregate-to-edit", [
            rule(READ_WRITE, [LEGACY], ["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets",
                                        "services/proxy"]),
            rule(["impersonate"], [LEGACY], ["serviceaccounts"]),
            rule(WRITE, [LEGACY], ["pods", "replicationcontrollers", "replicationcontrollers/scale",
                                   "persistentvolumeclaims", "services", "services/proxy", "endpoints",
                                   "configmaps", "secrets", "serviceaccounts"]),
            rule(["create"], [LEGACY], ["serviceaccounts/token"]),
            rule(WRITE, [APPS], ["statefulsets", "statefulsets/scale", "daemonsets", "deployments",
                                 "deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale"]),
            rule(WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
            rule(WRITE, [BATCH], ["jobs", "cronjobs"]),
            rule(WRITE, [POLICY], ["poddisruptionbudgets"]),
            rule(WRITE, ["networking.k8s.io"], ["networkpolicies", "ingresses"]),
            rule(WRITE, [COORDINATION], ["leases"])], _aggregated_into("edit")),
        _role("system:aggregate-to-view", [
            rule(READ, [LEGACY], ["pods", "replicationcontrollers", "replicationcontrollers/scale",
                                  "serviceaccounts", "services", "services/status", "endpoints",
                                  "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"]),
            rule(READ, [LEGACY], ["limitranges", "resourcequotas", "bindings", "events", "pods/status",
                                  "resourcequotas/status", "namespaces/status", "replicationcontrollers/status",
                                  "pods/log"]),
            rule(READ, [LEGACY], ["namespaces"]),
            rule(READ, [DISCOVERY], ["endpointslices"]),
            rule(READ, [APPS], ["controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
                                "daemonsets", "daemonsets/status", "deployments", "deployments/status",
                                "deployments/scale", "replicasets", "replicasets/status", "replicasets/scale"]),
            rule(READ, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
            rule(READ, [BATCH], ["jobs", "cronjobs", "cronjobs/status", "jobs/status"]),
            rule(READ, [POLICY], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
            rule(READ, ["networking.k8s.io"], ["networkpolicies", "ingresses", "ingresses/status"]),
            rule(READ, [COORDINATION], ["leases"])], _aggregated_into("view")),
        _role("system:heapster", [rule(READ, [LEGACY], ["events", "pods", "nodes", "namespaces"]),
                                  rule(READ, [APPS], ["deployments"])]),
        _role("system:node", node_rules()),
        _role("system:node-proxier", [
            rule(["list", "watch"], [LEGACY], ["services", "endpoints"]),
            rule(["get", "list", "watch"], [LEGACY], ["nodes"]),
            *event_rules(),
            rule(["list", "watch"], [DISCOVERY], ["endpointslices"])]),
        _role("system:node-bootstrapper", [
            rule(["create", "get", "list", "watch"], [CERTIFICATES], ["certificatesigningrequests"])]),
        _role("system:auth-delegator", [rule(["create"], [AUTHN], ["tokenreviews"]),
                                        rule(["create"], [AUTHZ], ["subjectaccessreviews"])]),
        _role("system:kube-controller-manager", [
            *event_rules(),
            rule(["create"], [COORDINATION], ["leases"]),
            rule(["get", "update"], [COORDINATION], ["leases"], ["kube-controller-manager"]),
            rule(["create"], [LEGACY], ["secrets", "serviceaccounts"]),
            rule(["delete"], [LEGACY], ["secrets"]),
            rule(["get"], [LEGACY], ["configmaps", "namespaces", "secrets", "serviceaccounts"]),
            rule(["update"], [LEGACY], ["secrets", "serviceaccounts"]),
            rule(["create"], [AUTHN], ["tokenreviews"]),
            rule(["create"], [AUTHZ], ["subjectaccessreviews"]),
            rule(["list", "watch"], ["*"], ["*"]),
            rule(["create"], [LEGACY], ["serviceaccounts/token"])]),
        _role("system:kube-scheduler", [
            *event_rules(),
            rule(["create"], [COORDINATION], ["leases"]),
            rule(["get", "update"], [COORDINATION], ["leases"], ["kube-scheduler"]),
            rule(["create"], [LEGACY], ["endpoints"]),
            rule(["get", "update"], [LEGACY], ["endpoints"], ["kube-scheduler"]),
            rule(READ, [LEGACY], ["nodes"]),
            rule(["get", "list", "watch", "delete"], [LEGACY], ["pods"]),
            rule(["create"], [LEGACY], ["pods/binding", "bindings"]),
            rule(["patch", "update"], [LEGACY], ["pods/status"]),
            rule(READ, [LEGACY], ["replicationcontrollers", "services"]),
            rule(READ, [APPS], ["replicasets", "statefulsets"]),
            rule(READ, [POLICY], ["poddisruptionbudgets"]),
            rule(READ, [LEGACY], ["persistentvolumeclaims", "persistentvolumes"]),
            rule(["create"], [AUTHN], ["tokenreviews"]),
            rule(["create"], [AUTHZ], ["subjectaccessreviews"]),
            rule(READ, [STORAGE], ["csinodes", "csidrivers", "csistoragecapacities", "storageclasses"]),
            rule(READ, [LEGACY], ["namespaces"]),
            rule(READ, [SCHEDULING], ["priorityclasses"]),  # kubelite: preemption reads them
            rule(READ_WRITE, [KUBELITE], ["schedulingexplanations"])]),  # kubelite: the scheduler's explanations
        _role("system:certificates.k8s.io:certificatesigningrequests:nodeclient", [
            rule(["create"], [CERTIFICATES], ["certificatesigningrequests/nodeclient"])]),
        _role("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", [
            rule(["create"], [CERTIFICATES], ["certificatesigningrequests/selfnodeclient"])]),
        # reading the ServiceAccountIssuerDiscovery documents (auth/openidmetadata.py), with and without the slash
        _role("system:service-account-issuer-discovery", [urls(["get"], [
            OPENID_CONFIG_PATH, OPENID_CONFIG_PATH + "/", JWKS_PATH, JWKS_PATH + "/"])]),
        # kubeadm's (AllowBootstrapTokensToGetNodes): `join` reads the Node of its name with the bootstrap token
        # and refuses one that is Ready (cli/join.py refuse_ready_node)
        _role(GET_NODES_ROLE, [rule(["get"], [LEGACY], ["nodes"])]),
    ]


def _binding(role: str, subjects: list[Obj], name: str | None = None) -> Obj:
    return labelled({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name or role},
                     "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role}, "subjects": subjects})


def group(name: str) -> Obj:
    return {"apiGroup": RBAC_GROUP, "kind": "Group", "name": name}


def user(name: str) -> Obj:
    return {"apiGroup": RBAC_GROUP, "kind": "User", "name": name}


def cluster_role_bindings() -> list[Obj]:
    """ClusterRoleBindings(): system:node is bound to no one (the Node authorizer answers for nodes)."""
    return [
        _binding("cluster-admin", [group("system:masters")]),
        _binding("system:monitoring", [group("system:monitoring")]),
        _binding("system:discovery", [group("system:authenticated")]),
        _binding("system:basic-user", [group("system:authenticated")]),
        _binding("system:public-info-viewer", [group("system:authenticated"), group("system:unauthenticated")]),
        _binding("system:node-proxier", [user("system:kube-proxy")]),
        _binding("system:kube-controller-manager", [user("system:kube-controller-manager")]),
        _binding("system:kube-scheduler", [user("system:kube-scheduler")]),
        _binding("system:node", []),
        # every service account may read the issuer discovery documents; anonymous readers need a binding of
        # their own (system:unauthenticated), as upstream
        _binding("system:service-account-issuer-discovery", [group(ALL_SERVICE_ACCOUNTS)]),
        # kubeadm's bindings for join tokens (`kubelite token create` puts them in DEFAULT_NODE_GROUP): they may
        # ask for node client certificates, which the csrapproving controller then approves; nodes may renew
        _binding("system:node-bootstrapper", [group(DEFAULT_NODE_GROUP)], "kubeadm:kubelet-bootstrap"),
        _binding("system:certificates.k8s.io:certificatesigningrequests:nodeclient", [group(DEFAULT_NODE_GROUP)],
                 "kubeadm:node-autoapprove-bootstrap"),
        _binding("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", [group("system:nodes")],
                 "kubeadm:node-autoapprove-certificate-rotation"),
        _binding(GET_NODES_ROLE, [group(DEFAULT_NODE_GROUP)]),
    ]


def _merged(current: Obj, default: Obj) -> Obj | None:
    """The current object with what the default has and it lacks; None when nothing is missing."""
    out = copy.deepcopy(current)
    meta = out["metadata"]
    meta["labels"] = {**default["metadata"]["labels"], **(meta.get("labels") or {})}
    meta["annotations"] = {**default["metadata"]["annotations"], **(meta.get("annotations") or {})}
    if "aggregationRule" in default:
        selectors = (out.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        missing = [s for s in default["aggregationRule"]["clusterRoleSelectors"] if s not in selectors]
        if missing:
            out["aggregationRule"] = {"clusterRoleSelectors": [*selectors, *missing]}
    for key in ("rules", "subjects"):
        if key in default and "aggregationRule" not in default:
            have = out.get(key) or []
            out[key] = [*have, *(x for x in default[key] if x not in have)]
    return None if out == current else out


async def _reconcile(registry: Registry, resource: Resource, defaults: list[Obj]) -> None:
    for default in defaults:
        name, namespace = default["metadata"]["name"], default["metadata"].get("namespace", "")
        current = registry.get(resource.plural, namespace, name)
        try:
            if current is None:
                await registry.create(resource, namespace, copy.deepcopy(default))
                continue
            if (current["metadata"].get("annotations") or {}).get(AUTOUPDATE) == "false":
                continue
            merged = _merged(current, default)
            if merged is not None:
                await registry.update(resource, namespace, name, merged)
        except ApiError as exc:  # as upstream's hook: report and carry on; the next start tries again
            log.warning("could not reconcile %s %s: %s", resource.kind, name, exc)


async def ensure_bootstrap_policy(registry: Registry) -> None:
    await _reconcile(registry, CLUSTER_ROLES, cluster_roles())
    await _reconcile(registry, CLUSTER_ROLE_BINDINGS, cluster_role_bindings())
    await _reconcile(registry, CLUSTER_ROLES, controller_roles())
    await _reconcile(registry, CLUSTER_ROLE_BINDINGS, controller_role_bindings())
    await _reconcile(registry, ROLES, namespace_roles())
    await _reconcile(registry, ROLE_BINDINGS, namespace_role_bindings())
