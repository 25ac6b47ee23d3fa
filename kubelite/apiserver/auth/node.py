"""The Node authorizer (plugin/pkg/auth/authorizer/node) and NodeRestriction admission (plugin/pkg/admission/
noderestriction), for requests by a node's identity (user `system:node:NAME`, group `system:nodes`).

Upstream keeps a graph of pods, secrets, configmaps, claims, volumes and service accounts fed by
informers; here the same edges are computed from the API server's caches on each request (pods bound
to the node, then what each references), which costs a scan of the pods: fine at kubelite's scale.
A node may read a secret, configmap, PVC or PV only when one of its pods references it (by name:
list/watch need a `metadata.name` field selector), create tokens only for its pods' service accounts,
touch only its own Lease; everything else is decided by the `system:node` role's rules.
NodeRestriction then limits writes: a node modifies only itself (and no `node-restriction.kubernetes.io/`
label), the status of its own pods, deletes or evicts only its own pods and creates only mirror pods.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubelite.api import errors
from kubelite.api.errors import ApiError
from kubelite.apiserver.auth.authorizer import Decision
from kubelite.apiserver.auth.bootstrappolicy import node_rules
from kubelite.apiserver.auth.context import CURRENT_USER
from kubelite.apiserver.auth.rbac import rule_allows
from kubelite.apiserver.auth.requestinfo import RequestAttributes
from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.registry.base import Lookup
from kubelite.apiserver.registry.core import LeaseStrategy, NodeStrategy
from kubelite.apiserver.registry.pods import MIRROR_POD_ANNOTATION

NODE_RULES = tuple(node_rules())

Obj = dict[str, Any]
NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
NODE_LEASE_NAMESPACE = "kube-node-lease"
RESTRICTED_LABEL_PREFIX = "node-restriction.kubernetes.io/"
_GRAPH_RESOURCES = frozenset({"secrets", "configmaps", "persistentvolumeclaims", "persistentvolumes"})
_READ_VERBS = frozenset({"get", "list", "watch"})
_CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy"})


def node_identity(user: UserInfo) -> str | None:
    """nodeidentifier.NodeIdentity: the node's name, None when the user is not a node ("" for a nameless one)."""
    if NODES_GROUP not in user.groups or not user.name.startswith(NODE_USER_PREFIX):
        return None
    return user.name.removeprefix(NODE_USER_PREFIX)


def _pod_references(pod: Obj) -> Iterator[tuple[str, str]]:
    """(resource, name) a pod references (the graph_populator's pod edges)."""
    spec = pod.get("spec") or {}
    for ref in spec.get("imagePullSecrets") or []:
        yield "secrets", ref.get("name", "")
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or []),
                      *(spec.get("ephemeralContainers") or [])]:
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            if source.get("secretKeyRef"):
                yield "secrets", source["secretKeyRef"].get("name", "")
            if source.get("configMapKeyRef"):
                yield "configmaps", source["configMapKeyRef"].get("name", "")
        for env_from in container.get("envFrom") or []:
            if env_from.get("secretRef"):
                yield "secrets", env_from["secretRef"].get("name", "")
            if env_from.get("configMapRef"):
                yield "configmaps", env_from["configMapRef"].get("name", "")
    for volume in spec.get("volumes") or []:
        if volume.get("secret"):
            yield "secrets", volume["secret"].get("secretName", "")
        if volume.get("configMap"):
            yield "configmaps", volume["configMap"].get("name", "")
        if volume.get("persistentVolumeClaim"):
            yield "persistentvolumeclaims", volume["persistentVolumeClaim"].get("claimName", "")
        if volume.get("ephemeral"):
            yield "persistentvolumeclaims", f"{pod['metadata']['name']}-{volume.get('name', '')}"
        for source in (volume.get("projected") or {}).get("sources") or []:
            if source.get("secret"):
                yield "secrets", source["secret"].get("name", "")
            if source.get("configMap"):
                yield "configmaps", source["configMap"].get("name", "")


