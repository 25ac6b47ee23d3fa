"""Pod sync with ConfigMaps and Secrets (hollow runtime, fake clock): a missing required object keeps the container
waiting with kubelet's reason and words and it starts once the object appears; volumes are projected before the
start and rewritten in place (a new `..data`) when their object changes; a missing TokenRequest API is a clear
mount error; the pod's watches are released when it ends."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.records import pod_dir
from kubelite.agent.volumes.atomic_writer import DATA_DIR
from kubelite.agent.volumes.manager import VolumeManager
from kubelite.agent.volumes.objects import Ref
from tests.unit.test_pod_worker import Harness, _c, _delete, _pod, _start
from tests.unit.volume_fakes import ScriptedTokens

Obj = dict[str, Any]


def secret(name: str, **data: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "default"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def config_map(name: str, **data: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "default"}, "data": data}


async def _wake(h: Harness, uid: str = "u1") -> None:
    """What the agent does when a referenced object changes: wake the pod's worker."""
    h.pod_workers.pods[uid].wake.set()
    await h.clock.advance(0)


async def test_missing_secret_for_env_is_create_container_config_error_until_it_exists(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    env = [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
    await _start(h, _pod([_c("main", env=env)]))
    waiting = h.container("main")["state"]["waiting"]
    assert waiting == {"reason": "CreateContainerConfigError", "message": 'secret "db" not found'}
    assert ("Failed", 'Error: secret "db" not found') in [(r, m) for _, r, m in h.events]
    assert h.objects.registered["u1"] == {Ref("secret", "default", "db")}
    h.objects.put("secret", secret("db", password="s3cret"))
    await _wake(h)
    assert "running" in h.container("main")["state"]


async def test_config_error_is_retried_without_a_wake(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    env = [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}]
    await _start(h, _pod([_c("main", env=env)]))
    h.objects.put("configmap", config_map("cfg", other="1"))
    await h.clock.advance(10)
    assert h.container("main")["state"]["waiting"]["message"] == "couldn't find key k in ConfigMap default/cfg"
    h.objects.put("configmap", config_map("cfg", k="1"))
    await h.clock.advance(10)
    assert "running" in h.container("main")["state"]


def _volume_dir(h: Harness, name: str) -> Path:
    return pod_dir(h.data_dir, _pod([])) / "volumes" / name


async def test_volume_is_projected_before_start_and_updated_in_place(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    pod = _pod([_c("main", volumeMounts=[{"name": "cfg", "mountPath": "/etc/cfg"}])])
    pod["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "settings"}}]
    await _start(h, pod)
    waiting = h.container("main")["state"]["waiting"]
    assert waiting["reason"] == "ContainerCreating"
    assert waiting["message"] == 'MountVolume.SetUp failed for volume "cfg" : configmap "settings" not found'
    assert any(r == "FailedMount" for _, r, _ in h.events)
    h.objects.put("configmap", config_map("settings", mode="fast"))
    await _wake(h)
    target = _volume_dir(h, "cfg")
    assert (target / "mode").read_text() == "fast" and "running" in h.container("main")["state"]
    first = os.readlink(target / DATA_DIR)
    h.objects.put("configmap", config_map("settings", mode="slow"))
    await _wake(h)
    assert (target / "mode").read_text() == "slow" and os.readlink(target / DATA_DIR) != first
    assert h.container("main")["restartCount"] == 0  # updated in place, not restarted


async def test_missing_token_api_keeps_the_pod_creating_with_a_clear_message(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.volumes = VolumeManager(h.objects, ScriptedTokens(missing=True), h.host_ip, {})
    pod = _pod([_c("main")])
    pod["spec"]["volumes"] = [{"name": "kube-api-access", "projected": {
        "sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}]
    await _start(h, pod)
    assert h.container("main")["state"]["waiting"]["message"] == (
        'MountVolume.SetUp failed for volume "kube-api-access" : failed to fetch token: the server could not find '
        "the requested resource")


async def test_token_is_refreshed_when_due(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    tokens = ScriptedTokens(refresh_at=h.clock.now() + 100)
    h.volumes = VolumeManager(h.objects, tokens, h.host_ip, {})
    pod = _pod([_c("main")])
    pod["spec"]["volumes"] = [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]
    await _start(h, pod)
    assert (_volume_dir(h, "t") / "token").read_text() == "token-1"
    tokens.refresh_at = h.clock.now() + 1e6
    await h.clock.advance(100)
    assert (_volume_dir(h, "t") / "token").read_text() == "token-2"


async def test_watches_released_when_the_pod_ends(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.objects.put("configmap", config_map("settings", a="1"))
    pod = _pod([_c("main")])
    pod["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "settings"}}]
    _, task = await _start(h, pod)
    assert "u1" in h.objects.registered
    await _delete(pod, h, grace=0)
    for _ in range(50):
        if task.done():
            break
        await h.clock.advance(1)
    await asyncio.wait_for(task, 5)
    assert "u1" not in h.objects.registered


async def test_secret_values_never_logged_or_in_events(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    h = Harness(tmp_path)
    h.objects.put("secret", secret("db", password="very-secret-value", **{"bad key": "very-secret-value-2"}))
    env = [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
           {"name": "NO", "valueFrom": {"secretKeyRef": {"name": "db", "key": "missing"}}}]
    pod = _pod([_c("main", env=env, envFrom=[{"secretRef": {"name": "db"}}])])
    pod["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "db", "items": [{"key": "nope", "path": "x"}]}}]
    await _start(h, pod)
    pod["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "db"}}]
    h.pod_workers.update_pod(pod)
    await h.clock.advance(0)
    seen = caplog.text + repr(h.events) + repr(h.statuses)
    assert "couldn't find key missing in Secret default/db" in seen  # the failures were reported...
    assert "very-secret-value" not in seen and base64.b64encode(b"very-secret-value").decode() not in seen


async def test_downward_api_labels_follow_the_pod(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    pod = _pod([_c("main")])
    pod["metadata"]["labels"] = {"tier": "web"}
    pod["spec"]["volumes"] = [{"name": "info", "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]
    await _start(h, pod)
    assert (_volume_dir(h, "info") / "labels").read_text() == 'tier="web"'
    h.pod_workers.update_pod({**pod, "metadata": {**pod["metadata"], "labels": {"tier": "web", "canary": "true"}}})
    await h.clock.advance(0)
    assert (_volume_dir(h, "info") / "labels").read_text() == 'canary="true"\ntier="web"'
