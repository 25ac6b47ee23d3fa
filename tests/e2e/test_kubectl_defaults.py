"""The real kubectl on workloads whose defaulted fields a later apply drops (upstream defaults on every write), whose
templates' limits change, and whose StatefulSet revisions carry the change cause."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e


def manifest(kind: str, replicas: str, annotations: str = "{}") -> str:
    service = "  serviceName: x\n" if kind == "StatefulSet" else ""
    return (f"apiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: d-{kind.lower()}, annotations: {annotations}}}\n"
            f"spec:\n{replicas}{service}  selector: {{matchLabels: {{app: d}}}}\n"
            "  template:\n    metadata: {labels: {app: d}}\n"
            "    spec: {containers: [{name: c, image: busybox, resources: {limits: {cpu: '1'}}}]}\n")


@pytest.mark.parametrize(("kind", "described"), [
    pytest.param("Deployment", "Replicas:               1 desired", id="describe deploy after apply without replicas"),
    pytest.param("StatefulSet", "Replicas:           1 desired", id="describe sts after apply without replicas"),
    pytest.param("ReplicaSet", " current / 1 desired", id="describe rs after apply without replicas"),
])
def test_apply_dropping_replicas_stores_the_default(server: ServerProcess, kind: str, described: str) -> None:
    name = f"{kind.lower()}/d-{kind.lower()}"
    server.kubectl("apply", "-f", "-", stdin=manifest(kind, "  replicas: 3\n"))
    server.kubectl("apply", "-f", "-", stdin=manifest(kind, ""))
    assert server.kubectl("get", name, "-o", "jsonpath={.spec.replicas}").stdout == "1"
    assert described in server.kubectl("describe", name).stdout
    # `kubectl set resources --limits`: the template's requests were never defaulted, so none are left stale
    server.kubectl("set", "resources", name, "--limits=cpu=2")
    got = json.loads(server.kubectl("get", name, "-o", "json").stdout)
    assert got["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "2"}}


def test_rollout_history_of_a_statefulset_shows_the_change_cause(server: ServerProcess) -> None:
    cause = "{kubernetes.io/change-cause: first cause}"
    server.kubectl("apply", "-f", "-", stdin=manifest("StatefulSet", "  replicas: 0\n", cause).replace(
        "d-statefulset", "hist"))
    deadline = time.monotonic() + 20
    out = ""
    while time.monotonic() < deadline and "first cause" not in out:
        out = server.kubectl("rollout", "history", "statefulset/hist").stdout
        time.sleep(0.2)
    assert "first cause" in out, out
