"""Node-pressure eviction for real (L21): a pod fills an emptyDir past a nodefs.available threshold.

The threshold is an ordinary KubeletConfiguration `evictionHard` value, computed when the test
starts from the data directory's free bytes minus a margin, so only what the pod writes (plus
whatever else the machine writes meanwhile) can cross it. The pod keeps writing in 16 MiB steps
until it is evicted; a quiet pod beside it must be left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess, free_port
from tests.e2e.pods import apply_pod, get_pod, pod_phase, sh, wait_for

pytestmark = pytest.mark.e2e

MIB = 2**20
MARGIN = 512 * MIB  # the pod must write this much before the node is under pressure
FILL = ("i=0; while [ $i -lt 256 ]; do dd if=/dev/zero of=/data/f$i bs=1M count=16 2>/dev/null; sync; "
        "i=$((i+1)); sleep 0.1; done; sleep 3600")


def available(path: Path) -> int:
    vfs = os.statvfs(path)
    return vfs.f_bavail * vfs.f_frsize


@dataclass
class Node:
    c: ServerProcess
    threshold: int  # evictionHard nodefs.available, in bytes


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    if shutil.which("bwrap") is None:
        pytest.fail("emptyDir volumes need bubblewrap (bwrap); `make up` installs it")
    base = tmp_path_factory.mktemp("evict")
    data = base / "data"
    data.mkdir()
    threshold = available(data) - MARGIN
    (base / "node.yaml").write_text(json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "evictionHard": {"nodefs.available": str(threshold)}}))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "up", "--data-dir", str(data), "--port",
                             str(port), "--node-config", str(base / "node.yaml")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    server = ServerProcess(data, port, proc, base / "home")
    (base / "home").mkdir()
    try:
        assert wait_for(lambda: (data / "kubeconfig").exists() and " Ready" in
                        server.kubectl("get", "nodes", check=False).stdout, 60), "kubelite up did not become ready"
        yield Node(server, threshold)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)  # what the pod wrote does not outlive the test


def node_object(c: ServerProcess) -> dict[str, Any]:
    return dict(json.loads(c.kubectl("get", "nodes", "-o", "json").stdout)["items"][0])


def test_pod_filling_an_emptydir_is_evicted_and_the_node_reports_disk_pressure(node: Node) -> None:
    c = node.c
    apply_pod(c, "quiet", [sh("quiet", "sleep 3600")], terminationGracePeriodSeconds=5)
    apply_pod(c, "filler", [sh("fill", FILL, volumeMounts=[{"name": "scratch", "mountPath": "/data"}])],
              volumes=[{"name": "scratch", "emptyDir": {}}], terminationGracePeriodSeconds=5)
    assert wait_for(lambda: pod_phase(c, "quiet") == "Running" and pod_phase(c, "filler") == "Running", 60)

    started = time.monotonic()
    assert wait_for(lambda: pod_phase(c, "filler") == "Failed", 120), get_pod(c, "filler").get("status")
    status = get_pod(c, "filler")["status"]
    assert status["reason"] == "Evicted"
    assert status["message"].startswith("The node was low on resource: ephemeral-storage. Threshold quantity: "), \
        status["message"]
    assert all(cs["state"].get("terminated") for cs in status["containerStatuses"])
    assert time.monotonic() - started < 120

    events = json.loads(c.kubectl("get", "events", "--field-selector", "involvedObject.name=filler",
                                  "-o", "json").stdout)["items"]
    assert any(e["reason"] == "Evicted" and e["type"] == "Warning" for e in events), [e["reason"] for e in events]

    def pressure_shown() -> bool:
        n = node_object(c)
        conditions = {x["type"]: x for x in n["status"]["conditions"]}
        return conditions["DiskPressure"]["status"] == "True" and \
            {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"} in (n["spec"].get("taints") or [])
    assert wait_for(pressure_shown, 30), node_object(c)["status"]["conditions"]
    disk = {x["type"]: x for x in node_object(c)["status"]["conditions"]}["DiskPressure"]
    assert (disk["reason"], disk["message"]) == ("KubeletHasDiskPressure", "kubelet has disk pressure")

    assert pod_phase(c, "quiet") == "Running", "only the pod using the disk is evicted"
    assert wait_for(lambda: available(c.data_dir) > node.threshold, 30), \
        "the evicted pod's emptyDir is removed, which gives the disk back"

    apply_pod(c, "late", [sh("late", "sleep 3600")])  # the taint keeps new pods off the node

    def unschedulable() -> bool:
        conds = {x["type"]: x for x in get_pod(c, "late").get("status", {}).get("conditions") or []}
        scheduled = conds.get("PodScheduled", {})
        return scheduled.get("status") == "False" and "disk-pressure" in scheduled.get("message", "")
    assert wait_for(unschedulable, 30), get_pod(c, "late").get("status")
