"""The real kubectl against a real `kubelite server` over HTTPS with a bearer token."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e

MANIFEST = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high
value: 1000
description: "for important pods"
preemptionPolicy: PreemptLowerPriority
---
apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web-pdb
  namespace: demo
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: web
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: demo
  labels: {app: web}
  annotations: {team: core}
spec:
  priorityClassName: high
  terminationGracePeriodSeconds: 20
  nodeSelector: {kubernetes.io/os: linux}
  tolerations:
  - {key: dedicated, operator: Equal, value: web, effect: NoSchedule}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector: {matchLabels: {app: web}}
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway,
     labelSelector: {matchLabels: {app: web}}}
  initContainers:
  - name: setup
    image: busybox:1.36
    command: [sh, -c, "true"]
  containers:
  - name: main
    image: busybox:1.36
    command: [sh, -c, "sleep 3600"]
    env:
    - {name: A, value: "1"}
    - name: POD
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    ports: [{containerPort: 8080, name: http}]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 200m, memory: 128Mi}
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
    lifecycle:
      preStop:
        sleep: {seconds: 2}
---
apiVersion: v1
kind: Pod
metadata:
  name: other
  namespace: demo
spec:
  containers:
  - {name: main, image: busybox, command: [sleep, "60"]}
"""

NODE = json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": {
    "kubernetes.io/hostname": "node-1"}}, "status": {
    "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
    "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}],
    "nodeInfo": {"kubeletVersion": "v1.32.0", "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "",
                 "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "linux",
                 "osImage": "", "systemUUID": ""}}})


@pytest.fixture(scope="module")
def cluster(server: ServerProcess) -> ServerProcess:
    server.kubectl("apply", "-f", "-", stdin=MANIFEST)
    server.kubectl("create", "-f", "-", stdin=NODE)
    return server


def test_version_reports_v132(cluster: ServerProcess) -> None:
    out = cluster.kubectl("version", "-o", "json").stdout
    version = json.loads(out)
    assert version["serverVersion"]["gitVersion"].startswith("v1.32.")
    assert version["clientVersion"]["minor"].startswith("32")


def test_api_resources(cluster: ServerProcess) -> None:
    out = cluster.kubectl("api-resources", "--no-headers").stdout
    rows = {line.split()[0]: line.split() for line in reversed(out.splitlines())}  # a name's first group wins
    for name in ("pods", "nodes", "namespaces", "events", "persistentvolumes", "persistentvolumeclaims", "leases",
                 "priorityclasses", "poddisruptionbudgets", "statefulsets", "replicasets", "deployments"):
        assert name in rows, name
    assert rows["pods"][1] == "po" and rows["priorityclasses"][1] == "pc"


def test_apply_is_idempotent(cluster: ServerProcess) -> None:
    """Re-applying changes nothing. kubectl re-sends `tolerations` (the server added defaults to that atomic
    list, so kubectl prints "configured", as upstream does); the patch is a no-op and the version stays."""
    before = json.loads(cluster.kubectl("get", "pod", "web", "-n", "demo", "-o", "json").stdout)
    out = cluster.kubectl("apply", "-f", "-", stdin=MANIFEST).stdout
    assert "pod/other unchanged" in out and "priorityclass.scheduling.k8s.io/high unchanged" in out
    after = json.loads(cluster.kubectl("get", "pod", "web", "-n", "demo", "-o", "json").stdout)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_apply_rejects_unknown_fields_strictly(cluster: ServerProcess) -> None:
    bad = 'apiVersion: v1\nkind: Pod\nmetadata: {name: bogus, namespace: demo}\n' \
          'spec: {bogusField: 1, containers: [{name: c, image: i}]}\n'
    res = cluster.kubectl("apply", "-f", "-", stdin=bad, check=False)
    assert res.returncode != 0
    assert 'strict decoding error: unknown field "spec.bogusField"' in res.stderr
    warn = cluster.kubectl("create", "--validate=warn", "-f", "-", stdin=bad)
    assert 'unknown field "spec.bogusField"' in warn.stderr


