"""kubectl 1.32 and the official Python client against a real server, over protobuf.

kubectl's typed clients send imperative `create` bodies as protobuf and ask for protobuf answers first
(research/kubectl-compat.md §12); `-v=8` shows both Content-Types, so each test checks protobuf really crossed
the wire both ways: kubectl decodes the protobuf 201 with Go's generated code (a strict check of the encoder)
before it prints "created".
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from kubernetes import client, config

from kubelite.apiserver import protobuf
from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e
PB = "application/vnd.kubernetes.protobuf"


def _sent_protobuf(cluster: ServerProcess, *args: str) -> str:
    """Run kubectl -v=8; assert it sent a protobuf body and got a protobuf answer; return its stdout."""
    res = cluster.kubectl("-v=8", *args)
    types = re.findall(r"Content-Type: (\S+)", res.stderr)
    assert types[:2] == [PB, PB], types
    return res.stdout


def _get(cluster: ServerProcess, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def test_create_deployment(server: ServerProcess) -> None:
    out = _sent_protobuf(server, "create", "deployment", "web", "--image=busybox", "--replicas=3", "--port=80",
                         "--", "sleep", "3600")
    assert "deployment.apps/web created" in out
    spec = _get(server, "deployment", "web")["spec"]
    assert spec["replicas"] == 3 and spec["selector"] == {"matchLabels": {"app": "web"}}
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%",
                                                                            "maxSurge": "25%"}}
    container = spec["template"]["spec"]["containers"][0]
    assert (container["command"], container["ports"]) == (["sleep", "3600"], [{"containerPort": 80,
                                                                                 "protocol": "TCP"}])


def test_create_job(server: ServerProcess) -> None:
    _sent_protobuf(server, "create", "job", "hello", "--image=busybox", "--", "sh", "-c", "echo hi")
    spec = _get(server, "job", "hello")["spec"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert spec["template"]["spec"]["containers"][0]["command"] == ["sh", "-c", "echo hi"]


def test_create_cronjob(server: ServerProcess) -> None:
    _sent_protobuf(server, "create", "cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *", "--",
                   "sh", "-c", "echo hi")
    spec = _get(server, "cronjob", "tick")["spec"]
    assert (spec["schedule"], spec["concurrencyPolicy"], spec["successfulJobsHistoryLimit"]) == ("*/5 * * * *",
                                                                                                  "Allow", 3)
    template = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert (template["restartPolicy"], template["containers"][0]["command"]) == ("OnFailure", ["sh", "-c", "echo hi"])


def test_create_namespace_priorityclass_pdb(server: ServerProcess) -> None:
    _sent_protobuf(server, "create", "namespace", "proto")
    _sent_protobuf(server, "create", "priorityclass", "p1", "--value=10", "--description=hi",
                   "--preemption-policy=Never")
    _sent_protobuf(server, "create", "pdb", "pd1", "-n", "proto", "--selector=app=x", "--max-unavailable=1")
    assert _get(server, "namespace", "proto")["status"]["phase"] == "Active"
    pc = _get(server, "pc", "p1")
    assert (pc["value"], pc["description"], pc["preemptionPolicy"]) == (10, "hi", "Never")
    assert _get(server, "pdb", "pd1", "-n", "proto")["spec"] == {
        "maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# Issue 11's imperative creates, each sent as protobuf and read back both ways: (id, kubectl create arguments —
# {pki} is the server's pki dir —, the object to get, fields it must have, lines `kubectl describe` prints).
CREATES = [
    ("configmap from literals", ["configmap", "cm", "--from-literal=a=1", "--from-literal=b=two"], ("cm", "cm"),
     {"data": {"a": "1", "b": "two"}}, ["a:\n----\n1", "b:\n----\ntwo"]),
    ("generic secret", ["secret", "generic", "gen", "--from-literal=pw=hunter2"], ("secret", "gen"),
     {"type": "Opaque", "data": {"pw": _b64("hunter2")}}, ["Type:  Opaque", "pw:  7 bytes"]),
    ("tls secret", ["secret", "tls", "tls", "--cert={pki}/server.crt", "--key={pki}/server.key"], ("secret", "tls"),
     {"type": "kubernetes.io/tls"}, ["Type:  kubernetes.io/tls", "tls.crt:", "tls.key:"]),
    ("docker-registry secret", ["secret", "docker-registry", "reg", "--docker-server=r.io", "--docker-username=u",
                                "--docker-password=p"], ("secret", "reg"),
     {"type": "kubernetes.io/dockerconfigjson"}, ["Type:  kubernetes.io/dockerconfigjson", ".dockerconfigjson:"]),
    ("clusterip service", ["service", "clusterip", "cip", "--tcp=80:8080"], ("svc", "cip"),
     {"spec": {"type": "ClusterIP", "selector": {"app": "cip"}}},
     ["Type:                     ClusterIP", "TargetPort:               8080/TCP"]),
    ("nodeport service", ["service", "nodeport", "np", "--tcp=80:8080", "--node-port=30111"], ("svc", "np"),
     {"spec": {"type": "NodePort"}}, ["NodePort:                 80-8080  30111/TCP"]),
    ("headless service", ["service", "clusterip", "hl", "--clusterip=None"], ("svc", "hl"),
     {"spec": {"clusterIP": "None"}}, ["IP: None", "IPs: None"]),
    ("serviceaccount", ["serviceaccount", "robot"], ("sa", "robot"), {"metadata": {"name": "robot"}},
     ["Name:                robot", "Tokens:              <none>"]),
    # (a quota on nothing the module's other tests create: the server is shared)
    ("quota", ["quota", "q", "--hard=services.loadbalancers=2"], ("quota", "q"),
     {"spec": {"hard": {"services.loadbalancers": "2"}}}, ["Name: q", "Resource Used Hard"]),
    ("ingress", ["ingress", "ing", "--rule=foo.com/bar=svc1:8080"], ("ing", "ing"),
     {"spec": {"rules": [{"host": "foo.com", "http": {"paths": [{"path": "/bar", "pathType": "Exact", "backend": {
         "service": {"name": "svc1", "port": {"number": 8080}}}}]}}]}}, ["foo.com", "/bar svc1:8080"]),
]


def _contains(got: Any, want: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and all(_contains(got.get(k), v) for k, v in want.items())
    return bool(got == want)


@pytest.mark.parametrize("args,target,fields,described", [c[1:] for c in CREATES], ids=[c[0] for c in CREATES])
def test_create_issue_11_kinds(server: ServerProcess, args: list[str], target: tuple[str, str], fields: Any,
                               described: list[str]) -> None:
    pki = str(server.data_dir / "pki")
    out = _sent_protobuf(server, "create", *[a.replace("{pki}", pki) for a in args])
    assert " created" in out, out
    obj = _get(server, *target)
    assert _contains(obj, fields), obj
    text = server.kubectl("describe", *target).stdout
    for line in described:  # whitespace-insensitive: kubectl's tabwriter aligns each block by its widest line
        assert " ".join(line.split()) in " ".join(text.split()), text


def test_create_token_is_protobuf_both_ways(server: ServerProcess) -> None:
    """TokenRequest is answered by the API server itself (no storage), still in its upstream message."""
    server.kubectl("create", "serviceaccount", "bot")
    token = _sent_protobuf(server, "create", "token", "bot", "--duration=10m").strip()
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sub"] == "system:serviceaccount:default:bot" and claims["exp"] - claims["iat"] == 600


DEPLOYMENT = client.V1Deployment(
    metadata=client.V1ObjectMeta(name="full", labels={"app": "full"}),
    spec=client.V1DeploymentSpec(
        replicas=0, min_ready_seconds=5, revision_history_limit=3, paused=True, progress_deadline_seconds=120,
        strategy=client.V1DeploymentStrategy(type="RollingUpdate", rolling_update=client.V1RollingUpdateDeployment(
            max_surge=2, max_unavailable="10%")),
        selector=client.V1LabelSelector(match_labels={"app": "full"}),
        template=client.V1PodTemplateSpec(
            metadata=client.V1ObjectMeta(labels={"app": "full"}),
            spec=client.V1PodSpec(node_selector={"disk": "ssd"}, containers=[client.V1Container(
                name="c", image="busybox", env=[client.V1EnvVar(name="A", value="1")],
                resources=client.V1ResourceRequirements(limits={"cpu": "250m", "memory": "64Mi"}),
                readiness_probe=client.V1Probe(_exec=client.V1ExecAction(command=["true"]), period_seconds=2))]))))


def test_python_client_deployment_read_back_as_protobuf(server: ServerProcess) -> None:
    """A Deployment the official client created as JSON reads back as protobuf with every field (the old
    decoder lost minReadySeconds, revisionHistoryLimit, paused, progressDeadlineSeconds, rollingUpdate)."""
    api_client = config.new_client_from_config(config_file=str(server.kubeconfig))
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment("default", DEPLOYMENT)
    answers = {}
    for accept in (f"{PB}, application/json", "application/json"):
        request = api_client.param_serialize("GET", "/apis/apps/v1/namespaces/default/deployments/full",
                                             header_params={"Accept": accept}, auth_settings=["BearerToken"])
        resp = api_client.call_api(*request)
        resp.read()
        answers[resp.getheader("Content-Type")] = resp.data
    got = protobuf.decode(answers[PB])
    as_json = json.loads(answers["application/json"])
    assert got["spec"] == as_json["spec"], (got["spec"], as_json["spec"])
    assert (got["spec"]["replicas"], got["spec"]["minReadySeconds"], got["spec"]["paused"]) == (0, 5, True)
    described = server.kubectl("describe", "deployment", "full").stdout
    assert got["spec"]["revisionHistoryLimit"] == 3 and got["spec"]["progressDeadlineSeconds"] == 120
    for line in ("MinReadySeconds:        5", "RollingUpdateStrategy:  10% max unavailable, 2 max surge",
                 "StrategyType:           RollingUpdate", "Limits:\n      cpu:      250m"):
        assert line in described, described
    assert "Requests:" not in described, "a template gets no requests from its limits (SetDefaults_Pod is a Pod's)"


POD = """
apiVersion: v1
kind: Pod
metadata: {name: described, labels: {app: x}}
spec:
  nodeName: node-1
  containers:
  - name: c
    image: busybox
    resources: {requests: {cpu: 100m, memory: 64Mi}}
    readinessProbe: {httpGet: {port: 8080, path: /}}
    env: [{name: A, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
"""
STATUS = {"phase": "Running", "startTime": "2026-11-24T10:00:00Z", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
          "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-24T10:00:01Z"}],
          "containerStatuses": [{"name": "c", "ready": True, "restartCount": 2, "image": "busybox", "imageID": "",
                                 "containerID": "kubelite://abc", "started": True,
                                 "state": {"running": {"startedAt": "2026-11-24T10:00:02Z"}}}]}


def test_describe_pod_decodes_a_protobuf_answer(server: ServerProcess) -> None:
    """`kubectl describe pod` reads the pod a second time through its typed client, protobuf first: Go's generated
    decoder must make the same Pod of our bytes (times, quantities, an IntOrString port, pointers)."""
    server.kubectl("apply", "-f", "-", stdin=POD)
    server.kubectl("patch", "pod", "described", "--subresource=status", "--type=merge",
                   "-p", json.dumps({"status": STATUS}))
    res = server.kubectl("-v=8", "describe", "pod", "described")
    answers = re.findall(r"GET \S+/pods/described\n.*?Content-Type: (\S+)", res.stderr, re.S)
    assert PB in answers, answers
    for line in ("Start Time:       Tue, 24 Nov 2026 10:00:00 +0000", "Started:      Tue, 24 Nov 2026 10:00:02 +0000",
                 "Restart Count:  2", "cpu:      100m", "http-get http://:8080/ delay=0s timeout=1s period=10s",
                 "A:     described (v1:metadata.name)", "node.kubernetes.io/not-ready:NoExecute op=Exists for 300s"):
        # kubectl's tabwriter aligns a block by its widest line (the service-account Mounts line widens Environment)
        assert " ".join(line.split()) in " ".join(res.stdout.split()), res.stdout
