"""Impersonation end to end: the real kubectl's `--as`, `--as-group` and `--as-uid` against a real `kubelite server`
(default authorization Node,RBAC; token-file users), as QA found them silently ignored: the request must run
as the impersonated user, and only a requester allowed `impersonate` on what it asks for may make it."""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.e2e
TARGET = "system:serviceaccount:default:target"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """alice may impersonate nothing; bob may impersonate the service account default/target only (a Role with
    resourceNames, as `kubectl create role --resource-name`)."""
    base = tmp_path_factory.mktemp("impersonation")
    tokens = base / "tokens.csv"
    tokens.write_text("alice-token,alice,alice-uid\nbob-token,bob,bob-uid\n")
    proc = start_server(base / "data", base / "home",
                        extra=["--disable", "scheduler,controllers", "--token-auth-file", str(tokens)])
    try:
        proc.kubectl("create", "role", "impersonate-target", "--verb=impersonate", "--resource=serviceaccounts",
                     "--resource-name=target", "-n", "default")
        proc.kubectl("create", "rolebinding", "bob-impersonates-target", "--role=impersonate-target", "--user=bob",
                     "-n", "default")
        yield proc
    finally:
        proc.stop()


def kubectl(server: ServerProcess, token: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    """kubectl as the admin kubeconfig (system:masters, via cluster-admin's `*` verbs) or as a token's user."""
    return server.kubectl(*args, *([f"--token={token}"] if token else []), check=False)


def whoami(server: ServerProcess, token: str | None, *args: str) -> dict[str, object]:
    res = kubectl(server, token, "auth", "whoami", "-o", "json", *args)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)["status"]["userInfo"]
    assert isinstance(info, dict)
    return info


def test_admin_acting_as_nobody_is_nobody(server: ServerProcess) -> None:
    """QA's three findings: whoami, a read of secrets and can-i all answer for the impersonated user."""
    assert whoami(server, None, "--as=nobody") == {"username": "nobody", "groups": ["system:authenticated"]}
    res = kubectl(server, None, "get", "secrets", "--as=nobody")
    assert res.returncode == 1
    assert res.stderr.strip() == ('Error from server (Forbidden): secrets is forbidden: User "nobody" cannot list '
                                  'resource "secrets" in API group "" in the namespace "default"')
    res = kubectl(server, None, "auth", "can-i", "list", "secrets", f"--as={TARGET}")
    assert (res.returncode, res.stdout.strip()) == (1, "no")
    assert kubectl(server, None, "auth", "can-i", "list", "secrets").stdout.strip() == "yes"


def test_as_groups_and_uid_make_the_user(server: ServerProcess) -> None:
    assert whoami(server, None, "--as=x", "--as-group=g1", "--as-group=g2", "--as-uid=u1") == {
        "username": "x", "uid": "u1", "groups": ["g1", "g2", "system:authenticated"]}
    assert whoami(server, None, f"--as={TARGET}") == {
        "username": TARGET, "groups": ["system:serviceaccounts", "system:serviceaccounts:default",
                                       "system:authenticated"]}
    # a group that makes the user an admin again
    assert kubectl(server, None, "get", "secrets", "--as=nobody", "--as-group=system:masters").returncode == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--as=nobody"], 'users "nobody" is forbidden: User "alice" cannot impersonate resource "users" in API '
                      'group "" at the cluster scope'),
    ([f"--as={TARGET}"], 'serviceaccounts "target" is forbidden: User "alice" cannot impersonate resource '
                         '"serviceaccounts" in API group "" in the namespace "default"'),
], ids=["user", "serviceaccount"])
def test_a_plain_user_may_not_impersonate(server: ServerProcess, args: list[str], message: str) -> None:
    res = kubectl(server, "alice-token", "get", "pods", *args)
    assert (res.returncode, res.stderr.strip()) == (1, f"Error from server (Forbidden): {message}")
    assert whoami(server, "alice-token") == {"username": "alice", "uid": "alice-uid",
                                             "groups": ["system:authenticated"]}


def test_impersonate_granted_on_one_service_account_only(server: ServerProcess) -> None:
    assert whoami(server, "bob-token", f"--as={TARGET}")["username"] == TARGET
    refusals = {
        "system:serviceaccount:default:other": 'serviceaccounts "other" is forbidden: User "bob" cannot '
        'impersonate resource "serviceaccounts" in API group "" in the namespace "default"',
        "system:serviceaccount:kube-system:target": 'serviceaccounts "target" is forbidden: User "bob" cannot '
        'impersonate resource "serviceaccounts" in API group "" in the namespace "kube-system"',
    }
    for user, message in refusals.items():
        res = kubectl(server, "bob-token", "get", "pods", f"--as={user}")
        assert res.stderr.strip() == f"Error from server (Forbidden): {message}"
    res = kubectl(server, "bob-token", "get", "pods", f"--as={TARGET}", "--as-group=system:masters")
    assert res.stderr.strip() == ('Error from server (Forbidden): groups "system:masters" is forbidden: User "bob" '
                                  'cannot impersonate resource "groups" in API group "" at the cluster scope')
    # acting as target, bob has target's rights: none on pods until target is granted them
    res = kubectl(server, "bob-token", "get", "pods", f"--as={TARGET}")
    assert "User \"system:serviceaccount:default:target\" cannot list resource \"pods\"" in res.stderr
    server.kubectl("create", "rolebinding", "target-view", "--clusterrole=system:aggregate-to-view",
                   "--serviceaccount=default:target", "-n", "default")
    res = kubectl(server, "bob-token", "get", "pods", f"--as={TARGET}")
    assert (res.returncode, res.stderr.strip()) == (0, "No resources found in default namespace.")


def test_groups_without_a_user_are_upstreams_internal_error(server: ServerProcess) -> None:
    """kubectl refuses `--as-group` alone itself; a raw request gets upstream's plain-text 500."""
    token = next(line.split()[-1] for line in server.kubeconfig.read_text().splitlines() if "token:" in line)
    context = ssl.create_default_context(cafile=str(server.data_dir / "pki" / "ca.crt"))
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    try:
        connection.request("GET", "/api/v1/pods", headers={"Authorization": f"Bearer {token}",
                                                           "Impersonate-Group": "g1"})
        response = connection.getresponse()
        assert (response.status, response.read().decode()) == (
            500, 'Internal Server Error: "/api/v1/pods": requested [{Group  g1    }] without impersonating a user\n')
    finally:
        connection.close()
