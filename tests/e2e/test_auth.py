"""Authentication end to end: kubectl and the official Python client against a real `kubelite server`.

Service-account tokens from `kubectl create token` (and their revocation when the bound pod goes or
they expire), client certificates signed by the cluster CA, the token file and anonymous requests.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubelite.apiserver import pki
from kubelite.apiserver.auth import jwt
from tests.conftest import ServerProcess, start_server
from tests.e2e.pods import wait_for

pytestmark = pytest.mark.e2e


def _core(server: ServerProcess, token: str) -> client.CoreV1Api:
    """The official client as an in-cluster program would be configured: a bearer token and the cluster CA."""
    configuration = client.Configuration()
    configuration.host = f"https://127.0.0.1:{server.port}"
    configuration.api_key = {"authorization": f"Bearer {token}"}
    configuration.ssl_ca_cert = str(server.data_dir / "pki" / "ca.crt")
    return client.CoreV1Api(client.ApiClient(configuration))


def _whoami(server: ServerProcess, *args: str) -> dict[str, object]:
    info = json.loads(server.kubectl("auth", "whoami", "-o", "json", *args).stdout)["status"]["userInfo"]
    assert isinstance(info, dict)
    return info


def _namespace(server: ServerProcess, name: str) -> None:
    server.kubectl("create", "namespace", name)
    assert wait_for(lambda: server.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0)
    _may_view(server, name)


def _may_view(server: ServerProcess, namespace: str) -> None:
    """RBAC (the default authorization mode): the namespace's default service account may list its pods."""
    server.kubectl("create", "rolebinding", "default-view", "--clusterrole=view",
                   f"--serviceaccount={namespace}:default", "-n", namespace)


def test_kubectl_create_token_then_the_python_client_lists_pods(server: ServerProcess) -> None:
    _namespace(server, "tokens")
    server.kubectl("run", "p1", "--image=busybox", "-n", "tokens", "--", "sleep", "60")
    token = server.kubectl("create", "token", "default", "-n", "tokens").stdout.strip()
    pods = _core(server, token).list_namespaced_pod("tokens")
    assert [p.metadata.name for p in pods.items] == ["p1"]
    assert _whoami(server, f"--token={token}") == {
        "username": "system:serviceaccount:tokens:default",
        "uid": json.loads(server.kubectl("get", "sa", "default", "-n", "tokens", "-o", "json").stdout)["metadata"]
        ["uid"],
        "groups": ["system:serviceaccounts", "system:serviceaccounts:tokens", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": [_credential_id(token)]},
    }


def _credential_id(token: str) -> str:
    parsed = jwt.parse(token)
    assert parsed is not None
    claims = parsed.claims
    return f"JTI={claims['jti']}"


def test_a_pod_bound_token_dies_with_its_pod(server: ServerProcess) -> None:
    _namespace(server, "bound")
    server.kubectl("run", "holder", "--image=busybox", "-n", "bound", "--", "sleep", "60")
    token = server.kubectl("create", "token", "default", "-n", "bound", "--bound-object-kind=Pod",
                           "--bound-object-name=holder").stdout.strip()
    core = _core(server, token)
    assert [p.metadata.name for p in core.list_namespaced_pod("bound").items] == ["holder"]
    server.kubectl("delete", "pod", "holder", "-n", "bound")  # never scheduled: removed at once
    with pytest.raises(ApiException) as refused:
        core.list_namespaced_pod("bound")
    assert refused.value.status == 401
    assert json.loads(refused.value.body) == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                              "status": "Failure", "message": "Unauthorized",
                                              "reason": "Unauthorized", "code": 401}


def test_an_expired_token_is_refused(server: ServerProcess) -> None:
    """A token signed with the server's own key (pki/sa.key) whose expiry passed over a minute ago."""
    sa = json.loads(server.kubectl("get", "sa", "default", "-n", "default", "-o", "json").stdout)
    key = jwt.load_signing_key(server.data_dir / "pki" / "sa.key")
    issuer = "https://kubernetes.default.svc.cluster.local"

    def token(expires_in: int) -> str:
        now = int(time.time())
        return jwt.sign({"iss": issuer, "sub": "system:serviceaccount:default:default", "aud": [issuer],
                         "iat": now - 3600, "nbf": now - 3600, "exp": now + expires_in,
                         "kubernetes.io": {"namespace": "default", "serviceaccount": {
                             "name": "default", "uid": sa["metadata"]["uid"]}}}, key)

    _may_view(server, "default")
    _core(server, token(600)).list_namespaced_pod("default")  # the same token, still valid, is accepted
    with pytest.raises(ApiException) as refused:
        _core(server, token(-120)).list_namespaced_pod("default")
    assert refused.value.status == 401