def test_get_pods_table_and_wide(cluster: ServerProcess) -> None:
    out = cluster.kubectl("get", "pods", "-n", "demo").stdout.splitlines()
    assert out[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    web = next(line.split() for line in out if line.startswith("web"))
    assert web[1:4] == ["0/1", "Pending", "0"]
    wide = cluster.kubectl("get", "pods", "-n", "demo", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE",
                               "READINESS", "GATES"]
    listed = cluster.kubectl("get", "pods", "-A", "--show-labels").stdout
    assert "demo" in listed and "app=web" in listed


def test_get_yaml_shows_defaults_and_priority(cluster: ServerProcess) -> None:
    pod = json.loads(cluster.kubectl("get", "pod", "web", "-n", "demo", "-o", "json").stdout)
    assert pod["spec"]["priority"] == 1000 and pod["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert pod["spec"]["containers"][0]["terminationMessagePolicy"] == "File"
    assert pod["status"]["qosClass"] == "Burstable"
    assert "apiVersion: v1" in cluster.kubectl("get", "pod", "web", "-n", "demo", "-o", "yaml").stdout


def test_get_nodes_pc_pdb(cluster: ServerProcess) -> None:
    nodes = cluster.kubectl("get", "nodes").stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[:3] == ["node-1", "Ready", "<none>"]
    pcs = cluster.kubectl("get", "pc").stdout
    assert "system-node-critical" in pcs and "2000001000" in pcs and "high" in pcs
    pdb = cluster.kubectl("get", "pdb", "-n", "demo").stdout.splitlines()
    assert pdb[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert pdb[1].split()[:4] == ["web-pdb", "1", "N/A", "0"]


def test_describe_pod_with_events(cluster: ServerProcess) -> None:
    event = json.dumps({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1", "namespace": "demo"},
                        "involvedObject": {"kind": "Pod", "namespace": "demo", "name": "web", "uid": json.loads(
                            cluster.kubectl("get", "pod", "web", "-n", "demo", "-o", "json").stdout)[
                            "metadata"]["uid"]},
                        "reason": "Testing", "message": "hello from the test", "type": "Normal",
                        "source": {"component": "e2e"}})
    cluster.kubectl("create", "-f", "-", stdin=event)
    out = cluster.kubectl("describe", "pod", "web", "-n", "demo").stdout
    assert "Priority Class Name:  high" in out
    assert "hello from the test" in out and "Testing" in out


def test_label_annotate_patch(cluster: ServerProcess) -> None:
    cluster.kubectl("label", "pod", "other", "-n", "demo", "tier=x")
    cluster.kubectl("annotate", "pod", "other", "-n", "demo", "note=y")
    cluster.kubectl("patch", "pod", "other", "-n", "demo", "-p",
                    '{"spec":{"containers":[{"name":"main","image":"busybox:2"}]}}')
    cluster.kubectl("patch", "pod", "other", "-n", "demo", "--type=merge", "-p",
                    '{"metadata":{"labels":{"tier":null}}}')
    # the last label gone, so is the map (omitempty, as upstream's JSON): a JSON patch adds the map itself
    cluster.kubectl("patch", "pod", "other", "-n", "demo", "--type=json", "-p",
                    '[{"op":"add","path":"/metadata/labels","value":{"j":"2"}}]')
    pod = json.loads(cluster.kubectl("get", "pod", "other", "-n", "demo", "-o", "json").stdout)
    assert pod["metadata"]["labels"] == {"j": "2"}
    assert pod["metadata"]["annotations"]["note"] == "y"
    assert pod["spec"]["containers"][0]["image"] == "busybox:2"
    same = cluster.kubectl("patch", "pod", "other", "-n", "demo", "--type=merge", "-p",
                           '{"metadata":{"labels":{"j":"2"}}}').stdout
    assert "(no change)" in same
    forbidden = cluster.kubectl("patch", "pod", "other", "-n", "demo", "-p", '{"spec":{"restartPolicy":"Never"}}',
                                check=False)
    assert forbidden.returncode != 0 and "pod updates may not change fields" in forbidden.stderr


def test_cordon_uncordon(cluster: ServerProcess) -> None:
    cluster.kubectl("cordon", "node-1")
    assert "Ready,SchedulingDisabled" in cluster.kubectl("get", "nodes").stdout
    cluster.kubectl("uncordon", "node-1")
    assert "SchedulingDisabled" not in cluster.kubectl("get", "nodes").stdout


def test_imperative_create_sends_protobuf(cluster: ServerProcess) -> None:
    cluster.kubectl("create", "namespace", "proto")
    cluster.kubectl("create", "priorityclass", "p1", "--value=10", "--description=hi")
    cluster.kubectl("create", "pdb", "pd1", "-n", "proto", "--selector=app=x", "--min-available=50%")
    pc = json.loads(cluster.kubectl("get", "pc", "p1", "-o", "json").stdout)
    assert (pc["value"], pc["description"]) == (10, "hi")
    pdb = json.loads(cluster.kubectl("get", "pdb", "pd1", "-n", "proto", "-o", "json").stdout)
    assert pdb["spec"] == {"minAvailable": "50%", "selector": {"matchLabels": {"app": "x"}}}


def _bound_pod(cluster: ServerProcess, name: str, grace: int = 30) -> None:
    cluster.kubectl("run", name, "-n", "demo", "--image=busybox", "--labels=app=drain",
                    f'--overrides={{"spec":{{"nodeName":"node-1","terminationGracePeriodSeconds":{grace}}}}}')


def test_delete_default_grace_waits_and_force_removes(cluster: ServerProcess) -> None:
    _bound_pod(cluster, "g1")
    res = cluster.kubectl("delete", "pod", "g1", "-n", "demo", "--wait=false")
    assert 'pod "g1" deleted' in res.stdout
    pod = json.loads(cluster.kubectl("get", "pod", "g1", "-n", "demo", "-o", "json").stdout)
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    assert "Terminating" in cluster.kubectl("get", "pod", "g1", "-n", "demo").stdout
    cluster.kubectl("delete", "pod", "g1", "-n", "demo", "--grace-period=5", "--wait=false")
    pod = json.loads(cluster.kubectl("get", "pod", "g1", "-n", "demo", "-o", "json").stdout)
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 5
    forced = cluster.kubectl("delete", "pod", "g1", "-n", "demo", "--grace-period=0", "--force")
    assert "Immediate deletion does not wait" in forced.stderr
    assert cluster.kubectl("get", "pod", "g1", "-n", "demo", check=False).returncode != 0


def test_delete_waits_for_removal(cluster: ServerProcess) -> None:
    """`kubectl delete` blocks on a watch until the agent (here: a client) removes the object."""
    _bound_pod(cluster, "g2")
    env_proc = subprocess.Popen(["kubectl", "delete", "pod", "g2", "-n", "demo", "--timeout=30s"],
                                env={"KUBECONFIG": str(cluster.kubeconfig), "HOME": str(cluster.home),
                                     "PATH": "/usr/bin:/bin:/usr/local/bin"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pod = json.loads(cluster.kubectl("get", "pod", "g2", "-n", "demo", "-o", "json").stdout)
        if pod["metadata"].get("deletionTimestamp"):
            break
        time.sleep(0.1)
    time.sleep(0.5)
    assert env_proc.poll() is None  # still waiting: a bound pod stays until its agent confirms
    cluster.kubectl("delete", "pod", "g2", "-n", "demo", "--grace-period=0", "--force")
    out, _ = env_proc.communicate(timeout=20)
    assert env_proc.returncode == 0 and 'pod "g2" deleted' in out


def test_get_watch_streams_changes(cluster: ServerProcess) -> None:
    proc = subprocess.Popen(["kubectl", "get", "pods", "-n", "demo", "-w", "--request-timeout=6s"],
                            env={"KUBECONFIG": str(cluster.kubeconfig), "HOME": str(cluster.home),
                                 "PATH": "/usr/bin:/bin:/usr/local/bin"}, stdout=subprocess.PIPE, text=True)
    time.sleep(1.5)
    cluster.kubectl("run", "watched", "-n", "demo", "--image=busybox")
    time.sleep(1.5)
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    lines = [line.split() for line in out.splitlines()]
    assert lines[0][:3] == ["NAME", "READY", "STATUS"]
    assert any(line[0] == "watched" for line in lines[1:])


def test_drain_evicts_within_budget(cluster: ServerProcess) -> None:
    cluster.kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "drain-pdb",
                                                                               "namespace": "demo"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "drain"}}}}))
    for name in ("d1", "d2"):
        _bound_pod(cluster, name)
        cluster.kubectl("patch", "pod", name, "-n", "demo", "--subresource=status", "--type=merge", "-p",
                        '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}')
    res = cluster.kubectl("drain", "node-1", "--force", "--timeout=6s", "--pod-selector=app=drain", check=False,
                          timeout=60)
    assert "Cannot evict pod as it would violate the pod's disruption budget." in res.stderr
    pods = json.loads(cluster.kubectl("get", "pods", "-n", "demo", "-l", "app=drain", "-o", "json").stdout)
    terminating = [p["metadata"]["name"] for p in pods["items"] if p["metadata"].get("deletionTimestamp")]
    assert len(terminating) == 1
    assert "SchedulingDisabled" in cluster.kubectl("get", "nodes").stdout
    cluster.kubectl("uncordon", "node-1")


def test_drain_without_eviction_sends_protobuf_delete(cluster: ServerProcess) -> None:
    cluster.kubectl("create", "namespace", "drain-proto")
    cluster.kubectl("run", "pd", "-n", "drain-proto", "--image=busybox", "--labels=app=proto",
                    '--overrides={"spec":{"nodeName":"node-1","terminationGracePeriodSeconds":7}}')
    cluster.kubectl("drain", "node-1", "--force", "--disable-eviction", "--pod-selector=app=proto",
                    "--grace-period=3", "--timeout=3s", check=False)
    pod = json.loads(cluster.kubectl("get", "pod", "pd", "-n", "drain-proto", "-o", "json").stdout)
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 3
    cluster.kubectl("uncordon", "node-1")
