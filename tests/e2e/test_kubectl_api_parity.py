"""The QA repros that found kubelite's API server differing from kube-apiserver 1.32, replayed with real kubectl and
the official Python client against a real `kubelite server`: re-applied manifests (strategic merge metadata from
upstream's struct tags), a Service name that is no DNS-1035 label, ListOptions validation, collection DELETE."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e


def _service(target_port: int, extra_port: bool) -> str:
    ports = [{"name": "http", "port": 80, "targetPort": target_port}]
    if extra_port:
        ports.append({"name": "https", "port": 443, "targetPort": 8443})
    return json.dumps({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "qa-web"},
                       "spec": {"selector": {"app": "qa-web"}, "ports": ports}})


def _job(env: str) -> str:
    return json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "qa-job"}, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "env": [{"name": "A", "value": env}]}]}}}})


REAPPLY_CASES = [
    pytest.param(_service(8080, False), _service(9090, True), 0, "service/qa-web configured",
                 id="a re-applied Service merges its ports by port"),
    pytest.param(_job("1"), _job("2"), 1, "field is immutable",
                 id="a re-applied Job with a changed env is refused as immutable"),
]


@pytest.mark.parametrize(("first", "second", "code", "said"), REAPPLY_CASES)
def test_kubectl_reapply(server: ServerProcess, first: str, second: str, code: int, said: str) -> None:
    server.kubectl("apply", "-f", "-", stdin=first)
    res = server.kubectl("apply", "-f", "-", stdin=second, check=False)
    assert res.returncode == code, res.stderr
    assert said in res.stdout + res.stderr
    assert "$setElementOrder" not in res.stderr
    if code == 0:
        ports = json.loads(server.kubectl("get", "svc", "qa-web", "-o", "json").stdout)["spec"]["ports"]
        assert [(p["name"], p["port"], p["targetPort"]) for p in ports] == [("http", 80, 9090), ("https", 443, 8443)]


REFUSAL_CASES = [
    pytest.param(["create", "svc", "clusterip", "1abc", "--tcp=80"], 'metadata.name: Invalid value: "1abc": a DNS-1035 '
                 "label must consist of lower case alphanumeric characters",
                 id="a service name must be a DNS-1035 label"),
    pytest.param(["get", "--raw", "/api/v1/namespaces/default/pods?resourceVersion=1&resourceVersionMatch=Bogus"],
                 'resourceVersionMatch: Unsupported value: "Bogus"', id="an unknown resourceVersionMatch"),
    pytest.param(["get", "--raw", "/api/v1/namespaces/default/pods?resourceVersion=abc"],
                 "invalid resource version", id="a resourceVersion that is not a number"),
]


@pytest.mark.parametrize(("args", "said"), REFUSAL_CASES)
def test_kubectl_refusals(server: ServerProcess, args: list[str], said: str) -> None:
    res = server.kubectl(*args, check=False)
    assert res.returncode != 0 and said in res.stderr, res.stderr


def test_python_client_deletes_a_collection(server: ServerProcess) -> None:
    v1 = client.CoreV1Api(config.new_client_from_config(config_file=str(server.kubeconfig)))
    for name, app in (("qa-a1", "a"), ("qa-a2", "a"), ("qa-b1", "b")):
        v1.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, labels={"qa": app})))
    v1.delete_collection_namespaced_config_map("default", label_selector="qa=a")
    left = [c.metadata.name for c in v1.list_namespaced_config_map("default", label_selector="qa").items]
    assert left == ["qa-b1"]


RBAC_CASES = [
    pytest.param("delete,list", 403, id="the delete verb does not allow a collection delete"),
    pytest.param("deletecollection", 200, id="the deletecollection verb allows it"),
]


@pytest.mark.parametrize(("verbs", "status"), RBAC_CASES)
def test_collection_delete_is_authorized_as_deletecollection(server: ServerProcess, verbs: str, status: int) -> None:
    account = f"qa-{verbs.split(',')[0]}"
    server.kubectl("create", "serviceaccount", account)
    server.kubectl("create", "role", account, f"--verb={verbs}", "--resource=configmaps")
    server.kubectl("create", "rolebinding", account, f"--role={account}", f"--serviceaccount=default:{account}")
    token = server.kubectl("create", "token", account).stdout.strip()
    configuration = client.Configuration()
    configuration.host = f"https://127.0.0.1:{server.port}"
    configuration.api_key = {"authorization": f"Bearer {token}"}
    configuration.ssl_ca_cert = str(server.data_dir / "pki" / "ca.crt")
    v1 = client.CoreV1Api(client.ApiClient(configuration))
    try:
        v1.delete_collection_namespaced_config_map("default", label_selector="qa=none")
        answered = 200
    except ApiException as exc:
        answered = exc.status
        assert 'cannot deletecollection resource "configmaps"' in json.loads(exc.body)["message"]
    assert answered == status
