"""Service-account issuer discovery end to end: a real `kubelite server --service-account-jwks-uri ...` and the real
kubectl. A service account's permissions list the discovery URLs as upstream's bootstrap policy grants them, and
its own token reads both documents; a request without credentials is refused."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from kubelite.apiserver.auth import jwt
from tests.conftest import ServerProcess, start_server
from tests.e2e.pods import wait_for

pytestmark = pytest.mark.e2e
JWKS_URI = "https://keys.example.com/openid/v1/jwks"
DISCOVERY_URLS = ["/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks",
                  "/openid/v1/jwks/"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("discovery")
    proc = start_server(base / "data", base / "home",
                        extra=["--disable", "scheduler", "--service-account-jwks-uri", JWKS_URI])
    yield proc
    proc.stop()


def test_can_i_list_shows_the_discovery_urls_to_a_service_account(server: ServerProcess) -> None:
    """`kubectl auth can-i --list --as=system:serviceaccount:default:x`: each URL its own row, verb get (the account
    need not exist: RBAC binds the group system:serviceaccounts)."""
    out = server.kubectl("auth", "can-i", "--list", "--as=system:serviceaccount:default:x").stdout
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.lstrip().startswith("[/")}
    assert {url: rows.get(f"[{url}]") for url in DISCOVERY_URLS} == {url: "[get]" for url in DISCOVERY_URLS}
    assert "openid" not in server.kubectl("auth", "can-i", "--list", "--as=someone").stdout


def test_a_service_account_token_reads_both_documents(server: ServerProcess) -> None:
    assert wait_for(lambda: server.kubectl("get", "sa", "default", check=False).returncode == 0)
    token = server.kubectl("create", "token", "default").stdout.strip()
    config = json.loads(server.kubectl("get", "--raw", "/.well-known/openid-configuration", f"--token={token}").stdout)
    assert config == {"issuer": "https://kubernetes.default.svc.cluster.local", "jwks_uri": JWKS_URI,
                      "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                      "id_token_signing_alg_values_supported": ["RS256"]}
    keys = json.loads(server.kubectl("get", "--raw", "/openid/v1/jwks", f"--token={token}").stdout)["keys"]
    parsed = jwt.parse(token)
    assert parsed is not None
    assert [(k["kid"], k["alg"], k["use"]) for k in keys] == [(parsed.header["kid"], "RS256", "sig")]


def test_without_credentials_is_401(server: ServerProcess) -> None:
    context = ssl.create_default_context(cafile=str(server.data_dir / "pki" / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"https://127.0.0.1:{server.port}/openid/v1/jwks", context=context, timeout=10)
    assert refused.value.code == 401
