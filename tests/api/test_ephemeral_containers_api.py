"""pods/ephemeralcontainers through the real server: discovery, GET, strategic merge PATCH (what kubectl debug sends),
PUT, and the refusals with upstream's field paths and messages (ValidatePodEphemeralContainersUpdate,
podEphemeralContainersStrategy, ValidatePodCreate)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kubelite.testing.builders import make_pod
from tests.api.test_rest import PODS, call

Client = TestClient  # type: ignore[type-arg]
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
DEBUGGER = {"name": "debugger", "image": "busybox", "command": ["sh"], "stdin": True, "tty": True,
            "targetContainerName": "main", "terminationMessagePolicy": "File"}


def _patch(*containers: dict[str, Any]) -> dict[str, Any]:
    """kubectl debug's two-way strategic merge patch: the pod's ephemeral containers, merged by name."""
    return {"spec": {"ephemeralContainers": list(containers)}}


async def _pod(api: Client, name: str = "p", **meta: Any) -> dict[str, Any]:
    body = make_pod(name).node("n1").obj()
    body["metadata"].update(meta)
    return await call(api, "POST", PODS, body, expect=201)  # type: ignore[no-any-return]


async def test_discovery_lists_the_subresource(api: Client) -> None:
    listed = await call(api, "GET", "/api/v1", expect=200)
    entry = next(r for r in listed["resources"] if r["name"] == "pods/ephemeralcontainers")
    assert (entry["kind"], entry["verbs"], entry["namespaced"]) == ("Pod", ["get", "patch", "update"], True)


async def test_strategic_merge_patch_adds_a_defaulted_container_and_nothing_else(api: Client) -> None:
    before = await _pod(api)
    patch = _patch(DEBUGGER)
    patch["metadata"] = {"labels": {"sneaked": "in"}}  # dropped, as dropNonEphemeralContainerUpdates drops it
    patch["spec"]["activeDeadlineSeconds"] = 5
    pod = await call(api, "PATCH", f"{PODS}/p/ephemeralcontainers", patch, SMP, expect=200)
    assert pod["spec"]["ephemeralContainers"] == [{
        **DEBUGGER, "imagePullPolicy": "Always", "terminationMessagePath": "/dev/termination-log", "resources": {}}]
    assert "labels" not in pod["metadata"] and "activeDeadlineSeconds" not in pod["spec"]
    assert int(pod["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    got = await call(api, "GET", f"{PODS}/p/ephemeralcontainers", expect=200)
    assert got == pod and got["kind"] == "Pod"
    # a second debugger merges in by name; the first stays as it was
    second = {"name": "debugger-2", "image": "busybox"}
    pod = await call(api, "PATCH", f"{PODS}/p/ephemeralcontainers", _patch(second), SMP, expect=200)
    assert [c["name"] for c in pod["spec"]["ephemeralContainers"]] == ["debugger", "debugger-2"]


async def test_put_takes_a_whole_pod(api: Client) -> None:
    pod = await _pod(api)
    pod["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox:1.36"}]
    updated = await call(api, "PUT", f"{PODS}/p/ephemeralcontainers", pod, expect=200)
    assert updated["spec"]["ephemeralContainers"][0]["imagePullPolicy"] == "IfNotPresent"
    stale = dict(updated, metadata={**updated["metadata"], "resourceVersion": pod["metadata"]["resourceVersion"]})
    await call(api, "PUT", f"{PODS}/p/ephemeralcontainers", stale, expect=409)


REFUSALS = [
    ("removing one", MERGE, {"spec": {"ephemeralContainers": []}},
     "spec.ephemeralContainers", 'Forbidden: existing ephemeral containers "debugger" may not be removed\n'),
    ("changing one", SMP, _patch({"name": "debugger", "image": "alpine"}),
     "spec.ephemeralContainers", 'Forbidden: existing ephemeral containers "debugger" may not be changed\n'),
    ("a name taken by a container", SMP, _patch({"name": "main", "image": "busybox"}),
     "spec.ephemeralContainers[1].name", 'Duplicate value: "main"'),
    ("a target that is no container", SMP, _patch({"name": "d2", "image": "busybox", "targetContainerName": "nope"}),
     "spec.ephemeralContainers[1].targetContainerName", 'Not found: "nope"'),
    ("a target that is ephemeral", SMP, _patch({"name": "d2", "image": "busybox", "targetContainerName": "debugger"}),
     "spec.ephemeralContainers[1].targetContainerName", 'Not found: "debugger"'),
    ("ports", SMP, _patch({"name": "d2", "image": "busybox", "ports": [{"containerPort": 80}]}),
     "spec.ephemeralContainers[1].ports", "Forbidden: cannot be set for an Ephemeral Container"),
    ("a probe", SMP, _patch({"name": "d2", "image": "busybox", "readinessProbe": {"tcpSocket": {"port": 80}}}),
     "spec.ephemeralContainers[1].readinessProbe", "Forbidden: cannot be set for an Ephemeral Container"),
    ("lifecycle", SMP, _patch({"name": "d2", "image": "busybox", "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}}),
     "spec.ephemeralContainers[1].lifecycle", "Forbidden: cannot be set for an Ephemeral Container"),
    ("resources", SMP, _patch({"name": "d2", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}),
     "spec.ephemeralContainers[1].resources", "Forbidden: cannot be set for an Ephemeral Container"),
    ("a restart policy", SMP, _patch({"name": "d2", "image": "busybox", "restartPolicy": "Always"}),
     "spec.ephemeralContainers[1].restartPolicy", "Forbidden: cannot be set for an Ephemeral Container"),
    ("an unknown pull policy", SMP, _patch({"name": "d2", "image": "busybox", "imagePullPolicy": "Sometimes"}),
     "spec.ephemeralContainers[1].imagePullPolicy",
     'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"'),
]


@pytest.mark.parametrize(("how", "ctype", "patch", "field", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_refused_updates_are_422_with_upstreams_causes(api: Client, how: str, ctype: str, patch: Any,
                                                              field: str, message: str) -> None:
    await _pod(api)
    await call(api, "PATCH", f"{PODS}/p/ephemeralcontainers", _patch(DEBUGGER), SMP, expect=200)
    status = await call(api, "PATCH", f"{PODS}/p/ephemeralcontainers", patch, ctype, expect=422)
    assert status["reason"] == "Invalid"
    causes = [(c["field"], c["message"]) for c in status["details"]["causes"]]
    assert any(f == field and m.startswith(message) for f, m in causes), causes
    assert status["message"].startswith(f'Pod "p" is invalid: {field}: {message}')


async def test_static_pods_take_none(api: Client) -> None:
    await _pod(api, annotations={"kubernetes.io/config.mirror": "foo"})
    status = await call(api, "PATCH", f"{PODS}/p/ephemeralcontainers", _patch(DEBUGGER), SMP, expect=422)
    assert status["message"] == 'Pod "p" is invalid: : Forbidden: static pods do not support ephemeral containers'


async def test_plain_pod_writes_cannot_set_them(api: Client) -> None:
    body = make_pod("p").obj()
    body["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox"}]
    status = await call(api, "POST", PODS, body, expect=422)
    assert status["message"] == 'Pod "p" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create'
    await _pod(api, "q")
    status = await call(api, "PATCH", f"{PODS}/q", _patch(DEBUGGER), SMP, expect=422)
    assert status["details"]["causes"][0]["field"] == "spec"
    assert "pod updates may not change fields other than" in status["message"]


async def test_a_missing_pod_is_404_and_other_verbs_405(api: Client) -> None:
    await call(api, "PATCH", f"{PODS}/nope/ephemeralcontainers", _patch(DEBUGGER), SMP, expect=404)
    await call(api, "GET", f"{PODS}/nope/ephemeralcontainers", expect=404)
    await _pod(api)
    await call(api, "DELETE", f"{PODS}/p/ephemeralcontainers", expect=405)
    await call(api, "POST", f"{PODS}/p/ephemeralcontainers", _patch(DEBUGGER), expect=405)


async def test_pod_templates_cannot_hold_them(api: Client) -> None:
    """ValidatePodTemplateSpec: a Deployment's (or a Job's) pods could never be created with them."""
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {
        "containers": [{"name": "main", "image": "busybox"}],
        "ephemeralContainers": [{"name": "debugger", "image": "busybox"}]}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template}}
    status = await call(api, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment, expect=422)
    assert ("spec.template.spec.ephemeralContainers", "Forbidden: ephemeral containers not allowed in pod template") \
        in [(c["field"], c["message"]) for c in status["details"]["causes"]]