@dataclass(frozen=True)
class NodeGraph:
    """The slice of upstream's graph that one decision needs, computed from the caches."""

    lookup: Lookup

    def pods(self, node: str) -> list[Obj]:
        return [p for p in self.lookup.list("pods") if (p.get("spec") or {}).get("nodeName") == node]

    def reachable(self, node: str, resource: str, namespace: str, name: str) -> bool:
        """hasPathFrom(node, object): one of the node's pods references the object (PVs through their claims)."""
        for pod in self.pods(node):
            pod_ns = pod["metadata"].get("namespace", "")
            for kind, ref in _pod_references(pod):
                if resource == kind and namespace == pod_ns and name == ref:
                    return True
                if resource == "persistentvolumes" and kind == "persistentvolumeclaims":
                    claim = self.lookup.get("persistentvolumeclaims", pod_ns, ref)
                    if claim is not None and (claim.get("spec") or {}).get("volumeName") == name:
                        return True
            if resource == "serviceaccounts" and namespace == pod_ns \
                    and (pod.get("spec") or {}).get("serviceAccountName", "default") == name:
                return True
        return False


@dataclass(frozen=True)
class NodeAuthorizer:
    graph: NodeGraph

    def authorize(self, attributes: RequestAttributes) -> tuple[Decision, str]:
        node = node_identity(attributes.user)
        if node is None:
            return Decision.NO_OPINION, ""
        if not node:
            return Decision.NO_OPINION, "unknown node"
        info = attributes.info
        if info.is_resource_request and info.api_group == "":
            if info.resource in _GRAPH_RESOURCES:
                return self._read(node, attributes)
            if info.resource == "serviceaccounts" and info.subresource == "token":
                return self._token(node, attributes)
        if info.is_resource_request and info.api_group == "coordination.k8s.io" and info.resource == "leases":
            return self._lease(node, attributes)
        if info.is_resource_request and info.api_group == "storage.k8s.io" and info.resource == "volumeattachments":
            return self._attachment(node, attributes)
        if info.is_resource_request and info.api_group == "kubelite.io" and info.resource == "nodefences":
            return self._own_fence(node, attributes)
        if any(rule_allows(attributes, rule) for rule in NODE_RULES):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    def _read(self, node: str, attributes: RequestAttributes) -> tuple[Decision, str]:
        """authorizeReadNamespacedObject / authorizeGet: reads by name of objects the node's pods reference."""
        if attributes.verb not in _READ_VERBS or attributes.subresource:
            return Decision.NO_OPINION, f"can only get individual {attributes.resource}"
        if not attributes.name:
            return Decision.NO_OPINION, "No Object name found"
        if not self.graph.reachable(node, attributes.resource, attributes.namespace, attributes.name):
            return Decision.NO_OPINION, f"no relationship found between node '{node}' and this object"
        return Decision.ALLOW, ""

    def _token(self, node: str, attributes: RequestAttributes) -> tuple[Decision, str]:
        if attributes.verb != "create" or not attributes.name:
            return Decision.NO_OPINION, "can only create tokens for individual service accounts"
        if not self.graph.reachable(node, "serviceaccounts", attributes.namespace, attributes.name):
            return Decision.NO_OPINION, f"no relationship found between node '{node}' and this object"
        return Decision.ALLOW, ""

    def _attachment(self, node: str, attributes: RequestAttributes) -> tuple[Decision, str]:
        """authorizeGet of a VolumeAttachment: the graph's edge from an attachment to the node it names."""
        if attributes.verb != "get" or not attributes.name:
            return Decision.NO_OPINION, "can only get individual resources of this type"
        attachment = self.graph.lookup.get("volumeattachments", "", attributes.name)
        if attachment is None or (attachment.get("spec") or {}).get("nodeName") != node:
            return Decision.NO_OPINION, f"no relationship found between node '{node}' and this object"
        return Decision.ALLOW, ""

    def _own_fence(self, node: str, attributes: RequestAttributes) -> tuple[Decision, str]:
        """kubelite's own: a self-fencing agent reads its node's NodeFence before it starts pods again."""
        if attributes.verb != "get" or attributes.name != node or attributes.subresource:
            return Decision.NO_OPINION, "can only get the NodeFence of the requesting node"
        return Decision.ALLOW, ""

    def _lease(self, node: str, attributes: RequestAttributes) -> tuple[Decision, str]:
        """authorizeLease: its own Lease in kube-node-lease (a create is named by NodeRestriction)."""
        if attributes.verb not in ("get", "create", "update", "patch", "delete"):
            return Decision.NO_OPINION, "can only get, create, update, patch, or delete a node lease"
        if attributes.namespace != NODE_LEASE_NAMESPACE:
            return Decision.NO_OPINION, f"can only access leases in the {NODE_LEASE_NAMESPACE} system namespace"
        if attributes.verb != "create" and attributes.name != node:
            return Decision.NO_OPINION, "can only access node lease with the same name as the requesting node"
        return Decision.ALLOW, ""


