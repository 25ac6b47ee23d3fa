"""DaemonSets end to end: `kubelite up` (controllers and scheduler in-process, a real agent running shell
processes) driven by the real kubectl: apply, `get ds` columns, `rollout status`, an image update that replaces
the pod, `rollout history` / `undo`, `describe`, and deletion taking the pods with it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, config

from tests.conftest import ServerProcess
from tests.e2e.pods import sh, wait_for

pytestmark = pytest.mark.e2e

DS = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agentd"}, "spec": {
    "selector": {"matchLabels": {"app": "agentd"}},
    "template": {"metadata": {"labels": {"app": "agentd"}}, "spec": {
        "terminationGracePeriodSeconds": 2,
        "containers": [sh("c", "while true; do sleep 0.1; done",
                          readinessProbe={"exec": {"command": ["true"]}, "periodSeconds": 1})]}}}}


def pods(up: ServerProcess) -> list[dict[str, Any]]:
    items = json.loads(up.kubectl("get", "pods", "-l", "app=agentd", "-o", "json").stdout)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def rollout_status(up: ServerProcess) -> str:
    return str(up.kubectl("rollout", "status", "ds/agentd", "--timeout=90s", timeout=120).stdout)


def test_daemonset_rolls_out_updates_and_rolls_back(up: ServerProcess) -> None:
    up.kubectl("apply", "-f", "-", stdin=json.dumps(DS))
    assert 'daemon set "agentd" successfully rolled out' in rollout_status(up)
    table = up.kubectl("get", "ds", "agentd").stdout.splitlines()
    assert table[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE",
                                "SELECTOR", "AGE"]
    assert table[1].split()[:7] == ["agentd", "1", "1", "1", "1", "1", "<none>"]
    [first] = pods(up)
    node = json.loads(up.kubectl("get", "nodes", "-o", "json").stdout)["items"][0]["metadata"]["name"]
    assert first["spec"]["nodeName"] == node  # placed by the scheduler through the pinning node affinity

    up.kubectl("set", "image", "ds/agentd", "c=busybox:1.36")
    rollout_status(up)
    assert wait_for(lambda: [p["spec"]["containers"][0]["image"] for p in pods(up)] == ["busybox:1.36"],
                    timeout=30)
    [second] = pods(up)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    history = up.kubectl("rollout", "history", "ds/agentd").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"], history

    up.kubectl("rollout", "undo", "ds/agentd")
    rollout_status(up)
    assert wait_for(lambda: [p["spec"]["containers"][0]["image"] for p in pods(up)] == ["busybox"], timeout=30)
    described = up.kubectl("describe", "ds", "agentd").stdout
    assert "Desired Number of Nodes Scheduled: 1" in described and "SuccessfulCreate" in described, described

    apps = client.AppsV1Api(config.new_client_from_config(config_file=str(up.kubeconfig)))
    status = apps.read_namespaced_daemon_set_status("agentd", "default").status  # the official client's types
    assert (status.desired_number_scheduled, status.number_available, status.updated_number_scheduled) == (1, 1, 1)
    explained = up.kubectl("explain", "ds.spec.updateStrategy").stdout
    assert "KIND:       DaemonSet" in explained and "rollingUpdate" in explained, explained

    up.kubectl("delete", "ds", "agentd", "--timeout=60s", timeout=70)
    assert wait_for(lambda: pods(up) == [], timeout=30)
