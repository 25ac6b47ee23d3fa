"""The components' Prometheus metrics: upstream's names, labels and buckets, and what each instrument counts
(request labels as kube-apiserver derives them, scheduler attempts, work queues, kubelet pod starts)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kubelite.agent.metrics import KubeletMetrics, census
from kubelite.agent.records import Record
from kubelite.agent.runtime.interface import Exit, Handle
from kubelite.apiserver.metrics import DURATION_BUCKETS, RequestInfo, request_info
from kubelite.clock import FakeClock
from kubelite.controllers.metrics import PROVIDER, WorkqueueMetrics
from kubelite.controllers.runner import Runner, WorkQueue
from kubelite.scheduler.candidate import Candidate, PreemptionResult
from kubelite.scheduler.metrics import SchedulerMetrics, attempts_label


def samples(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the registry's exposition, parsed back: (name, labels) → value."""
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(registry: CollectorRegistry, metric: str, **labels: str) -> float | None:
    return samples(registry).get((metric, frozenset(labels.items())))


# --- kube-apiserver: labels from the request (requestinfo.go, CleanScope, CanonicalVerb, cleanVerb) -----------

R = RequestInfo


@pytest.mark.parametrize("name,method,path,watch,apply,want", [
    ("get of a namespaced object", "GET", "/api/v1/namespaces/default/pods/web", False, False,
     R("GET", "", "v1", "pods", "", "resource", True)),
    ("list in a namespace", "GET", "/api/v1/namespaces/default/pods", False, False,
     R("LIST", "", "v1", "pods", "", "namespace", True)),
    ("list across namespaces", "GET", "/api/v1/pods", False, False, R("LIST", "", "v1", "pods", "", "cluster", True)),
    ("watch is reported as WATCH", "GET", "/api/v1/namespaces/default/pods", True, False,
     R("WATCH", "", "v1", "pods", "", "namespace", True)),
    ("create is POST with resource scope", "POST", "/apis/apps/v1/namespaces/ns/deployments", False, False,
     R("POST", "apps", "v1", "deployments", "", "resource", True)),
    ("status subresource update", "PUT", "/api/v1/namespaces/ns/pods/web/status", False, False,
     R("PUT", "", "v1", "pods", "status", "resource", True)),
    ("server-side apply is APPLY", "PATCH", "/apis/apps/v1/namespaces/ns/deployments/d", False, True,
     R("APPLY", "apps", "v1", "deployments", "", "resource", True)),
    ("delete collection keeps DELETE with namespace scope", "DELETE", "/api/v1/namespaces/ns/pods", False, False,
     R("DELETE", "", "v1", "pods", "", "namespace", True)),
    ("a namespace is a cluster-scoped object named by the path", "GET", "/api/v1/namespaces/kube-system", False,
     False, R("GET", "", "v1", "namespaces", "", "resource", True)),
    ("namespace finalize is a subresource of the namespace", "PUT", "/api/v1/namespaces/ns/finalize", False, False,
     R("PUT", "", "v1", "namespaces", "finalize", "resource", True)),
    ("cluster-scoped get", "GET", "/api/v1/nodes/n1", False, False, R("GET", "", "v1", "nodes", "", "resource", True)),
    ("metrics.k8s.io is a resource request too", "GET", "/apis/metrics.k8s.io/v1beta1/nodes", False, False,
     R("LIST", "metrics.k8s.io", "v1beta1", "nodes", "", "cluster", True)),
    ("discovery is non-resource, by path", "GET", "/apis/apps/v1", False, False, R("GET", subresource="/apis/apps/v1")),
    ("health check", "GET", "/readyz", False, False, R("GET", subresource="/readyz")),
    ("openapi documents collapse to one label", "GET", "/openapi/v3/apis/apps/v1", False, False,
     R("GET", subresource="/openapi/v3/*")),
    ("unknown paths are 'other' (bounded cardinality)", "GET", "/favicon.ico", False, False,
     R("GET", subresource="other")),
    ("a resource the server does not serve is 'other'", "GET", "/api/v1/namespaces/ns/widgets", False, False,
     R("GET", subresource="other")),
    ("an unknown subresource is 'other'", "GET", "/api/v1/namespaces/ns/pods/web/x9", False, False,
     R("GET", "", "v1", "pods", "other", "resource", True)),
    ("the top-level bindings collection", "POST", "/api/v1/namespaces/ns/bindings", False, False,
     R("POST", "", "v1", "bindings", "", "resource", True)),
    ("pod logs keep their subresource", "GET", "/api/v1/namespaces/ns/pods/web/log", False, False,
     R("GET", "", "v1", "pods", "log", "resource", True)),
])
def test_request_labels(name: str, method: str, path: str, watch: bool, apply: bool, want: RequestInfo) -> None:
    assert request_info(method, path, watch, apply) == want


