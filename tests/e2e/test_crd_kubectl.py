"""CustomResourceDefinitions end to end: the real kubectl v1.32 and the official Python client's CustomObjectsApi
against a real `kubelite server` (HTTPS + token), as an operator's or a Helm chart's install would use them."""

from __future__ import annotations

import pytest
from kubernetes import client, config

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Spec
      type: string
      jsonPath: .spec.cronSpec
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: CronTab runs an image on a schedule.
        properties:
          spec:
            type: object
            properties:
              cronSpec:
                type: string
                description: The schedule, in cron format.
              image:
                type: string
              replicas:
                type: integer
                default: 1
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""

CR = """
apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: my-cron
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
"""


def test_kubectl_installs_a_crd_and_manages_its_resources(server: ServerProcess) -> None:
    server.kubectl("apply", "-f", "-", stdin=CRD)
    server.kubectl("wait", "--for=condition=Established", "crd/crontabs.stable.example.com", "--timeout=20s")
    server.kubectl("apply", "-f", "-", stdin=CR)  # client-side validation against the published schema
    table = server.kubectl("get", "crontabs").stdout.splitlines()
    assert table[0].split() == ["NAME", "SPEC", "REPLICAS", "AGE"]
    assert table[1].split()[:7] == ["my-cron", "*", "*", "*", "*", "*/5", "1"]
    assert server.kubectl("get", "ct", "-o", "name").stdout.strip() == "crontab.stable.example.com/my-cron"
    assert "my-cron" in server.kubectl("get", "crontab.stable.example.com", "my-cron").stdout
    server.kubectl("apply", "-f", "-", stdin=CR.replace("my-awesome-cron-image", "new-image"))  # a merge patch
    image = server.kubectl("get", "ct", "my-cron", "-o", "jsonpath={.spec.image}").stdout
    assert image == "new-image"
    server.kubectl("scale", "ct", "my-cron", "--replicas=3")
    assert server.kubectl("get", "ct", "my-cron", "-o", "jsonpath={.spec.replicas}").stdout == "3"
    server.kubectl("apply", "--server-side", "-f", "-", stdin=CR.replace("my-awesome-cron-image", "ssa-image"))
    assert server.kubectl("get", "ct", "my-cron", "-o", "jsonpath={.spec.image}").stdout == "ssa-image"
    described = server.kubectl("describe", "ct", "my-cron").stdout
    assert "Kind:         CronTab" in described and "Cron Spec:" in described
    explained = server.kubectl("explain", "crontabs.spec").stdout
    assert "cronSpec" in explained and "The schedule, in cron format." in explained
    bad = server.kubectl("apply", "-f", "-", stdin=CR.replace("my-awesome-cron-image", "1").replace(
        "image: 1", "image: {a: 1}"), check=False)
    assert bad.returncode != 0
    server.kubectl("delete", "crd", "crontabs.stable.example.com", "--timeout=30s")
    assert server.kubectl("get", "crd", "-o", "name").stdout.strip() == ""
    missing = server.kubectl("get", "crontabs", check=False)  # kubectl's discovery cache may still know the type
    assert missing.returncode != 0
    assert "the server doesn't have a resource type" in missing.stderr or \
        "the server could not find the requested resource" in missing.stderr


def test_custom_objects_api(server: ServerProcess) -> None:
    server.kubectl("apply", "-f", "-", stdin=CRD.replace("crontabs", "jobtabs").replace("crontab", "jobtab")
                   .replace("CronTab", "JobTab").replace("[ct]", "[jt]"))
    server.kubectl("wait", "--for=condition=Established", "crd/jobtabs.stable.example.com", "--timeout=20s")
    api = client.CustomObjectsApi(config.new_client_from_config(config_file=str(server.kubeconfig)))
    body = {"apiVersion": "stable.example.com/v1", "kind": "JobTab", "metadata": {"name": "j1", "labels": {"a": "b"}},
            "spec": {"cronSpec": "@daily", "image": "busybox"}}
    created = api.create_namespaced_custom_object("stable.example.com", "v1", "default", "jobtabs", body)
    assert created["spec"]["replicas"] == 1
    listed = api.list_namespaced_custom_object("stable.example.com", "v1", "default", "jobtabs", label_selector="a=b")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["j1"]
    patched = api.patch_namespaced_custom_object("stable.example.com", "v1", "default", "jobtabs", "j1",
                                                 {"spec": {"replicas": 3}})
    assert patched["spec"]["replicas"] == 3 and patched["metadata"]["generation"] == 2
    status = api.patch_namespaced_custom_object_status("stable.example.com", "v1", "default", "jobtabs", "j1",
                                                       {"status": {"lastRun": "now"}})
    assert status["status"] == {"lastRun": "now"}
    api.delete_namespaced_custom_object("stable.example.com", "v1", "default", "jobtabs", "j1")
    assert api.list_namespaced_custom_object("stable.example.com", "v1", "default", "jobtabs")["items"] == []
