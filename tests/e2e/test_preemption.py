"""Priority and preemption end to end (P4-P9): a real server with its scheduler and disruption controller."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.e2e

CLASSES = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: mid}
value: 500
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-never}
value: 1000
preemptionPolicy: Never
"""


def _start(base: Path, config: str | None = None) -> ServerProcess:
    extra: list[str] = []
    if config is not None:
        (base / "sched.yaml").write_text(config)
        extra = ["--scheduler-config", str(base / "sched.yaml")]
    proc = start_server(base / "data", base / "home", extra=extra)
    proc.kubectl("apply", "-f", "-", stdin=CLASSES)
    return proc


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = _start(tmp_path_factory.mktemp("preempt"))
    yield proc
    proc.stop()


def _node(c: ServerProcess, name: str, group: str, cpu: str = "4") -> None:
    c.kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "group": group}},
        "status": {"capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                   "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}))


def _pod(c: ServerProcess, ns: str, name: str, priority_class: str, cpu: str, node: str = "", group: str = "",
         labels: dict[str, str] | None = None, ready: bool = False) -> None:
    spec: dict[str, object] = {"priorityClassName": priority_class,
                               "containers": [{"name": "c", "image": "pause",
                                               "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    if group:
        spec["nodeSelector"] = {"group": group}
    c.kubectl("create", "-n", ns, "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}))
    if ready:
        c.kubectl("patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge", "-p",
                  '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}')


def _get(c: ServerProcess, ns: str, name: str) -> dict[str, object]:
    res = c.kubectl("get", "pod", name, "-n", ns, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else {}


def _wait(predicate: object, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


def _terminating(c: ServerProcess, ns: str, name: str) -> bool:
    return bool(_get(c, ns, name).get("metadata", {}).get("deletionTimestamp"))  # type: ignore[union-attr]


def _condition_message(c: ServerProcess, ns: str, name: str) -> str:
    for cond in _get(c, ns, name).get("status", {}).get("conditions") or []:  # type: ignore[union-attr]
        if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable":
            return str(cond["message"])
    return ""


def test_preempts_the_right_victims_then_binds(cluster: ServerProcess) -> None:
    ns = "victims"
    cluster.kubectl("create", "namespace", ns)
    _node(cluster, "v1", ns)
    _node(cluster, "v2", ns)
    _pod(cluster, ns, "low-a", "low", "2", node="v1")
    _pod(cluster, ns, "low-b", "low", "2", node="v1")
    _pod(cluster, ns, "mid", "mid", "3", node="v2")
    _pod(cluster, ns, "low-c", "low", "1", node="v2")
    _pod(cluster, ns, "urgent", "high", "3", group=ns)
    # v1 needs both low pods gone (highest victim priority 10); v2 would need "mid" (500): v1 wins.
    assert _wait(lambda: _get(cluster, ns, "urgent").get("status", {}).get("nominatedNodeName") == "v1")
    assert _wait(lambda: _terminating(cluster, ns, "low-a") and _terminating(cluster, ns, "low-b"))
    assert not _terminating(cluster, ns, "mid") and not _terminating(cluster, ns, "low-c")
    victim = _get(cluster, ns, "low-a")
    target = next(c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget")  # type: ignore[index]
    assert target["reason"] == "PreemptionByScheduler" and f"({ns}/urgent)" in target["message"]
    assert victim["metadata"]["deletionGracePeriodSeconds"] == 30  # type: ignore[index]  # its own grace period
    events = cluster.kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=low-a").stdout
    assert "Preempted" in events and f"Preempted by pod {ns}/urgent" in events and "on node v1" in events
    assert _get(cluster, ns, "urgent")["spec"].get("nodeName") is None  # type: ignore[union-attr]
    # The node agent would remove the victims once their processes are gone; do it here.
    cluster.kubectl("delete", "pod", "low-a", "low-b", "-n", ns, "--grace-period=0", "--force")
    assert _wait(lambda: _get(cluster, ns, "urgent")["spec"].get("nodeName") == "v1")  # type: ignore[union-attr]
    explained = cluster.kubectl("get", "--raw", f"/apis/kubelite.io/v1alpha1/namespaces/{ns}/"
                                                f"schedulingexplanations/urgent").stdout
    assert json.loads(explained)["result"] == "Scheduled"


def test_pdb_protected_pods_are_spared_when_an_alternative_exists(cluster: ServerProcess) -> None:
    ns = "budget"
    cluster.kubectl("create", "namespace", ns)
    _node(cluster, "b1", ns)
    _node(cluster, "b2", ns)
    _pod(cluster, ns, "protected", "low", "2", node="b1", labels={"app": "web"}, ready=True)
    _pod(cluster, ns, "spare", "low", "2", node="b2", ready=True)
    cluster.kubectl("create", "-n", ns, "-f", "-", stdin=json.dumps({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}))
    # the disruption controller keeps the budget's status current
    assert _wait(lambda: json.loads(cluster.kubectl("get", "pdb", "web", "-n", ns, "-o", "json").stdout)
                 .get("status", {}).get("observedGeneration") == 1)
    _pod(cluster, ns, "urgent", "high", "3", group=ns)
    assert _wait(lambda: _terminating(cluster, ns, "spare"))
    assert not _terminating(cluster, ns, "protected")
    assert _get(cluster, ns, "urgent")["status"].get("nominatedNodeName") == "b2"  # type: ignore[union-attr]


def test_never_policy_and_equal_priority_do_not_preempt(cluster: ServerProcess) -> None:
    ns = "never"
    cluster.kubectl("create", "namespace", ns)
    _node(cluster, "n1", ns)
    _pod(cluster, ns, "sitter", "low", "3", node="n1")
    _pod(cluster, ns, "peer", "high", "1", node="n1")
    _pod(cluster, ns, "polite", "high-never", "2", group=ns)
    assert _wait(lambda: "not eligible due to preemptionPolicy=Never" in _condition_message(cluster, ns, "polite"))
    assert not _terminating(cluster, ns, "sitter")
    # 4 cpu would need both pods gone, but "peer" has equal priority and is never a victim: no candidate.
    _pod(cluster, ns, "equal", "high", "4", group=ns)
    assert _wait(lambda: "No preemption victims found" in _condition_message(cluster, ns, "equal"))
    assert not _terminating(cluster, ns, "peer") and not _terminating(cluster, ns, "sitter")


def test_no_preemption_when_disabled(tmp_path: Path) -> None:
    config = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
              "- schedulerName: default-scheduler\n  plugins:\n    postFilter:\n"
              "      disabled: [{name: DefaultPreemption}]\n")
    c = _start(tmp_path, config)
    try:
        c.kubectl("create", "namespace", "off")
        _node(c, "o1", "off")
        _pod(c, "off", "low", "low", "3", node="o1")
        _pod(c, "off", "urgent", "high", "2", group="off")
        assert _wait(lambda: _condition_message(c, "off", "urgent") != "")
        assert _condition_message(c, "off", "urgent") == "0/1 nodes are available: 1 Insufficient cpu."
        time.sleep(1)
        assert not _terminating(c, "off", "low")
    finally:
        c.stop()
