"""ConfigMaps and Secrets with the real kubectl against a real `kubelite server`.

`kubectl create configmap|secret` sends protobuf, which the protobuf work covers; here the same objects
go through kubectl's JSON path (`create --dry-run=client -o json | create -f -`, `apply`)."""

from __future__ import annotations

import base64
import json

import pytest

from tests.conftest import ServerProcess

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
