"""HA control plane end to end (issue 12 item 5): three `kubelite server` processes on a 3-member etcd, one
`kubelite agent` given all three URLs.

The servers share the first one's CA, service-account key and admin token (copied, as README "Many
machines: several API servers" says), so a credential of one is accepted by all; their schedulers and
controllers are leader-elected (on by default with etcd; short lease timings here). SIGKILL the server
the agent uses → the agent's client fails over: its Lease is renewed and a new pod is scheduled to it and
runs, and its running pod is untouched. SIGKILL the server whose scheduler leads → a standby takes the
Lease and binds the next pod within the lease duration (plus the start of its scheduler).
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess, start_server
from tests.e2e.pods import apply_pod, container_status, pod_phase, sh, wait_for
from tests.etcd_cluster import EtcdCluster

pytestmark = pytest.mark.e2e

NODE = "ha-node"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 4.0, 3.0, 0.5
SELF_FENCE_AFTER = 8.0  # the agent renews its Lease every 2 s, and kills its containers after 8 s without one
SCHEDULER_START = 4.0  # a new leader's scheduler lists and watches before it binds (generous: CI load)
SHARED = ("pki/ca.crt", "pki/ca.key", "pki/sa.key", "admin.token")  # what the README says to copy
ACQUIRED = "successfully acquired lease kube-system/kube-scheduler"


@dataclass
class Cluster:
    base: Path
    etcd: EtcdCluster
    servers: list[ServerProcess]
    agent_urls: tuple[str, ...] = ()  # in the agent's order: its first is not the leader, so the kills are apart

    def log(self, i: int) -> str:
        return (self.servers[i].data_dir.parent / f"server-{self.servers[i].port}.log").read_text(errors="replace")

    def alive(self) -> list[int]:
        return [i for i, s in enumerate(self.servers) if s.proc.poll() is None]

    def scheduler_leader(self) -> int:
        """The server whose scheduler holds the Lease: the one that logged acquiring it as its holder."""
        holder = self.get(self.alive()[0], "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"
                          "kube-scheduler")["spec"]["holderIdentity"]
        (leader,) = [i for i in range(len(self.servers)) if f"{ACQUIRED} as {holder}" in self.log(i)]
        return leader

    def get(self, i: int, path: str) -> Any:
        """GET through server i with the shared admin token, its certificate verified by the shared CA."""
        server = self.servers[i]
        ctx = ssl.create_default_context(cafile=str(server.data_dir / "pki" / "ca.crt"))
        token = (server.data_dir / "admin.token").read_text().strip()
        req = urllib.request.Request(f"https://127.0.0.1:{server.port}{path}",
                                     headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
            return json.load(resp)

    def kill(self, i: int) -> float:
        self.servers[i].proc.kill()
        self.servers[i].proc.wait()
        return time.monotonic()


def server_args(etcd: EtcdCluster) -> list[str]:
    return ["--store", etcd.url, "--leader-elect-lease-duration", str(LEASE_DURATION),
            "--leader-elect-renew-deadline", str(RENEW_DEADLINE), "--leader-elect-retry-period", str(RETRY_PERIOD)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("ha")
    (base / "etcd").mkdir()
    etcd = EtcdCluster(base / "etcd", 3)
    servers: list[ServerProcess] = []
    agent: subprocess.Popen[bytes] | None = None
    try:
        etcd.start()
        servers.append(start_server(base / "s0" / "data", base / "home", extra=server_args(etcd)))
        for i in (1, 2):  # the second and third servers get the first one's CA, SA key and admin token
            for rel in SHARED:
                (base / f"s{i}" / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(servers[0].data_dir / rel, base / f"s{i}" / "data" / rel)
        with ThreadPoolExecutor() as pool:  # started together, as after a power cut
            servers += pool.map(lambda i: start_server(base / f"s{i}" / "data", base / "home",
                                                       extra=server_args(etcd)), (1, 2))
        c = Cluster(base, etcd, servers)
        assert wait_for(lambda: any(ACQUIRED in c.log(i) for i in range(3)), timeout=30)
        leader = c.scheduler_leader()
        order = [i for i in range(3) if i != leader] + [leader]
        c.agent_urls = tuple(f"https://127.0.0.1:{servers[i].port}" for i in order)
        with (base / "agent.log").open("wb") as log:
            agent = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig",
                                      str(servers[0].kubeconfig), "--server", ",".join(c.agent_urls),
                                      "--node-name", NODE, "--data-dir", str(base / "agent"),
                                      "--proxy-mode", "none", "--self-fence-after", str(SELF_FENCE_AFTER)],
                                     stdout=log, stderr=subprocess.STDOUT)
        assert wait_for(lambda: node_ready(c, 0) == "True", timeout=60), (base / "agent.log").read_text()
        yield c
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(timeout=30)
        for s in servers:
            s.stop()
        etcd.stop()


def node_ready(c: Cluster, via: int) -> str:
    try:
        node = c.get(via, f"/api/v1/nodes/{NODE}")
    except OSError:  # urllib's HTTPError (404 before the agent registers) included
        return ""
    return next((x["status"] for x in node["status"].get("conditions", []) if x["type"] == "Ready"), "")


def lease_renewed_after(c: Cluster, via: int, wall: float) -> bool:
    lease = c.get(via, f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}")
    return datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00")).timestamp() > wall


def bound_node(c: Cluster, via: int, pod: str) -> str:
    try:
        return str(c.get(via, f"/api/v1/namespaces/default/pods/{pod}")["spec"].get("nodeName", ""))
    except OSError:
        return ""


def test_a_credential_of_one_server_is_accepted_by_the_others(cluster: Cluster) -> None:
    """The admin token and a service-account token minted by server 0 work on servers 1 and 2, whose serving
    certificates verify against server 0's CA (kubectl checks them)."""
    first = cluster.servers[0]
    assert wait_for(lambda: first.kubectl("get", "serviceaccount", "default", check=False).returncode == 0)
    token = first.kubectl("create", "token", "default").stdout.strip()
    for other in cluster.servers[1:]:
        url = f"https://127.0.0.1:{other.port}"
        assert first.kubectl("--server", url, "get", "nodes").returncode == 0
        who = json.loads(first.kubectl("--server", url, "--token", token, "auth", "whoami", "-o", "json").stdout)
        assert who["status"]["userInfo"]["username"] == "system:serviceaccount:default:default"


