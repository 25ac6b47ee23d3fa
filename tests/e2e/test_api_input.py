"""Request bodies over TLS with kubectl (issue 10): read whole however they are split, and type-checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ServerProcess


def _pod(name: str, annotation: str = "", env: str = "") -> str:
    container: dict[str, object] = {"name": "c", "image": "busybox"}
    if env:
        container["env"] = [{"name": "BIG", "value": env}]
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "annotations": {"big": annotation} if annotation else {}},
                       "spec": {"containers": [container]}})


def test_kubectl_create_with_an_8kb_annotation_five_times(server: ServerProcess) -> None:
    for i in range(5):
        out = server.kubectl("create", "-f", "-", stdin=_pod(f"annotated-{i}", annotation="a" * 8192)).stdout
        assert f"pod/annotated-{i} created" in out
    got = json.loads(server.kubectl("get", "pod", "annotated-4", "-o", "json").stdout)
    assert len(got["metadata"]["annotations"]["big"]) == 8192


@pytest.mark.parametrize(("size", "expect"), [
    pytest.param(700 * 1024, "created", id="a 700 KB body is read whole"),
    pytest.param(int(3.5 * 1024 * 1024), "RequestEntityTooLarge", id="a body over 3 MiB is 413"),
])
def test_large_bodies(server: ServerProcess, tmp_path: Path, size: int, expect: str) -> None:
    name = f"large-{size}"
    server.kubectl("delete", "pod", name, "--ignore-not-found", "--grace-period=0")
    body = _pod(name, env="e" * size)
    (tmp_path / "pod.json").write_text(body)
    res = server.kubectl("create", "--raw", "/api/v1/namespaces/default/pods", "-f", str(tmp_path / "pod.json"),
                         check=False)
    if expect == "created":
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["metadata"]["name"] == name
        assert len(json.loads(server.kubectl("get", "pod", name, "-o", "json").stdout)
                   ["spec"]["containers"][0]["env"][0]["value"]) == size
    else:
        assert res.returncode != 0 and expect in res.stderr + res.stdout, (res.stdout, res.stderr)


def test_kubectl_create_of_a_type_confused_pod_is_refused(server: ServerProcess) -> None:
    """Issue 10, defect 2: the decoder's error reaches the user; the cluster's lists keep working."""
    bad = json.loads(_pod("confused"))
    bad["spec"]["affinity"] = 7
    res = server.kubectl("create", "-f", "-", stdin=json.dumps(bad), check=False)
    assert res.returncode != 0
    assert ('Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field '
            "PodSpec.spec.affinity of type v1.Affinity") in res.stderr
    assert "confused" not in server.kubectl("get", "pods", "-A").stdout
