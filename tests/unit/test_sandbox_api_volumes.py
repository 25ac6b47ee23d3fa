"""API-data volumes (configMap, secret, downwardAPI, projected) in the real bubblewrap sandbox: bound read-only at
their mountPath (the service-account path included), an AtomicWriter update is seen in place through the
directory, and a subPath mount keeps the content it started with (as upstream)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.container import ConfigError
from kubelite.agent.sandbox import sandboxed
from kubelite.agent.volumes.atomic_writer import AtomicWriter, FileProjection

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

Obj = dict[str, Any]
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def _pod(*volumes: Obj) -> Obj:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": {"volumes": list(volumes)}}


def _write(root: Path, name: str, **files: str) -> None:
    target = root / name
    target.mkdir(parents=True, exist_ok=True)
    AtomicWriter(target).write({k: FileProjection(v.encode()) for k, v in files.items()})


@pytest.mark.parametrize("kind", ["configMap", "secret", "downwardAPI", "projected"])
def test_bound_read_only_even_when_the_mount_asks_for_write(tmp_path: Path, kind: str) -> None:
    _write(tmp_path, "v", k="value")
    container = {"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/mnt/v", "readOnly": False}]}
    cmd = sandboxed(["sh", "-c", "cat /mnt/v/k; echo x > /mnt/v/new 2>/dev/null && echo WROTE"],
                    _pod({"name": "v", kind: {}}), container, tmp_path)
    assert ["--ro-bind", str(tmp_path / "v"), "/mnt/v"] == cmd[cmd.index("/mnt/v") - 2:cmd.index("/mnt/v") + 1]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert out.stdout == "value"


def test_service_account_path_and_in_place_updates_but_not_subpath(tmp_path: Path) -> None:
    _write(tmp_path, "kube-api-access", token="t1", namespace="default")
    container = {"name": "c", "volumeMounts": [
        {"name": "kube-api-access", "mountPath": SA_PATH},
        {"name": "kube-api-access", "mountPath": "/token-at-start", "subPath": "token"}]}
    cmd = sandboxed(["sh", "-c", f"cat {SA_PATH}/token /token-at-start; read _; cat {SA_PATH}/token /token-at-start"],
                    _pod({"name": "kube-api-access", "projected": {"sources": []}}), container, tmp_path)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.read(4) == "t1t1"
    _write(tmp_path, "kube-api-access", token="t2", namespace="default")
    proc.stdin.write("go\n")
    proc.stdin.close()
    assert proc.stdout.read() == "t2t1"
    assert proc.wait(timeout=30) == 0


def test_not_set_up_or_missing_subpath_is_a_config_error(tmp_path: Path) -> None:
    mount = {"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}
    with pytest.raises(ConfigError, match='volume "v" has not been set up'):
        sandboxed(["true"], _pod({"name": "v", "secret": {"secretName": "s"}}), mount, tmp_path)
    _write(tmp_path, "v", k="1")
    mount["volumeMounts"][0]["subPath"] = "nokey"
    with pytest.raises(ConfigError, match='subPath "nokey" of volume "v" does not exist'):
        sandboxed(["true"], _pod({"name": "v", "secret": {"secretName": "s"}}), mount, tmp_path)
