"""Joining nodes end to end: `kubelite server --authorization-mode Node,RBAC`, `kubelite token create
--print-join-command`, then two `kubelite join` processes (same machine, their own data dirs and node names)
whose agents run under their node certificates. node-a joins from the host (127.0.0.1); node-b, where the
machine allows network namespaces (root), joins from its own namespace with its own address, as another
machine would (kubelite/testing/netns.py; the server advertises the lab's host address), else from the host
too. A pod scheduled to node-b runs there; node-a's identity is refused (403, upstream's messages) what the
Node authorizer and NodeRestriction refuse. A join restarted over an expired certificate bootstraps again. A
join under the name of a Ready node, or under an invalid name, is refused before any CSR; one with a token the
cluster does not know says it is waiting."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kubelite.agent.certificates import kubeconfig_certificate
from kubelite.api.errors import ApiError
from kubelite.apiserver import pki
from kubelite.cli.join import JoinOptions, bootstrap
from kubelite.client.http import ApiClient
from kubelite.clock import RealClock
from kubelite.testing import netns
from tests.conftest import ServerProcess, free_port, start_server
from tests.e2e import netns_nodes
from tests.e2e.pods import SHUTDOWN_GRACE, apply_pod, no_leftovers, pod_phase, sh, wait_for
from tests.e2e.test_certificate_rotation import short_lived_node_certificate

pytestmark = pytest.mark.e2e
NODES = ("node-a", "node-b")
# `kubelite join` takes no --shutdown-grace-period: the node config says it (see tests/e2e/pods.py)
STOP_PODS_ON_SHUTDOWN = f"""\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
shutdownGracePeriod: {SHUTDOWN_GRACE}s
"""


@dataclass
class Cluster:
    server: ServerProcess
    node_dirs: dict[str, Path]
    join_command: list[str]
    lab: netns.Lab | None  # node-b's namespace, where namespaces can be made

    def as_node(self, node: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.server.kubectl("--kubeconfig", str(self.node_dirs[node] / "kubeconfig"), *args, check=False)


def kubelite(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kubelite.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


def csr_count(server: ServerProcess) -> int:
    return len(json.loads(server.kubectl("get", "csr", "-o", "json").stdout)["items"])


def ready_nodes(server: ServerProcess) -> set[str]:
    lines = server.kubectl("get", "nodes", "--no-headers", check=False).stdout.splitlines()
    return {line.split()[0] for line in lines if line.split()[1:2] == ["Ready"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("join")
    (base / "node.yaml").write_text(STOP_PODS_ON_SHUTDOWN)
    with no_leftovers(base), contextlib.ExitStack() as stack:
        lab = stack.enter_context(netns.Lab()) if netns.unavailable() is None else None
        server = start_server(base / "data", base / "home", extra=[
            "--authorization-mode", "Node,RBAC", *(netns_nodes.server_flags(lab) if lab else [])])
        agents: list[subprocess.Popen[bytes]] = []
        stack.callback(server.stop)
        stack.callback(netns_nodes.stop, agents)
        dirs: dict[str, Path] = {}
        created = kubelite("token", "create", "--print-join-command", "--kubeconfig", str(server.kubeconfig))
        assert created.returncode == 0, created.stderr
        command = created.stdout.split()
        assert command[:2] == ["kubelite", "join"] and "--ca-cert-hash" in command
        for node in NODES:
            dirs[node] = base / node
            argv = [sys.executable, "-m", "kubelite.cli.main", *command[1:], "--node-name", node, "--data-dir",
                    str(dirs[node]), "--proxy-mode", "none", "--node-config", str(base / "node.yaml"),
                    "--port", "0"]  # several nodes on this machine: not all on kubelet's 10250
            if node == "node-a":  # an HA list whose first server is down: discovery, CSR and agent fail over
                url = argv.index("--server") + 1
                argv[url] = f"https://127.0.0.1:{free_port()},{argv[url]}"
            with (base / f"{node}.log").open("wb") as log:
                if node == "node-b" and lab is not None:
                    in_lab = lab.add_node(node)
                    agents.append(in_lab.popen([*argv, "--address", in_lab.address], stdout=log,
                                               stderr=subprocess.STDOUT))
                else:
                    agents.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        ready = wait_for(lambda: ready_nodes(server) >= set(NODES), timeout=60)
        logs = "\n".join((base / f"{n}.log").read_text(errors="replace")[-3000:] for n in NODES)
        assert ready, f"the joined nodes never became Ready:\n{logs}"
        yield Cluster(server, dirs, command, lab)


def test_join_issued_node_certificates(cluster: Cluster) -> None:
    csrs = json.loads(cluster.server.kubectl("get", "csr", "-o", "json").stdout)["items"]
    assert len(csrs) == len(NODES)
    for csr in csrs:
        assert csr["spec"]["username"].startswith("system:bootstrap:")
        assert csr["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
        assert [c["reason"] for c in csr["status"]["conditions"]] == ["AutoApproved"]
        assert csr["status"]["certificate"]
    who = cluster.as_node("node-a", "auth", "whoami", "-o", "json")
    info = json.loads(who.stdout)["status"]["userInfo"]
    assert info["username"] == "system:node:node-a" and "system:nodes" in info["groups"]


def test_join_with_several_servers_fails_over_past_a_dead_one(cluster: Cluster) -> None:
    """node-a joined with `--server DEAD,LIVE`: it is Ready, so discovery, its CSR and its agent went past the
    dead server; its kubeconfig names the live one (kubectl does not fail over)."""
    config = yaml.safe_load((cluster.node_dirs["node-a"] / "kubeconfig").read_text())
    live = cluster.join_command[cluster.join_command.index("--server") + 1]
    assert config["clusters"][0]["cluster"]["server"] == live
    assert "node-a" in ready_nodes(cluster.server)


def test_pod_runs_on_the_joined_node(cluster: Cluster) -> None:
    server = cluster.server
    server.kubectl("create", "secret", "generic", "b-secret", "--from-literal=k=v")
    container = sh("c", "cat /s/k; sleep 60", volumeMounts=[{"name": "s", "mountPath": "/s"}])
    apply_pod(server, "on-b", [container], nodeSelector={"kubernetes.io/hostname": "node-b"},
              volumes=[{"name": "s", "secret": {"secretName": "b-secret"}}])
    assert wait_for(lambda: pod_phase(server, "on-b") == "Running", timeout=60), \
        server.kubectl("describe", "pod", "on-b").stdout
    pod = json.loads(server.kubectl("get", "pod", "on-b", "-o", "json").stdout)
    assert pod["spec"]["nodeName"] == "node-b"
    assert wait_for(lambda: server.kubectl("logs", "on-b", check=False).stdout.strip() == "v")
    # node-b may read its pod's secret; node-a may not (no relationship in the graph)
    assert cluster.as_node("node-b", "get", "secret", "b-secret").returncode == 0


BIND_HERE = "import socket, sys; socket.socket().bind((sys.argv[1], 0)); print('bound', sys.argv[1])"


def test_joined_node_has_its_own_network_namespace(cluster: Cluster) -> None:
    if cluster.lab is None:
        pytest.skip(f"nodes in network namespaces: {netns.unavailable()}")
    if pod_phase(cluster.server, "on-b") != "Running":
        pytest.skip("needs the pod of test_pod_runs_on_the_joined_node")
    node_b = cluster.lab.nodes["node-b"]
    server = cluster.server
    # the join command names the advertised address, which the namespace reaches (and the certificate names)
    assert cluster.join_command[cluster.join_command.index("--server") + 1] == \
        f"https://{cluster.lab.host_address}:{server.port}"
    assert netns_nodes.internal_ip(server, "node-b") == node_b.address
    assert netns_nodes.internal_ip(server, "node-a") == "127.0.0.1"
    pod = json.loads(server.kubectl("get", "pod", "on-b", "-o", "json").stdout)
    assert pod["status"]["hostIP"] == node_b.address
    # exec goes API server -> node-b's agent at its address; the container can bind that address: it is in
    # node-b's namespace (the host has no such address)
    out = server.kubectl("exec", "on-b", "--", "python3", "-c", BIND_HERE, node_b.address, check=False)
    assert out.stdout.strip() == f"bound {node_b.address}", out.stderr


REFUSED = [
    ("read a secret of another node's pod", ("get", "secret", "b-secret"),
     'secrets "b-secret" is forbidden: User "system:node:node-a" cannot get resource "secrets" in API group "" in '
     "the namespace \"default\": no relationship found between node 'node-a' and this object"),
    ("patch another node's pod", ("patch", "pod", "on-b", "--subresource=status", "--type=merge", "-p",
                                  '{"status":{"message":"x"}}'),
     # kubectl reads pods/status first, which NodeRules do not grant (upstream neither)
     'pods "on-b" is forbidden: User "system:node:node-a" cannot get resource "pods/status" in API group ""'),
    ("delete another node's pod", ("delete", "pod", "on-b", "--wait=false"),
     'pods "on-b" is forbidden: node "node-a" can only delete pods with spec.nodeName set to itself'),
    ("patch another node", ("label", "node", "node-b", "x=y"),
     'nodes "node-b" is forbidden: node "node-a" is not allowed to modify node "node-b"'),
    ("label itself with node-restriction.kubernetes.io/", ("label", "node", "node-a",
                                                          "node-restriction.kubernetes.io/x=y"),
     'nodes "node-a" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/x'),
    ("list all secrets", ("get", "secrets", "-A"),
     'secrets is forbidden: User "system:node:node-a" cannot list resource "secrets" in API group "" at the '
     "cluster scope"),
]


@pytest.mark.parametrize("name,args,message", REFUSED, ids=[c[0] for c in REFUSED])
def test_node_identity_is_restricted(cluster: Cluster, name: str, args: tuple[str, ...], message: str) -> None:
    if pod_phase(cluster.server, "on-b") == "":
        pytest.skip("needs the pod of test_pod_runs_on_the_joined_node")
    out = cluster.as_node("node-a", *args)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr


def test_node_may_label_itself(cluster: Cluster) -> None:
    out = cluster.as_node("node-a", "label", "node", "node-a", "example.com/role=worker")
    assert out.returncode == 0, out.stderr


REFUSED_JOINS = [
    # kubeadm's runKubeletStartJoinPhase, with the bootstrap token's kubeadm:get-nodes: node-a is Ready, so a second
    # machine joining as node-a would run node-a's pods a second time
    ("a name whose node is ready", "node-a",
     'a Node with name "node-a" and status "Ready" already exists in the cluster. You must delete the existing Node '
     "or change the name of this new joining Node"),
    # ValidateNodeRegistrationOptions: else the CSR is approved and the agent's registration gets 422 for ever
    ("a name that is not a DNS-1123 subdomain", "Node_4",
     'nodeRegistration.name: Invalid value: "Node_4": a lowercase RFC 1123 subdomain must consist of'),
]


@pytest.mark.parametrize("case,name,message", REFUSED_JOINS, ids=[c[0] for c in REFUSED_JOINS])
def test_join_refused_before_any_certificate_request(cluster: Cluster, tmp_path: Path, case: str, name: str,
                                                     message: str) -> None:
    """Refused with upstream's message and status 1, having asked for no certificate and written nothing. (A
    `join` that is let through would become an agent and not exit: the short timeout fails the test then.)"""
    before = csr_count(cluster.server)
    out = kubelite(*cluster.join_command[1:], "--node-name", name, "--data-dir", str(tmp_path / "node"),
                   "--proxy-mode", "none", timeout=30)
    assert out.returncode == 1, out.stderr
    assert message in out.stderr, out.stderr
    assert csr_count(cluster.server) == before and not (tmp_path / "node" / "kubeconfig").exists()
    assert "node-a" in ready_nodes(cluster.server)


def test_join_with_an_unknown_token_says_it_waits(cluster: Cluster, tmp_path: Path) -> None:
    """kubeadm's getClusterInfo: while cluster-info carries no signature for the token (one this cluster does not
    know, or one the bootstrapsigner has not signed yet), each retry is said on stderr."""
    flags = dict(zip(cluster.join_command[2::2], cluster.join_command[3::2], strict=True))
    flags["--token"] = "zzzzzz.0123456789abcdef"
    stderr = tmp_path / "stderr"
    with stderr.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "join",
                                 *(x for kv in flags.items() for x in kv), "--node-name", "node-z", "--data-dir",
                                 str(tmp_path / "node")], stdout=subprocess.DEVNULL, stderr=err)
    try:
        said = wait_for(lambda: "does not yet contain a JWS signature for token ID \"zzzzzz\", will try again"
                        in stderr.read_text(errors="replace"), timeout=20)
        assert said, stderr.read_text(errors="replace")
        assert proc.poll() is None  # still waiting (5 minutes, as kubeadm's discovery timeout)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_join_restarted_over_an_expired_certificate_bootstraps_again(cluster: Cluster, tmp_path: Path) -> None:
    """LoadClientCert / isClientConfigStillValid: a `kubelite join` restarted over a kubeconfig whose certificate
    expired (the server answers it 401) requests a new one with the bootstrap token; one still valid is reused
    as it is, without a request."""
    flags = dict(zip(cluster.join_command[2::2], cluster.join_command[3::2], strict=True))
    opts = JoinOptions((flags["--server"],), flags["--token"], (flags["--ca-cert-hash"],), "node-c", tmp_path)
    kubeconfig = tmp_path / "kubeconfig"
    expired = short_lived_node_certificate(cluster.server.data_dir / "pki", "node-c", -10)
    pki.write_kubeconfig(kubeconfig, flags["--server"], None, cluster.server.data_dir / "pki" / "ca.crt", expired)

    async def node_get() -> int:  # the node's own Node object: 404 (it has none) once it is authenticated
        client = ApiClient.from_kubeconfig(kubeconfig)
        try:
            await client.get("/api/v1/nodes/node-c")
            return 200
        except ApiError as exc:
            return exc.code
        finally:
            await client.close()

    assert asyncio.run(node_get()) == 401
    before = csr_count(cluster.server)
    assert asyncio.run(bootstrap(opts, RealClock())) == kubeconfig
    renewed = kubeconfig_certificate(kubeconfig)
    assert renewed is not None and renewed[0] != expired[0] and csr_count(cluster.server) == before + 1
    assert asyncio.run(node_get()) == 404
    assert asyncio.run(bootstrap(opts, RealClock())) == kubeconfig  # valid now: reused, nothing requested
    assert kubeconfig_certificate(kubeconfig) == renewed and csr_count(cluster.server) == before + 1
