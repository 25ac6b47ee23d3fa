"""ConfigMaps and Secrets with the real kubectl against a real `kubelite server`.

`kubectl create configmap|secret` sends protobuf, which the protobuf work covers; here the same objects
go through kubectl's JSON path (`create --dry-run=client -o json | create -f -`, `apply`)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.e2e


def _create(server: ServerProcess, *generator: str) -> None:
    manifest = server.kubectl("create", *generator, "--dry-run=client", "-o", "json").stdout
    server.kubectl("create", "-f", "-", stdin=manifest)


def test_create_get_columns_and_string_data(server: ServerProcess) -> None:
    _create(server, "configmap", "settings", "--from-literal=mode=fast", "--from-literal=level=3")
    _create(server, "secret", "generic", "creds", "--from-literal=password=hunter2")
    out = server.kubectl("get", "cm,secrets", "--no-headers", "-o", "custom-columns=N:.metadata.name").stdout
    assert {"settings", "creds"} <= set(out.split())
    table = server.kubectl("get", "cm", "settings").stdout.splitlines()
    assert table[0].split() == ["NAME", "DATA", "AGE"] and table[1].split()[:2] == ["settings", "2"]
    table = server.kubectl("get", "secret", "creds").stdout.splitlines()
    assert table[0].split() == ["NAME", "TYPE", "DATA", "AGE"]
    assert table[1].split()[:3] == ["creds", "Opaque", "1"]
    server.kubectl("patch", "secret", "creds", "--type=merge", "-p", '{"stringData":{"password":"changed"}}')
    got = json.loads(server.kubectl("get", "secret", "creds", "-o", "json").stdout)
    assert base64.b64decode(got["data"]["password"]) == b"changed" and "stringData" not in got


def test_immutable_configmap_refuses_edits_with_upstreams_message(server: ServerProcess) -> None:
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"}, "data": {"k": "v"},
                "immutable": True}
    server.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    res = server.kubectl("patch", "cm", "frozen", "--type=merge", "-p", '{"data":{"k":"w"}}', check=False)
    assert res.returncode != 0
    assert 'ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when `immutable` is set' in res.stderr


def test_tls_secret_requires_its_keys(server: ServerProcess) -> None:
    manifest = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls-bad"}, "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": "x"}}
    res = server.kubectl("apply", "-f", "-", stdin=json.dumps(manifest), check=False)
    assert res.returncode != 0 and "data[tls.key]: Required value" in res.stderr


ENCRYPTION_CONFIG = """\
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: {key}
      - identity: {{}}
"""


def test_encryption_key_file_keeps_secrets_out_of_the_database(tmp_path: Path) -> None:
    key_file = tmp_path / "encryption.yaml"
    key_file.write_text(ENCRYPTION_CONFIG.format(key=base64.b64encode(bytes(range(32))).decode()))
    data = tmp_path / "data"
    proc = start_server(data, tmp_path / "home", extra=["--disable", "scheduler,controllers",
                                                        "--encryption-key-file", str(key_file)])
    try:
        _create(proc, "secret", "generic", "db", "--from-literal=password=s3cr3t-value-xyz")
        got = json.loads(proc.kubectl("get", "secret", "db", "-o", "json").stdout)
        assert base64.b64decode(got["data"]["password"]) == b"s3cr3t-value-xyz"
    finally:
        proc.stop()
    stored = b"".join(p.read_bytes() for p in data.glob("state.db*"))
    assert b"s3cr3t-value-xyz" not in stored and base64.b64encode(b"s3cr3t-value-xyz") not in stored
    assert b"k8s:enc:aesgcm:v1:key1:" in stored
    log = (tmp_path / f"server-{proc.port}.log").read_text()
    assert "s3cr3t-value-xyz" not in log


def test_bad_encryption_key_file_refuses_to_start(tmp_path: Path) -> None:
    key_file = tmp_path / "encryption.yaml"
    key_file.write_text(ENCRYPTION_CONFIG.format(key=base64.b64encode(b"short").decode()))
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "server", "--data-dir", str(tmp_path / "d"),
                          "--encryption-key-file", str(key_file)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "key must be 16, 24 or 32 bytes, not 5" in res.stderr
