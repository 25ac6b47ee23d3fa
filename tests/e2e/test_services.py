"""Services end to end, with kubectl only against `kubelite up`: expose a Deployment, curl its ClusterIP,
readiness removing an endpoint and its traffic, headless slices, in-pod KUBERNETES_SERVICE_HOST over TLS.

Pods share the host's network here, so the two backends listen on different ports and the Service's
named targetPort ("http") resolves per pod. Traffic is sent with curl from the host (pods' traffic
takes the same nftables path: same network namespace). Skipped where nft cannot be used."""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.proxy import nft
from tests.conftest import ServerProcess, free_port
from tests.e2e.pods import wait_for

pytestmark = pytest.mark.skipif(not nft.available() or shutil.which("curl") is None,
                                reason="needs nft (and CAP_NET_ADMIN) and curl")
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str, Path]]:
    """`kubelite up` with a service range of its own (other clusters on this host use other ClusterIPs)."""
    base = tmp_path_factory.mktemp("services")
    cidr = f"10.{random.randint(100, 111)}.{random.randint(0, 255)}.0/24"
    port = free_port()
    data = base / "data"
    log = (base / "up.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "up", "--data-dir", str(data), "--port",
                             str(port), "--service-cluster-ip-range", cidr], stdout=log, stderr=subprocess.STDOUT)
    (base / "home").mkdir()
    server = ServerProcess(data, port, proc, base / "home")
    if not wait_for(lambda: (data / "kubeconfig").exists() and
                    "Ready" in server.kubectl("get", "nodes", check=False).stdout, 40):
        proc.kill()
        raise RuntimeError("kubelite up did not become ready")
    yield server, cidr, base
    agent_table = f"{nft.PREFIX}{_agent_pid(proc)}"
    server.stop()
    assert agent_table not in asyncio.run(nft.tables())  # a clean stop removes the proxy's rules


def deployment(name: str, variant: str, port: int, ready_file: Path) -> Obj:
    labels = {"app": "web", "variant": variant}
    serve = (f"mkdir -p {ready_file.parent}/{variant} && echo {variant} > {ready_file.parent}/{variant}/index.html && "
             f"cd {ready_file.parent}/{variant} && exec python3 -m http.server {port} --bind 127.0.0.1")
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                         "name": "web", "image": "python", "command": ["sh", "-c", serve],
                         "ports": [{"name": "http", "containerPort": port}],
                         "readinessProbe": {"exec": {"command": ["test", "-f", str(ready_file)]},
                                            "periodSeconds": 1, "failureThreshold": 1}}]}}}}


def curl(url: str, *extra: str) -> str:
    res = subprocess.run(["curl", "--noproxy", "*", "-s", "-m", "2", *extra, url], capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else f"error {res.returncode}"


def answers(ip: str, n: int = 30) -> set[str]:
    return {curl(f"http://{ip}:80/") for _ in range(n)}


def ready_pods(c: ServerProcess, selector: str) -> int:
    pods = json.loads(c.kubectl("get", "pods", "-l", selector, "-o", "json").stdout)["items"]
    return sum(any(cond["type"] == "Ready" and cond["status"] == "True"
                   for cond in p.get("status", {}).get("conditions") or []) for p in pods)


def slice_endpoints(c: ServerProcess, service: str) -> list[Obj]:
    out = c.kubectl("get", "endpointslices", "-l", f"kubernetes.io/service-name={service}", "-o", "json").stdout
    return [ep for s in json.loads(out)["items"] for ep in s.get("endpoints") or []]


def test_expose_deployment_traffic_reaches_only_ready_pods(cluster: tuple[ServerProcess, str, Path]) -> None:
    c, cidr, base = cluster
    ready_a, ready_b = base / "ready-a", base / "ready-b"
    ready_a.touch()
    ready_b.touch()
    for name, variant, ready in (("web-a", "a", ready_a), ("web-b", "b", ready_b)):
        c.kubectl("apply", "-f", "-", stdin=json.dumps(deployment(name, variant, free_port(), ready)))
    assert wait_for(lambda: ready_pods(c, "app=web") == 2, 60), c.kubectl("get", "pods", "-o", "wide").stdout
    c.kubectl("expose", "deployment", "web-a", "--name=web", "--port=80", "--target-port=http", "--selector=app=web")
    ip = c.kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}").stdout
    assert ip.startswith(cidr.rsplit(".", 1)[0] + ".")
    assert wait_for(lambda: len([e for e in slice_endpoints(c, "web") if e["conditions"]["ready"]]) == 2, 30)

    assert wait_for(lambda: answers(ip) == {"a", "b"}, 20), answers(ip)  # both pods, through the ClusterIP

    ready_b.unlink()  # b's readiness probe starts failing
    began = time.monotonic()
    assert wait_for(lambda: answers(ip, 10) == {"a"}, 20), answers(ip)
    took = time.monotonic() - began
    assert [e["conditions"]["ready"] for e in slice_endpoints(c, "web") if e["targetRef"]["name"].startswith("web-b")
            ] == [False]
    assert answers(ip, 40) == {"a"}  # and it stays so: no request goes to the unready pod
    print(f"readiness failure to traffic stopped: {took:.2f} s (probe period 1 s)")

    ready_b.touch()
    assert wait_for(lambda: answers(ip) == {"a", "b"}, 20)

    table = c.kubectl("get", "svc,endpointslices,endpoints", "-l", "app=web").stdout + \
        c.kubectl("get", "svc,endpoints").stdout
    assert "TYPE" in table and "CLUSTER-IP" in table and "PORT(S)" in table
    assert "service/web" in table and "80/TCP" in table


