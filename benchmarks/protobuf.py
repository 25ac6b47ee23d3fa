"""Protobuf codec cost versus JSON: one Pod and a 1,000-pod PodList, encode and decode.

The Pod is what the server stores and serves for a running pod: defaults, managedFields-free metadata with
labels, annotations and an owner, two containers with probes, env, resources and mounts, a projected
service-account volume, and a status with conditions and container statuses. JSON is orjson (C); protobuf is
kubelite's table-driven codec (pure Python). Prints per-operation figures (best of 5 rounds).

    python -m benchmarks.protobuf [--pods 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kubelite.apiserver.proto import codec

T = "2026-11-24T10:00:00Z"


def pod(i: int) -> dict[str, Any]:
    def container(name: str) -> dict[str, Any]:
        return {"name": name, "image": "registry.example.com/team/app:1.2.3", "command": ["/bin/app"],
                "args": ["--port=8080", "--verbose"], "ports": [{"name": "http", "containerPort": 8080,
                                                                  "protocol": "TCP"}],
                "env": [{"name": "MODE", "value": "prod"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                        "fieldPath": "metadata.name"}}}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 5,
                                   "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}

    def status(name: str) -> dict[str, Any]:
        return {"name": name, "state": {"running": {"startedAt": T}}, "lastState": {}, "ready": True,
                "restartCount": 0, "image": "registry.example.com/team/app:1.2.3", "imageID": "",
                "containerID": f"kubelite://{i:08x}-{name}", "started": True}

    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"web-7d4b9c8f6d-{i:05d}", "generateName": "web-7d4b9c8f6d-", "namespace": "default",
                     "uid": f"0f6c3b52-1d2e-4c4b-9a51-{i:012d}", "resourceVersion": str(1000 + i),
                     "creationTimestamp": T, "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6d"},
                     "annotations": {"kubectl.kubernetes.io/restartedAt": T},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f6d",
                                          "uid": "5b0e1f7a-0000-4000-8000-000000000001", "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                     {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                     {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
                 "containers": [container("app"), container("sidecar")], "restartPolicy": "Always",
                 "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                 "serviceAccountName": "default", "serviceAccount": "default", "nodeName": "node-1",
                 "securityContext": {}, "schedulerName": "default-scheduler", "priority": 0,
                 "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": T}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "podIP": f"10.244.{i // 250}.{i % 250}",
            "podIPs": [{"ip": f"10.244.{i // 250}.{i % 250}"}], "startTime": T, "qosClass": "Burstable",
            "containerStatuses": [status("app"), status("sidecar")]}}


def best(fn: Callable[[], object], repeat: int) -> float:
    """Seconds per call: the best of 5 rounds of `repeat` calls (the least disturbed by other load)."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        rounds.append((time.perf_counter() - start) / repeat)
    return min(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=1000)
    args = parser.parse_args()
    one = {k: v for k, v in pod(0).items()}
    one["status"]["conditions"] = [{k: v for k, v in c.items() if v is not None} for c in one["status"]["conditions"]]
    items = []
    for i in range(args.pods):
        p = pod(i)
        p["status"]["conditions"] = [{k: v for k, v in c.items() if v is not None} for c in p["status"]["conditions"]]
        items.append({k: v for k, v in p.items() if k not in ("apiVersion", "kind")})
    listed = {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "99999"}, "items": items}
    print(f"{'object':<22}{'format':<10}{'bytes':>10}{'encode':>12}{'decode':>12}")
    for label, obj, repeat, unit, scale in (("Pod", one, 2000, "µs", 1e6),
                                            (f"PodList of {args.pods}", listed, 3, "ms", 1e3)):
        as_json, as_pb = orjson.dumps(obj), codec.encode_object(obj)
        assert codec.decode_object(as_pb) == codec.decode_object(codec.encode_object(orjson.loads(as_json)))
        for fmt, body, enc, dec in (("json", as_json, lambda o=obj: orjson.dumps(o), lambda b=as_json: orjson.loads(b)),
                                    ("protobuf", as_pb, lambda o=obj: codec.encode_object(o),
                                     lambda b=as_pb: codec.decode_object(b))):
            print(f"{label:<22}{fmt:<10}{len(body):>10,}{best(enc, repeat) * scale:>10.1f}{unit}"
                  f"{best(dec, repeat) * scale:>10.1f}{unit}")


if __name__ == "__main__":
    main()
