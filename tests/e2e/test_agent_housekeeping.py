"""Housekeeping and logs with a real `kubelite server` and a separate `kubelite agent` (issue 9 §1).

A removed pod's directory under the agent's data dir (logs, checkpoint, volumes) is deleted once
the pod object is gone (kubelet's cleanupOrphanedPodDirs); the previous log of a container a signal
ended holds only what the container wrote (no `Terminated` line from the runtime's shell).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import ServerProcess
from tests.e2e.pods import AgentProcess, apply_pod, container_status, get_pod, pod_phase, server_and_agent, sh, wait_for

pytestmark = pytest.mark.e2e
NODE = "housekeeping-node"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, AgentProcess]]:
    with server_and_agent(tmp_path_factory.mktemp("housekeeping"), NODE) as cluster:
        yield cluster


@pytest.mark.parametrize("policy,script", [
    pytest.param("Always", "echo hi; sleep 30", id="running pod deleted"),
    pytest.param("Never", "echo done", id="finished pod deleted"),
])
def test_cleanup_orphaned_pod_dirs(cluster: tuple[ServerProcess, AgentProcess], policy: str, script: str) -> None:
    server, agent = cluster
    name = f"dir-{policy.lower()}"
    apply_pod(server, name, [sh("main", script)], nodeName=NODE, restartPolicy=policy,
              terminationGracePeriodSeconds=1)
    assert wait_for(lambda: pod_phase(server, name) in ("Running", "Succeeded"))
    uid = get_pod(server, name)["metadata"]["uid"]
    assert wait_for(lambda: bool(list(agent.data_dir.glob(f"pods/*_{uid}/main/0.log"))))
    server.kubectl("delete", "pod", name)
    assert wait_for(lambda: not list(agent.data_dir.glob(f"pods/*_{uid}")), 15)


def test_previous_log_of_a_signalled_container_has_only_its_output(cluster: tuple[ServerProcess, AgentProcess]
                                                                   ) -> None:
    """kubectl logs -p after a liveness kill (SIGTERM ends the container): only what the container wrote."""
    server, _ = cluster
    liveness = {"exec": {"command": ["false"]}, "initialDelaySeconds": 2, "periodSeconds": 1, "failureThreshold": 1,
                "terminationGracePeriodSeconds": 1}
    apply_pod(server, "signalled", [sh("main", "echo started; sleep 30", livenessProbe=liveness)], nodeName=NODE)
    assert wait_for(lambda: container_status(server, "signalled", "main").get("restartCount", 0) >= 1, 30)
    assert server.kubectl("logs", "signalled", "-p").stdout == "started\n"
    server.kubectl("delete", "pod", "signalled", "--grace-period=1")
