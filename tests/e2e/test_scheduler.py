"""The scheduler inside a real `kubelite server`, driven with the real kubectl: placement, failures,
gates, explanations, and the topology spread examples of seed 004."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("sched")
    proc = start_server(base / "data", base / "home")
    yield proc
    proc.stop()


def _node(name: str, labels: dict[str, str], cpu: str = "4") -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, **labels}}, "status": {
        "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
        "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}})


def _nodes(c: ServerProcess, nodes: dict[str, dict[str, str]]) -> None:
    c.kubectl("delete", "nodes", "--all", "--wait=false")
    for name, labels in nodes.items():
        c.kubectl("create", "-f", "-", stdin=_node(name, labels))


def _pods_on(c: ServerProcess, ns: str, placements: dict[str, int], labels: str = "foo=bar") -> None:
    for node, count in placements.items():
        for i in range(count):
            c.kubectl("run", f"{node}-{i}", "-n", ns, "--image=pause", f"--labels={labels}",
                      f'--overrides={{"spec":{{"nodeName":"{node}"}}}}')


def _wait_node(c: ServerProcess, ns: str, name: str, timeout: float = 15) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node = c.kubectl("get", "pod", name, "-n", ns, "-o", "jsonpath={.spec.nodeName}").stdout
        if node:
            return node
        time.sleep(0.2)
    return ""


def _wait_condition_message(c: ServerProcess, ns: str, name: str, timeout: float = 15) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = json.loads(c.kubectl("get", "pod", name, "-n", ns, "-o", "json").stdout)
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return str(cond["message"])
        time.sleep(0.2)
    return ""


def _mypod(constraints: list[dict[str, object]], affinity: dict[str, object] | None = None) -> str:
    spec: dict[str, object] = {"topologySpreadConstraints": constraints,
                               "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.1"}]}
    if affinity:
        spec["affinity"] = affinity
    return json.dumps({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "mypod", "labels": {"foo": "bar"}},
                       "spec": spec})


def _tsc(key: str, skew: int = 1, when: str = "DoNotSchedule") -> dict[str, object]:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"foo": "bar"}}}


FOUR = {"node1": {"node": "node1", "zone": "zoneA"}, "node2": {"node": "node2", "zone": "zoneA"},
        "node3": {"node": "node3", "zone": "zoneB"}, "node4": {"node": "node4", "zone": "zoneB"}}
THREE_PODS = {"node1": 1, "node2": 1, "node3": 1}


def _scenario(c: ServerProcess, ns: str, nodes: dict[str, dict[str, str]], pods: dict[str, int],
              manifest: str) -> str:
    c.kubectl("create", "namespace", ns)
    _nodes(c, nodes)
    _pods_on(c, ns, pods)
    c.kubectl("apply", "-n", ns, "-f", "-", stdin=manifest)
    return _wait_node(c, ns, "mypod")


# Seed 004, "Example: one topology spread constraint" and the variations it lists.
SEED_004_CASES = [
    ("one constraint on zone: only zone B", [_tsc("zone")], None, FOUR, THREE_PODS, {"node3", "node4"}),
    ("maxSkew 2 also allows zone A", [_tsc("zone", 2)], None, FOUR, THREE_PODS,
     {"node1", "node2", "node3", "node4"}),
    ("topologyKey node: only node4", [_tsc("node")], None, FOUR, THREE_PODS, {"node4"}),
    ("two constraints: only node4", [_tsc("zone"), _tsc("node")], None, FOUR, THREE_PODS, {"node4"}),
    ("nodeAffinity excluding zone C keeps zone C out of the skew",
     [_tsc("zone")], {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
         {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["zoneC"]}]}]}}},
     {**FOUR, "node5": {"node": "node5", "zone": "zoneC"}}, THREE_PODS, {"node3", "node4"}),
    ("a node missing the zone label is skipped and its pods do not count", [_tsc("zone")], None,
     {"node1": {"node": "node1"}, "node2": {"node": "node2", "zone": "zoneA"},
      "node3": {"node": "node3", "zone": "zoneB"}, "node4": {"node": "node4", "zone": "zoneB"}},
     {"node1": 2, "node3": 1}, {"node2"}),
]


@pytest.mark.parametrize("case", SEED_004_CASES, ids=lambda c: c[0])
def test_seed_004_topology_spread(cluster: ServerProcess, case: tuple) -> None:  # type: ignore[type-arg]
    name, constraints, affinity, nodes, pods, allowed = case
    ns = "seed-" + str(SEED_004_CASES.index(case))
    assert _scenario(cluster, ns, nodes, pods, _mypod(constraints, affinity)) in allowed, name


def test_seed_004_conflicting_constraints_stay_pending(cluster: ServerProcess) -> None:
    nodes = {"node1": {"node": "node1", "zone": "zoneA"}, "node2": {"node": "node2", "zone": "zoneA"},
             "node3": {"node": "node3", "zone": "zoneB"}}
    cluster.kubectl("create", "namespace", "conflict")
    _nodes(cluster, nodes)
    _pods_on(cluster, "conflict", {"node1": 2, "node3": 1})
    cluster.kubectl("apply", "-n", "conflict", "-f", "-", stdin=_mypod([_tsc("zone"), _tsc("node")]))
    message = _wait_condition_message(cluster, "conflict", "mypod")
    assert message == ("0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints. "
                       "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
    assert "Pending" in cluster.kubectl("get", "pod", "mypod", "-n", "conflict").stdout
    explained = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "explain", "pod", "mypod", "-n",
                                "conflict", "--kubeconfig", str(cluster.kubeconfig)],
                               capture_output=True, text=True, timeout=60)
    assert explained.returncode == 0, explained.stderr
    assert "3 node(s) didn't match pod topology spread constraints: node1, node2, node3" in explained.stdout
    assert "Suggestion: fits" in explained.stdout and "if maxSkew were 2" in explained.stdout
    raw = json.loads(cluster.kubectl("get", "--raw",
                                     "/apis/kubelite.io/v1alpha1/namespaces/conflict/schedulingexplanations/mypod"
                                     ).stdout)
    assert raw["result"] == "Unschedulable" and raw["message"] == message


def test_placement_events_and_failed_scheduling(cluster: ServerProcess) -> None:
    cluster.kubectl("create", "namespace", "fit")
    _nodes(cluster, {"small": {}, "large": {}})
    cluster.kubectl("patch", "node", "large", "--subresource=status", "--type=merge", "-p",
                    '{"status":{"allocatable":{"cpu":"16"},"capacity":{"cpu":"16"}}}')
    cluster.kubectl("run", "wide", "-n", "fit", "--image=pause",
                    '--overrides={"spec":{"containers":[{"name":"c","image":"pause","resources":'
                    '{"requests":{"cpu":"8"}}}]}}')
    assert _wait_node(cluster, "fit", "wide") == "large"
    described = cluster.kubectl("describe", "pod", "wide", "-n", "fit").stdout
    assert "Successfully assigned fit/wide to large" in described
    cluster.kubectl("run", "huge", "-n", "fit", "--image=pause",
                    '--overrides={"spec":{"containers":[{"name":"c","image":"pause","resources":'
                    '{"requests":{"cpu":"20"}}}]}}')
    assert _wait_condition_message(cluster, "fit", "huge") == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption "
        "victims found for incoming pod.")
    assert "FailedScheduling" in cluster.kubectl("describe", "pod", "huge", "-n", "fit").stdout
    # a new, bigger node is a cluster event: the parked pod is retried and lands
    cluster.kubectl("create", "-f", "-", stdin=_node("giant", {}, cpu="32"))
    assert _wait_node(cluster, "fit", "huge") == "giant"


def test_scheduling_gates(cluster: ServerProcess) -> None:
    cluster.kubectl("create", "namespace", "gates")
    _nodes(cluster, {"gate-node": {}})
    cluster.kubectl("run", "gated", "-n", "gates", "--image=pause",
                    '--overrides={"spec":{"schedulingGates":[{"name":"example.com/wait"}]}}')
    time.sleep(1.5)
    assert "SchedulingGated" in cluster.kubectl("get", "pod", "gated", "-n", "gates").stdout
    assert cluster.kubectl("get", "pod", "gated", "-n", "gates", "-o", "jsonpath={.spec.nodeName}").stdout == ""
    cluster.kubectl("patch", "pod", "gated", "-n", "gates", "--type=json", "-p",
                    '[{"op":"remove","path":"/spec/schedulingGates"}]')
    assert _wait_node(cluster, "gates", "gated") == "gate-node"


def test_other_scheduler_names_are_left_alone(cluster: ServerProcess) -> None:
    cluster.kubectl("create", "namespace", "other")
    _nodes(cluster, {"any": {}})
    cluster.kubectl("run", "mine", "-n", "other", "--image=pause",
                    '--overrides={"spec":{"schedulerName":"someone-else"}}')
    time.sleep(1.5)
    assert cluster.kubectl("get", "pod", "mine", "-n", "other", "-o", "jsonpath={.spec.nodeName}").stdout == ""


def test_invalid_scheduler_config_is_rejected_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "sched.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                   "percentageOfNodesToScore: 300\n")
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "server", "--insecure", "--data-dir",
                          str(tmp_path / "d"), "--scheduler-config", str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2
    assert "percentageOfNodesToScore: Invalid value: 300" in res.stderr
