"""An API server outage never touches a running container (issue 9 §2), with real processes.

`kubelite server` (no scheduler: pods name their node) and a separate `kubelite agent`, as a
user runs them. The server is SIGKILLed and restarted on the same data dir, or stopped
(SIGSTOP) for 20 s and continued, while pods run. Afterwards: the same host processes, restart
counts unchanged, the node's Lease renewed again, a pod created afterwards runs, and a pod that
finished during the outage shows its terminal status (the status manager retried the write).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import ServerProcess, start_server
from tests.e2e.pods import (
    AgentProcess,
    apply_pod,
    container_status,
    group_alive,
    no_leftovers,
    pod_phase,
    sh,
    short_lease_config,
    wait_for,
)

pytestmark = pytest.mark.e2e
NODE = "outage-node"
SERVER_ARGS = ["--disable", "scheduler"]
LEASE_SECONDS = 8  # a renewal every 2 s: an outage of a few seconds already spans several


class Cluster:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.server = start_server(base / "server", base / "home", extra=SERVER_ARGS)
        config = short_lease_config(base / "node.yaml", LEASE_SECONDS)
        self.agent = AgentProcess(self.server, base / "agent", NODE, ["--node-config", str(config)])

    def restart_server(self) -> None:
        self.server = start_server(self.server.data_dir, self.server.home, port=self.server.port, extra=SERVER_ARGS)

    def renew_time(self) -> str:
        res = self.server.kubectl("get", "lease", "-n", "kube-node-lease", NODE, "-o", "json", check=False)
        return str(json.loads(res.stdout)["spec"]["renewTime"]) if res.returncode == 0 else ""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("outage")
    with no_leftovers(base):
        c = Cluster(base)
        try:
            c.agent.start()
            assert wait_for(lambda: NODE in c.server.kubectl("get", "nodes", check=False).stdout)
            yield c
        finally:
            c.agent.stop()
            c.server.stop()


def shim_pid(server: ServerProcess, pod: str) -> int:
    return int(container_status(server, pod, "main")["containerID"].removeprefix("kubelite://"))


def kill_and_restart(c: Cluster) -> None:
    c.server.proc.kill()
    c.server.proc.wait()
    time.sleep(6)  # past 3 Lease renewals (every 2 s) and the finisher's exit (4 s) while the server is gone
    c.restart_server()


def stop_for_20_seconds(c: Cluster) -> None:
    os.kill(c.server.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(20)
    finally:
        os.kill(c.server.proc.pid, signal.SIGCONT)


@pytest.mark.parametrize("outage", [pytest.param(kill_and_restart, id="server SIGKILLed and restarted"),
                                    pytest.param(stop_for_20_seconds, id="server stalled 20 s (SIGSTOP)")])
def test_api_server_outage_never_touches_running_containers(cluster: Cluster, outage: Callable[[Cluster], None]
                                                            ) -> None:
    c, suffix = cluster, outage.__name__.split("_")[0]
    steady, finisher, after = f"steady-{suffix}", f"finisher-{suffix}", f"after-{suffix}"
    apply_pod(c.server, steady, [sh("main", "while true; do sleep 0.1; done")], nodeName=NODE)
    # finishes while the server is away: its Succeeded status must reach the API afterwards
    apply_pod(c.server, finisher, [sh("main", "sleep 4; exit 0")], nodeName=NODE, restartPolicy="Never")
    assert wait_for(lambda: pod_phase(c.server, steady) == "Running" and pod_phase(c.server, finisher) == "Running")
    pid = shim_pid(c.server, steady)
    renewed = c.renew_time()

    outage(c)

    assert group_alive(pid), "a container was killed during the outage"
    assert c.agent.proc is not None and c.agent.proc.poll() is None, "the agent exited"
    assert wait_for(lambda: c.renew_time() not in ("", renewed), 30), "the Lease is not renewed any more"
    assert wait_for(lambda: pod_phase(c.server, finisher) == "Succeeded", 30), "the status did not converge"
    st = container_status(c.server, steady, "main")
    assert shim_pid(c.server, steady) == pid and st["restartCount"] == 0 and "running" in st["state"]
    apply_pod(c.server, after, [sh("main", "sleep 30")], nodeName=NODE)
    assert wait_for(lambda: pod_phase(c.server, after) == "Running", 30), "a new pod does not start"
    assert group_alive(pid)
    for name in (steady, finisher, after):
        c.server.kubectl("delete", "pod", name, "--grace-period=1")
    assert not group_alive(pid)