# --- NodeRestriction admission --------------------------------------------------------------------------------


def admission_forbidden(resource: str, name: str, reason: str, group: str = "") -> ApiError:
    """admission.NewForbidden: `nodes "n" is forbidden: REASON`, with the Status details (Go's omitempty)."""
    qualified = f"{resource}.{group}" if group else resource
    details = {k: v for k, v in (("name", name), ("group", group), ("kind", resource)) if v}
    return ApiError(403, "Forbidden", f'{qualified} "{name}" is forbidden: {reason}', details)


def _requesting_node() -> str | None:
    user = CURRENT_USER.get()
    return None if user is None else node_identity(user)


def restrict_request(attributes: RequestAttributes, lookup: Lookup) -> str | None:
    """The checks of NodeRestriction that need only the request and the stored object (pods and nodes by name,
    leases); the refusal's reason, or None. Bodies are checked by `admit_pod_create` and `RestrictedNodes`."""
    node = node_identity(attributes.user)
    info = attributes.info
    if node is None or not info.is_resource_request or info.verb in _READ_VERBS:
        return None
    if not node:  # a write that cannot be matched to a particular node, whatever it writes
        return f'could not determine node from user "{attributes.user.name}"'
    if info.api_group == "" and info.resource == "pods":
        return _restrict_pod(node, attributes, lookup)
    if info.api_group == "" and info.resource == "nodes" and info.verb != "create" and info.name != node:
        return f'node "{node}" is not allowed to modify node "{info.name}"'
    if info.api_group == "coordination.k8s.io" and info.resource == "leases" and info.verb != "create" \
            and info.name != node:
        return "can only access node lease with the same name as the requesting node"
    return None


def _restrict_pod(node: str, attributes: RequestAttributes, lookup: Lookup) -> str | None:
    info = attributes.info
    if info.subresource in _CONNECT_SUBRESOURCES:
        return None  # CONNECT: not an operation NodeRestriction handles (the authorizer alone decides)
    if info.subresource not in ("", "status", "eviction"):
        return f"unexpected pod subresource \"{info.subresource}\", only 'status' and 'eviction' are allowed"
    if info.verb == "create" and not info.subresource:
        return None  # the body decides (admit_pod_create)
    pod = lookup.get("pods", info.namespace, info.name) if info.name else None
    bound = None if pod is None else (pod.get("spec") or {}).get("nodeName")
    if info.subresource == "status":
        if bound != node:
            return f'node "{node}" can only update pod status for pods with spec.nodeName set to itself'
        return None
    if info.subresource == "eviction":
        if pod is not None and bound != node:
            return f'node "{node}" can only evict pods with spec.nodeName set to itself'
        return None
    if info.verb == "delete" and not info.subresource:
        if pod is not None and bound != node:
            return f'node "{node}" can only delete pods with spec.nodeName set to itself'
        return None
    return f'unexpected operation "{info.verb}", node "{node}" can only create and delete mirror pods'


def admit_pod_create(pod: Obj, lookup: Lookup) -> list[str]:
    """A pod plugin: admitPodCreate, in upstream's order. A node creates only mirror pods bound to itself, owned
    by its own Node (so they go when it goes) and referencing no secret, configmap, claim or trust bundle (which
    would let it read objects the Node authorizer keeps from it). A missing Node is the 404 upstream returns.

    Partial: upstream also refuses a mirror pod naming a service account ("can not create pods that reference a
    service account"); here ServiceAccount admission runs first and gives every pod, mirror pods included,
    `default` (upstream's leaves mirror pods alone), so that check would refuse every mirror pod."""
    node = _requesting_node()
    if node is None:
        return []
    refusal = _mirror_pod_refusal(node, pod, lookup)
    return [] if refusal is None else [refusal]


