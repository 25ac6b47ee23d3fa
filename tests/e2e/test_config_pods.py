"""ConfigMaps and Secrets in pods, with the real kubectl against a real `kubelite up` (node agent included):
a ConfigMap value in env and a Secret file in a volume, the files changing in place after `kubectl edit` /
`kubectl patch` (no restart), and a missing Secret giving CreateContainerConfigError until it is created."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import ServerProcess
from tests.e2e.pods import apply_pod, container_status, sh, wait_for

pytestmark = pytest.mark.e2e


def _apply(up: ServerProcess, obj: dict[str, Any]) -> None:
    up.kubectl("apply", "-f", "-", stdin=json.dumps(obj))


def _config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _secret(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data}


def _last_log_line(up: ServerProcess, pod: str) -> str:
    lines = up.kubectl("logs", pod, "--tail=1", check=False).stdout.splitlines()
    return lines[-1] if lines else ""


def test_env_and_volumes_follow_their_objects(up: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    _apply(up, _config_map("app-config", mode="fast"))
    _apply(up, _secret("app-secret", password="first"))
    script = ('while true; do echo "env=$MODE file=$(cat /etc/secret/password) cm=$(cat /etc/config/mode) '
              'sub=$(cat /etc/mode-at-start)"; sleep 0.3; done')
    apply_pod(up, "reader", [sh("main", script, env=[
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "mode"}}}],
        volumeMounts=[{"name": "secret", "mountPath": "/etc/secret"},
                      {"name": "config", "mountPath": "/etc/config"},
                      {"name": "config", "mountPath": "/etc/mode-at-start", "subPath": "mode"}])],
        volumes=[{"name": "secret", "secret": {"secretName": "app-secret", "defaultMode": 0o400}},
                 {"name": "config", "configMap": {"name": "app-config"}}])
    want = "env=fast file=first cm=fast sub=fast"
    assert wait_for(lambda: _last_log_line(up, "reader") == want, 30), _last_log_line(up, "reader")
    up.kubectl("patch", "secret", "app-secret", "--type=merge", "-p", '{"stringData":{"password":"second"}}')
    monkeypatch.setenv("KUBE_EDITOR", "sed -i -e 's/mode: fast/mode: slow/'")  # `kubectl edit`, scripted
    up.kubectl("edit", "configmap", "app-config")
    # Files change in place; env and the subPath mount keep what the container started with (as upstream).
    want = "env=fast file=second cm=slow sub=fast"
    assert wait_for(lambda: _last_log_line(up, "reader") == want, 30), _last_log_line(up, "reader")
    assert container_status(up, "reader", "main")["restartCount"] == 0
    up.kubectl("delete", "pod", "reader", "--grace-period=1")


def test_missing_secret_is_create_container_config_error_until_created(up: ServerProcess) -> None:
    apply_pod(up, "waiter", [sh("main", "echo pw=$PW; sleep 30", env=[
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "late-secret", "key": "pw"}}}])])

    def waiting() -> dict[str, Any]:
        return dict(container_status(up, "waiter", "main").get("state", {}).get("waiting") or {})

    assert wait_for(lambda: waiting().get("reason") == "CreateContainerConfigError", 30), waiting()
    assert waiting()["message"] == 'secret "late-secret" not found'
    assert "CreateContainerConfigError" in up.kubectl("get", "pod", "waiter").stdout
    events = up.kubectl("get", "events", "--field-selector", "involvedObject.name=waiter", "-o", "json").stdout
    assert 'Error: secret \\"late-secret\\" not found' in events
    _apply(up, _secret("late-secret", pw="now-here"))
    assert wait_for(lambda: "running" in container_status(up, "waiter", "main").get("state", {}), 30)
    assert wait_for(lambda: "pw=now-here" in up.kubectl("logs", "waiter", check=False).stdout, 10)
    up.kubectl("delete", "pod", "waiter", "--grace-period=1")


def test_missing_config_map_volume_waits_in_container_creating(up: ServerProcess) -> None:
    apply_pod(up, "mounter", [sh("main", "cat /cfg/k; sleep 30", volumeMounts=[{"name": "c", "mountPath": "/cfg"}])],
              volumes=[{"name": "c", "configMap": {"name": "late-config"}}])

    def waiting() -> dict[str, Any]:
        return dict(container_status(up, "mounter", "main").get("state", {}).get("waiting") or {})

    assert wait_for(lambda: "late-config" in waiting().get("message", ""), 30), waiting()
    assert waiting() == {"reason": "ContainerCreating", "message": 'MountVolume.SetUp failed for volume "c" : '
                                                                   'configmap "late-config" not found'}
    _apply(up, _config_map("late-config", k="hello"))
    assert wait_for(lambda: "hello" in up.kubectl("logs", "mounter", check=False).stdout, 30)
    up.kubectl("delete", "pod", "mounter", "--grace-period=1")


def test_projected_volume_at_the_service_account_path(up: ServerProcess) -> None:
    _apply(up, _config_map("root-ca", **{"ca.crt": "CERT"}))
    _apply(up, _secret("extra", token="not-a-real-token"))
    path = "/var/run/secrets/kubernetes.io/serviceaccount"
    apply_pod(up, "projected", [sh("main", f"cat {path}/ca.crt {path}/namespace {path}/token; "
                                           f"touch {path}/x 2>/dev/null || echo ' read-only'; sleep 30",
                                   volumeMounts=[{"name": "api", "mountPath": path}])],
              volumes=[{"name": "api", "projected": {"defaultMode": 0o444, "sources": [
                  {"configMap": {"name": "root-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                  {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
                  {"secret": {"name": "extra"}}]}}])
    assert wait_for(lambda: up.kubectl("logs", "projected", check=False).stdout == "CERTdefaultnot-a-real-token "
                                                                                     "read-only\n", 30), \
        up.kubectl("logs", "projected", check=False).stdout
    up.kubectl("delete", "pod", "projected", "--grace-period=1")
