"""RBAC end to end: a real `kubelite server --authorization-mode RBAC` (with its controllers, so admin, edit and
view are aggregated), users from a token file bound with `kubectl create rolebinding`, and kubectl's answers:
`kubectl auth can-i` for a table of verbs x roles, and the Forbidden errors kubectl prints."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.e2e
USERS = {"viewer": "view", "editor": "edit", "nsadmin": "admin", "nobody": None}


@pytest.fixture(scope="module")
def rbac_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("rbac")
    tokens = base / "tokens.csv"
    tokens.write_text("".join(f"{user}-token,{user},{user}-uid\n" for user in USERS))
    server = start_server(base / "data", base / "home", extra=[
        "--disable", "scheduler", "--authorization-mode", "RBAC", "--token-auth-file", str(tokens)])
    for user, role in USERS.items():
        if role is not None:
            server.kubectl("create", "rolebinding", f"{user}-{role}", f"--clusterrole={role}", f"--user={user}",
                           "-n", "default")
    deadline = time.monotonic() + 30  # the aggregation controller fills admin/edit/view
    while time.monotonic() < deadline:
        if can_i(server, "viewer", "list", "pods") == "yes" and can_i(server, "nsadmin", "get", "pods") == "yes":
            break
        time.sleep(0.2)
    yield server
    server.stop()


def kubectl_as(server: ServerProcess, user: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    return server.kubectl(*args, *(["--token", f"{user}-token"] if user else []), check=False)


def can_i(server: ServerProcess, user: str | None, verb: str, resource: str, namespace: str = "default") -> str:
    return kubectl_as(server, user, "auth", "can-i", verb, resource, "-n", namespace).stdout.strip()


CAN_I = [  # (user, verb, resource, namespace, answer); user None: the admin kubeconfig (system:masters)
    ("viewer", "list", "pods", "default", "yes"),
    ("viewer", "get", "deployments.apps", "default", "yes"),
    ("viewer", "create", "pods", "default", "no"),
    ("viewer", "get", "secrets", "default", "no"),
    ("viewer", "list", "pods", "kube-system", "no"),
    ("editor", "create", "pods", "default", "yes"),
    ("editor", "delete", "deployments.apps", "default", "yes"),
    ("editor", "get", "secrets", "default", "yes"),
    ("editor", "create", "rolebindings.rbac.authorization.k8s.io", "default", "no"),
    ("nsadmin", "create", "rolebindings.rbac.authorization.k8s.io", "default", "yes"),
    ("nsadmin", "list", "nodes", "default", "no"),
    ("nobody", "list", "pods", "default", "no"),
    ("nobody", "create", "selfsubjectaccessreviews.authorization.k8s.io", "default", "yes"),
    (None, "delete", "nodes", "default", "yes"),
    (None, "*", "*", "kube-system", "yes"),
]


@pytest.mark.parametrize("user,verb,resource,namespace,answer", CAN_I,
                         ids=[f"{c[0] or 'admin'} {c[1]} {c[2]} in {c[3]}" for c in CAN_I])
def test_auth_can_i(rbac_server: ServerProcess, user: str | None, verb: str, resource: str, namespace: str,
                    answer: str) -> None:
    assert can_i(rbac_server, user, verb, resource, namespace) == answer


def test_viewer_lists_pods_but_cannot_create(rbac_server: ServerProcess) -> None:
    listed = kubectl_as(rbac_server, "viewer", "get", "pods", "-n", "default")
    assert listed.returncode == 0, listed.stderr
    created = kubectl_as(rbac_server, "viewer", "run", "p", "--image=busybox", "-n", "default")
    assert created.returncode != 0
    assert created.stderr.strip() == ('Error from server (Forbidden): pods is forbidden: User "viewer" cannot '
                                      'create resource "pods" in API group "" in the namespace "default"')


def test_whoami_and_list_are_basic_user_rights(rbac_server: ServerProcess) -> None:
    whoami = kubectl_as(rbac_server, "nobody", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert whoami.stdout == "nobody", whoami.stderr
    listed = kubectl_as(rbac_server, "viewer", "auth", "can-i", "--list", "-n", "default")
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[:1] == ["pods"] and "list" in line for line in listed.stdout.splitlines())


def test_escalation_is_refused(rbac_server: ServerProcess) -> None:
    out = kubectl_as(rbac_server, "nsadmin", "create", "rolebinding", "grab", "--clusterrole=cluster-admin",
                     "--user=nsadmin", "-n", "default")
    assert out.returncode != 0
    assert ('rolebindings.rbac.authorization.k8s.io "grab" is forbidden: user "nsadmin" '
            '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held') \
        in out.stderr