def _kubeconfig(server: ServerProcess, path: Path, cert: bytes, key: bytes) -> Path:
    config = yaml.safe_load(server.kubeconfig.read_text())
    config["users"] = [{"name": "admin", "user": {"client-certificate-data": base64.b64encode(cert).decode(),
                                                  "client-key-data": base64.b64encode(key).decode()}}]
    path.write_text(yaml.safe_dump(config))
    return path


def _kubectl(kubeconfig: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          timeout=60, env={"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin"})


def test_client_certificate_signed_by_the_cluster_ca(server: ServerProcess, tmp_path: Path) -> None:
    cert, key = pki.sign_client_certificate(server.data_dir / "pki", "alice", ["devs", "ops"])
    res = _kubectl(_kubeconfig(server, tmp_path / "alice", cert, key), tmp_path, "auth", "whoami", "-o", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["status"]["userInfo"] == {
        "username": "alice", "groups": ["devs", "ops", "system:authenticated"]}


def test_client_certificate_from_another_ca_is_refused(server: ServerProcess, tmp_path: Path) -> None:
    """The TLS handshake itself fails (CERT_OPTIONAL verifies any certificate presented); the server carries on."""
    other = tmp_path / "other-pki"
    pki.ensure_pki(other, [])
    cert, key = pki.sign_client_certificate(other, "mallory", ["system:masters"])
    (tmp_path / "m.crt").write_bytes(cert)
    (tmp_path / "m.key").write_bytes(key)
    context = ssl.create_default_context(cafile=str(server.data_dir / "pki" / "ca.crt"))
    context.load_cert_chain(tmp_path / "m.crt", tmp_path / "m.key")
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        connection.request("GET", "/api/v1/namespaces/default/pods")
        connection.getresponse()
    connection.close()
    assert server.kubectl("get", "pods", "-n", "default").returncode == 0


def test_root_ca_published_in_every_namespace(server: ServerProcess) -> None:
    _namespace(server, "ca")
    assert wait_for(lambda: server.kubectl("get", "cm", "kube-root-ca.crt", "-n", "ca", check=False).returncode == 0)
    cm = json.loads(server.kubectl("get", "cm", "kube-root-ca.crt", "-n", "ca", "-o", "json").stdout)
    assert cm["data"] == {"ca.crt": (server.data_dir / "pki" / "ca.crt").read_text()}


def test_token_file_and_anonymous(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('t1,user1,uid1,"group1,group2"\n')
    server = start_server(tmp_path / "data", tmp_path / "home",
                          extra=["--disable", "scheduler,controllers", "--token-auth-file", str(tokens),
                                 "--anonymous-auth", "--authorization-mode", "AlwaysAllow"])  # RBAC: anonymous
    # users may not review themselves (system:basic-user is bound to system:authenticated only), as upstream
    try:
        assert _whoami(server, "--token=t1") == {"username": "user1", "uid": "uid1",
                                                 "groups": ["group1", "group2", "system:authenticated"]}
        # kubectl prompts for a user name when it has no credentials; an HTTPS request without any instead
        context = ssl.create_default_context(cafile=str(server.data_dir / "pki" / "ca.crt"))
        connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
        connection.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=b"{}",
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 201
        assert json.loads(response.read())["status"]["userInfo"] == {"username": "system:anonymous",
                                                                      "groups": ["system:unauthenticated"]}
        connection.close()
        bad = server.kubectl("--token=nope", "get", "pods", check=False)
        assert bad.returncode != 0 and "You must be logged in to the server" in bad.stderr  # kubectl words a 401
    finally:
        server.stop()


def test_signing_key_is_private(server: ServerProcess) -> None:
    key = server.data_dir / "pki" / "sa.key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert serialization.load_pem_private_key(key.read_bytes(), password=None)
