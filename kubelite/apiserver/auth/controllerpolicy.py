"""The controllers' roles (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go and the
controller part of namespace_policy.go): one `system:controller:<account>` ClusterRole per controller kubelite
has, bound to the service account `kube-system/<account>` that `kubelite controller-manager
--use-service-account-credentials` runs that controller as (upstream's SAControllerClientBuilder).

Rules are upstream's, minus resources kubelite does not serve (the `extensions` group, ReplicationControllers'
finalizers, volume plugins); kubelite-only controllers and rules are marked. The bootstrap signer and token
cleaner get namespaced Roles in kube-system and kube-public, as upstream.
"""

from __future__ import annotations

from kubelite.apiserver.auth.policyrules import (
    APPS,
    AUTHZ,
    BATCH,
    CERTIFICATES,
    COORDINATION,
    DISCOVERY,
    KUBELITE,
    LEGACY,
    POLICY,
    RBAC_GROUP,
    READ,
    STORAGE,
    Obj,
    event_rules,
    labelled,
    rule,
)

PREFIX = "system:controller:"
NAMESPACE = "kube-system"


def _controller_rules() -> dict[str, list[Obj]]:
    """buildControllerRoles: service account name → rules."""
    events = event_rules()
    return {
        "attachdetach-controller": [
            rule(["list", "watch"], [LEGACY], ["persistentvolumes", "persistentvolumeclaims"]),
            rule(READ, [LEGACY], ["nodes"]),
            rule(["patch", "update"], [LEGACY], ["nodes/status"]),
            rule(["list", "watch"], [LEGACY], ["pods"]),
            *events,
            rule(["get", "create", "delete", "list", "watch"], [STORAGE], ["volumeattachments"]),
            rule(READ, [STORAGE], ["csidrivers"]),
            rule(READ, [STORAGE], ["csinodes"])],
        "clusterrole-aggregation-controller": [
            rule(["escalate", "get", "list", "watch", "update", "patch"], [RBAC_GROUP], ["clusterroles"])],
        "daemon-set-controller": [
            rule(["get", "list", "watch"], [APPS], ["daemonsets"]),
            rule(["update"], [APPS], ["daemonsets/status"]),
            rule(["update"], [APPS], ["daemonsets/finalizers"]),
            rule(["list", "watch"], [LEGACY], ["nodes"]),
            rule(["list", "watch", "create", "delete", "patch"], [LEGACY], ["pods"]),
            rule(["create"], [LEGACY], ["pods/binding"]),
            rule(["get", "list", "watch", "create", "delete", "update", "patch"], [APPS], ["controllerrevisions"]),
            *events],
        "deployment-controller": [
            rule(["get", "list", "watch", "update"], [APPS], ["deployments"]),
            rule(["update"], [APPS], ["deployments/status"]),
            rule(["update"], [APPS], ["deployments/finalizers"]),
            rule(["get", "list", "watch", "create", "update", "patch", "delete"], [APPS], ["replicasets"]),
            rule(["get", "list", "watch", "update"], [LEGACY], ["pods"]),
            *events],
        "disruption-controller": [
            rule(READ, [APPS], ["deployments"]),
            rule(READ, [APPS], ["replicasets"]),
            rule(READ, [LEGACY], ["replicationcontrollers"]),
            rule(READ, [POLICY], ["poddisruptionbudgets"]),
            rule(READ, [APPS], ["statefulsets"]),
            rule(["update"], [POLICY], ["poddisruptionbudgets/status"]),
            rule(["patch", "update"], [LEGACY], ["pods/status"]),
            rule(["get"], ["*"], ["*/scale"]),
            *events],
        "endpoint-controller": [
            rule(READ, [LEGACY], ["services", "pods"]),
            rule(["get", "list", "watch", "create", "update", "delete"], [LEGACY], ["endpoints"]),
            rule(["create"], [LEGACY], ["endpoints/restricted"]),
            *events],
        "endpointslice-controller": [
            rule(READ, [LEGACY], ["services", "pods", "nodes"]),
            rule(["update"], [LEGACY], ["services/finalizers"]),
            rule(["get", "list", "watch", "create", "update", "delete"], [DISCOVERY], ["endpointslices"]),
            *events],
        "generic-garbage-collector": [
            rule(["get", "list", "watch", "patch", "update", "delete"], ["*"], ["*"]),
            *events],
        "cronjob-controller": [
            rule(["get", "list", "watch", "update"], [BATCH], ["cronjobs"]),
            rule(["get", "list", "watch", "create", "update", "delete", "patch"], [BATCH], ["jobs"]),
            rule(["update"], [BATCH], ["cronjobs/status"]),
            rule(["update"], [BATCH], ["cronjobs/finalizers"]),
            rule(["list", "delete"], [LEGACY], ["pods"]),
            *events],
        "horizontal-pod-autoscaler": [
            rule(["get", "list", "watch"], ["autoscaling"], ["horizontalpodautoscalers"]),
            rule(["update"], ["autoscaling"], ["horizontalpodautoscalers/status"]),
            rule(["get", "update"], ["*"], ["*/scale"]),
            rule(["list", "watch"], [LEGACY], ["pods"]),  # kubelite: watch, for its pod informer
            rule(["list"], ["metrics.k8s.io"], ["pods"]),
            rule(["get", "list"], ["custom.metrics.k8s.io"], ["*"]),
            rule(["get", "list"], ["external.metrics.k8s.io"], ["*"]),
            *events],
        "job-controller": [
            rule(["get", "list", "watch", "update", "patch"], [BATCH], ["jobs"]),
            rule(["update"], [BATCH], ["jobs/status"]),
            rule(["update"], [BATCH], ["jobs/finalizers"]),
            rule(["list", "watch", "create", "delete", "patch"], [LEGACY], ["pods"]),
            *events],
        "namespace-controller": [
            rule(["get", "list", "watch", "delete"], [LEGACY], ["namespaces"]),
            rule(["update"], [LEGACY], ["namespaces/finalize", "namespaces/status"]),
            rule(["get", "list", "watch", "delete", "deletecollection"], ["*"], ["*"])],
        "node-controller": [
            rule(["get", "list", "watch", "update", "delete", "patch"], [LEGACY], ["nodes"]),
            rule(["patch", "update"], [LEGACY], ["nodes/status"]),
            rule(["patch", "update"], [LEGACY], ["pods/status"]),
            rule(["list", "watch", "get", "delete"], [LEGACY], ["pods"]),
            *events,
            rule(READ, [COORDINATION], ["leases"])],  # kubelite: node health reads the node leases
        "persistent-volume-binder": [
            rule(["get", "list", "watch", "update", "create", "delete"], [LEGACY], ["persistentvolumes"]),
            rule(["update"], [LEGACY], ["persistentvolumes/status"]),
            rule(["get", "list", "watch", "update"], [LEGACY], ["persistentvolumeclaims"]),
            rule(["update"], [LEGACY], ["persistentvolumeclaims/status"]),
            rule(["list", "watch", "get", "create", "delete"], [LEGACY], ["pods"]),
            rule(READ, [STORAGE], ["storageclasses"]),
            rule(["list", "watch"], [LEGACY], ["nodes"]),
            *events,
            rule(["watch"], [LEGACY], ["events"])],
        "pod-garbage-collector": [
            rule(["list", "watch", "delete"], [LEGACY], ["pods"]),
            rule(READ, [LEGACY], ["nodes"]),
            rule(["patch"], [LEGACY], ["pods/status"])],
        "replicaset-controller": [
            rule(["get", "list", "watch", "update"], [APPS], ["replicasets"]),
            rule(["update"], [APPS], ["replicasets/status"]),
            rule(["update"], [APPS], ["replicasets/finalizers"]),
            rule(["list", "watch", "patch", "create", "delete"], [LEGACY], ["pods"]),
            *events,
            rule(["get"], [APPS], ["replicasets/status"])],  # kubelite: re-reads the status after a conflict
        "replication-controller": [
            rule(["get", "list", "watch", "update"], [LEGACY], ["replicationcontrollers"]),
            rule(["update"], [LEGACY], ["replicationcontrollers/status"]),
            rule(["update"], [LEGACY], ["replicationcontrollers/finalizers"]),
            rule(["list", "watch", "patch", "create", "delete"], [LEGACY], ["pods"]),
            *events,
            rule(["get"], [LEGACY], ["replicationcontrollers/status"])],  # kubelite: re-reads after a conflict
        "service-account-controller": [
            rule(["create"], [LEGACY], ["serviceaccounts"]),
            *events,
            rule(["list", "watch"], [LEGACY], ["serviceaccounts", "namespaces"])],  # kubelite: its informers
        "statefulset-controller": [
            rule(["list", "watch"], [LEGACY], ["pods"]),
            rule(READ, [APPS], ["statefulsets"]),
            rule(["update"], [APPS], ["statefulsets/status"]),
            rule(["update"], [APPS], ["statefulsets/finalizers"]),
            rule(["get", "create", "delete", "update", "patch"], [LEGACY], ["pods"]),
            rule(["get", "create", "delete", "update", "patch", "list", "watch"], [APPS], ["controllerrevisions"]),
            rule(["get", "create", "list", "watch"], [LEGACY], ["persistentvolumeclaims"]),
            rule(["update", "delete"], [LEGACY], ["persistentvolumeclaims"]),
            rule(["update"], [LEGACY], ["pods/finalizers"]),
            *events],
        "taint-eviction-controller": [
            rule(["patch", "update"], [LEGACY], ["pods/status"]),
            rule(["list", "watch", "get", "delete"], [LEGACY], ["pods"]),
            rule(["list", "watch"], [LEGACY], ["nodes"]),  # kubelite: its node informer
            *events],
        "certificate-controller": [
            rule(["get", "list", "watch", "delete"], [CERTIFICATES], ["certificatesigningrequests"]),
            rule(["update"], [CERTIFICATES], ["certificatesigningrequests/status",
                                              "certificatesigningrequests/approval"]),
            rule(["approve"], [CERTIFICATES], ["signers"], ["kubernetes.io/kube-apiserver-client-kubelet"]),
            rule(["sign"], [CERTIFICATES], ["signers"], ["kubernetes.io/legacy-unknown",
                                                         "kubernetes.io/kube-apiserver-client",
                                                         "kubernetes.io/kube-apiserver-client-kubelet",
                                                         "kubernetes.io/kubelet-serving"]),
            rule(["create"], [AUTHZ], ["subjectaccessreviews"]),
            *events],
        "pvc-protection-controller": [
            rule(["get", "list", "watch", "update"], [LEGACY], ["persistentvolumeclaims"]),
            rule(["list", "watch", "get"], [LEGACY], ["pods"]),
            *events],
        "pv-protection-controller": [
            rule(["get", "list", "watch", "update"], [LEGACY], ["persistentvolumes"]),
            *events],
        "ttl-after-finished-controller": [
            rule(["get", "list", "watch", "delete"], [BATCH], ["jobs"]),
            *events],
        "resourcequota-controller": [
            rule(["list", "watch"], ["*"], ["*"]),
            rule(["update"], [LEGACY], ["resourcequotas/status"]),
            *events],
        "root-ca-cert-publisher": [
            rule(["create", "update"], [LEGACY], ["configmaps"]),
            *events,
            rule(["list", "watch"], [LEGACY], ["configmaps", "namespaces"])],  # kubelite: its informers
        # kubelite-only controllers
        "kubelite-provisioner": [
            rule(["list", "watch"], [LEGACY], ["persistentvolumeclaims"]),
            rule(READ, [STORAGE], ["storageclasses"]),
            rule(["create"], [LEGACY], ["persistentvolumes"]),
            *events],
        "fencing-controller": [
            rule(["list", "watch"], [LEGACY], ["nodes", "pods", "persistentvolumeclaims"]),
            rule(["patch", "update"], [LEGACY], ["nodes/status"]),
            rule(["delete"], [LEGACY], ["pods"]),
            rule(READ, [COORDINATION], ["leases"]),
            rule(["get", "list", "watch", "create", "delete"], [KUBELITE], ["nodefences"]),
            rule(["update"], [KUBELITE], ["nodefences/status"]),
            *events],
    }


