"""Two real `kubelite scheduler --leader-elect` processes against one server (bare nodes, no agent): only the
holder of the kube-system/kube-scheduler Lease schedules; SIGKILL it and pods wait, unbound, until the Lease
expires as the standby observes it, then the standby takes over within the lease duration and binds them. The
timings are upstream's (15 s, 10 s, 2 s) scaled down, so that the wait is seconds.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ServerProcess, start_server
from tests.e2e.pods import wait_for

pytestmark = pytest.mark.e2e

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 10.0, 7.0, 1.0
# The standby polls at most 2.2 retry periods apart (client-go's jitter 1.2) and each poll sees a renewal, so it
# cannot take the Lease before LEASE_DURATION - 2.2 * RETRY_PERIOD = 7.8 s after the kill; the pods are looked at
# well before that.
UNBOUND_UNTIL = 5.0
ACQUIRED = "successfully acquired lease kube-system/kube-scheduler"


def _node(name: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name}}, "status": {
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}})


def _scheduler(server: ServerProcess, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "scheduler", "--kubeconfig",
                             str(server.kubeconfig), "--leader-elect",
                             "--leader-elect-lease-duration", str(LEASE_DURATION),
                             "--leader-elect-renew-deadline", str(RENEW_DEADLINE),
                             "--leader-elect-retry-period", str(RETRY_PERIOD)],
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))


def _holder(server: ServerProcess) -> str:
    return server.kubectl("get", "lease", "-n", "kube-system", "kube-scheduler", "-o",
                          "jsonpath={.spec.holderIdentity}").stdout


def _node_of(server: ServerProcess, pod: str) -> str:
    return server.kubectl("get", "pod", pod, "-o", "jsonpath={.spec.nodeName}").stdout


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_server(tmp_path / "data", tmp_path / "home", extra=["--disable", "controllers,scheduler"])
    try:
        for name in ("bare-1", "bare-2"):
            server.kubectl("create", "-f", "-", stdin=_node(name))
        server.kubectl("create", "serviceaccount", "default")  # no controllers here to make it (admission needs it)
        yield server
    finally:
        server.stop()


def test_one_scheduler_active_and_the_standby_takes_over_after_sigkill(cluster: ServerProcess,
                                                                       tmp_path: Path) -> None:
    logs = [tmp_path / "sched-a.log", tmp_path / "sched-b.log"]
    procs = [_scheduler(cluster, log) for log in logs]
    try:
        def leaders() -> list[int]:
            return [i for i, log in enumerate(logs) if ACQUIRED in log.read_text()]

        assert wait_for(lambda: bool(leaders()), timeout=30), [log.read_text() for log in logs]
        cluster.kubectl("run", "before", "--image=pause")
        assert wait_for(lambda: _node_of(cluster, "before") != "", timeout=20)
        time.sleep(3 * RETRY_PERIOD)  # a few of the standby's retry periods
        (active,) = leaders()
        first = _holder(cluster)

        procs[active].send_signal(signal.SIGKILL)
        procs[active].wait(timeout=10)
        killed = time.monotonic()
        for i in range(3):
            cluster.kubectl("run", f"after-{i}", "--image=pause")
        # Were the standby scheduling without the Lease, these pods would be bound by now.
        time.sleep(max(0.0, killed + UNBOUND_UNTIL - time.monotonic()))
        assert [_node_of(cluster, f"after-{i}") for i in range(3)] == ["", "", ""]
        assert wait_for(lambda: all(_node_of(cluster, f"after-{i}") for i in range(3)), timeout=LEASE_DURATION + 10)
        took = time.monotonic() - killed
        assert took <= LEASE_DURATION + 4, f"the standby took over {took:.1f} s after the kill"
        assert leaders() == [0, 1]  # the standby logs its acquisition too
        assert _holder(cluster) not in ("", first)  # a new holder, whose scheduling keeps going:
        cluster.kubectl("run", "later", "--image=pause")
        assert wait_for(lambda: _node_of(cluster, "later") != "", timeout=20)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=20)
