"""Jobs and StatefulSets end to end: `kubelite up` (controllers in-process, a real agent running shell processes)
driven by the real kubectl."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import pytest

from kubelite.clock import parse_rfc3339
from tests.conftest import ServerProcess
from tests.e2e.pods import agent_pid, get_pod, sh, wait_for

pytestmark = pytest.mark.e2e


def apply(up: ServerProcess, obj: dict[str, Any]) -> None:
    up.kubectl("apply", "-f", "-", stdin=json.dumps(obj))


def pods(up: ServerProcess, selector: str) -> list[dict[str, Any]]:
    return list(json.loads(up.kubectl("get", "pods", "-l", selector, "-o", "json").stdout)["items"])


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions", []))


def test_job_of_5_completions_with_parallelism_2_completes(up: ServerProcess) -> None:
    apply(up, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "five"}, "spec": {
        "completions": 5, "parallelism": 2,
        "template": {"spec": {"restartPolicy": "Never", "containers": [sh("work", "echo working; sleep 1")]}}}})
    up.kubectl("wait", "--for=condition=complete", "job/five", "--timeout=90s", timeout=100)
    job = json.loads(up.kubectl("get", "job", "five", "-o", "json").stdout)
    assert (job["status"]["succeeded"], job["status"].get("failed", 0)) == (5, 0)
    row = up.kubectl("get", "job", "five", "--no-headers").stdout.split()
    assert row[1:3] == ["Complete", "5/5"]
    runs = []
    for pod in pods(up, "batch.kubernetes.io/job-name=five"):
        assert not pod["metadata"].get("finalizers")  # the tracking finalizer is released once counted
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        runs.append((parse_rfc3339(term["startedAt"]), parse_rfc3339(term["finishedAt"])))
    assert len(runs) == 5
    most = max(sum(1 for s, f in runs if s < end and start < f) for start, end in runs)
    assert most <= 2  # never more than `parallelism` running at once


def test_kubectl_create_job_runs_the_command(up: ServerProcess) -> None:
    """`kubectl create job` sends the Job as protobuf."""
    up.kubectl("create", "job", "hello", "--image=busybox", "--", "sh", "-c", "echo hello-from-job")
    up.kubectl("wait", "--for=condition=complete", "job/hello", "--timeout=60s", timeout=70)
    assert "hello-from-job" in up.kubectl("logs", "job/hello").stdout


def test_indexed_job_pods_see_their_index(up: ServerProcess) -> None:
    apply(up, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "indexed"}, "spec": {
        "completions": 3, "parallelism": 3, "completionMode": "Indexed",
        "template": {"spec": {"restartPolicy": "Never",
                              "containers": [sh("work", "echo index=$JOB_COMPLETION_INDEX")]}}}})
    up.kubectl("wait", "--for=condition=complete", "job/indexed", "--timeout=60s", timeout=70)
    seen = {}
    for pod in pods(up, "batch.kubernetes.io/job-name=indexed"):
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        seen[index] = up.kubectl("logs", pod["metadata"]["name"]).stdout.strip()
    assert seen == {"0": "index=0", "1": "index=1", "2": "index=2"}, up.kubectl("get", "pods", "-o", "wide").stdout
    status = json.loads(up.kubectl("get", "job", "indexed", "-o", "json").stdout)["status"]
    assert status["completedIndexes"] == "0-2"


STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"}, "spec": {
    "replicas": 3, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
        "terminationGracePeriodSeconds": 10,
        "containers": [sh("c", "trap 'sleep 2; exit 0' TERM; while true; do sleep 0.1; done",
                          readinessProbe={"exec": {"command": ["true"]}, "initialDelaySeconds": 1,
                                          "periodSeconds": 1})]}}}}


def test_statefulset_starts_in_order_and_replaces_only_after_the_old_pod_is_gone(up: ServerProcess) -> None:
    apply(up, STS)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        current = {p["metadata"]["name"]: p for p in pods(up, "app=web")}
        for ordinal in (1, 2):
            if f"web-{ordinal}" in current:  # a pod exists only once its predecessor is Ready
                assert is_ready(current[f"web-{ordinal - 1}"]), sorted(current)
        if len(current) == 3 and all(is_ready(p) for p in current.values()):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the StatefulSet did not become ready")
    assert up.kubectl("get", "sts", "web", "--no-headers").stdout.split()[1] == "3/3"

    old = get_pod(up, "web-1")["metadata"]["uid"]
    up.kubectl("delete", "pod", "web-1", "--wait=false")
    seen_terminating = False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pod = get_pod(up, "web-1")
        if pod and pod["metadata"]["uid"] == old:
            seen_terminating |= bool(pod["metadata"].get("deletionTimestamp"))
        elif pod:
            break  # a new web-1 (the name cannot be reused while the old object exists)
        time.sleep(0.1)
    assert seen_terminating  # the old web-1 was terminating (its trap takes 2 s) and was not replaced meanwhile
    assert wait_for(lambda: is_ready(get_pod(up, "web-1")), timeout=30)
    new = get_pod(up, "web-1")
    assert new["metadata"]["uid"] != old
    assert wait_for(lambda: json.loads(up.kubectl("get", "sts", "web", "-o", "json").stdout)["status"].get(
        "readyReplicas") == 3)


def test_statefulset_pod_is_not_replaced_while_its_agent_cannot_confirm_it_dead(up: ServerProcess) -> None:
    """S1 with real processes: the agent is frozen (SIGSTOP), so a deleted pod's processes are not known dead and
    its object stays; the controller waits however long. Continued, the agent kills it, removes the object, and only
    then is the replacement created."""
    frozen = json.loads(json.dumps(STS))
    frozen["metadata"]["name"] = "frozen"
    frozen["spec"].update(replicas=2, podManagementPolicy="Parallel", selector={"matchLabels": {"app": "frozen"}})
    frozen["spec"]["template"]["metadata"]["labels"] = {"app": "frozen"}
    apply(up, frozen)
    assert wait_for(lambda: sum(is_ready(p) for p in pods(up, "app=frozen")) == 2, timeout=60)
    old = get_pod(up, "frozen-1")["metadata"]["uid"]
    agent = agent_pid(up.proc.pid)
    os.kill(agent, signal.SIGSTOP)
    try:
        up.kubectl("delete", "pod", "frozen-1", "--wait=false")
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            pod = get_pod(up, "frozen-1")
            assert pod["metadata"]["uid"] == old and pod["metadata"]["deletionTimestamp"]
            time.sleep(0.5)
    finally:
        os.kill(agent, signal.SIGCONT)
    assert wait_for(lambda: get_pod(up, "frozen-1").get("metadata", {}).get("uid", old) != old, timeout=60)
    assert wait_for(lambda: is_ready(get_pod(up, "frozen-1")), timeout=60)
