"""The Node authorizer and NodeRestriction, as upstream's tables (plugin/pkg/auth/authorizer/node/
node_authorizer_test.go TestAuthorizer, plugin/pkg/admission/noderestriction/admission_test.go), names kept
where the case exists upstream; the graph is a handful of pods on node0/node1 referencing secrets,
configmaps, claims and service accounts."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver.auth.authorizer import Decision
from kubelite.apiserver.auth.context import serving_as
from kubelite.apiserver.auth.node import (
    NodeAuthorizer,
    NodeGraph,
    RestrictedNodes,
    admit_pod_create,
    admit_token_request,
    node_identity,
    restrict_request,
)
from kubelite.apiserver.auth.requestinfo import RequestAttributes, new_request_info
from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.registry.core import NODES
from tests.rbac.test_rbac_authorizer import FakeLookup

Obj = dict[str, Any]
NODE0 = UserInfo("system:node:node0", groups=("system:nodes", "system:authenticated"))


def pod(name: str, node: str, **spec: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns0"}, "spec": {"nodeName": node, **spec}}


LOOKUP = FakeLookup({
    ("pods", ""): [
        pod("pod0-node0", "node0", serviceAccountName="svcacct0-node0",
            volumes=[{"name": "s", "secret": {"secretName": "secret0-pod0-node0"}},
                     {"name": "c", "configMap": {"name": "configmap0-pod0-node0"}},
                     {"name": "v", "persistentVolumeClaim": {"claimName": "pvc0-pod0-node0"}},
                     {"name": "p", "projected": {"sources": [{"secret": {"name": "shared-secret"}}]}}],
            containers=[{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {
                "name": "env-secret-pod0-node0", "key": "k"}}}]}]),
        pod("pod0-node1", "node1", volumes=[{"name": "s", "secret": {"secretName": "secret0-pod0-node1"}},
                                            {"name": "p", "projected": {"sources": [
                                                {"secret": {"name": "shared-secret"}}]}}]),
    ],
    ("volumeattachments", ""): [{"metadata": {"name": "va-node0"}, "spec": {"nodeName": "node0"}},
                                {"metadata": {"name": "va-node1"}, "spec": {"nodeName": "node1"}}],
    ("persistentvolumeclaims", "ns0"): [{"metadata": {"name": "pvc0-pod0-node0", "namespace": "ns0"},
                                         "spec": {"volumeName": "pv0-pod0-node0"}}],
})

LOOKUP.objects[("pods", "ns0")] = LOOKUP.objects[("pods", "")]  # listed across namespaces, got in their own


def req(method: str, path: str, query: dict[str, str] | None = None, user: UserInfo = NODE0) -> RequestAttributes:
    return RequestAttributes(user, new_request_info(method, path, query or {}))


NS = "/api/v1/namespaces/ns0"
AUTHORIZER = [  # TestAuthorizer
    ("allowed configmap", req("GET", f"{NS}/configmaps/configmap0-pod0-node0"), True),
    ("allowed secret via pod", req("GET", f"{NS}/secrets/secret0-pod0-node0"), True),
    ("allowed secret via env", req("GET", f"{NS}/secrets/env-secret-pod0-node0"), True),
    ("allowed shared secret via pod", req("GET", f"{NS}/secrets/shared-secret"), True),
    ("list allowed secret via pod", req("GET", f"{NS}/secrets", {"fieldSelector": "metadata.name=secret0-pod0-node0"}),
     True),
    ("watch allowed secret via pod", req("GET", f"{NS}/secrets", {
        "fieldSelector": "metadata.name=secret0-pod0-node0", "watch": "true"}), True),
    ("disallowed list many secrets", req("GET", f"{NS}/secrets"), False),
    ("disallowed watch many secrets", req("GET", f"{NS}/secrets", {"watch": "true"}), False),
    ("disallowed list secrets from all namespaces with name",
     req("GET", "/api/v1/secrets", {"fieldSelector": "metadata.name=secret0-pod0-node0"}), False),
    ("disallowed secret via pod of another node", req("GET", f"{NS}/secrets/secret0-pod0-node1"), False),
    ("disallowed secret in another namespace", req("GET", "/api/v1/namespaces/ns1/secrets/secret0-pod0-node0"),
     False),
    ("disallowed secret update", req("PUT", f"{NS}/secrets/secret0-pod0-node0"), False),
    ("allowed pvc", req("GET", f"{NS}/persistentvolumeclaims/pvc0-pod0-node0"), True),
    ("allowed pv via pvc", req("GET", "/api/v1/persistentvolumes/pv0-pod0-node0"), True),
    ("disallowed pv", req("GET", "/api/v1/persistentvolumes/pv0-pod0-node1"), False),
    ("allowed service account token create", req("POST", f"{NS}/serviceaccounts/svcacct0-node0/token"), True),
    ("disallowed service account token create for another pod's account",
     req("POST", f"{NS}/serviceaccounts/default/token"), False),
    ("allowed node lease - get", req("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node0"),
     True),
    ("allowed node lease - create", req("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"),
     True),
    ("allowed node lease - update", req("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node0"),
     True),
    ("disallowed node lease - get other node",
     req("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1"), False),
    ("disallowed node lease - list", req("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"),
     False),
    ("disallowed lease in another namespace",
     req("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/node0"), False),
    ("allowed by node rules: list pods", req("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=node0"}), True),
    ("allowed by node rules: patch pod status", req("PATCH", f"{NS}/pods/pod0-node0/status"), True),
    ("allowed by node rules: get nodes", req("GET", "/api/v1/nodes/node1"), True),
    ("disallowed by node rules: create deployments", req("POST", "/apis/apps/v1/namespaces/ns0/deployments"), False),
    ("allowed volumeattachment of the node", req("GET", "/apis/storage.k8s.io/v1/volumeattachments/va-node0"), True),
    ("disallowed volumeattachment of another node",
     req("GET", "/apis/storage.k8s.io/v1/volumeattachments/va-node1"), False),
    ("allowed own nodefence (self-fencing agent)", req("GET", "/apis/kubelite.io/v1alpha1/nodefences/node0"), True),
    ("disallowed nodefence of another node", req("GET", "/apis/kubelite.io/v1alpha1/nodefences/node1"), False),
    ("disallowed nodefence status write", req("PUT", "/apis/kubelite.io/v1alpha1/nodefences/node0/status"), False),
    ("no opinion for non-nodes", req("GET", f"{NS}/secrets/secret0-pod0-node0", user=UserInfo("alice")), False),
]


@pytest.mark.parametrize("name,attrs,allowed", AUTHORIZER, ids=[c[0] for c in AUTHORIZER])
def test_node_authorizer(name: str, attrs: RequestAttributes, allowed: bool) -> None:
    decision, _ = NodeAuthorizer(NodeGraph(LOOKUP)).authorize(attrs)
    assert decision is (Decision.ALLOW if allowed else Decision.NO_OPINION)


def test_denied_read_says_why() -> None:
    _, reason = NodeAuthorizer(NodeGraph(LOOKUP)).authorize(req("GET", f"{NS}/secrets/secret0-pod0-node1"))
    assert reason == "no relationship found between node 'node0' and this object"


IDENTITY = [  # nodeidentifier TestDefaultNodeIdentifier
    ("node", UserInfo("system:node:foo", groups=("system:nodes",)), "foo"),
    ("node without group", UserInfo("system:node:foo"), None),
    ("group without node prefix", UserInfo("foo", groups=("system:nodes",)), None),
    ("empty name", UserInfo("system:node:", groups=("system:nodes",)), ""),
]


@pytest.mark.parametrize("name,user,node", IDENTITY, ids=[c[0] for c in IDENTITY])
def test_node_identity(name: str, user: UserInfo, node: str | None) -> None:
    assert node_identity(user) == node


RESTRICTION = [  # admission_test.go TestAdmitPod / TestAdmitNode / leases, by request
    ("allow update of own pod status", req("PUT", f"{NS}/pods/pod0-node0/status"), None),
    ("forbid update of other node's pod status", req("PATCH", f"{NS}/pods/pod0-node1/status"),
     'node "node0" can only update pod status for pods with spec.nodeName set to itself'),
    ("allow delete of own pod", req("DELETE", f"{NS}/pods/pod0-node0"), None),
    ("forbid delete of other node's pod", req("DELETE", f"{NS}/pods/pod0-node1"),
     'node "node0" can only delete pods with spec.nodeName set to itself'),
    ("forbid update of pod spec", req("PATCH", f"{NS}/pods/pod0-node0"),
     'unexpected operation "patch", node "node0" can only create and delete mirror pods'),
    ("allow eviction of own pod", req("POST", f"{NS}/pods/pod0-node0/eviction"), None),
    ("forbid eviction of other node's pod", req("POST", f"{NS}/pods/pod0-node1/eviction"),
     'node "node0" can only evict pods with spec.nodeName set to itself'),
    ("forbid pod binding subresource", req("POST", f"{NS}/pods/pod0-node0/binding"),
     "unexpected pod subresource \"binding\", only 'status' and 'eviction' are allowed"),
    ("forbid ephemeral containers update", req("PATCH", f"{NS}/pods/pod0-node0/ephemeralcontainers"),
     "unexpected pod subresource \"ephemeralcontainers\", only 'status' and 'eviction' are allowed"),
    ("exec is a connect, not admitted", req("POST", f"{NS}/pods/pod0-node0/exec"), None),
    ("allow own node update", req("PATCH", "/api/v1/nodes/node0"), None),
    ("allow own node status update", req("PATCH", "/api/v1/nodes/node0/status"), None),
    ("forbid other node update", req("PATCH", "/api/v1/nodes/node1"),
     'node "node0" is not allowed to modify node "node1"'),
    ("forbid other node status update", req("PUT", "/api/v1/nodes/node1/status"),
     'node "node0" is not allowed to modify node "node1"'),
    ("forbid other node delete", req("DELETE", "/api/v1/nodes/node1"),
     'node "node0" is not allowed to modify node "node1"'),
    ("forbid other node lease update",
     req("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1"),
     "can only access node lease with the same name as the requesting node"),
    ("non-nodes are not restricted", req("PATCH", "/api/v1/nodes/node1", user=UserInfo("alice")), None),
    ("forbid a write by a node without a name", req("POST", f"{NS}/configmaps", user=UserInfo(
        "system:node:", groups=("system:nodes",))), 'could not determine node from user "system:node:"'),
]


@pytest.mark.parametrize("name,attrs,refusal", RESTRICTION, ids=[c[0] for c in RESTRICTION])
def test_node_restriction_requests(name: str, attrs: RequestAttributes, refusal: str | None) -> None:
    assert restrict_request(attrs, LOOKUP) == refusal


MIRROR = {"kubernetes.io/config.mirror": "x"}
NODE0_UID = "uid-node0"
NODE0_OWNER = {"apiVersion": "v1", "kind": "Node", "name": "node0", "uid": NODE0_UID, "controller": True}
LOOKUP.objects[("nodes", "")] = [{"metadata": {"name": "node0", "uid": NODE0_UID}}]


def mirror(node: str = "node0", owners: list[Obj] | None = None, **spec: Any) -> Obj:
    return {"metadata": {"name": "p", "annotations": MIRROR, "ownerReferences": [NODE0_OWNER] if owners is None
                         else owners}, "spec": {"nodeName": node, **spec}}


POD_CREATE = [  # admission_test.go TestAdmitPod's create cases
    ("allow creating a mirror pod bound to self", mirror(), []),
    ("forbid creating a mirror pod bound to another node", mirror("node1"),
     ['node "node0" can only create pods with spec.nodeName set to itself']),
    ("forbid creating a non-mirror pod", {"metadata": {"name": "p"}, "spec": {"nodeName": "node0"}},
     ['pod does not have "kubernetes.io/config.mirror" annotation, node "node0" can only create mirror pods']),
    ("forbid create of my pod with no owner reference", mirror(owners=[]),
     ['node "node0" can only create pods with an owner reference set to itself']),
    ("forbid create of my pod with multiple owner references", mirror(owners=[NODE0_OWNER, NODE0_OWNER]),
     ['node "node0" can only create pods with a single owner reference set to itself']),
    ("forbid create of my pod with owner reference to another node",
     mirror(owners=[{**NODE0_OWNER, "name": "node1"}]),
     ['node "node0" can only create pods with an owner reference set to itself']),
    ("forbid create of my pod with owner reference of another kind",
     mirror(owners=[{**NODE0_OWNER, "kind": "ReplicaSet", "apiVersion": "apps/v1"}]),
     ['node "node0" can only create pods with an owner reference set to itself']),
    ("forbid create of my pod with non-controller owner reference", mirror(owners=[{**NODE0_OWNER,
                                                                                     "controller": False}]),
     ['node "node0" can only create pods with a controller owner reference set to itself']),
    ("forbid create of my pod with blockOwnerDeletion", mirror(owners=[{**NODE0_OWNER, "blockOwnerDeletion": True}]),
     ['node "node0" must not set blockOwnerDeletion on an owner reference']),
    ("forbid create of my pod with wrong node uid", mirror(owners=[{**NODE0_OWNER, "uid": "stale"}]),
     [f"node node0 UID mismatch: expected stale got {NODE0_UID}"]),
    ("forbid create of pod referencing secret", mirror(volumes=[{"name": "s", "secret": {"secretName": "foo"}}]),
     ['node "node0" can not create pods that reference secrets']),
    ("forbid create of pod referencing secret via env", mirror(containers=[{"name": "c", "env": [
        {"name": "E", "valueFrom": {"secretKeyRef": {"name": "foo", "key": "k"}}}]}]),
     ['node "node0" can not create pods that reference secrets']),
    ("forbid create of pod referencing configmap", mirror(volumes=[{"name": "c", "configMap": {"name": "foo"}}]),
     ['node "node0" can not create pods that reference configmaps']),
    ("forbid create of pod referencing persistentvolumeclaim", mirror(volumes=[
        {"name": "v", "persistentVolumeClaim": {"claimName": "foo"}}]),
     ['node "node0" can not create pods that reference persistentvolumeclaims']),
    ("forbid create of pod referencing clustertrustbundle", mirror(volumes=[
        {"name": "t", "projected": {"sources": [{"clusterTrustBundle": {"name": "foo", "path": "ca.crt"}}]}}]),
     ['node "node0" can not create pods that reference clustertrustbundles']),
]


@pytest.mark.parametrize("name,pod_obj,refusals", POD_CREATE, ids=[c[0] for c in POD_CREATE])
def test_node_restriction_pod_create(name: str, pod_obj: Obj, refusals: list[str]) -> None:
    with serving_as(NODE0):
        assert admit_pod_create(pod_obj, LOOKUP) == refusals
    assert admit_pod_create({"metadata": {"name": "p"}, "spec": {}}, LOOKUP) == []  # not a node: no opinion


def test_node_restriction_mirror_pod_of_a_missing_node_is_not_found() -> None:
    with serving_as(UserInfo("system:node:ghost", groups=("system:nodes",))), pytest.raises(ApiError) as caught:
        admit_pod_create(mirror("ghost", owners=[{**NODE0_OWNER, "name": "ghost"}]), LOOKUP)
    assert (caught.value.code, caught.value.message) == (404, 'nodes "ghost" not found')


def node_obj(name: str, labels: dict[str, str] | None = None, owners: list[Obj] | None = None,
             **spec: Any) -> Obj:
    meta: Obj = {"name": name, "labels": labels or {}}
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"metadata": meta, "spec": spec, "status": {}}


TAINT = {"key": "mykey", "value": "myvalue", "effect": "NoSchedule"}
OWNER = {"apiVersion": "v1", "kind": "Node", "name": "node1", "uid": "uid-node1"}
SOURCE = {"configMap": {"name": "cm", "namespace": "ns", "kubeletConfigKey": "kubelet"}}


NODE_BODIES = [  # TestAdmitNode
    ("allow create of own node", None, node_obj("node0", {"a": "b"}), None),
    ("forbid create of other node", None, node_obj("node1"), 'node "node0" is not allowed to modify node "node1"'),
    ("forbid create with node-restriction label", None,
     node_obj("node0", {"node-restriction.kubernetes.io/foo": "bar"}),
     "is not allowed to set the following labels: node-restriction.kubernetes.io/foo"),
    ("forbid create with subdomain node-restriction label", None,
     node_obj("node0", {"a.node-restriction.kubernetes.io/foo": "bar"}),
     "is not allowed to set the following labels: a.node-restriction.kubernetes.io/foo"),
    ("allow update keeping an existing node-restriction label", node_obj("node0", {
        "node-restriction.kubernetes.io/foo": "bar"}), node_obj("node0", {"node-restriction.kubernetes.io/foo": "bar",
                                                                          "x": "y"}), None),
    ("forbid update adding a node-restriction label", node_obj("node0"),
     node_obj("node0", {"node-restriction.kubernetes.io/foo": "bar"}),
     "is not allowed to modify labels: node-restriction.kubernetes.io/foo"),
    ("forbid update removing a node-restriction label", node_obj("node0", {"node-restriction.kubernetes.io/foo": "b"}),
     node_obj("node0"), "is not allowed to modify labels: node-restriction.kubernetes.io/foo"),
    ("allow create with taints", None, node_obj("node0", taints=[TAINT]), None),
    ("allow update with same taints", node_obj("node0", taints=[TAINT]), node_obj("node0", {"a": "b"}, taints=[TAINT]),
     None),
    ("allow update with empty taints where none were", node_obj("node0"), node_obj("node0", taints=[]), None),
    ("forbid update with taints", node_obj("node0"), node_obj("node0", taints=[TAINT]),
     'node "node0" is not allowed to modify taints'),
    ("forbid update removing taints", node_obj("node0", taints=[TAINT]), node_obj("node0"),
     'node "node0" is not allowed to modify taints'),
    ("forbid update changing a taint", node_obj("node0", taints=[TAINT]),
     node_obj("node0", taints=[{**TAINT, "effect": "PreferNoSchedule"}]),
     'node "node0" is not allowed to modify taints'),
    ("allow update keeping ownerReferences", node_obj("node0", owners=[OWNER]),
     node_obj("node0", {"a": "b"}, owners=[OWNER]), None),
    ("forbid update adding ownerReferences", node_obj("node0"), node_obj("node0", owners=[OWNER]),
     'node "node0" is not allowed to modify ownerReferences'),
    ("forbid update removing ownerReferences", node_obj("node0", owners=[OWNER]), node_obj("node0", owners=[]),
     'node "node0" is not allowed to modify ownerReferences'),
    ("forbid update changing an ownerReference's uid", node_obj("node0", owners=[OWNER]),
     node_obj("node0", owners=[{**OWNER, "uid": "other"}]), 'node "node0" is not allowed to modify ownerReferences'),
    ("forbid create with configSource", None, node_obj("node0", configSource=SOURCE),
     'node "node0" is not allowed to create pods with a non-nil configSource'),
    ("forbid update adding configSource", node_obj("node0"), node_obj("node0", configSource=SOURCE),
     'node "node0" is not allowed to update configSource to a new non-nil configSource'),
    ("allow update removing configSource", node_obj("node0", configSource=SOURCE), node_obj("node0"), None),
    ("allow create with kubelet labels", None, node_obj("node0", {
        "kubernetes.io/hostname": "node0", "topology.kubernetes.io/zone": "z", "node.kubernetes.io/foo": "bar",
        "a.kubelet.kubernetes.io/foo": "bar", "example.com/x": "y"}), None),
    ("forbid create with unknown kubernetes.io label", None, node_obj("node0", {"node-role.kubernetes.io/master": ""}),
     "is not allowed to set the following labels: node-role.kubernetes.io/master"),
    ("forbid create with unknown k8s.io label", None, node_obj("node0", {"foo.k8s.io/bar": "x"}),
     "is not allowed to set the following labels: foo.k8s.io/bar"),
    ("forbid update adding unknown kubernetes.io label", node_obj("node0"),
     node_obj("node0", {"kubernetes.io/foo": "bar"}), "is not allowed to modify labels: kubernetes.io/foo"),
]


@pytest.mark.parametrize("name,old,new,refusal", NODE_BODIES, ids=[c[0] for c in NODE_BODIES])
def test_node_restriction_node_bodies(name: str, old: Obj | None, new: Obj, refusal: str | None) -> None:
    strategy = RestrictedNodes(NODES)
    for status in ((False, True) if old is not None else (False,)):
        # a status update keeps the stored spec: a change of taints or configSource is no change there, while
        # metadata (labels, ownerReferences) is the request's and checked alike
        expected = None if status and old is not None and new["spec"] != old["spec"] else refusal
        with serving_as(NODE0):
            try:
                if old is None:
                    strategy.prepare_create(new, LOOKUP)
                elif status:
                    strategy.prepare_status_update(new, old)
                else:
                    strategy.prepare_update(new, old)
            except ApiError as exc:
                assert expected is not None and exc.code == 403, exc.message
                assert exc.message.startswith(f'nodes "{new["metadata"]["name"]}" is forbidden: '), exc.message
                assert exc.message.endswith(expected), exc.message
            else:
                assert expected is None


POD_UID = "uid-pod0-node0"
TOKEN_LOOKUP = FakeLookup({("pods", "ns0"): [
    {"metadata": {"name": "pod0-node0", "namespace": "ns0", "uid": POD_UID}, "spec": {"nodeName": "node0"}},
    {"metadata": {"name": "pod0-node1", "namespace": "ns0", "uid": "uid-pod0-node1"}, "spec": {"nodeName": "node1"}},
]})


def bound(kind: str = "Pod", name: str = "pod0-node0", uid: str = POD_UID, api_version: str = "v1") -> Obj:
    return {"boundObjectRef": {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}}


TOKENS = [  # admission_test.go TestAdmitNode's service-account token cases (admitServiceAccount)
    ("can request token with a pod binding", bound(), None),
    ("forbid create of unbound token", {}, "node requested token not bound to a pod"),
    ("forbid create of token bound to nonexistant pod", bound(name="nopod", uid="x"), 'pods "nopod" not found'),
    ("forbid create of token bound to secret", bound(kind="Secret"), "node requested token not bound to a pod"),
    ("forbid create of token bound to a node", bound(kind="Node", name="node0"),
     "node requested token not bound to a pod"),
    ("forbid create of token bound to a pod in another api version", bound(api_version="v2"),
     "node requested token not bound to a pod"),
    ("forbid create of token bound to pod without uid", bound(uid=""),
     "node requested token with a pod binding without a uid"),
    ("forbid create of token bound to pod with a different uid", bound(uid="wrong"),
     "the UID in the bound object reference (wrong) does not match the UID in record. The object might have been "
     "deleted and then recreated"),
    ("forbid create of token bound to pod scheduled on another node", bound(name="pod0-node1", uid="uid-pod0-node1"),
     "node requested token bound to a pod scheduled on a different node"),
]


@pytest.mark.parametrize("name,spec,refusal", TOKENS, ids=[c[0] for c in TOKENS])
def test_node_restriction_token_requests(name: str, spec: Obj, refusal: str | None) -> None:
    with serving_as(NODE0):
        try:
            admit_token_request("ns0", "default", spec, TOKEN_LOOKUP)
        except ApiError as exc:
            assert refusal is not None, exc.message
            expected = refusal if exc.code == 404 else f'serviceaccounts "default" is forbidden: {refusal}'
            assert (exc.code, exc.message) == (404 if "not found" in refusal else 403, expected)
        else:
            assert refusal is None
    admit_token_request("ns0", "default", {}, TOKEN_LOOKUP)  # not a node: no opinion
