"""CronJobs end to end: `kubelite up` (controllers in-process, a real agent) driven by the real kubectl.

Scheduled starts are timed in the controller tests on a fake clock; here kubectl's own paths are checked without
waiting a real minute: `create cronjob` (sent as protobuf), the server's Table for `get cj`, `describe`, and
`create job --from=cronjob/…`, which kubectl builds client-side from the CronJob's template, and a strategic
merge patch into the template (`set image`).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e


def test_kubectl_create_get_describe_and_create_job_from_cronjob(up: ServerProcess) -> None:
    up.kubectl("create", "cronjob", "tick", "--image=busybox", "--schedule=*/1 * * * *", "--",
               "sh", "-c", "echo tick-from-cronjob")
    header, row = up.kubectl("get", "cj").stdout.splitlines()[:2]
    assert header.split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
    assert row.split()[:9] == ["tick", "*/1", "*", "*", "*", "*", "<none>", "False", "0"]
    assert "tick" in up.kubectl("get", "all").stdout  # category `all`
    assert "FIELD: schedule <string>" in up.kubectl("explain", "cronjob.spec.schedule").stdout  # OpenAPI

    described = up.kubectl("describe", "cronjob", "tick").stdout
    for line in ("Schedule:                      */1 * * * *", "Concurrency Policy:            Allow",
                 "Suspend:                       False", "Successful Job History Limit:  3"):
        assert line in described, described

    up.kubectl("create", "job", "manual", "--from=cronjob/tick")
    up.kubectl("wait", "--for=condition=complete", "job/manual", "--timeout=60s", timeout=70)
    assert "tick-from-cronjob" in up.kubectl("logs", "job/manual").stdout
    job = json.loads(up.kubectl("get", "job", "manual", "-o", "json").stdout)
    cj = json.loads(up.kubectl("get", "cronjob", "tick", "-o", "json").stdout)
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert job["metadata"]["ownerReferences"][0]["uid"] == cj["metadata"]["uid"]

    up.kubectl("set", "image", "cronjob/tick", "tick=busybox:1.36")  # a strategic merge by container name
    wide = up.kubectl("get", "cj", "tick", "-o", "wide", "--no-headers").stdout.split()
    assert wide[-3:] == ["tick", "busybox:1.36", "<none>"]  # CONTAINERS IMAGES SELECTOR

    up.kubectl("patch", "cronjob", "tick", "-p", '{"spec":{"suspend":true}}')
    assert up.kubectl("get", "cj", "tick", "--no-headers").stdout.split()[7] == "True"
    up.kubectl("delete", "cronjob", "tick")
    up.kubectl("wait", "--for=delete", "job/manual", "--timeout=30s", timeout=40)  # the garbage collector's
