"""Metrics with the real kubectl against `kubelite up`: `kubectl top node|pod` (metrics.k8s.io scraped from the
node agent, which measures real processes) and `kubectl get --raw /metrics`."""

from __future__ import annotations

import json
import re
import ssl
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ServerProcess
from tests.e2e.pods import apply_pod, pod_phase, sh, wait_for

pytestmark = pytest.mark.e2e


def millicores(text: str) -> int:
    """kubectl top's CPU column: `250m` or whole cores."""
    return int(text[:-1]) if text.endswith("m") else int(text) * 1000


def top_pod_cpu(up: ServerProcess, name: str) -> int | None:
    res = up.kubectl("top", "pod", name, "--no-headers", check=False)
    fields = res.stdout.split()
    return millicores(fields[1]) if res.returncode == 0 and len(fields) >= 3 else None


def node_cpu_percent(up: ServerProcess) -> int:
    fields = up.kubectl("top", "node", "--no-headers").stdout.split()
    return int(fields[2].rstrip("%"))


def test_kubectl_top_pod_shows_a_busy_pods_cpu(up: ServerProcess) -> None:
    apply_pod(up, "spin", [sh("main", "while :; do :; done")])
    apply_pod(up, "rest", [sh("main", "sleep 3600")])
    assert wait_for(lambda: pod_phase(up, "spin") == "Running" and pod_phase(up, "rest") == "Running")
    seen: list[int | None] = []
    # The API server keeps a scrape for 15 s, so a few looks span several measurements.
    if not wait_for(lambda: seen.append(top_pod_cpu(up, "spin")) or (seen[-1] or 0) >= 500, timeout=40):
        # A spinner gets a whole core only if the machine has one to spare. On a saturated node (the CI and
        # development machines are shared) it gets its fair share: then it must still read as clearly busy.
        assert node_cpu_percent(up) >= 90, seen
        assert (seen[-1] or 0) >= 100, seen
    rest = top_pod_cpu(up, "rest")
    assert rest is not None and rest < 50
    out = up.kubectl("top", "pod", "--containers").stdout
    assert re.search(r"^spin\s+main\s+\d+m?\s+\d+Mi", out, re.M), out
    by_label = up.kubectl("top", "pod", "-l", "run!=x", "--no-headers").stdout
    assert {line.split()[0] for line in by_label.splitlines()} >= {"spin", "rest"}
    up.kubectl("delete", "pod", "spin", "rest", "--wait=false")


def test_kubectl_top_node(up: ServerProcess) -> None:
    node = up.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    lines: list[str] = []
    assert wait_for(lambda: bool(lines.append(up.kubectl("top", "node", "--no-headers", check=False).stdout)
                                 or lines[-1].strip()), timeout=30), lines
    fields = lines[-1].split()
    assert fields[0] == node
    assert millicores(fields[1]) > 0 and fields[2].endswith("%") and fields[3].endswith("Mi")


def test_raw_metrics_count_a_request_just_made(up: ServerProcess) -> None:
    def listed() -> float:
        text = up.kubectl("get", "--raw", "/metrics").stdout
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "apiserver_request_total" and s.labels == {
                        "verb": "LIST", "dry_run": "", "group": "", "version": "v1", "resource": "pods",
                        "subresource": "", "scope": "namespace", "component": "apiserver", "code": "200"}:
                    return s.value
        return 0.0

    before = listed()
    up.kubectl("get", "pods", "-n", "metrics-probe")
    assert listed() == before + 1
    text = up.kubectl("get", "--raw", "/metrics").stdout
    for name in ("apiserver_request_duration_seconds_bucket", "apiserver_current_inflight_requests",
                 "apiserver_storage_objects", "scheduler_schedule_attempts_total", "scheduler_pending_pods",
                 "workqueue_adds_total"):
        assert name in text, name


def test_the_agent_serves_kubelet_and_resource_metrics(up: ServerProcess) -> None:
    node = json.loads(up.kubectl("get", "nodes", "-o", "json").stdout)["items"][0]
    port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    apply_pod(up, "probe", [sh("main", "sleep 3600")])
    assert wait_for(lambda: pod_phase(up, "probe") == "Running")

    # The agent serves TLS to callers with a certificate of the cluster CA: the API server's is used here.
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    pki = up.data_dir / "pki"
    ctx.load_cert_chain(pki / "apiserver-kubelet-client.crt", pki / "apiserver-kubelet-client.key")

    def families(path: str) -> dict[str, list[Any]]:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx, timeout=10) as resp:
            text = resp.read().decode()
        return {f.name: f.samples for f in text_string_to_metric_families(text)}

    kubelet = families("/metrics")
    assert kubelet["kubelet_running_pods"][0].value >= 1
    assert any(s.name == "kubelet_pod_start_duration_seconds_count" and s.value >= 1
               for s in kubelet["kubelet_pod_start_duration_seconds"])
    resource = families("/metrics/resource")
    probe = [s for s in resource["container_memory_working_set_bytes"] if s.labels.get("pod") == "probe"]
    assert probe and probe[0].labels == {"container": "main", "pod": "probe", "namespace": "default"}
    assert probe[0].value > 0 and probe[0].timestamp is not None
    assert resource["node_cpu_usage_seconds"][0].value > 0
    up.kubectl("delete", "pod", "probe", "--wait=false")
