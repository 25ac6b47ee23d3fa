"""`kubectl explain` against a real `kubelite server`: the OpenAPI v3 documents carry every kind's schema."""

from __future__ import annotations

import pytest

from tests.conftest import ServerProcess

EXPLAIN_CASES = [
    pytest.param(["pods"], ["KIND:       Pod", "VERSION:    v1",
                            "Pod is a collection of containers that can run on a host.",
                            "spec\t<PodSpec>", "metadata\t<ObjectMeta>", "status\t<PodStatus>"], id="pods"),
    pytest.param(["pod.spec.containers"], ["FIELD: containers <[]Container>",
                                           "List of containers belonging to the pod.",
                                           "name\t<string> -required-", "image\t<string>",
                                           "resources\t<ResourceRequirements>", "ports\t<[]ContainerPort>"],
                 id="pod.spec.containers"),
    pytest.param(["deployments.spec"], ["GROUP:      apps", "KIND:       Deployment", "FIELD: spec <DeploymentSpec>",
                                        "replicas\t<integer>", "selector\t<LabelSelector> -required-",
                                        "template\t<PodTemplateSpec> -required-"], id="deployments.spec"),
    pytest.param(["pod.spec.containers.resources.limits"], ["FIELD: limits <map[string]Quantity>"],
                 id="quantity maps"),
    pytest.param(["pod.spec.containers.livenessProbe.httpGet.port"], ["FIELD: port <IntOrString>"],
                 id="int or string"),
    pytest.param(["leases.spec.holderIdentity"], ["GROUP:      coordination.k8s.io", "FIELD: holderIdentity <string>"],
                 id="leases"),
    pytest.param(["priorityclasses"], ["KIND:       PriorityClass", "value\t<integer>",
                                       "metadata\t<ObjectMeta>\n    ObjectMeta is metadata"],
                 id="priorityclasses"),
    pytest.param(["events.involvedObject"], ["KIND:       Event", "FIELD: involvedObject <ObjectReference>"],
                 id="core events"),
    pytest.param(["schedulingexplanations"], ["GROUP:      kubelite.io", "KIND:       SchedulingExplanation",
                                              "metadata\t<ObjectMeta>"], id="kubelite kinds"),
]


@pytest.mark.parametrize(("args", "expected"), EXPLAIN_CASES)
def test_kubectl_explain(server: ServerProcess, args: list[str], expected: list[str]) -> None:
    out = server.kubectl("explain", *args).stdout
    for line in expected:
        assert line in out, f"{line!r} not in:\n{out}"


def test_kubectl_explain_recursive_and_unknown_field(server: ServerProcess) -> None:
    out = server.kubectl("explain", "pods.spec.affinity", "--recursive").stdout
    assert "nodeAffinity\t<NodeAffinity>" in out and "      matchExpressions\t<[]NodeSelectorRequirement>" in out
    missing = server.kubectl("explain", "pods.spec.nope", check=False)
    assert missing.returncode != 0 and 'field "nope" does not exist' in missing.stderr
