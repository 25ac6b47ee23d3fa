"""The workload under fault: a StatefulSet whose pods append "identity uid node pid counter time" to their
identity's file every WRITE_INTERVAL on their own ReadWriteOnce volume (a claim from the
`kubelite.io/shared-path` provisioner: network storage any node can mount, so only the attach lock
keeps it on one node, and a second instance on another node would write the same file), and a
Deployment (on a hostPath). Both carry the markers `procs.scan` finds them by."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.testing.chaos.observations import FileRecord

NAMESPACE = "default"
STATEFULSET = "chaos-db"
DEPLOYMENT = "chaos-web"
REPLICAS = {STATEFULSET: 3, DEPLOYMENT: 2}
DELETE_TARGETS = [*(f"{STATEFULSET}-{i}" for i in range(REPLICAS[STATEFULSET])), DEPLOYMENT]
GRACE = 5
WRITE_INTERVAL = 0.5
# Tolerate an unreachable or not-ready node this long (not the default 300 s), so that a long enough
# partition makes the taint manager delete the pods there within a run: a Deployment replaces them at once
# (S6), a StatefulSet must not until the old pod's processes are confirmed dead (S1).
TOLERATION_SECONDS = 3
# bash (not sh): EPOCHREALTIME gives the time without forking; the loop is one long-lived bash process.
# `$$$$` is the shell's `$$` after Kubernetes' $(VAR) expansion of the command, which turns `$$` into `$`.
SCRIPT = ("trap 'exit 0' TERM; i=0; while true; do i=$((i+1)); "
          "echo \"$CHAOS_IDENTITY $CHAOS_POD_UID $CHAOS_NODE $$$$ $i $EPOCHREALTIME\" "
          ">> \"$DATA/$CHAOS_IDENTITY.log\"; "
          f"sleep {WRITE_INTERVAL}; done")


def _env(run_id: str, kind: str) -> list[dict[str, Any]]:
    fields = {"CHAOS_IDENTITY": "metadata.name", "CHAOS_POD_UID": "metadata.uid", "CHAOS_NODE": "spec.nodeName"}
    return [{"name": "CHAOS_RUN", "value": run_id}, {"name": "CHAOS_KIND", "value": kind},
            {"name": "DATA", "value": "/data"},
            *({"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in fields.items())]


STORAGE_CLASS = "chaos-shared"
VOLUMES = "volumes"  # under the shared dir: one directory per PersistentVolume


def _pod_template(name: str, run_id: str, kind: str, data_dir: Path) -> dict[str, Any]:
    volumes = [] if kind == "statefulset" else [  # the StatefulSet's "data" comes from its claim template
        {"name": "data", "hostPath": {"path": str(data_dir / kind), "type": "DirectoryOrCreate"}}]
    return {"metadata": {"labels": {"app": name}}, "spec": {
        "terminationGracePeriodSeconds": GRACE,
        "tolerations": [{"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": TOLERATION_SECONDS} for key in ("unreachable", "not-ready")],
        "containers": [{"name": "main", "image": "busybox", "command": ["bash", "-c", SCRIPT],
                        "env": _env(run_id, kind), "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": volumes}}


def manifests(run_id: str, data_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(API collection path, object) for the StorageClass, the StatefulSet and the Deployment."""
    storage_class = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": STORAGE_CLASS},
                     "provisioner": "kubelite.io/shared-path", "parameters": {"path": str(data_dir / VOLUMES)}}
    claim = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                                                    "resources": {"requests": {"storage": "10Mi"}}}}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": STATEFULSET}, "spec": {
        "replicas": REPLICAS[STATEFULSET], "serviceName": STATEFULSET,
        "selector": {"matchLabels": {"app": STATEFULSET}}, "volumeClaimTemplates": [claim],
        "template": _pod_template(STATEFULSET, run_id, "statefulset", data_dir)}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": DEPLOYMENT}, "spec": {
        "replicas": REPLICAS[DEPLOYMENT], "selector": {"matchLabels": {"app": DEPLOYMENT}},
        "template": _pod_template(DEPLOYMENT, run_id, "deployment", data_dir)}}
    return [("/apis/storage.k8s.io/v1/storageclasses", storage_class),
            (f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets", sts),
            (f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", deploy)]


async def delete_twice(client: Client, clock: Clock, target: str, graces: tuple[int, ...]) -> None:
    """DELETE pod `target` (or the first live pod of the workload of that name) with each grace period in
    turn, half a second apart, as two clients racing would: a later, longer grace period must not stick."""
    pods = (await client.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
    names = sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")
                   and (p["metadata"]["name"] == target or p["metadata"].get("labels", {}).get("app") == target))
    if not names:
        return
    for i, grace in enumerate(graces):
        if i:
            await clock.sleep(0.5)
        with contextlib.suppress(ApiError):  # gone already, or the server down: the next fault goes on
            await client.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{names[0]}",
                                 {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace})


def read_records(data_dir: Path, started: float) -> list[FileRecord]:
    """The StatefulSet's file lines, with wall-clock times made relative to the run's start (a torn last
    line, from a process killed mid-write, is skipped)."""
    out = []
    for path in sorted((data_dir / VOLUMES).glob("*/*.log")):
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