def _mirror_pod_refusal(node: str, pod: Obj, lookup: Lookup) -> str | None:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if MIRROR_POD_ANNOTATION not in (meta.get("annotations") or {}):
        return f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, node "{node}" can only create mirror pods'
    if spec.get("nodeName") != node:
        return f'node "{node}" can only create pods with spec.nodeName set to itself'
    owners = meta.get("ownerReferences") or []
    if len(owners) > 1:
        return f'node "{node}" can only create pods with a single owner reference set to itself'
    if not owners:
        return f'node "{node}" can only create pods with an owner reference set to itself'
    owner = owners[0]
    if (owner.get("apiVersion"), owner.get("kind"), owner.get("name")) != ("v1", "Node", node):
        return f'node "{node}" can only create pods with an owner reference set to itself'
    if not owner.get("controller"):
        return f'node "{node}" can only create pods with a controller owner reference set to itself'
    if owner.get("blockOwnerDeletion"):
        return f'node "{node}" must not set blockOwnerDeletion on an owner reference'
    stored = lookup.get("nodes", "", node)
    if stored is None:
        raise errors.not_found("nodes", node)
    if owner.get("uid") != stored["metadata"].get("uid"):
        return f"node {node} UID mismatch: expected {owner.get('uid', '')} got {stored['metadata'].get('uid', '')}"
    referenced = {kind for kind, _ in _pod_references(pod)}
    for kind in ("secrets", "configmaps"):
        if kind in referenced:
            return f'node "{node}" can not create pods that reference {kind}'
    volumes = spec.get("volumes") or []
    if any(source.get("clusterTrustBundle") for v in volumes for source in (v.get("projected") or {}).get("sources")
           or []):
        return f'node "{node}" can not create pods that reference clustertrustbundles'
    if any(v.get("persistentVolumeClaim") for v in volumes):
        return f'node "{node}" can not create pods that reference persistentvolumeclaims'
    return None


# kubeletapis.IsKubeletLabel: the kubernetes.io / k8s.io labels a kubelet may set on its own Node
_KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch", "node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region"})
_KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
_RESTRICTED_NAMESPACE = RESTRICTED_LABEL_PREFIX.rstrip("/")


def _in_namespace(namespace: str, parent: str) -> bool:
    return namespace == parent or namespace.endswith("." + parent)


def _forbidden_label(key: str) -> bool:
    """getForbiddenLabels for one modified key: a node-restriction.kubernetes.io label, or a kubernetes.io/k8s.io
    label that is not one of the kubelet's own (which would let a node steer workloads to itself)."""
    namespace = key.split("/", 1)[0] if "/" in key else ""
    if _in_namespace(namespace, _RESTRICTED_NAMESPACE):
        return True
    kubernetes = _in_namespace(namespace, "kubernetes.io") or _in_namespace(namespace, "k8s.io")
    kubelet = key in _KUBELET_LABELS or any(_in_namespace(namespace, ns) for ns in _KUBELET_LABEL_NAMESPACES)
    return kubernetes and not kubelet


def admit_token_request(namespace: str, service_account: str, spec: Obj, lookup: Lookup) -> None:
    """admitServiceAccount: a node's TokenRequest must be bound to a pod, by uid, scheduled on that node; a node
    can then mint tokens only for pods it runs (the Node authorizer alone lets it ask for any of their service
    accounts' tokens, unbound). Raises the 403 (or the pod's 404), as upstream before the token is made."""
    node = _requesting_node()
    if node is None:
        return
    ref = spec.get("boundObjectRef") or {}
    refusal = None
    if ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not ref.get("name"):
        refusal = "node requested token not bound to a pod"
    elif not ref.get("uid"):
        refusal = "node requested token with a pod binding without a uid"
    else:
        pod = lookup.get("pods", namespace, ref["name"])
        if pod is None:
            raise errors.not_found("pods", ref["name"])
        if ref["uid"] != pod["metadata"].get("uid"):
            refusal = (f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. The "
                       "object might have been deleted and then recreated")
        elif (pod.get("spec") or {}).get("nodeName") != node:
            refusal = "node requested token bound to a pod scheduled on a different node"
    if refusal is not None:
        raise admission_forbidden("serviceaccounts", service_account, refusal)