def test_headless_service_slices(cluster: tuple[ServerProcess, str, Path]) -> None:
    c, _, _ = cluster
    c.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "hl"},
        "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}}))
    row = c.kubectl("get", "svc", "hl", "--no-headers").stdout.split()
    assert row[:3] == ["hl", "ClusterIP", "None"]
    assert wait_for(lambda: len(slice_endpoints(c, "hl")) == 2, 30)
    slices = json.loads(c.kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=hl", "-o",
                                  "json").stdout)["items"]
    assert all(s["metadata"]["labels"]["service.kubernetes.io/headless"] == "" for s in slices)
    assert "ENDPOINTS" in c.kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=hl").stdout


def test_readiness_gate_holds_traffic_until_its_condition_is_true(cluster: tuple[ServerProcess, str, Path]) -> None:
    """L9 to traffic: a pod whose readiness gate is unset is not Ready, so its endpoint is not ready and the
    ClusterIP refuses; setting the gate condition through pods/status makes both flow."""
    c, _, base = cluster
    port = free_port()
    root = base / "gated"
    root.mkdir()
    (root / "index.html").write_text("gated\n")
    c.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gated", "labels": {"app": "gated"}},
        "spec": {"readinessGates": [{"conditionType": "example.com/gate"}], "containers": [{
            "name": "web", "image": "python", "ports": [{"name": "http", "containerPort": port}],
            "command": ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                        str(root)]}]}}))
    c.kubectl("expose", "pod", "gated", "--port=80", "--target-port=http")
    ip = c.kubectl("get", "svc", "gated", "-o", "jsonpath={.spec.clusterIP}").stdout
    assert wait_for(lambda: [e["conditions"] for e in slice_endpoints(c, "gated")] == [
        {"ready": False, "serving": False, "terminating": False}], 30)
    assert answers(ip, 5) == {"error 7"}  # refused: no ready endpoint
    c.kubectl("patch", "pod", "gated", "--subresource=status", "--type=json", "-p", json.dumps([
        {"op": "add", "path": "/status/conditions/-", "value": {"type": "example.com/gate", "status": "True"}}]))
    assert wait_for(lambda: answers(ip, 5) == {"gated"}, 20), answers(ip, 5)


def test_in_pod_client_reaches_the_api_server_through_kubernetes_service(
        cluster: tuple[ServerProcess, str, Path]) -> None:
    """KUBERNETES_SERVICE_HOST/PORT lead to the API server over TLS, the certificate verified for the ClusterIP."""
    c, cidr, base = cluster
    ca = base / "ca.crt"
    ca.write_bytes((c.data_dir / "pki" / "ca.crt").read_bytes())  # the data dir is hidden from containers
    script = (f'echo host=$KUBERNETES_SERVICE_HOST port=$KUBERNETES_SERVICE_PORT; '
              f'curl --noproxy "*" -s --cacert {ca} https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/version;'
              ' sleep 30')
    c.kubectl("run", "incluster", "--image=curl", "--restart=Never", "--command", "--", "sh", "-c", script)
    expected_host = cidr.rsplit(".", 1)[0] + ".1"

    def logged() -> bool:
        out = c.kubectl("logs", "incluster", check=False).stdout
        return "gitVersion" in out
    assert wait_for(logged, 30), c.kubectl("logs", "incluster", check=False).stdout
    out = c.kubectl("logs", "incluster").stdout
    assert f"host={expected_host} port=443" in out


