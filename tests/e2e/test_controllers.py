"""Workload controllers end to end: a real `kubelite up` (control plane + node agent running real processes),
real kubectl; and two real `kubelite controller-manager` processes under leader election."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess, start_server

TIMEOUT = 90.0


def wait_for(check: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


def pods(k: ServerProcess, selector: str) -> list[dict[str, Any]]:
    out = k.kubectl("get", "pods", "-l", selector, "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def running(k: ServerProcess, selector: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods(k, selector)
                  if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))


def test_deployment_lifecycle_with_kubectl(up: ServerProcess) -> None:
    """create → pods run; a deleted pod is replaced; scale; a new revision rolls out; history, undo, restart,
    pause/resume; delete cascades."""
    up.kubectl("create", "deployment", "web", "--image=busybox", "--replicas=2", "--", "sleep", "3600")
    up.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    first = running(up, "app=web")
    assert len(first) == 2
    up.kubectl("delete", "pod", first[0], "--wait=false")
    wait_for(lambda: len(running(up, "app=web")) == 2 and first[0] not in running(up, "app=web"),
             "the deleted pod to be replaced")
    up.kubectl("scale", "deployment/web", "--replicas=3")
    up.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    assert len(running(up, "app=web")) == 3
    up.kubectl("set", "image", "deployment/web", "busybox=busybox:1.36")
    up.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    history = up.kubectl("rollout", "history", "deployment/web").stdout
    assert "1" in history and "2" in history
    up.kubectl("rollout", "undo", "deployment/web")
    up.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    d = json.loads(up.kubectl("get", "deployment", "web", "-o", "json").stdout)
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    up.kubectl("rollout", "pause", "deployment/web")
    up.kubectl("rollout", "resume", "deployment/web")
    up.kubectl("rollout", "restart", "deployment/web")
    up.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    events = up.kubectl("get", "events", "--field-selector", "reason=ScalingReplicaSet").stdout
    assert "Scaled up replica set web-" in events
    up.kubectl("delete", "deployment", "web", "--wait=false")
    wait_for(lambda: not pods(up, "app=web"), "the deployment's pods to be deleted")
    assert json.loads(up.kubectl("get", "rs", "-l", "app=web", "-o", "json").stdout)["items"] == []


def test_delete_with_cascade_orphan_leaves_pods(up: ServerProcess) -> None:
    up.kubectl("create", "deployment", "keep", "--image=busybox", "--replicas=2", "--", "sleep", "3600")
    up.kubectl("rollout", "status", "deployment/keep", "--timeout=90s", timeout=120)
    up.kubectl("delete", "deployment", "keep", "--cascade=orphan")
    wait_for(lambda: up.kubectl("get", "deployment", "keep", check=False).returncode != 0, "the deployment to go")
    time.sleep(3)  # give a (wrong) cascade the time to happen
    assert len(running(up, "app=keep")) == 2
    (rs,) = json.loads(up.kubectl("get", "rs", "-l", "app=keep", "-o", "json").stdout)["items"]
    assert not rs["metadata"].get("ownerReferences")
    up.kubectl("delete", "rs", "-l", "app=keep", "--wait=false")
    wait_for(lambda: not pods(up, "app=keep"), "the replica set's pods to be deleted")


# Upstream's timings scaled down (15 s, 10 s, 2 s by default): the standby's wait is the lease duration.
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 6.0, 4.0, 1.0


def _controller_manager(server: ServerProcess, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "controller-manager", "--kubeconfig",
                             str(server.kubeconfig), "--leader-elect", "--controllers",
                             "replicaset,garbagecollector,serviceaccount",
                             "--leader-elect-lease-duration", str(LEASE_DURATION),
                             "--leader-elect-renew-deadline", str(RENEW_DEADLINE),
                             "--leader-elect-retry-period", str(RETRY_PERIOD)],
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))


def test_leader_election_two_controller_managers(tmp_path: Path) -> None:
    """One of two controller managers is active; SIGKILL it and the other takes over within the lease
    duration; no pod is ever created twice."""
    server = start_server(tmp_path / "data", tmp_path / "home", extra=["--disable", "controllers,scheduler"])
    logs = [tmp_path / "cm-a.log", tmp_path / "cm-b.log"]
    procs = [_controller_manager(server, log) for log in logs]
    try:
        def leader() -> int | None:
            found = [i for i, log in enumerate(logs) if "successfully acquired lease" in log.read_text()]
            assert len(found) <= 1, "two leaders"
            return found[0] if found else None

        wait_for(lambda: leader() is not None, "a leader", timeout=30)
        server.kubectl("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "le", "namespace": "default"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "le"}},
                     "template": {"metadata": {"labels": {"app": "le"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))
        wait_for(lambda: len(pods(server, "app=le")) == 3, "3 pods")
        time.sleep(2)
        assert len(pods(server, "app=le")) == 3
        active = leader()
        assert active is not None
        procs[active].send_signal(signal.SIGKILL)
        procs[active].wait(timeout=10)
        killed_at = time.monotonic()
        server.kubectl("scale", "rs/le", "--replicas=5")
        wait_for(lambda: len(pods(server, "app=le")) == 5, "the standby to take over", timeout=40)
        took = time.monotonic() - killed_at
        assert "successfully acquired lease" in logs[1 - active].read_text()
        assert took < LEASE_DURATION + 5, took  # the lease duration, plus a retry period and start-up slack
        time.sleep(2)
        assert len(pods(server, "app=le")) == 5  # no duplicates
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=20)
        server.stop()


@pytest.mark.parametrize("controllers", ["replicaset,nosuch"])
def test_controller_manager_refuses_unknown_controllers(tmp_path: Path, controllers: str) -> None:
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "controller-manager", "--kubeconfig",
                          str(tmp_path / "none"), "--controllers", controllers], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 2 and "nosuch" in res.stderr