def _restricted_label_changes(new: Obj, old: Obj | None) -> list[str]:
    new_labels = (new.get("metadata") or {}).get("labels") or {}
    old_labels = ((old or {}).get("metadata") or {}).get("labels") or {}
    return sorted(k for k in {*new_labels, *old_labels}
                  if new_labels.get(k) != old_labels.get(k) and _forbidden_label(k))


def _spec(obj: Obj, field: str) -> Any:
    return (obj.get("spec") or {}).get(field)


def _owners(obj: Obj) -> list[Obj]:
    return (obj.get("metadata") or {}).get("ownerReferences") or []  # Semantic.DeepEqual: nil == empty


def _node_refusal(node: str, new: Obj, old: Obj | None) -> str | None:
    """admitNode's checks of a node's own Node body, in upstream's order; the reason, or None."""
    name = (new.get("metadata") or {}).get("name", "")
    if name != node:
        return f'node "{node}" is not allowed to modify node "{name}"'
    if old is None:
        if _spec(new, "configSource") is not None:
            return f'node "{node}" is not allowed to create pods with a non-nil configSource'
        changed = _restricted_label_changes(new, None)
        return f'node "{node}" is not allowed to set the following labels: {", ".join(changed)}' if changed else None
    if _spec(new, "configSource") is not None and _spec(new, "configSource") != _spec(old, "configSource"):
        return f'node "{node}" is not allowed to update configSource to a new non-nil configSource'
    # Taints may be set at registration (--register-with-taints) but never changed after: a node that could drop
    # its own NoSchedule/NoExecute taints would steer workloads meant to stay off it onto itself.
    if (_spec(new, "taints") or []) != (_spec(old, "taints") or []):
        return f'node "{node}" is not allowed to modify taints'
    # CVE-2025-5187 (fixed in 1.32.8): an owner reference to a missing owner makes the garbage collector delete the
    # Node. Upstream checks updates only.
    if _owners(new) != _owners(old):
        return f'node "{node}" is not allowed to modify ownerReferences'
    changed = _restricted_label_changes(new, old)
    return f'is not allowed to modify labels: {", ".join(changed)}' if changed else None


class RestrictedNodes(NodeStrategy):
    """Nodes with NodeRestriction's body checks (admitNode) on create, update and status update alike: a node
    creates only itself, sets no configSource, and neither sets nor changes a node-restriction.kubernetes.io/
    label or another kubernetes.io label that is not the kubelet's; on update it changes neither taints nor
    ownerReferences."""

    def _check(self, new: Obj, old: Obj | None) -> None:
        node = _requesting_node()
        if node is None:
            return
        refusal = _node_refusal(node, new, old)
        if refusal is not None:
            raise admission_forbidden("nodes", (new.get("metadata") or {}).get("name", ""), refusal)

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        self._check(obj, None)
        super().prepare_create(obj, lookup)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        self._check(new, old)
        super().prepare_update(new, old)

    def prepare_status_update(self, new: Obj, old: Obj) -> Obj:
        out = super().prepare_status_update(new, old)
        self._check(out, old)
        return out


class RestrictedLeases(LeaseStrategy):
    """Leases with admitLease's check of a create's body (the request names no object): a node creates only its
    own Lease. The namespace (kube-node-lease) and the name of other requests are checked before the body."""

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        node = _requesting_node()
        name = (obj.get("metadata") or {}).get("name", "")
        if node is not None and name != node:
            raise admission_forbidden("leases", name, "can only access node lease with the same name as the "
                                      "requesting node", "coordination.k8s.io")
        super().prepare_create(obj, lookup)
