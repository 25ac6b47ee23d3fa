"""HorizontalPodAutoscaler end to end: the real kubectl v1.32 against a real `kubelite up` (control plane, the
autoscaler among its controllers, a node agent running real processes whose CPU it measures).

`kubectl autoscale` posts an autoscaling/v1 object; `kubectl get hpa` reads v2 as a Table; the autoscaler brings the
Deployment up to minReplicas, then reads the pods' CPU from metrics.k8s.io (idle pods: 0% of their request) and
`kubectl describe hpa` shows its conditions and events."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest

from tests.conftest import ServerProcess

pytestmark = pytest.mark.e2e

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: hpa-web}
spec:
  replicas: 1
  selector: {matchLabels: {app: hpa-web}}
  template:
    metadata: {labels: {app: hpa-web}}
    spec:
      containers:
      - name: main
        image: busybox
        command: [sleep, "3600"]
        resources: {requests: {cpu: 50m}}
"""


def wait_for(check: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(1.0)


def test_kubectl_autoscale_get_and_describe(up: ServerProcess) -> None:
    up.kubectl("apply", "-f", "-", stdin=DEPLOYMENT)
    up.kubectl("rollout", "status", "deployment/hpa-web", "--timeout=90s", timeout=120)
    out = up.kubectl("autoscale", "deployment", "hpa-web", "--cpu-percent=50", "--min=2", "--max=3").stdout
    assert out.strip() == "horizontalpodautoscaler.autoscaling/hpa-web autoscaled"

    table = up.kubectl("get", "hpa").stdout.splitlines()
    assert table[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert table[1].split()[:7] == ["hpa-web", "Deployment/hpa-web", "cpu:", "<unknown>/50%", "2", "3", "0"]

    def replicas() -> int:
        return int(json.loads(up.kubectl("get", "deployment", "hpa-web", "-o", "json").stdout)["spec"]["replicas"])

    wait_for(lambda: replicas() == 2, "the autoscaler to bring the Deployment up to minReplicas")
    measured = re.compile(r"cpu: \d+%/50%")  # idle pods: a few percent of 50m at most
    wait_for(lambda: bool(measured.search(up.kubectl("get", "hpa", "hpa-web").stdout)),
             "the autoscaler to measure the idle pods' CPU", 180.0)
    row = up.kubectl("get", "hpa", "hpa-web", "--no-headers").stdout.split()
    assert row[:3] == ["hpa-web", "Deployment/hpa-web", "cpu:"] and row[4:7] == ["2", "3", "2"]

    v1 = json.loads(up.kubectl("get", "horizontalpodautoscalers.v1.autoscaling", "hpa-web", "-o", "json").stdout)
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 50
    assert f'{v1["status"]["currentCPUUtilizationPercentage"]}%/50%' == row[3]

    described = up.kubectl("describe", "hpa", "hpa-web").stdout
    for expected in ("Reference:", "Deployment/hpa-web", "Min replicas:", "Max replicas:",
                     "resource cpu on pods  (as a percentage of request):", "ValidMetricFound",
                     "SuccessfulRescale", "New size: 2; reason: Current number of replicas below Spec.MinReplicas"):
        assert expected in described, (expected, described)
    up.kubectl("delete", "hpa", "hpa-web")
    up.kubectl("delete", "deployment", "hpa-web")
