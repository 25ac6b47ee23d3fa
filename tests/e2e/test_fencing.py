"""Partition end to end (S4, S1, S5; seed 002): real server, two real agents, node-a's link to the API
server through a TCP proxy the test cuts.

A StatefulSet pod with a ReadWriteOnce volume on the shared-path provisioner runs on node-a; the
link is cut; node-a goes Unknown; then
- with a command fence agent (a script that records its call and kills node-a's agent and every
  process under it — the stand-in for powering the machine off), the fence runs, the attachment is
  removed, and web-0 starts on node-b with the data node-a's instance wrote;
- with no fence agent configured, web-0 is *not* replaced: the identity stays with the
  unreachable node (the seed's safe default);
- with `--self-fence-after` on node-a and only the `self` agent, node-a's container is dead before
  the replacement starts — the old container's last sighting in the host's /proc against the
  replacement's own start stamp.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
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
from tests.e2e.pods import get_pod, sh, wait_for

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


def _agent(p: Partition, name: str, kubeconfig: Path, *extra: str) -> None:
    log = (p.base / f"{name}.log").open("wb")
    p.agents[name] = subprocess.Popen(
        [sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig", str(kubeconfig), "--node-name", name,
         "--data-dir", str(p.base / name), "--proxy-mode", "none", *extra], stdout=log, stderr=subprocess.STDOUT)


def _ready(server: ServerProcess, name: str) -> str:
    res = server.kubectl("get", "node", name, "-o", "json", check=False)
    node = json.loads(res.stdout) if res.returncode == 0 else {}
    return next((str(c["status"]) for c in node.get("status", {}).get("conditions") or [] if c["type"] == "Ready"),
                "")


def _partition(tmp_path: Path, fencing: dict[str, Any] | None, *agent_a_flags: str) -> Iterator[Partition]:
    if shutil.which("kubectl") is None or shutil.which("bwrap") is None:
        pytest.fail("kubectl and bubblewrap are required for the end-to-end tests")
    extra = ["--node-monitor-grace-period", str(GRACE)]
    if fencing is not None:
        (tmp_path / "fencing.yaml").write_text(yaml.safe_dump(fencing))
        extra += ["--fencing-config", str(tmp_path / "fencing.yaml")]
    server = start_server(tmp_path / "data", tmp_path / "home", extra=extra)
    kubeconfig = yaml.safe_load(server.kubeconfig.read_text())
    proxy = CuttableProxy(server.port)
    for cluster in kubeconfig["clusters"]:
        cluster["cluster"]["server"] = cluster["cluster"]["server"].replace(f":{server.port}", f":{proxy.port}")
    (tmp_path / "kubeconfig-a").write_text(yaml.safe_dump(kubeconfig))
    p = Partition(server, proxy, tmp_path)
    try:
        _agent(p, "node-a", tmp_path / "kubeconfig-a", *agent_a_flags)
        assert wait_for(lambda: _ready(server, "node-a") == "True", timeout=60)
        server.kubectl("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "shared"},
            "provisioner": "kubelite.io/shared-path", "parameters": {"path": str(tmp_path / "shared")}}))
        server.kubectl("apply", "-f", "-", stdin=json.dumps(_statefulset()))
        assert wait_for(lambda: _running_on(server) == "node-a", timeout=60), get_pod(server, "web-0")
        _agent(p, "node-b", server.kubeconfig)  # only now: web-0 is on node-a
        assert wait_for(lambda: _ready(server, "node-b") == "True", timeout=60)
        yield p
    finally:
        proxy.close()
        for proc in p.agents.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
        server.stop()
        _kill_leftovers(tmp_path)


def _statefulset() -> dict[str, Any]:
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


def _running_on(server: ServerProcess) -> str:
    pod = get_pod(server, "web-0")
    if pod.get("status", {}).get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
        return ""
    return str(pod["spec"].get("nodeName", ""))


def _data_log(p: Partition) -> list[str]:
    logs = list((p.base / "shared").rglob("log"))
    return logs[0].read_text().splitlines() if logs else []


def _pids_with_env(marker: bytes) -> list[int]:
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


def _kill_leftovers(base: Path) -> None:
    """Containers of a test's pods still running (the cut-off agent leaves them): killed by their marker dir."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if str(base).encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                continue


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
            if _pids_with_env(self.marker):
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