def test_one_scheduler_and_one_controller_manager_lead(cluster: Cluster) -> None:
    leases = {n: cluster.get(0, f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{n}")["spec"]
              for n in ("kube-scheduler", "kube-controller-manager")}
    assert all(spec["holderIdentity"] for spec in leases.values())
    assert [ACQUIRED in cluster.log(i) for i in range(3)].count(True) == 1
    controllers = "successfully acquired lease kube-system/kube-controller-manager"
    assert [controllers in cluster.log(i) for i in range(3)].count(True) == 1


def test_the_kubernetes_service_lists_every_server(cluster: Cluster) -> None:
    """In-pod clients reach any live server: each server's identity Lease puts it in the endpoints
    (kubelite/apiserver/endpoint_reconciler.py), whichever server is asked."""
    ports = {s.port for s in cluster.servers}

    def listed(via: int) -> set[int]:
        subsets = cluster.get(via, "/api/v1/namespaces/default/endpoints/kubernetes").get("subsets") or []
        return {p["port"] for subset in subsets for p in subset["ports"]}

    assert wait_for(lambda: all(listed(i) == ports for i in range(3)), timeout=25), [listed(i) for i in range(3)]


def test_sigkill_of_the_agents_server_fails_the_agent_over(cluster: Cluster) -> None:
    used = next(i for i, s in enumerate(cluster.servers) if cluster.agent_urls[0].endswith(f":{s.port}"))
    assert used != cluster.scheduler_leader()
    via = next(i for i in cluster.alive() if i != used)
    via_server = cluster.servers[via]
    apply_pod(via_server, "steady", [sh("main", "sleep 3600")])
    assert wait_for(lambda: pod_phase(via_server, "steady") == "Running", timeout=60)

    wall = time.time()
    killed = cluster.kill(used)
    assert wait_for(lambda: lease_renewed_after(cluster, via, wall), timeout=SELF_FENCE_AFTER)
    renewed = time.monotonic() - killed
    apply_pod(via_server, "after-failover", [sh("main", "sleep 3600")])
    assert wait_for(lambda: pod_phase(via_server, "after-failover") == "Running", timeout=30), \
        (cluster.base / "agent.log").read_text()[-3000:]
    running = time.monotonic() - killed
    print(f"\nserver SIGKILL -> agent's Lease renewed via another server: {renewed:.2f} s; "
          f"-> a new pod Running on the agent: {running:.2f} s")
    assert bound_node(cluster, via, "after-failover") == NODE
    assert "failing over to" in (cluster.base / "agent.log").read_text()
    # within the self-fence deadline: the running pod was never touched, the Node is still Ready
    assert container_status(via_server, "steady", "main")["restartCount"] == 0
    assert pod_phase(via_server, "steady") == "Running"
    assert node_ready(cluster, via) == "True"


def test_sigkill_of_the_scheduler_leader_hands_scheduling_over_within_the_lease(cluster: Cluster) -> None:
    leader = cluster.scheduler_leader()
    via = next(i for i in cluster.alive() if i != leader)
    killed = cluster.kill(leader)
    apply_pod(cluster.servers[via], "after-leader", [sh("main", "sleep 3600")])
    assert wait_for(lambda: bound_node(cluster, via, "after-leader") == NODE, timeout=LEASE_DURATION + 20)
    took = time.monotonic() - killed
    print(f"\nscheduler leader SIGKILL -> next pod bound: {took:.2f} s (lease duration {LEASE_DURATION} s)")
    assert took <= LEASE_DURATION + JITTERED_RETRY + SCHEDULER_START, f"scheduling resumed after {took:.1f} s"
    new_leader = cluster.scheduler_leader()
    assert new_leader != leader and ACQUIRED in cluster.log(new_leader)
    assert wait_for(lambda: pod_phase(cluster.servers[via], "after-leader") == "Running", timeout=30)


JITTERED_RETRY = RETRY_PERIOD * 1.2  # a standby's acquire loop waits up to this between tries
