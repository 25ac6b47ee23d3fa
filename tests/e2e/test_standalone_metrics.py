"""`kubelite scheduler` and `kubelite controller-manager` on their own serve /metrics with --metrics-bind-address."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ServerProcess, free_port
from tests.e2e.pods import wait_for

pytestmark = pytest.mark.e2e


@contextmanager
def component(server: ServerProcess, *args: str) -> Iterator[str]:
    """Run `kubelite ARGS --kubeconfig … --metrics-bind-address 127.0.0.1:PORT`; yields its /metrics URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", *args, "--kubeconfig", str(server.kubeconfig),
                             "--metrics-bind-address", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_scheduler_metrics_count_an_unschedulable_pod(server: ServerProcess) -> None:
    server.kubectl("run", "nowhere", "--image=busybox", "--", "sleep", "1")  # no node: unschedulable
    with component(server, "scheduler") as url:
        attempts = ("scheduler_schedule_attempts_total",
                    frozenset({"result": "unschedulable", "profile": "default-scheduler"}.items()))
        assert wait_for(lambda: scrape(url).get(attempts, 0) >= 1, timeout=30)

        def pending() -> float:  # parked, or backing off after a cluster event during its attempt
            found = scrape(url)
            return sum(found.get(("scheduler_pending_pods", frozenset({"queue": q}.items())), 0)
                       for q in ("active", "backoff", "unschedulable"))

        assert wait_for(lambda: pending() == 1, timeout=10)
    server.kubectl("delete", "pod", "nowhere", "--wait=false")


def test_controller_manager_metrics_show_its_work_queues(server: ServerProcess) -> None:
    server.kubectl("create", "deployment", "web", "--image=busybox", "--", "sleep", "3600")
    with component(server, "controller-manager", "--controllers", "deployment,replicaset") as url:
        adds = ("workqueue_adds_total", frozenset({"name": "deployment"}.items()))
        assert wait_for(lambda: scrape(url).get(adds, 0) >= 1, timeout=30)
        assert ("workqueue_depth", frozenset({"name": "replicaset"}.items())) in scrape(url)
    server.kubectl("delete", "deployment", "web", "--wait=false")