@pytest.fixture
def fenced_by_command(tmp_path: Path) -> Iterator[Partition]:
    script = tmp_path / "fence.py"
    script.write_text(textwrap.dedent(FENCE_SCRIPT))
    pidfile = tmp_path / "agent-a.pid"
    fencing = {"kind": "FencingConfiguration", "delay": 2, "period": 0.5, "retry": {"initial": 1, "max": 4},
               "pools": [{"name": "all", "agents": [{"command": [
                   "sh", "-c", f'exec {sys.executable} {script} "$0" "$(cat {pidfile})" {tmp_path / "calls"}',
                   "{node}"]}]}]}
    gen = _partition(tmp_path, fencing)
    p = next(gen)
    pidfile.write_text(str(p.agents["node-a"].pid))
    yield p
    next(gen, None)


def test_a_partitioned_node_is_fenced_and_its_statefulset_pod_moves_with_its_data(
        fenced_by_command: Partition) -> None:
    p = fenced_by_command
    old = get_pod(p.server, "web-0")
    assert wait_for(lambda: len(_data_log(p)) == 1)
    cut_at = time.time()
    p.proxy.cut()
    assert wait_for(lambda: _ready(p.server, "node-a") == "Unknown", timeout=GRACE + 20)
    assert wait_for(lambda: _running_on(p.server) == "node-b", timeout=60), get_pod(p.server, "web-0")
    new = get_pod(p.server, "web-0")
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    calls = (p.base / "calls").read_text().split()
    assert calls[0] == "node-a" and float(calls[1]) > cut_at
    fence = json.loads(p.server.kubectl("get", "nodefence", "node-a", "-o", "json").stdout)
    assert fence["status"]["phase"] == "Succeeded" and fence["status"]["agent"] == "command"
    assert p.agents["node-a"].wait(timeout=5) == -signal.SIGKILL
    assert wait_for(lambda: len(_data_log(p)) == 2)
    first, second = _data_log(p)
    assert first.split()[1] == old["metadata"]["uid"] and second.split()[1] == new["metadata"]["uid"]
    vas = json.loads(p.server.kubectl("get", "volumeattachments", "-o", "json").stdout)["items"]
    assert [va["spec"]["nodeName"] for va in vas] == ["node-b"]


@pytest.fixture
def unfenced(tmp_path: Path) -> Iterator[Partition]:
    yield from _partition(tmp_path, None)


def test_without_a_fence_agent_the_statefulset_pod_is_not_replaced(unfenced: Partition) -> None:
    p = unfenced
    old = get_pod(p.server, "web-0")
    p.proxy.cut()
    assert wait_for(lambda: _ready(p.server, "node-a") == "Unknown", timeout=GRACE + 20)
    time.sleep(30)  # generous: well past the node's grace, the taints and any eviction
    pod = get_pod(p.server, "web-0")
    assert pod["metadata"]["uid"] == old["metadata"]["uid"] and pod["spec"]["nodeName"] == "node-a"
    assert len(_data_log(p)) == 1
    assert p.server.kubectl("get", "nodefences", "-o", "name").stdout.strip() == ""


@pytest.fixture
def self_fencing(tmp_path: Path) -> Iterator[Partition]:
    fencing = {"kind": "FencingConfiguration", "delay": 2, "period": 0.5, "selfFenceMargin": 2,
               "pools": [{"name": "all", "agents": [{"self": {}}]}]}
    yield from _partition(tmp_path, fencing, "--self-fence-after", str(SELF_FENCE_AFTER))


def test_a_self_fencing_node_kills_its_container_before_the_replacement_starts(self_fencing: Partition) -> None:
    p = self_fencing
    old = get_pod(p.server, "web-0")
    node = json.loads(p.server.kubectl("get", "node", "node-a", "-o", "json").stdout)
    assert node["metadata"]["annotations"]["kubelite.io/self-fence-after"] == f"{SELF_FENCE_AFTER:g}"
    watcher = Watcher(old["metadata"]["uid"])
    assert wait_for(lambda: watcher.seen and len(_data_log(p)) == 1)
    p.proxy.cut()
    try:
        assert wait_for(lambda: _running_on(p.server) == "node-b", timeout=GRACE + 60), get_pod(p.server, "web-0")
        assert wait_for(lambda: len(_data_log(p)) == 2)
    finally:
        watcher.stop.set()
    new_uid, new_start = _data_log(p)[1].split()[1:3]
    assert new_uid == get_pod(p.server, "web-0")["metadata"]["uid"] != old["metadata"]["uid"]
    assert p.agents["node-a"].poll() is None, "the agent itself stays up: it only killed its containers"
    assert not _pids_with_env(watcher.marker)
    assert watcher.last_alive < float(new_start), (watcher.last_alive, new_start)
    fence = json.loads(p.server.kubectl("get", "nodefence", "node-a", "-o", "json").stdout)
    assert fence["status"]["agent"] == "self" and fence["status"]["phase"] == "Succeeded"
