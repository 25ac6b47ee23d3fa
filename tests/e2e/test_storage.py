"""Storage end to end with real processes (S5, S1): a server, two real agents, kubectl.

- A StatefulSet with volumeClaimTemplates on the local-path provisioner keeps its data across pod
  deletion: the replacement (same identity, same claim) sees what the first instance wrote.
- A ReadWriteOnce volume never attaches to a second node while the first holds it: directly through
  the API (node-b's VolumeAttachment create is AlreadyExists) and through scheduling (a second pod
  on the other node waits in ContainerCreating with a Multi-Attach message until the first pod is
  gone, then starts and sees the first pod's data on the shared-path volume).
- Reclaim policy Delete: deleting the claims of a local-path and a shared-path volume deletes their
  directories (the local-path one by its node's agent) and then their PVs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ServerProcess, start_server
from tests.e2e.pods import (
    SHUTDOWN_GRACE,
    apply_pod,
    container_status,
    get_pod,
    no_leftovers,
    pod_phase,
    sh,
    wait_for,
)

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is required for the end-to-end tests")
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap (bwrap) is required: claim volumes are bound into the sandbox")
    base = tmp_path_factory.mktemp("storage")
    with no_leftovers(base):
        server = start_server(base / "data", base / "home")
        agents = [subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig",
                                    str(server.kubeconfig), "--node-name", name, "--data-dir", str(base / name),
                                    "--shutdown-grace-period", str(SHUTDOWN_GRACE)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for name in ("node-a", "node-b")]
        try:
            assert wait_for(lambda: server.kubectl("get", "nodes", check=False).stdout.count(" Ready") == 2,
                            timeout=60)
            for sc in ({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
                        "provisioner": "kubelite.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"},
                       {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "shared"},
                        "provisioner": "kubelite.io/shared-path", "parameters": {"path": str(base / "shared")}}):
                server.kubectl("apply", "-f", "-", stdin=json.dumps(sc))
            yield server
        finally:
            for proc in agents:
                os.kill(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            server.stop()


def _json(server: ServerProcess, *args: str) -> Obj:
    res = server.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else {}


def _logs(server: ServerProcess, pod: str) -> str:
    return server.kubectl("logs", pod, check=False).stdout


def test_statefulset_keeps_its_data_across_pod_deletion(cluster: ServerProcess) -> None:
    script = "echo started-$(date +%s%N) >> /data/log; cat /data/log; trap 'exit 0' TERM; sleep 3600 & wait"
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "replicas": 1, "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"terminationGracePeriodSeconds": 5, "containers": [
                                  sh("main", script, volumeMounts=[{"name": "data", "mountPath": "/data"}])]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                     "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "resources": {"requests": {"storage": "1Gi"}}}}]}}))
    assert wait_for(lambda: pod_phase(cluster, "db-0") == "Running", timeout=60), get_pod(cluster, "db-0")
    claim = _json(cluster, "pvc", "data-db-0")
    assert claim["status"]["phase"] == "Bound"
    pv = _json(cluster, "pv", claim["spec"]["volumeName"])
    node = get_pod(cluster, "db-0")["spec"]["nodeName"]
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [node]
    assert wait_for(lambda: _logs(cluster, "db-0").count("started-") == 1)
    first_uid = get_pod(cluster, "db-0")["metadata"]["uid"]
    cluster.kubectl("delete", "pod", "db-0", "--wait=false")
    assert wait_for(lambda: get_pod(cluster, "db-0").get("metadata", {}).get("uid") not in (None, first_uid)
                    and pod_phase(cluster, "db-0") == "Running", timeout=60)
    assert get_pod(cluster, "db-0")["spec"]["nodeName"] == node  # the local volume pins the identity's node
    assert wait_for(lambda: _logs(cluster, "db-0").count("started-") == 2), _logs(cluster, "db-0")
    out = cluster.kubectl("get", "pv,pvc,sc,volumeattachments").stdout
    for header in ("CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "PROVISIONER", "VOLUMEBINDINGMODE", "ATTACHER",
                   "ATTACHED"):
        assert header in out, out


def test_rwo_volume_waits_for_the_first_node_to_let_go(cluster: ServerProcess) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "shared-data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "shared",
                 "resources": {"requests": {"storage": "1Gi"}}}}))
    mount = [{"name": "data", "mountPath": "/data"}]
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "shared-data"}}]
    script = "echo from-$POD >> /data/log; cat /data/log; trap 'exit 0' TERM; sleep 3600 & wait"

    def writer(name: str, node: str) -> None:
        apply_pod(cluster, name, [sh("main", script, volumeMounts=mount, env=[{"name": "POD", "value": name}])],
                  volumes=volumes, nodeSelector={"kubernetes.io/hostname": node}, terminationGracePeriodSeconds=5)

    writer("first", "node-a")
    assert wait_for(lambda: pod_phase(cluster, "first") == "Running", timeout=60), get_pod(cluster, "first")
    pv_name = _json(cluster, "pvc", "shared-data")["spec"]["volumeName"]
    held = _json(cluster, "volumeattachment", f"kubelite-{pv_name}")
    assert held["spec"]["nodeName"] == "node-a" and held["status"]["attached"] is True
    # directly through the API: node-b's attachment of the same volume is refused while node-a holds it
    res = cluster.kubectl("create", "-f", "-", check=False, stdin=json.dumps({
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": f"kubelite-{pv_name}"},
        "spec": {"attacher": "kubelite.io/attacher", "nodeName": "node-b",
                 "source": {"persistentVolumeName": pv_name}}}))
    assert res.returncode != 0 and "AlreadyExists" in res.stderr, res.stderr
    writer("second", "node-b")

    def waiting_message() -> str:
        return str(container_status(cluster, "second", "main").get("state", {}).get("waiting", {}).get("message", ""))
    assert wait_for(lambda: "Multi-Attach error" in waiting_message(), timeout=30), get_pod(cluster, "second")
    st = container_status(cluster, "second", "main")
    assert st["state"]["waiting"]["reason"] == "ContainerCreating" and pod_phase(cluster, "second") == "Pending"
    assert _json(cluster, "volumeattachment", f"kubelite-{pv_name}")["spec"]["nodeName"] == "node-a"
    assert "from-second" not in _logs(cluster, "first")
    cluster.kubectl("delete", "pod", "first", "--wait=false")
    assert wait_for(lambda: pod_phase(cluster, "second") == "Running", timeout=60), get_pod(cluster, "second")
    assert _json(cluster, "volumeattachment", f"kubelite-{pv_name}")["spec"]["nodeName"] == "node-b"
    assert wait_for(lambda: _logs(cluster, "second").split() == ["from-first", "from-second"]), _logs(cluster, "second")


def test_reclaim_delete_removes_the_directories_then_the_volumes(cluster: ServerProcess) -> None:
    base = cluster.data_dir.parent
    volumes, mounts = [], []
    for cls in ("local", "shared"):
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"gone-{cls}"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                     "resources": {"requests": {"storage": "1Gi"}}}}))
        volumes.append({"name": cls, "persistentVolumeClaim": {"claimName": f"gone-{cls}"}})
        mounts.append({"name": cls, "mountPath": f"/{cls}"})
    apply_pod(cluster, "filler", [sh("main", "echo x > /local/f; echo x > /shared/f; echo done; sleep 3600",
                                     volumeMounts=mounts)], volumes=volumes, terminationGracePeriodSeconds=1)
    assert wait_for(lambda: "done" in _logs(cluster, "filler"), timeout=60), get_pod(cluster, "filler")
    node = get_pod(cluster, "filler")["spec"]["nodeName"]
    pvs = {cls: _json(cluster, "pvc", f"gone-{cls}")["spec"]["volumeName"] for cls in ("local", "shared")}
    dirs = {"local": base / node / "volumes" / "local-path" / pvs["local"], "shared": base / "shared" / pvs["shared"]}
    assert all((d / "f").read_text() == "x\n" for d in dirs.values())
    cluster.kubectl("delete", "pod", "filler")
    cluster.kubectl("delete", "pvc", "gone-local", "gone-shared", "--wait=false")
    # the local one waits for the agent's next heartbeat (every 10 s) to see the request on its Node
    assert wait_for(lambda: not _json(cluster, "pv", pvs["local"]) and not _json(cluster, "pv", pvs["shared"]),
                    timeout=45), cluster.kubectl("get", "pv", "-o", "wide").stdout
    assert not dirs["local"].exists() and not dirs["shared"].exists()
    annotations = _json(cluster, "node", node)["metadata"].get("annotations") or {}
    assert "kubelite.io/local-path-delete" not in annotations, annotations