def _binding(kind: str, name: str, account: str, namespace: str = "") -> Obj:
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return labelled({"apiVersion": f"{RBAC_GROUP}/v1", "kind": kind, "metadata": meta,
                     "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind.removesuffix("Binding"), "name": name},
                     "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]})


def controller_roles() -> list[Obj]:
    return [labelled({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": PREFIX + sa},
                      "rules": rules}) for sa, rules in _controller_rules().items()]


def controller_role_bindings() -> list[Obj]:
    return [_binding("ClusterRoleBinding", PREFIX + sa, sa) for sa in _controller_rules()]


def namespace_roles() -> list[Obj]:
    """namespace_policy.go's controller Roles: the bootstrap signer reads token Secrets and signs cluster-info;
    the token cleaner deletes expired token Secrets."""
    def role(namespace: str, account: str, rules: list[Obj]) -> Obj:
        return labelled({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role",
                         "metadata": {"name": PREFIX + account, "namespace": namespace}, "rules": rules})

    return [
        role(NAMESPACE, "bootstrap-signer", [rule(READ, [LEGACY], ["secrets"])]),
        role(NAMESPACE, "token-cleaner", [rule(["get", "list", "watch", "delete"], [LEGACY], ["secrets"]),
                                          *event_rules()]),
        role("kube-public", "bootstrap-signer", [rule(READ, [LEGACY], ["configmaps"]),
                                                 rule(["update"], [LEGACY], ["configmaps"], ["cluster-info"]),
                                                 *event_rules()]),
    ]


def namespace_role_bindings() -> list[Obj]:
    return [_binding("RoleBinding", role["metadata"]["name"], role["metadata"]["name"].removeprefix(PREFIX),
                     role["metadata"]["namespace"]) for role in namespace_roles()]
