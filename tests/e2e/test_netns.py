"""Two node agents on one machine, each in its own network namespace (kubelite/testing/netns.py): each Node
has its own address, its own host ports, and one can be cut off the network alone.

Real processes: `kubelite server` listening on every address and advertising the lab's host address, and
two `kubelite agent`s started inside their namespaces with `--address` their namespace's address.
"""

from __future__ import annotations

import functools
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubelite.testing import netns
from tests.conftest import ServerProcess, start_server
from tests.e2e import netns_nodes
from tests.e2e.partition import ready
from tests.e2e.pods import apply_pod, get_pod, pod_phase, wait_for

pytestmark = pytest.mark.e2e
NODES = ("node-a", "node-b")
LEASE = 8  # the agents' nodeLeaseDurationSeconds: renewed every quarter of it (kubelite/agent/node.py)
RENEW = LEASE / 4
GRACE = 8.0  # --node-monitor-grace-period: several renewals, so a loaded machine does not flap a node
NODE_CONFIG = f"""\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
nodeLeaseDurationSeconds: {LEASE}
"""
HOST_PORT = 8080  # free in every node's fresh namespace, whatever the host itself listens on
SERVE_NODE_NAME = """\
import os, socket
s = socket.create_server(("0.0.0.0", int(os.environ["PORT"])))
while True:
    c, _ = s.accept()
    c.sendall(os.environ["NODE"].encode())
    c.close()
"""


@dataclass
class Cluster:
    server: ServerProcess
    lab: netns.Lab


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("netns")
    with netns_nodes.lab() as lab:
        server = start_server(base / "data", base / "home", extra=[
            *netns_nodes.server_flags(lab), "--node-monitor-grace-period", str(GRACE)])
        agents: list[subprocess.Popen[bytes]] = []
        (base / "node.yaml").write_text(NODE_CONFIG)
        try:
            for name in NODES:
                # on SIGTERM the agent stops its pods: none is left running in the namespace
                agents.append(netns_nodes.start_agent(lab.add_node(name), server, base, "--shutdown-grace-period", "2",
                                                      "--node-config", str(base / "node.yaml")))
            up = wait_for(lambda: all(ready(server, n) == "True" for n in NODES), timeout=60)
            assert up, "\n".join((base / f"{n}.log").read_text(errors="replace")[-2000:] for n in NODES)
            yield Cluster(server, lab)
        finally:
            netns_nodes.stop(agents)
            server.stop()


def test_each_node_has_its_namespace_address(cluster: Cluster) -> None:
    for name, node in cluster.lab.nodes.items():
        assert netns_nodes.internal_ip(cluster.server, name) == node.address
    # the API server reaches each agent at that address: logs of a pod on each node
    for name in NODES:
        apply_pod(cluster.server, f"hello-{name}", [{"name": "c", "image": "busybox", "command": [
            "sh", "-c", "echo hello; sleep 60"]}],
                  nodeName=name, terminationGracePeriodSeconds=1)
    for name in NODES:
        assert wait_for(functools.partial(logs_say, cluster.server, f"hello-{name}", "hello"), timeout=30), \
            get_pod(cluster.server, f"hello-{name}")
        assert get_pod(cluster.server, f"hello-{name}")["status"]["hostIP"] == cluster.lab.nodes[name].address


def apply_web(server: ServerProcess, name: str, node: str) -> None:
    """A pod on `node` serving its node's name on HOST_PORT (a hostPort: pods share their node's network)."""
    container = {"name": "web", "image": "python", "command": ["python3", "-c", SERVE_NODE_NAME],
                 "ports": [{"containerPort": HOST_PORT, "hostPort": HOST_PORT}],
                 "env": [{"name": "PORT", "value": str(HOST_PORT)},
                         {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}
    apply_pod(server, name, [container], nodeSelector={"kubernetes.io/hostname": node},
              terminationGracePeriodSeconds=1)


def answers(address: str, expected: str) -> bool:
    """ADDRESS:HOST_PORT answers `expected`."""
    try:
        with socket.create_connection((address, HOST_PORT), timeout=2) as conn:
            return conn.recv(100).decode() == expected
    except OSError:
        return False


def logs_say(server: ServerProcess, pod: str, expected: str) -> bool:
    return server.kubectl("logs", pod, check=False).stdout.strip() == expected


def test_each_node_has_its_own_host_ports(cluster: Cluster) -> None:
    server, lab = cluster.server, cluster.lab
    for name in NODES:
        apply_web(server, f"web-{name}", name)
    for name, node in lab.nodes.items():
        assert wait_for(functools.partial(answers, node.address, name), timeout=30), get_pod(server, f"web-{name}")
        assert pod_phase(server, f"web-{name}") == "Running"
    # the port is taken per node: a third pod asking for it on node-a is not scheduled (NodePorts)
    apply_web(server, "web-node-a-again", "node-a")

    def unschedulable() -> bool:
        conditions = get_pod(server, "web-node-a-again").get("status", {}).get("conditions") or []
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)

    assert wait_for(unschedulable, timeout=20), get_pod(server, "web-node-a-again")
    events = server.kubectl("get", "events", "--field-selector", "involvedObject.name=web-node-a-again",
                            "-o", "json").stdout
    assert "didn't have free ports for the requested pod ports" in events


def test_partitioned_node_goes_unknown_and_recovers(cluster: Cluster) -> None:
    server, node = cluster.server, cluster.lab.nodes["node-b"]
    cut = time.monotonic()
    node.partition()
    try:
        assert wait_for(lambda: ready(server, "node-b") == "Unknown", timeout=GRACE + 15), \
            json.loads(server.kubectl("get", "node", "node-b", "-o", "json").stdout)["status"]
        lost = time.monotonic() - cut
        assert ready(server, "node-a") == "True"  # the other namespace's node is not affected
    finally:
        node.heal()
    healed = time.monotonic()
    assert wait_for(lambda: ready(server, "node-b") == "True", timeout=30)
    print(f"node-b Unknown {lost:.1f} s after the cut; Ready {time.monotonic() - healed:.1f} s after the heal")
    # Unknown GRACE after the last renewal, which was at most RENEW before the cut (the monitor wakes at the grace)
    assert GRACE - RENEW - 1 <= lost <= GRACE + 5


def test_advertise_address_must_be_an_ip(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "server", "--advertise-address", "node.example",
                          "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    assert "argument --advertise-address: invalid ip_address value: 'node.example'" in res.stderr
