"""batch/v1 Jobs through the API: defaults, generated selector, validation (TestValidateJob), update rules, Tables."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
JOBS = "/apis/batch/v1/namespaces/default/jobs"
MERGE = "application/merge-patch+json"


def job(name: str = "pi", **spec: Any) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": template, **spec}}


async def test_defaults_and_generated_selector(api: Client) -> None:
    out = await call(api, "POST", JOBS, job(), expect=201)
    spec, uid = out["spec"], out["metadata"]["uid"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"], spec["completionMode"],
            spec["suspend"], spec["podReplacementPolicy"]) == (1, 1, 6, "NonIndexed", False, "TerminatingOrFailed")
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = spec["template"]["metadata"]["labels"]
    assert labels == {"controller-uid": uid, "batch.kubernetes.io/controller-uid": uid, "job-name": "pi",
                      "batch.kubernetes.io/job-name": "pi"}
    assert out["metadata"]["generation"] == 1


async def test_parallelism_alone_leaves_completions_unset(api: Client) -> None:
    out = await call(api, "POST", JOBS, job(parallelism=3), expect=201)
    assert "completions" not in out["spec"] and out["spec"]["parallelism"] == 3


async def test_manual_selector_is_kept(api: Client) -> None:
    body = job(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    body["spec"]["template"]["metadata"] = {"labels": {"app": "x"}}
    out = await call(api, "POST", JOBS, body, expect=201)
    assert out["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "x"}


def _bad(mutate: Any) -> dict[str, Any]:
    body = job()
    mutate(body["spec"])
    return body


# Cases from TestValidateJob's errorCases (pkg/apis/batch/validation/validation_test.go), keyed as upstream
# by "field:detail".
INVALID = [
    pytest.param(_bad(lambda s: s.update(parallelism=-1)), "spec.parallelism", "must be greater than or equal to 0",
                 id="spec.parallelism:must be greater than or equal to 0"),
    pytest.param(_bad(lambda s: s.update(completions=-1)), "spec.completions", "must be greater than or equal to 0",
                 id="spec.completions:must be greater than or equal to 0"),
    pytest.param(_bad(lambda s: s.update(activeDeadlineSeconds=-1)), "spec.activeDeadlineSeconds",
                 "must be greater than or equal to 0",
                 id="spec.activeDeadlineSeconds:must be greater than or equal to 0"),
    pytest.param(_bad(lambda s: s.update(backoffLimit=-1)), "spec.backoffLimit", "must be greater than or equal to 0",
                 id="spec.backoffLimit:must be greater than or equal to 0"),
    pytest.param(_bad(lambda s: s["template"]["spec"].update(restartPolicy="Always")),
                 "spec.template.spec.restartPolicy", 'supported values: "OnFailure", "Never"',
                 id="spec.template.spec.restartPolicy: Unsupported value"),
    pytest.param(_bad(lambda s: s.update(completionMode="Indexed", parallelism=2)), "spec.completions",
                 "when completion mode is Indexed", id="spec.completions:when completion mode is Indexed"),
    pytest.param(_bad(lambda s: s.update(completionMode="Indexed", completions=100_001, parallelism=1)),
                 "spec.completions", "must be less than or equal to 100000",
                 id="spec.completions:must be less than or equal to 100000 when completion mode is Indexed"),
    pytest.param(_bad(lambda s: s.update(completionMode="Sequential")), "spec.completionMode", "Unsupported value",
                 id="spec.completionMode:Unsupported value"),
    pytest.param(_bad(lambda s: s.update(manualSelector=True, selector={"matchLabels": {"a": "b"}})),
                 "spec.template.metadata.labels", "`selector` does not match template `labels`",
                 id="spec.template.metadata.labels: Invalid value: {\"y\":\"z\"}: `selector` does not match template "
                    "`labels`"),
    pytest.param(_bad(lambda s: s.update(selector={"matchLabels": {"a": "b"}})),
                 "spec.selector", "`selector` not auto-generated", id="spec.selector:`selector` not auto-generated"),
    pytest.param(_bad(lambda s: s.update(podFailurePolicy={"rules": [{"action": "FailJob"}]})),
                 "spec.podFailurePolicy.rules[0]", "specifying one of OnExitCodes and OnPodConditions is required",
                 id="spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and OnPodConditions "
                    "is required"),
    pytest.param(_bad(lambda s: s.update(podFailurePolicy={"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0]}}]})),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[0]", "must not be 0 for the In operator",
        id="spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In "
           "operator"),
    pytest.param(_bad(lambda s: s.update(podFailurePolicy={"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [2, 1]}}]})),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[1]", "must be ordered",
        id="spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 1: must be ordered"),
    pytest.param(_bad(lambda s: s.update(podFailurePolicy={"rules": [
        {"action": "UnknownAction", "onExitCodes": {"operator": "In", "values": [1]}}]})),
        "spec.podFailurePolicy.rules[0].action", "Unsupported value",
        id="spec.podFailurePolicy.rules[0].action: Unsupported value: \"UnknownAction\""),
    pytest.param(_bad(lambda s: s.update(podFailurePolicy={"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}]}]})),
        "spec.podFailurePolicy.rules[0].onPodConditions[0].status", "Unsupported value",
        id="spec.podFailurePolicy.rules[0].onPodConditions[0].status: Unsupported value: \"Maybe\""),
    pytest.param(_bad(lambda s: (s["template"]["spec"].update(restartPolicy="OnFailure"), s.update(
        podFailurePolicy={"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}]}))),
        "spec.template.spec.restartPolicy", "only \"Never\" is supported when podFailurePolicy is specified",
        id="spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when "
           "podFailurePolicy is specified"),
]


@pytest.mark.parametrize(("body", "field", "detail"), INVALID)
async def test_invalid_job_is_422_with_causes(api: Client, body: dict[str, Any], field: str, detail: str) -> None:
    out = await call(api, "POST", JOBS, copy.deepcopy(body), expect=422)
    assert out["reason"] == "Invalid"
    assert any(c["field"] == field and detail in c["message"] for c in out["details"]["causes"]), out
    await call(api, "GET", f"{JOBS}/{body['metadata']['name']}", expect=404)  # nothing half-written


@pytest.mark.parametrize(("patch", "field"), [
    pytest.param({"spec": {"completions": 3}}, "spec.completions", id="completions immutable"),
    pytest.param({"spec": {"selector": {"matchLabels": {"x": "y"}}}}, "spec.selector", id="selector immutable"),
    pytest.param({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
                 "spec.template", id="template immutable"),
    pytest.param({"spec": {"completionMode": "Indexed"}}, "spec.completionMode", id="completionMode immutable"),
])
async def test_immutable_fields_are_refused(api: Client, patch: dict[str, Any], field: str) -> None:
    await call(api, "POST", JOBS, job(), expect=201)
    out = await call(api, "PATCH", f"{JOBS}/pi", patch, MERGE, expect=422)
    assert any(c["field"] == field for c in out["details"]["causes"]), out


async def test_mutable_fields_and_elastic_indexed_completions(api: Client) -> None:
    await call(api, "POST", JOBS, job(parallelism=1, suspend=True), expect=201)
    out = await call(api, "PATCH", f"{JOBS}/pi", {"spec": {"parallelism": 4, "suspend": False,
                                                           "activeDeadlineSeconds": 60}}, MERGE, expect=200)
    assert (out["spec"]["parallelism"], out["metadata"]["generation"]) == (4, 2)
    await call(api, "POST", JOBS, job("idx", completionMode="Indexed", completions=2, parallelism=2), expect=201)
    out = await call(api, "PATCH", f"{JOBS}/idx", {"spec": {"completions": 5, "parallelism": 5}}, MERGE, expect=200)
    assert out["spec"]["completions"] == 5


async def test_status_subresource_and_table(api: Client) -> None:
    await call(api, "POST", JOBS, job(completions=3), expect=201)
    status = {"status": {"succeeded": 2, "startTime": "2026-01-01T00:00:00Z",
                         "completionTime": "2026-01-01T00:01:05Z",
                         "conditions": [{"type": "Complete", "status": "True"}]}}
    out = await call(api, "PATCH", f"{JOBS}/pi/status", status, MERGE, expect=200)
    assert out["status"]["succeeded"] == 2
    await call(api, "PATCH", f"{JOBS}/pi/status", {"status": {"active": -1}}, MERGE, expect=422)
    resp = await api.get(JOBS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    table = await resp.json()
    assert [c["name"] for c in table["columnDefinitions"]][:5] == ["Name", "Status", "Completions", "Duration", "Age"]
    assert table["rows"][0]["cells"][:4] == ["pi", "Complete", "2/3", "65s"]


async def test_discovery_lists_jobs(api: Client) -> None:
    out = await call(api, "GET", "/apis/batch/v1", expect=200)
    names = {r["name"] for r in out["resources"]}
    assert {"jobs", "jobs/status"} <= names
