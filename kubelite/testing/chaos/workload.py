"""The workload under fault: a StatefulSet whose pods append "identity uid node pid counter time" to their
identity's file every WRITE_INTERVAL — on a directory every node mounts (a hostPath standing for network
storage, so a second instance on another node would write the same file) — and a Deployment. Both carry
the markers `procs.scan` finds them by."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelite.testing.chaos.observations import FileRecord

NAMESPACE = "default"
STATEFULSET = "chaos-db"
DEPLOYMENT = "chaos-web"
REPLICAS = {STATEFULSET: 3, DEPLOYMENT: 2}
GRACE = 5
WRITE_INTERVAL = 0.5
# bash (not sh): EPOCHREALTIME gives the time without forking; the loop is one long-lived bash process.
SCRIPT = ("trap 'exit 0' TERM; i=0; while true; do i=$((i+1)); "
          "echo \"$CHAOS_IDENTITY $CHAOS_POD_UID $CHAOS_NODE $$ $i $EPOCHREALTIME\" >> \"$DATA/$CHAOS_IDENTITY.log\"; "
          f"sleep {WRITE_INTERVAL}; done")


def _env(run_id: str, kind: str) -> list[dict[str, Any]]:
    fields = {"CHAOS_IDENTITY": "metadata.name", "CHAOS_POD_UID": "metadata.uid", "CHAOS_NODE": "spec.nodeName"}
    return [{"name": "CHAOS_RUN", "value": run_id}, {"name": "CHAOS_KIND", "value": kind},
            {"name": "DATA", "value": "/data"},
            *({"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in fields.items())]


def _pod_template(name: str, run_id: str, kind: str, data_dir: Path) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": name}}, "spec": {
        "terminationGracePeriodSeconds": GRACE,
        "containers": [{"name": "main", "image": "busybox", "command": ["bash", "-c", SCRIPT],
                        "env": _env(run_id, kind), "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "hostPath": {"path": str(data_dir / kind), "type": "DirectoryOrCreate"}}]}}


def manifests(run_id: str, data_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(API collection path, object) for the StatefulSet and the Deployment."""
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": STATEFULSET}, "spec": {
        "replicas": REPLICAS[STATEFULSET], "serviceName": STATEFULSET,
        "selector": {"matchLabels": {"app": STATEFULSET}},
        "template": _pod_template(STATEFULSET, run_id, "statefulset", data_dir)}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": DEPLOYMENT}, "spec": {
        "replicas": REPLICAS[DEPLOYMENT], "selector": {"matchLabels": {"app": DEPLOYMENT}},
        "template": _pod_template(DEPLOYMENT, run_id, "deployment", data_dir)}}
    return [(f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets", sts),
            (f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", deploy)]


def read_records(data_dir: Path, started: float) -> list[FileRecord]:
    """The StatefulSet's file lines, with wall-clock times made relative to the run's start (a torn last
    line, from a process killed mid-write, is skipped)."""
    out = []
    for path in sorted((data_dir / "statefulset").glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) != 6:
                continue
            try:
                out.append(FileRecord(parts[0], parts[1], parts[2], int(parts[3]), int(parts[4]),
                                      float(parts[5]) - started))
            except ValueError:
                continue
    return out
