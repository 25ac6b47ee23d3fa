"""An in-pod program talks to the API with its projected service-account token (issue 11 item 3).

A real `kubelite server` and `kubelite agent`: the ServiceAccount admission mounts the
kube-api-access volume, the agent projects a pod-bound token (TokenRequest), the root-CA publisher's
ca.crt and the namespace, and the official Python client's `load_incluster_config()` uses them.
The client finds the API server as in a cluster: KUBERNETES_SERVICE_HOST/PORT (the agent's service
links) name the `kubernetes` Service's ClusterIP, which the agent's proxy forwards to the server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.pods import apply_pod, get_pod, server_and_agent, wait_for

pytestmark = pytest.mark.e2e

SCRIPT = """
from kubernetes import client, config
config.load_incluster_config()
namespace = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
pods = client.CoreV1Api().list_namespaced_pod(namespace)
print("pods:", sorted(p.metadata.name for p in pods.items))
print("server:", client.Configuration.get_default_copy().host)
try:
    client.CoreV1Api().list_namespaced_secret("kube-system")
    print("other namespace's secrets: allowed")
except client.exceptions.ApiException as exc:
    print("other namespace's secrets:", exc.status)
"""


def test_in_pod_client_lists_pods_with_its_projected_token_and_is_refused_other_secrets(tmp_path: Path) -> None:
    with server_and_agent(tmp_path, "node-1") as (server, _):
        # RBAC (the default authorization mode): the default service account may list its namespace's pods
        server.kubectl("create", "rolebinding", "default-view", "--clusterrole=view",
                       "--serviceaccount=default:default")
        apply_pod(server, "incluster", [{"name": "main", "image": "python",
                                         "command": [sys.executable, "-c", SCRIPT]}],
                  nodeName="node-1", restartPolicy="Never")
        pod = get_pod(server, "incluster")
        volume = next(v for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api-access-"))
        assert pod["spec"]["containers"][0]["volumeMounts"] == [
            {"name": volume["name"], "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
        assert wait_for(lambda: get_pod(server, "incluster").get("status", {}).get("phase") in ("Succeeded", "Failed"),
                        timeout=60), json.dumps(get_pod(server, "incluster").get("status"))
        logs = server.kubectl("logs", "incluster").stdout
        assert get_pod(server, "incluster")["status"]["phase"] == "Succeeded", logs
        assert "pods: ['incluster']" in logs
        service = json.loads(server.kubectl("get", "service", "kubernetes", "-o", "json").stdout)
        assert f"server: https://{service['spec']['clusterIP']}:443" in logs  # through the kubernetes Service
        assert "other namespace's secrets: 403" in logs  # RBAC: view in its own namespace only
