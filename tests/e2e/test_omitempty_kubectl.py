"""What a user sees of Go's omitempty, with real kubectl and the official Python client against a real
`kubelite server`: empty values of value-typed omitempty fields are not shown (`kubectl get rs -o json` has no
`readyReplicas: 0`), pointers set to 0 or false are."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, config

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e
SELECTOR = {"matchLabels": {"app": "omit"}}
TEMPLATE = {"metadata": {"labels": {"app": "omit"}}, "spec": {"containers": [
    {"name": "c", "image": "busybox", "stdin": False, "ports": [{"containerPort": 80, "hostPort": 0}]}]}}

# (manifest, paths not shown, paths shown with their value)
CASES = [
    pytest.param({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "omit-rs"}, "spec": {
        "replicas": 0, "minReadySeconds": 0, "selector": SELECTOR, "template": TEMPLATE}},
        ["spec.minReadySeconds", "spec.template.spec.containers.0.stdin",
         "spec.template.spec.containers.0.ports.0.hostPort"], {"spec.replicas": 0},
        id="ReplicaSet applied with zero values: the pointer replicas shown, the rest not"),
    pytest.param({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "omit-node", "labels": {}}, "spec": {
        "taints": [], "unschedulable": False}}, ["spec.taints", "spec.unschedulable", "metadata.labels"], {},
        id="Node applied with empty taints and false unschedulable: neither shown"),
]


def _has(obj: Any, path: str) -> bool:
    for step in path.split("."):
        try:
            obj = obj[int(step)] if isinstance(obj, list) else obj[step]
        except (KeyError, IndexError):
            return False
    return True


def _at(obj: Any, path: str) -> Any:
    for step in path.split("."):
        obj = obj[int(step)] if isinstance(obj, list) else obj[step]
    return obj


@pytest.mark.parametrize(("manifest", "omitted", "kept"), CASES)
def test_kubectl_get_omits_empty_values(server: ServerProcess, manifest: dict[str, Any], omitted: list[str],
                                        kept: dict[str, Any]) -> None:
    server.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    kind, name = manifest["kind"].lower(), manifest["metadata"]["name"]
    shown = json.loads(server.kubectl("get", kind, name, "-o", "json").stdout)
    assert [p for p in omitted if _has(shown, p)] == [], shown
    assert {p: _at(shown, p) for p in kept} == kept


def test_status_counts_of_zero_are_not_shown(server: ServerProcess) -> None:
    """The Python client patches `readyReplicas: 0` in; the server stores and answers the status without it, and
    kubectl shows none: only `replicas`, which upstream does not tag omitempty."""
    apps = client.AppsV1Api(config.new_client_from_config(config_file=str(server.kubeconfig)))
    rs = client.V1ReplicaSet(metadata=client.V1ObjectMeta(name="omit-status"), spec=client.V1ReplicaSetSpec(
        replicas=0, selector=client.V1LabelSelector(match_labels=SELECTOR["matchLabels"]),
        template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=SELECTOR["matchLabels"]),
                                          spec=client.V1PodSpec(containers=[client.V1Container(
                                              name="c", image="busybox")]))))
    apps.create_namespaced_replica_set("default", rs)
    written = apps.patch_namespaced_replica_set_status("omit-status", "default", {"status": {
        "replicas": 0, "readyReplicas": 0, "availableReplicas": 0, "fullyLabeledReplicas": 0}})
    assert (written.status.replicas, written.status.ready_replicas, written.status.available_replicas) == (0, None,
                                                                                                           None)
    shown = json.loads(server.kubectl("get", "rs", "omit-status", "-o", "json").stdout)
    assert not {"readyReplicas", "availableReplicas", "fullyLabeledReplicas"} & set(shown["status"]), shown
