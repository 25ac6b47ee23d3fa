"""`kubelite controller-manager` under upstream's identity: a real server (its own controllers and scheduler off),
a real controller-manager process with `DATA_DIR/pki/controller-manager.kubeconfig` (user
system:kube-controller-manager) and --use-service-account-credentials. A Deployment becomes a ReplicaSet and
pods, made by the controllers' own service accounts; the controller-manager's identity, and each controller's,
is refused what its role does not grant (403, upstream's message)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.e2e
CONTROLLERS = "deployment,replicaset,serviceaccount"


def wait_for(check: Callable[[], bool], what: str, timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    base = tmp_path_factory.mktemp("cm-identity")
    server = start_server(base / "data", base / "home", extra=["--disable", "controllers,scheduler"])
    kubeconfig = server.data_dir / "pki" / "controller-manager.kubeconfig"
    log = base / "cm.log"
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "controller-manager", "--kubeconfig",
                             str(kubeconfig), "--controllers", CONTROLLERS, "--use-service-account-credentials"],
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    try:
        yield server, kubeconfig
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        server.stop()


def test_deployment_reconciled_by_the_controllers_service_accounts(cluster: tuple[ServerProcess, Path]) -> None:
    server, _ = cluster
    server.kubectl("create", "deployment", "web", "--image=busybox", "--replicas=2")

    def pods() -> int:
        out = server.kubectl("get", "pods", "-l", "app=web", "-o", "json").stdout
        return len(json.loads(out)["items"])

    wait_for(lambda: pods() == 2, "the deployment's two pods")
    accounts = server.kubectl("get", "serviceaccounts", "-n", "kube-system", "-o", "name").stdout.split()
    assert {"serviceaccount/deployment-controller", "serviceaccount/replicaset-controller"} <= set(accounts)
    whoami = server.kubectl("--kubeconfig", str(cluster[1]), "auth", "whoami", "-o", "json").stdout
    assert json.loads(whoami)["status"]["userInfo"]["username"] == "system:kube-controller-manager"


REFUSED = [  # (what, kubectl args, expected stderr)
    ("the controller-manager creates a deployment", ("create", "deployment", "x", "--image=busybox"),
     'deployments.apps is forbidden: User "system:kube-controller-manager" cannot create resource "deployments" '
     'in API group "apps" in the namespace "default"'),
    ("the controller-manager deletes a pod", ("delete", "pods", "--all"),
     'User "system:kube-controller-manager" cannot delete resource "pods" in API group "" in the namespace '
     '"default"'),
]


@pytest.mark.parametrize("name,args,message", REFUSED, ids=[c[0] for c in REFUSED])
def test_controller_manager_identity_is_refused(cluster: tuple[ServerProcess, Path], name: str,
                                               args: tuple[str, ...], message: str) -> None:
    server, kubeconfig = cluster
    if not server.kubectl("get", "pods", "-o", "name").stdout.strip():
        server.kubectl("run", "victim", "--image=busybox")
    out = server.kubectl("--kubeconfig", str(kubeconfig), *args, check=False)
    assert out.returncode != 0 and message in out.stderr, out.stderr


ACCESS = [  # (service account, verb, group, resource, allowed), as the system:controller:* roles say
    ("replicaset-controller", "create", "", "pods", True),
    ("replicaset-controller", "delete", "apps", "deployments", False),
    ("replicaset-controller", "get", "", "secrets", False),
    ("deployment-controller", "create", "apps", "replicasets", True),
    ("deployment-controller", "create", "", "pods", False),
    ("daemon-set-controller", "create", "apps", "controllerrevisions", True),
    ("daemon-set-controller", "create", "apps", "daemonsets", False),
]


@pytest.mark.parametrize("account,verb,group,resource,allowed", ACCESS,
                         ids=[f"{c[0]} {c[1]} {c[3]}" for c in ACCESS])
def test_controller_roles(cluster: tuple[ServerProcess, Path], account: str, verb: str, group: str, resource: str,
                          allowed: bool) -> None:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": f"system:serviceaccount:kube-system:{account}",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
        "resourceAttributes": {"namespace": "default", "verb": verb, "group": group, "resource": resource}}}
    out = cluster[0].kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(review)).stdout
    assert json.loads(out)["status"].get("allowed", False) is allowed
