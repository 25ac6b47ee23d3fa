"""`enums.causes` names every enumerated field outside its values wherever the models lead, in its walk's order:
the walk looks only at the fields that are a row or lead to one (`_relevant`), and must find what a walk of every
field found, in the same order. Each case lists the paths expected, in order (main's answers before the change)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.apiserver import enums
from kubelite.testing.builders import make_pod


def _pod(spec: dict[str, Any], **containers: Any) -> dict[str, Any]:
    body = make_pod("p").obj()
    body["spec"].update(spec)
    body["spec"]["containers"][0].update(containers)
    return body


CASES = [
    pytest.param("V1Pod", _pod({}), [], id="a valid pod: none"),
    pytest.param("V1Pod", _pod({"restartPolicy": "Sometimes", "dnsPolicy": "Nope"}), [
        "spec.restartPolicy", "spec.dnsPolicy"], id="two of the spec's own, in the model's order"),
    pytest.param("V1Pod", _pod({"tolerations": [{"operator": "Maybe"}, {"effect": "Later", "operator": "Equal"}]},
                               imagePullPolicy="Sometimes", ports=[{"containerPort": 1, "protocol": "QUIC"}]), [
        "spec.containers[0].ports[0].protocol", "spec.containers[0].imagePullPolicy", "spec.tolerations[0].operator",
        "spec.tolerations[1].effect"], id="in lists of structs, at two depths"),
    pytest.param("V1Pod", _pod({"containers": [{"name": "a", "image": "i", "livenessProbe": {"httpGet": {
        "port": 80, "scheme": "FTP"}}}]}), ["spec.containers[0].livenessProbe.httpGet.scheme"],
        id="four structs down"),
    pytest.param("V1Deployment", {"spec": {"template": _pod({"restartPolicy": "Sometimes"})}}, [
        "spec.template.spec.restartPolicy"], id="a pod template in another kind"),
    pytest.param("V1PersistentVolumeClaim", {"spec": {"accessModes": ["ReadWriteOnce", "WriteSome", "ReadSome"]}},
                 ["spec.accessModes", "spec.accessModes"], id="a list of enums: each value outside, named as a whole"),
    pytest.param("V1ConfigMap", {"data": {"restartPolicy": "Sometimes"}}, [], id="a kind that reaches no row"),
]


@pytest.mark.parametrize(("model", "obj", "paths"), CASES)
def test_causes_name_each_unsupported_value_in_order(model: str, obj: dict[str, Any],
                                                              paths: list[str]) -> None:
    found = enums.causes(obj, model)
    assert [c.field for c in found] == paths
    assert all(c.reason == "FieldValueNotSupported" for c in found)