def test_apiserver_duration_buckets_are_upstreams() -> None:
    assert DURATION_BUCKETS[:4] == (0.005, 0.025, 0.05, 0.1) and DURATION_BUCKETS[-3:] == (30, 45, 60)
    assert len(DURATION_BUCKETS) == 23


# --- kube-scheduler ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("attempts,want", [(1, "1"), (14, "14"), (15, "15+"), (40, "15+")])
def test_attempts_label(attempts: int, want: str) -> None:
    assert attempts_label(attempts) == want


def test_scheduler_metrics_names_labels_and_buckets() -> None:
    m = SchedulerMetrics()
    m.watch_pending(lambda: {"active": 2, "unschedulable": 1})
    m.attempt("unschedulable", "default-scheduler", 0.003)
    m.scheduled("default-scheduler", 0.02, attempts=2, since_queued=1.5)
    m.preemption(PreemptionResult(None, "no victims"))
    m.preemption(PreemptionResult(Candidate("n1", 0, [], 0), ""))
    r = m.registry
    assert value(r, "scheduler_schedule_attempts_total", result="unschedulable", profile="default-scheduler") == 1
    assert value(r, "scheduler_schedule_attempts_total", result="scheduled", profile="default-scheduler") == 1
    assert value(r, "scheduler_scheduling_attempt_duration_seconds_bucket", result="scheduled",
                 profile="default-scheduler", le="16.384") == 1  # ExponentialBuckets(0.001, 2, 15)
    assert value(r, "scheduler_pod_scheduling_sli_duration_seconds_bucket", attempts="2", le="2.56") == 1
    assert value(r, "scheduler_pod_scheduling_sli_duration_seconds_bucket", attempts="2", le="1.28") == 0
    assert value(r, "scheduler_pending_pods", queue="active") == 2
    assert value(r, "scheduler_pending_pods", queue="gated") == 0
    assert value(r, "scheduler_preemption_attempts_total") == 2
    assert value(r, "scheduler_preemption_victims_count") == 1
    assert value(r, "scheduler_preemption_victims_bucket", le="64.0") == 1  # ExponentialBuckets(1, 2, 7)
    assert not any(name.endswith("_created") for name, _ in samples(r))


def test_two_schedulers_in_one_process_have_separate_registries() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.attempt("error", "p", 0.1)
    assert value(a.registry, "scheduler_schedule_attempts_total", result="error", profile="p") == 1
    assert value(b.registry, "scheduler_schedule_attempts_total", result="error", profile="p") is None


# --- client-go workqueue -------------------------------------------------------------------------------------

