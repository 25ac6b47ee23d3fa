"""batch/v1 CronJobs through the API: defaults, validation (TestValidateCronJob), generation, status, Tables,
discovery and OpenAPI."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kubelite.apiserver.openapi import schema_name
from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
CRONJOBS = "/apis/batch/v1/namespaces/default/cronjobs"
MERGE = "application/merge-patch+json"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def cronjob(name: str = "mycronjob", schedule: str = "* * * * ?", **spec: Any) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "abc", "image": "image"}]}}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": template}}, **spec}}


async def test_defaults_and_generation(api: Client) -> None:
    out = await call(api, "POST", CRONJOBS, cronjob(), expect=201)
    spec = out["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"], spec["successfulJobsHistoryLimit"],
            spec["failedJobsHistoryLimit"]) == ("Allow", False, 3, 1)
    # the template gets pod defaults, not a Job's: each Job made from it is defaulted when created
    job_spec = spec["jobTemplate"]["spec"]
    assert "completions" not in job_spec and "selector" not in job_spec
    assert job_spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert out["metadata"]["generation"] == 1 and out["status"] == {}
    out = await call(api, "PATCH", f"{CRONJOBS}/mycronjob", {"spec": {"suspend": True}}, MERGE, expect=200)
    assert out["metadata"]["generation"] == 2
    out = await call(api, "PATCH", f"{CRONJOBS}/mycronjob", {"metadata": {"labels": {"a": "b"}}}, MERGE, expect=200)
    assert out["metadata"]["generation"] == 2


SUCCESS = [
    pytest.param(cronjob(), id="basic scheduled job"),
    pytest.param(cronjob(schedule="@hourly"), id="non-standard scheduled"),
    pytest.param(cronjob(schedule="0 * * * *", timeZone="America/New_York"), id="correct timeZone value"),
]


@pytest.mark.parametrize("body", SUCCESS)
async def test_valid_cronjobs_are_created(api: Client, body: dict[str, Any]) -> None:
    await call(api, "POST", CRONJOBS, copy.deepcopy(body), expect=201)


def _bad(mutate: Any, name: str = "mycronjob") -> dict[str, Any]:
    body = cronjob(name)
    mutate(body["spec"])
    return body


def _template(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = spec["jobTemplate"]["spec"]
    return out


# Mirrors TestValidateCronJob's errorCases (pkg/apis/batch/validation/validation_test.go), keyed as upstream by
# "field: detail". Upstream's two restartPolicy cases expect "Required value" for Always; kubelite's Job validation
# says "Unsupported value" (supported: OnFailure, Never) for both, so only the field is compared there.
INVALID = [
    pytest.param(_bad(lambda s: s.update(schedule="error")), "spec.schedule",
                 "expected exactly 5 fields, found 1: [error]", id="spec.schedule: Invalid value"),
    pytest.param(_bad(lambda s: s.update(schedule="")), "spec.schedule", "Required value",
                 id="spec.schedule: Required value"),
    pytest.param(_bad(lambda s: s.update(schedule="TZ=UTC 0 * * * *", timeZone="UTC")), "spec.schedule",
                 "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                 id="spec.schedule: cannot use TZ or CRON_TZ in schedule"),
    pytest.param(_bad(lambda s: s.update(timeZone="")), "spec.timeZone", "timeZone must be nil or non-empty string",
                 id="spec.timeZone: timeZone must be nil or non-empty string"),
    pytest.param(_bad(lambda s: s.update(timeZone="Local")), "spec.timeZone",
                 "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                 id="spec.timeZone: timeZone must be an explicit time zone as defined in "
                    "https://www.iana.org/time-zones"),
    pytest.param(_bad(lambda s: s.update(timeZone=" Continent/Zone")), "spec.timeZone",
                 "unknown time zone  Continent/Zone",
                 id='spec.timeZone: Invalid value: " Continent/Zone": unknown time zone  Continent/Zone'),
    pytest.param(_bad(lambda s: s.update(timeZone="Continent/InvalidZone")), "spec.timeZone",
                 "unknown time zone Continent/InvalidZone",
                 id='spec.timeZone: Invalid value: "Continent/InvalidZone": unknown time zone  Continent/InvalidZone'),
    pytest.param(_bad(lambda s: s.update(timeZone=" ")), "spec.timeZone", "unknown time zone  ",
                 id='spec.timeZone: Invalid value: " ": unknown time zone  '),
    pytest.param(_bad(lambda s: s.update(timeZone="Continent/Zone ")), "spec.timeZone",
                 "unknown time zone Continent/Zone ",
                 id='spec.timeZone: Invalid value: "Continent/Zone ": unknown time zone Continent/Zone '),
    pytest.param(_bad(lambda s: s.update(startingDeadlineSeconds=-1)), "spec.startingDeadlineSeconds",
                 "must be greater than or equal to 0", id="spec.startingDeadlineSeconds:must be greater than or equal "
                                                          "to 0"),
    pytest.param(_bad(lambda s: s.update(successfulJobsHistoryLimit=-1)), "spec.successfulJobsHistoryLimit",
                 "must be greater than or equal to 0",
                 id="spec.successfulJobsHistoryLimit: must be greater than or equal to 0"),
    pytest.param(_bad(lambda s: s.update(failedJobsHistoryLimit=-1)), "spec.failedJobsHistoryLimit",
                 "must be greater than or equal to 0",
                 id="spec.failedJobsHistoryLimit: must be greater than or equal to 0"),
    pytest.param(_bad(lambda s: s.update(concurrencyPolicy="Sometimes")), "spec.concurrencyPolicy",
                 'Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"',
                 id="spec.concurrencyPolicy: Unsupported value"),
    pytest.param(_bad(lambda s: _template(s).update(parallelism=-1)), "spec.jobTemplate.spec.parallelism",
                 "must be greater than or equal to 0",
                 id="spec.jobTemplate.spec.parallelism:must be greater than or equal to 0"),
    pytest.param(_bad(lambda s: _template(s).update(completions=-1)), "spec.jobTemplate.spec.completions",
                 "must be greater than or equal to 0",
                 id="spec.jobTemplate.spec.completions:must be greater than or equal to 0"),
    pytest.param(_bad(lambda s: _template(s).update(activeDeadlineSeconds=-1)),
                 "spec.jobTemplate.spec.activeDeadlineSeconds", "must be greater than or equal to 0",
                 id="spec.jobTemplate.spec.activeDeadlineSeconds:must be greater than or equal to 0"),
    pytest.param(_bad(lambda s: _template(s).update(selector={"matchLabels": {"a": "b"}})),
                 "spec.jobTemplate.spec.selector", "`selector` will be auto-generated",
                 id='spec.jobTemplate.spec.selector: Invalid value: {"matchLabels":{"a":"b"}}: `selector` will be '
                    'auto-generated'),
    pytest.param(_bad(lambda s: None, name="10000000002000000000300000000040000000005000000000123"),
                 "metadata.name", "must be no more than 52 characters",
                 id="metadata.name: must be no more than 52 characters"),
    pytest.param(_bad(lambda s: _template(s).update(manualSelector=True)), "spec.jobTemplate.spec.manualSelector",
                 "Unsupported value", id="spec.jobTemplate.spec.manualSelector: Unsupported value"),
    pytest.param(_bad(lambda s: _template(s)["template"]["spec"].update(restartPolicy="Always")),
                 "spec.jobTemplate.spec.template.spec.restartPolicy", "",
                 id="spec.jobTemplate.spec.template.spec.restartPolicy: Required value"),
    pytest.param(_bad(lambda s: _template(s)["template"]["spec"].update(restartPolicy="Invalid")),
                 "spec.jobTemplate.spec.template.spec.restartPolicy", "Unsupported value",
                 id="spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value"),
    pytest.param(_bad(lambda s: _template(s).update(ttlSecondsAfterFinished=-1)),
                 "spec.jobTemplate.spec.ttlSecondsAfterFinished", "must be greater than or equal to 0",
                 id="spec.jobTemplate.spec.ttlSecondsAfterFinished:must be greater than or equal to 0"),
]


@pytest.mark.parametrize(("body", "field", "detail"), INVALID)
async def test_invalid_cronjob_is_422_with_causes(api: Client, body: dict[str, Any], field: str,
                                                  detail: str) -> None:
    out = await call(api, "POST", CRONJOBS, copy.deepcopy(body), expect=422)
    assert out["reason"] == "Invalid"
    assert any(c["field"] == field and detail in c["message"] for c in out["details"]["causes"]), out
    await call(api, "GET", f"{CRONJOBS}/{body['metadata']['name']}", expect=404)


@pytest.mark.parametrize(("zone", "messages"), [
    pytest.param("Local", ["timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"],
                 id="Local: one cause (Go's LoadLocation knows it)"),
    pytest.param("local", ["timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                           "unknown time zone local"], id="local: refused by name and by lookup"),
])
async def test_local_time_zone_causes(api: Client, zone: str, messages: list[str]) -> None:
    out = await call(api, "POST", CRONJOBS, _bad(lambda s: s.update(timeZone=zone)), expect=422)
    want = [f'Invalid value: "{zone}": {m}' for m in messages]
    assert [c["message"] for c in out["details"]["causes"]] == want, out


# Mirrors TestValidateCronJobSpec: timeZone is checked only when it changes; TZ in a schedule stays allowed on an
# update of a CronJob whose schedule had it.
async def test_update_rules(api: Client) -> None:
    await call(api, "POST", CRONJOBS, cronjob(schedule="0 * * * *"), expect=201)
    await call(api, "PATCH", f"{CRONJOBS}/mycronjob", {"spec": {"timeZone": "America/New_York"}}, MERGE, expect=200)
    out = await call(api, "PATCH", f"{CRONJOBS}/mycronjob", {"spec": {"timeZone": "broken"}}, MERGE, expect=422)
    assert out["details"]["causes"][0]["field"] == "spec.timeZone"
    out = await call(api, "PATCH", f"{CRONJOBS}/mycronjob", {"spec": {"schedule": "TZ=UTC 0 * * * *"}}, MERGE,
                     expect=422)
    assert "use timeZone field instead" in out["details"]["causes"][0]["message"]


async def test_status_subresource_and_table(api: Client) -> None:
    await call(api, "POST", CRONJOBS, cronjob(schedule="*/1 * * * *"), expect=201)
    status = {"status": {"lastScheduleTime": "2026-01-01T00:00:00Z",
                         "active": [{"kind": "Job", "namespace": "default", "name": "mycronjob-1", "uid": "u"}]}}
    out = await call(api, "PATCH", f"{CRONJOBS}/mycronjob/status", status, MERGE, expect=200)
    assert out["status"]["active"][0]["name"] == "mycronjob-1"
    assert out["metadata"]["generation"] == 1
    resp = await api.get(CRONJOBS, headers={"Accept": TABLE})
    table = await resp.json()
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images",
        "Selector"]
    cells = table["rows"][0]["cells"]
    assert cells[:5] == ["mycronjob", "*/1 * * * *", "<none>", "False", 1]
    assert cells[7:] == ["abc", "image", "<none>"]


async def test_discovery_and_openapi(api: Client) -> None:
    out = await call(api, "GET", "/apis/batch/v1", expect=200)
    by_name = {r["name"]: r for r in out["resources"]}
    assert {"cronjobs", "cronjobs/status"} <= set(by_name)
    assert by_name["cronjobs"]["shortNames"] == ["cj"] and by_name["cronjobs"]["categories"] == ["all"]
    doc = await call(api, "GET", "/openapi/v3/apis/batch/v1", expect=200)
    gvk = doc["components"]["schemas"][schema_name("V1CronJob")]["x-kubernetes-group-version-kind"]
    assert gvk == [{"group": "batch", "kind": "CronJob", "version": "v1"}]


@pytest.mark.parametrize(("schedule", "time_zone"), [
    ("TZ=", None), ("CRON_TZ=Foo/Bar 0 * * * *", None), ("@every", None), ("@every 1", None), ("* * * * * *", None),
    ("*/0 * * * *", None), ("99999999999999999999 * * * *", None), ("1-2-3 * * * *", None), ("\u00e9 * * * *", None),
    ("0 * * * *", "/"), ("0 * * * *", "a//b"), ("0 * * * *", "../../etc/passwd"), ("0 * * * *", "America/Nowhere"),
])
async def test_bad_schedules_and_zones_are_422(api: Client, schedule: str, time_zone: str | None) -> None:
    body = cronjob(schedule=schedule) if time_zone is None else cronjob(schedule=schedule, timeZone=time_zone)
    out = await call(api, "POST", CRONJOBS, body, expect=422)
    assert out["details"]["causes"][0]["field"] in ("spec.schedule", "spec.timeZone")


async def test_warnings_on_create_and_update(api: Client) -> None:
    """WarningsOnCreate: a name that is no DNS label, and the pod template's warnings under the template's path;
    WarningsOnUpdate: the template's again, only when the spec changed."""
    body = cronjob("my.cron")
    body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = -1
    resp = await api.post(CRONJOBS, json=body)
    assert resp.status == 201
    grace = ('299 - "spec.jobTemplate.spec.template.spec.terminationGracePeriodSeconds: must be >= 0; negative '
             'values are invalid and will be treated as 1"')
    warnings = resp.headers.getall("Warning")
    assert warnings[1:] == [grace] and "a DNS label is recommended" in warnings[0]
    resp = await api.patch(f"{CRONJOBS}/my.cron", json={"metadata": {"labels": {"a": "b"}}},
                           headers={"Content-Type": MERGE})
    assert resp.status == 200 and "Warning" not in resp.headers
    resp = await api.patch(f"{CRONJOBS}/my.cron", json={"spec": {"suspend": True}}, headers={"Content-Type": MERGE})
    assert resp.headers.getall("Warning") == [grace]