def test_create_service_clusterip(cluster: tuple[ServerProcess, str, Path]) -> None:
    """`kubectl create service` sends protobuf: the server decodes the Service and answers in protobuf."""
    c, _, _ = cluster
    res = c.kubectl("create", "service", "clusterip", "made", "--tcp=8080:80", "-v=6")
    assert re.search(r"POST \S+/services\?fieldManager=kubectl-create\S* 201 Created", res.stderr), res.stderr
    row = c.kubectl("get", "svc", "made", "--no-headers").stdout.split()
    assert row[1] == "ClusterIP" and row[4] == "8080/TCP"


IN_CLUSTER = """
from kubernetes import client, config
config.load_incluster_config()
pods = client.CoreV1Api().list_namespaced_pod(open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read())
print("pods:", sorted(p.metadata.name for p in pods.items), "server:", client.Configuration.get_default_copy().host)
"""


def test_one_pod_with_config_env_account_token_service_links_exec_and_top(
        cluster: tuple[ServerProcess, str, Path]) -> None:
    """Issue 11's parts meeting in one pod: env from a ConfigMap, the projected service-account token, service
    links; `kubectl exec` sees them all, the in-cluster client reaches the API through KUBERNETES_SERVICE_HOST
    with the token, and `kubectl top` measures the pod."""
    c, _, _ = cluster
    # RBAC (the default authorization mode): the default service account may list its namespace's pods
    c.kubectl("create", "rolebinding", "seam-view", "--clusterrole=view", "--serviceaccount=default:default")
    c.kubectl("create", "configmap", "seam-config", "--from-literal=greeting=hello")
    c.kubectl("create", "service", "clusterip", "backend", "--tcp=80:8080")
    c.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "seam"},
        "spec": {"containers": [{
            "name": "main", "image": "python", "command": ["sleep", "300"],
            "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "seam-config", "key": "greeting"}}}],
            "envFrom": [{"configMapRef": {"name": "seam-config"}, "prefix": "CM_"}]}]}}))
    c.kubectl("wait", "--for=condition=Ready", "pod/seam", "--timeout=60s")
    backend = c.kubectl("get", "svc", "backend", "-o", "jsonpath={.spec.clusterIP}").stdout
    kubernetes = c.kubectl("get", "svc", "kubernetes", "-o", "jsonpath={.spec.clusterIP}").stdout
    out = c.kubectl("exec", "seam", "--", "sh", "-c",
                    "echo $GREETING $CM_greeting $BACKEND_SERVICE_HOST:$BACKEND_SERVICE_PORT $KUBERNETES_SERVICE_HOST; "
                    "cd /var/run/secrets/kubernetes.io/serviceaccount && ls && cat namespace").stdout.split()
    assert out == ["hello", "hello", f"{backend}:80", kubernetes, "ca.crt", "namespace", "token", "default"], out
    listed = c.kubectl("exec", "seam", "--", sys.executable, "-c", IN_CLUSTER).stdout
    assert "'seam'" in listed and f"server: https://{kubernetes}:443" in listed, listed
    assert wait_for(lambda: c.kubectl("top", "pod", "seam", "--no-headers", check=False).stdout.startswith("seam"),
                    30), c.kubectl("top", "pod", "seam", check=False)


def _agent_pid(up: subprocess.Popen[bytes]) -> int:
    children = Path(f"/proc/{up.pid}/task/{up.pid}/children").read_text().split()
    for pid in children:
        if b"agent" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return int(pid)
    raise AssertionError("no agent child")


def test_agent_crash_leaves_no_rules_behind(cluster: tuple[ServerProcess, str, Path]) -> None:
    """SIGKILL the agent: `up` restarts it, the new proxy deletes the dead one's table and serves the Service."""
    c, _, _ = cluster
    old = _agent_pid(c.proc)
    old_table = f"{nft.PREFIX}{old}"
    assert old_table in asyncio.run(nft.tables())
    subprocess.run(["kill", "-9", str(old)], check=True)
    assert wait_for(lambda: old_table not in asyncio.run(nft.tables()), 30)
    new = _agent_pid(c.proc)
    assert wait_for(lambda: f"{nft.PREFIX}{new}" in asyncio.run(nft.tables()), 30)
    ip = c.kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}").stdout
    assert wait_for(lambda: "a" in answers(ip, 5), 20)