async def test_workqueue_metrics_count_adds_depth_latency_work_and_retries() -> None:
    clock = FakeClock()
    metrics = WorkqueueMetrics(clock)
    token = PROVIDER.set(metrics)
    try:
        runner: Runner[str] = Runner("replicaset", _noop, clock)
    finally:
        PROVIDER.reset(token)
    q: WorkQueue[str] = runner.queue
    q.add("a")
    q.add("a")  # deduplicated while queued: not an add
    q.add("b")
    r = metrics.registry
    assert value(r, "workqueue_adds_total", name="replicaset") == 2
    assert value(r, "workqueue_depth", name="replicaset") == 2
    await clock.advance(0.5)
    assert await q.get() == "a"
    assert value(r, "workqueue_depth", name="replicaset") == 1
    assert value(r, "workqueue_queue_duration_seconds_sum", name="replicaset") == 0.5
    await clock.advance(0.25)
    assert value(r, "workqueue_longest_running_processor_seconds", name="replicaset") == 0.25
    q.add_rate_limited("a")
    q.done("a")
    assert value(r, "workqueue_retries_total", name="replicaset") == 1
    assert value(r, "workqueue_work_duration_seconds_sum", name="replicaset") == 0.25
    assert value(r, "workqueue_work_duration_seconds_bucket", name="replicaset", le="1.0") == 1
    assert value(r, "workqueue_unfinished_work_seconds", name="replicaset") == 0


def test_queues_built_outside_a_measured_component_report_nothing() -> None:
    assert Runner("job", _noop, FakeClock()).queue.metrics is None


async def _noop(key: str) -> None:
    return None


# --- kubelet -------------------------------------------------------------------------------------------------

def _pod(phase: str) -> dict[str, object]:
    return {"metadata": {"uid": "u1", "name": "p", "namespace": "default"}, "status": {"phase": phase}}


async def test_pod_start_duration_runs_from_first_seen_to_running() -> None:
    clock = FakeClock()
    m = KubeletMetrics(clock, lambda: (3, {"running": 4, "exited": 1}))
    m.pod_seen(_pod("Pending"))
    await clock.advance(2.5)
    m.pod_seen(_pod("Pending"))
    m.pod_seen(_pod("Running"))
    m.pod_seen(_pod("Running"))  # observed once
    m.pod_synced("create", 0.01)
    r = m.registry
    assert value(r, "kubelet_pod_start_duration_seconds_count") == 1
    assert value(r, "kubelet_pod_start_duration_seconds_sum") == 2.5
    assert value(r, "kubelet_pod_start_duration_seconds_bucket", le="3.0") == 1
    assert value(r, "kubelet_pod_start_duration_seconds_bucket", le="2.0") == 0
    assert value(r, "kubelet_running_pods") == 3
    assert value(r, "kubelet_running_containers", container_state="running") == 4
    assert value(r, "kubelet_running_containers", container_state="created") == 0
    assert value(r, "kubelet_pod_worker_duration_seconds_count", operation="create") == 1


def test_a_pod_first_seen_running_is_not_a_start() -> None:
    """After an agent restart its running pods are not starts."""
    m = KubeletMetrics(FakeClock(), lambda: (0, {}))
    m.pod_seen(_pod("Running"))
    assert value(m.registry, "kubelet_pod_start_duration_seconds_count") == 0


def _record(state: str) -> Record:
    r = Record({"name": state}, "app")
    if state in ("running", "exited"):
        r.process = Handle(pid=1, started=0.0)
    if state == "exited":
        r.process.finish(Exit(0))  # type: ignore[union-attr]
        r.exit = Exit(0)
    r.ever_started = state != "waiting"
    return r


@pytest.mark.parametrize("name,pods,could_run,want", [
    ("running and exited containers of running pods", {"a": ["running", "exited"], "b": ["running"]}, {"a", "b"},
     (2, {"running": 2, "exited": 1, "created": 0})),
    ("a pod whose containers all exited is not running", {"a": ["exited"]}, {"a"},
     (0, {"running": 0, "exited": 1, "created": 0})),
    ("a container never started is not counted", {"a": ["waiting", "running"]}, {"a"},
     (1, {"running": 1, "exited": 0, "created": 0})),
    ("finished pods are left out", {"a": ["running"], "b": ["exited"]}, {"a"},
     (1, {"running": 1, "exited": 0, "created": 0})),
])
def test_census(name: str, pods: dict[str, list[str]], could_run: set[str],
                want: tuple[int, dict[str, int]]) -> None:
    syncers = {uid: SimpleNamespace(records=[_record(s) for s in states]) for uid, states in pods.items()}
    assert census(syncers, could_run.__contains__) == want  # type: ignore[arg-type]
