"""A partitionable two-node cluster for the fencing e2e tests and benchmarks/fencing.py (real processes).

`partitioned_cluster` starts a server (optionally with `--fencing-config`), node-a behind a
`CuttableProxy`, a StatefulSet `web` with one ReadWriteOnce claim on the shared-path provisioner
(its pod web-0 lands on node-a: node-b starts only afterwards), then node-b. Each container
instance appends `start <pod uid> <unix time>` to the shared volume's `log`, so a test reads from
the volume both who ran and when the replacement started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ServerProcess, start_server
from tests.e2e.cuttable_proxy import CuttableProxy
from tests.e2e.pods import SHUTDOWN_GRACE, get_pod, no_leftovers, sh, wait_for

GRACE = 15.0  # node-monitor-grace-period: above the agents' 10 s Lease renewal
SELF_FENCE_AFTER = 4.0
SCRIPT = ("echo start $POD_UID $(date +%s.%N) >> /data/log; cat /data/log; "
          "trap 'exit 0' TERM; sleep 3600 & wait")


@dataclass
class Partition:
    server: ServerProcess
    proxy: CuttableProxy
    base: Path
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)


def start_agent(p: Partition, name: str, kubeconfig: Path, *extra: str) -> None:
    with (p.base / f"{name}.log").open("wb") as log:
        p.agents[name] = subprocess.Popen(
            [sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig", str(kubeconfig), "--node-name", name,
             "--data-dir", str(p.base / name), "--proxy-mode", "none", "--shutdown-grace-period", str(SHUTDOWN_GRACE),
             *extra], stdout=log, stderr=subprocess.STDOUT)


def ready(server: ServerProcess, name: str) -> str:
    res = server.kubectl("get", "node", name, "-o", "json", check=False)
    node = json.loads(res.stdout) if res.returncode == 0 else {}
    return next((str(c["status"]) for c in node.get("status", {}).get("conditions") or [] if c["type"] == "Ready"),
                "")


@contextlib.contextmanager
def partitioned_cluster(tmp_path: Path, fencing: dict[str, Any] | None, *agent_a_flags: str
                        ) -> Iterator[Partition]:
    if shutil.which("kubectl") is None or shutil.which("bwrap") is None:
        pytest.fail("kubectl and bubblewrap are required for the end-to-end tests")
    extra = ["--node-monitor-grace-period", str(GRACE)]
    if fencing is not None:
        (tmp_path / "fencing.yaml").write_text(yaml.safe_dump(fencing))
        extra += ["--fencing-config", str(tmp_path / "fencing.yaml")]
    with no_leftovers(tmp_path):
        server = start_server(tmp_path / "data", tmp_path / "home", extra=extra)
        kubeconfig = yaml.safe_load(server.kubeconfig.read_text())
        proxy = CuttableProxy(server.port)
        for cluster in kubeconfig["clusters"]:
            cluster["cluster"]["server"] = cluster["cluster"]["server"].replace(f":{server.port}", f":{proxy.port}")
        (tmp_path / "kubeconfig-a").write_text(yaml.safe_dump(kubeconfig))
        p = Partition(server, proxy, tmp_path)
        try:
            start_agent(p, "node-a", tmp_path / "kubeconfig-a", *agent_a_flags)
            assert wait_for(lambda: ready(server, "node-a") == "True", timeout=60)
            server.kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "shared"},
                "provisioner": "kubelite.io/shared-path", "parameters": {"path": str(tmp_path / "shared")}}))
            server.kubectl("apply", "-f", "-", stdin=json.dumps(statefulset()))
            assert wait_for(lambda: running_on(server) == "node-a", timeout=60), get_pod(server, "web-0")
            start_agent(p, "node-b", server.kubeconfig)  # only now: web-0 is on node-a
            assert wait_for(lambda: ready(server, "node-b") == "True", timeout=60)
            yield p
        finally:
            proxy.close()
            for proc in p.agents.values():  # a cut-off agent stops its pods too: they are its own processes
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=30)
            server.stop()


def statefulset() -> dict[str, Any]:
    env = [{"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
            "spec": {"serviceName": "web", "replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "terminationGracePeriodSeconds": 2,
                         "containers": [sh("main", SCRIPT, env=env,
                                           volumeMounts=[{"name": "data", "mountPath": "/data"}])]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "storageClassName": "shared",
                         "resources": {"requests": {"storage": "1Gi"}}}}]}}


def running_on(server: ServerProcess) -> str:
    pod = get_pod(server, "web-0")
    if pod.get("status", {}).get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
        return ""
    return str(pod["spec"].get("nodeName", ""))


def data_log(p: Partition) -> list[str]:
    logs = list((p.base / "shared").rglob("log"))
    return logs[0].read_text().splitlines() if logs else []


def pids_with_env(marker: bytes) -> list[int]:
    """Host processes whose environment holds `marker` (a container of one pod instance: POD_UID=…)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                env = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if marker in env.split(b"\0"):
                out.append(int(entry))
    return out


class Watcher:
    """Samples /proc every 20 ms: the last moment (wall clock) a process of the old instance was alive."""

    def __init__(self, uid: str) -> None:
        self.marker = f"POD_UID={uid}".encode()
        self.last_alive = 0.0
        self.seen = False
        self.stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.stop.is_set():
            if pids_with_env(self.marker):
                self.last_alive, self.seen = time.time(), True
            time.sleep(0.02)


FENCE_SCRIPT = """\
import os, signal, sys, time
agent = int(sys.argv[2])
with open(sys.argv[3], "a") as f:
    f.write(f"{sys.argv[1]} {time.time()}\\n")
children = {}
for e in os.listdir("/proc"):
    if e.isdigit():
        try:
            children.setdefault(int(open(f"/proc/{e}/stat").read().rsplit(")", 1)[1].split()[1]), []).append(int(e))
        except OSError:
            pass
todo, doomed = [agent], []
while todo:
    pid = todo.pop()
    doomed.append(pid)
    todo += children.get(pid, [])
for pid in doomed:  # the node "powered off": its agent and every process under it
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""




def command_fencing(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """A FencingConfiguration whose command agent records its call and kills node-a's agent and everything
    under it (the machine "powered off"); node-a's agent pid goes into the returned file once it runs."""
    script = tmp_path / "fence.py"
    script.write_text(textwrap.dedent(FENCE_SCRIPT))
    pidfile = tmp_path / "agent-a.pid"
    fencing = {"kind": "FencingConfiguration", "delay": 2, "period": 0.5, "retry": {"initial": 1, "max": 4},
               "pools": [{"name": "all", "agents": [{"command": [
                   "sh", "-c", f'exec {sys.executable} {script} "$0" "$(cat {pidfile})" {tmp_path / "calls"}',
                   "{node}"]}]}]}
    return fencing, pidfile


def self_fencing_config() -> dict[str, Any]:
    return {"kind": "FencingConfiguration", "delay": 2, "period": 0.5, "selfFenceMargin": 2,
            "pools": [{"name": "all", "agents": [{"self": {}}]}]}
