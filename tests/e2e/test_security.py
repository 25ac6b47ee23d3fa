"""Security defaults (G3, first part): TLS + bearer token, public health and version, loopback-only --insecure."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import yaml

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e


def _get(server: ServerProcess, path: str, token: str | None) -> int:
    ctx = ssl.create_default_context(cafile=str(server.data_dir / "pki" / "ca.crt"))
    req = urllib.request.Request(f"https://127.0.0.1:{server.port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        body = json.loads(exc.read())
        assert body["kind"] == "Status" and body["code"] == exc.code
        return exc.code


def test_token_required_over_verified_tls(server: ServerProcess) -> None:
    token = yaml.safe_load(server.kubeconfig.read_text())["users"][0]["user"]["token"]
    assert token == (server.data_dir / "admin.token").read_text().strip()
    assert _get(server, "/api/v1/namespaces", None) == 401
    assert _get(server, "/api/v1/namespaces", "wrong") == 401
    assert _get(server, "/api/v1/namespaces", token) == 200
    for public in ("/version", "/healthz", "/livez", "/readyz"):
        assert _get(server, public, None) == 200


def test_insecure_refuses_non_loopback_bind(tmp_path: pytest.TempPathFactory) -> None:
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "server", "--insecure", "--bind-address",
                          "0.0.0.0", "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    assert "may only bind a loopback address" in res.stderr
