"""The DaemonSet controller's pure decisions (daemonset_util.py), as tables named after upstream's tests
(pkg/controller/daemon/daemon_controller_test.go, update_test.go, util/daemonset_util_test.go)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelite.clock import rfc3339
from kubelite.controllers import daemonset_util as du
from kubelite.testing.builders import make_node

Obj = dict[str, Any]
NOW = 1_000_000.0


def daemon_set(name: str = "foo", **template_spec: Any) -> Obj:
    """newDaemonSet: selector name=<name>, one container, a RollingUpdate of maxUnavailable 1."""
    spec = {"containers": [{"name": "foo", "image": "foo/bar"}], **template_spec}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "annotations": {du.TEMPLATE_GENERATION: "1"}},
            "spec": {"selector": {"matchLabels": {"name": name}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1,
                                                                                   "maxSurge": 0}},
                     "template": {"metadata": {"labels": {"name": name}}, "spec": spec}}}


def node(name: str = "node1", labels: dict[str, str] | None = None, taints: list[Obj] | None = None,
         unschedulable: bool = False) -> Obj:
    out = make_node(name, labels=labels)
    out["spec"] = {}
    if taints:
        out["spec"]["taints"] = taints
    if unschedulable:
        out["spec"]["unschedulable"] = True
    return out


def taint(key: str, effect: str, value: str = "") -> Obj:
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


def required_affinity(*expressions: Obj) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}


@dataclass(frozen=True)
class RunCase:
    name: str
    ds: Obj
    node: Obj
    should_run: bool
    should_continue_running: bool


# Mirrors TestNodeShouldRunDaemonPod (daemon_controller_test.go), plus the taint/toleration tests of that file
# (TestTaintedNodeDaemonDoesNotLaunchIntolerantPods, TestNotReadyNodeDaemonLaunchesPod, ...) as verdicts.
RUN_CASES = [
    RunCase("ShouldRunDaemonPod", daemon_set(), node(), True, True),
    RunCase("InsufficientResourceError", daemon_set(containers=[{"name": "foo", "image": "foo/bar", "resources": {
        "requests": {"memory": "200M", "cpu": "200m"}}}]), make_node("node1", cpu="100m", memory="100M"), True,
        True),
    RunCase("ErrPodNotMatchHostName", daemon_set(nodeName="other-node"), node(), False, False),
    RunCase("ErrPodNotFitsHostPorts", daemon_set(containers=[{"name": "foo", "image": "foo/bar", "ports": [
        {"hostPort": 666, "containerPort": 666}]}]), node(), True, True),
    RunCase("ShouldRunDaemonPodOnUnschedulableNode", daemon_set(), node(unschedulable=True), True, True),
    RunCase("ShouldRunDaemonPodOnUnschedulableNode tainted", daemon_set(), node(unschedulable=True, taints=[
        taint("node.kubernetes.io/unschedulable", "NoSchedule")]), True, True),
    RunCase("ErrNodeSelectorNotMatch", daemon_set(nodeSelector={"type": "production"}), node(), False, False),
    RunCase("ShouldRunDaemonPod with matching nodeSelector", daemon_set(nodeSelector={"type": "production"}),
            node(labels={"type": "production"}), True, True),
    RunCase("ErrPodAffinityNotMatch", daemon_set(affinity=required_affinity(
        {"key": "type", "operator": "In", "values": ["test"]})), node(labels={"type": "production"}), False, False),
    RunCase("ShouldRunDaemonPod with matching node affinity", daemon_set(affinity=required_affinity(
        {"key": "type", "operator": "In", "values": ["test"]})), node(labels={"type": "test"}), True, True),
    RunCase("ShouldRunDaemonPodOnUnschedulableNode matchFields", daemon_set(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node1"]}]}]}}}), node(), True, True),
    RunCase("TestTaintedNodeDaemonDoesNotLaunchIntolerantPods", daemon_set(),
            node(taints=[taint("dedicated", "NoSchedule", "master")]), False, True),
    RunCase("TestTaintedNodeDaemonLaunchesToleratePod", daemon_set(tolerations=[
        {"key": "dedicated", "operator": "Equal", "value": "master", "effect": "NoSchedule"}]),
        node(taints=[taint("dedicated", "NoSchedule", "master")]), True, True),
    RunCase("NoExecute taint not tolerated: neither run nor keep running", daemon_set(),
            node(taints=[taint("dedicated", "NoExecute", "master")]), False, False),
    RunCase("TestNotReadyNodeDaemonLaunchesPod", daemon_set(),
            node(taints=[taint("node.kubernetes.io/not-ready", "NoExecute")]), True, True),
    RunCase("TestUnreachableTaintedNodeDaemonLaunchesPod", daemon_set(),
            node(taints=[taint("node.kubernetes.io/unreachable", "NoExecute")]), True, True),
    RunCase("TestTaintPressureNodeDaemonLaunchesPod", daemon_set(), node(taints=[
        taint("node.kubernetes.io/disk-pressure", "NoSchedule"),
        taint("node.kubernetes.io/memory-pressure", "NoSchedule"),
        taint("node.kubernetes.io/pid-pressure", "NoSchedule")]), True, True),
    RunCase("network-unavailable is tolerated by hostNetwork pods only", daemon_set(),
            node(taints=[taint("node.kubernetes.io/network-unavailable", "NoSchedule")]), False, True),
    RunCase("TestNetworkUnavailableNodeDaemonLaunchesPod", daemon_set(hostNetwork=True),
            node(taints=[taint("node.kubernetes.io/network-unavailable", "NoSchedule")]), True, True),
    RunCase("PreferNoSchedule taints do not keep a pod off", daemon_set(),
            node(taints=[taint("dedicated", "PreferNoSchedule")]), True, True),
]


@pytest.mark.parametrize("case", RUN_CASES, ids=lambda c: c.name)
def test_node_should_run_daemon_pod(case: RunCase) -> None:
    got = du.node_should_run_daemon_pod(case.node, case.ds)
    assert got == (case.should_run, case.should_continue_running)


def test_add_or_update_daemon_pod_tolerations() -> None:
    """AddOrUpdateDaemonPodTolerations: upstream's set in its order, a user's matching toleration replaced in
    place, network-unavailable only for hostNetwork."""
    spec: Obj = {"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 30},
                                 {"key": "a", "operator": "Exists"}]}
    du.add_daemon_tolerations(spec)
    assert spec["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "a", "operator": "Exists"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    host: Obj = {"hostNetwork": True}
    du.add_daemon_tolerations(host)
    assert host["tolerations"][-1] == {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                                       "effect": "NoSchedule"}


def _pinned(node_name: str) -> Obj:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}


# Mirrors TestReplaceDaemonSetPodNodeNameNodeAffinity (util/daemonset_util_test.go).
@pytest.mark.parametrize(("affinity", "want"), [
    pytest.param(None, {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _pinned("host_1")}},
                 id="nil affinity"),
    pytest.param({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}]}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _pinned("host_1")}},
        id="replaces the required terms"),
    pytest.param({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]},
        "podAntiAffinity": {"x": 1}},
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}],
            "requiredDuringSchedulingIgnoredDuringExecution": _pinned("host_1")}, "podAntiAffinity": {"x": 1}},
        id="keeps preferred terms and pod affinity"),
])
def test_replace_daemon_set_pod_node_name_node_affinity(affinity: Obj | None, want: Obj) -> None:
    before = copy.deepcopy(affinity)
    assert du.replace_node_name_affinity(affinity, "host_1") == want
    assert affinity == before  # the template's own affinity is not touched


# Mirrors TestGetTargetNodeName (util/daemonset_util_test.go).
@pytest.mark.parametrize(("spec", "want"), [
    pytest.param({"nodeName": "node-1"}, "node-1", id="pod with node name"),
    pytest.param({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _pinned(
        "node-1")}}}, "node-1", id="pod with node affinity"),
    pytest.param({}, None, id="pod without node name or affinity"),
])
def test_get_target_node_name(spec: Obj, want: str | None) -> None:
    assert du.target_node_name({"metadata": {"name": "pod1"}, "spec": spec}) == want


# Mirrors TestIsPodUpdated (util/daemonset_util_test.go).
@pytest.mark.parametrize(("labels", "hash_", "generation", "want"), [
    pytest.param({du.GENERATION_LABEL: "1", du.REVISION_LABEL: "hash"}, "hash", 1, True,
                 id="templateGeneration and hash both match"),
    pytest.param({du.GENERATION_LABEL: "1", du.REVISION_LABEL: "hash"}, "hash-new", 1, True,
                 id="templateGeneration matches, hash doesn't"),
    pytest.param({du.GENERATION_LABEL: "1", du.REVISION_LABEL: "hash"}, "hash", 2, True,
                 id="hash matches, templateGeneration doesn't"),
    pytest.param({du.GENERATION_LABEL: "1", du.REVISION_LABEL: "hash"}, "hash-new", 2, False,
                 id="both don't match"),
    pytest.param({du.REVISION_LABEL: "hash"}, "hash", None, True, id="nil templateGeneration"),
    pytest.param({}, "", None, False, id="empty hash"),
])
def test_is_pod_updated(labels: Obj, hash_: str, generation: int | None, want: bool) -> None:
    assert du.is_pod_updated({"metadata": {"labels": labels}}, hash_, generation) == want


# GetTemplateGeneration as the controller's callers use it: a value strconv.ParseInt refuses is no generation (nil
# upstream), so the revision hash alone decides; Python's laxer int() must not make one up.
@pytest.mark.parametrize(("value", "want"), [
    pytest.param("3", 3, id="number"),
    pytest.param("-1", -1, id="signed"),
    pytest.param(None, None, id="absent"),
    pytest.param("\u00b2", None, id="non-ASCII digit"),
    pytest.param("1_0", None, id="underscore"),
    pytest.param("9" * 20, None, id="beyond int64"),
])
def test_get_template_generation(value: str | None, want: int | None) -> None:
    ds = daemon_set()
    ds["metadata"]["annotations"] = {} if value is None else {du.TEMPLATE_GENERATION: value}
    assert du.template_generation(ds) == want


def test_create_pod_template_labels_and_tolerations() -> None:
    """CreatePodTemplate: the revision hash and template generation labels, the daemon tolerations."""
    template = du.new_pod_template(daemon_set(), "abc")
    assert template["metadata"]["labels"] == {"name": "foo", du.GENERATION_LABEL: "1", du.REVISION_LABEL: "abc"}
    assert len(template["spec"]["tolerations"]) == len(du.DAEMON_TOLERATIONS)


# --- per node and rolling update decisions ------------------------------------------------------------


def pod(name: str, node_name: str, hash_: str, ready: bool = True, phase: str = "Running", age: float = 100,
        deleting: bool = False) -> Obj:
    meta: Obj = {"name": name, "labels": {"name": "foo", du.REVISION_LABEL: hash_},
                 "creationTimestamp": rfc3339(NOW - age)}
    if deleting:
        meta["deletionTimestamp"] = rfc3339(NOW)
    status: Obj = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                                   "lastTransitionTime": rfc3339(NOW - age)}]}
    return {"metadata": meta, "spec": {"nodeName": node_name}, "status": status}


def pending_pod(name: str, age: float) -> Obj:
    """A pod the scheduler has not bound yet: pinned to node1 by the affinity the controller gives it."""
    out = pod(name, "", "h", ready=False, phase="Pending", age=age)
    out["spec"] = {"affinity": du.replace_node_name_affinity(None, "node1")}
    return out


def surge(ds: Obj, max_surge: int | str) -> Obj:
    ds["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": 0, "maxSurge": max_surge}
    return ds


@dataclass(frozen=True)
class NodeCase:
    name: str
    pods: list[Obj]
    create: bool = False
    delete: list[str] = field(default_factory=list)
    ds: Obj = field(default_factory=daemon_set)
    in_backoff: bool = False


# Mirrors podsShouldBeOnNode's branches as exercised by TestDaemonKillFailedPods, TestDaemonSetRespectsTermination
# and the surge tests of update_test.go.
NODE_CASES = [
    NodeCase("a missing pod is created", [], create=True),
    NodeCase("TestDaemonSetRespectsTermination", [pod("p1", "node1", "h", deleting=True)]),
    NodeCase("TestDaemonKillFailedPods", [pod("p1", "node1", "h", phase="Failed")], delete=["p1"]),
    NodeCase("failed pods wait for the node's back-off", [pod("p1", "node1", "h", phase="Failed")], in_backoff=True),
    NodeCase("succeeded pods are deleted", [pod("p1", "node1", "h", phase="Succeeded")], delete=["p1"]),
    NodeCase("without surge all but the oldest pod go", [pod("young", "node1", "h", age=1),
                                                          pod("old", "node1", "h", age=50)], delete=["young"]),
    NodeCase("podByCreationTimestampAndPhase: a bound pod is kept over an older pending one",
             [pending_pod("a-pending", age=50), pod("b-running", "node1", "h", age=1)], delete=["a-pending"]),
    NodeCase("podByCreationTimestampAndPhase: at equal times the first name is kept",
             [pod("b", "node1", "h", age=5), pod("a", "node1", "h", age=5)], delete=["b"]),
    NodeCase("with surge a ready old pod stays while the new one is not available",
             [pod("old", "node1", "old-h", age=50), pod("new", "node1", "h", ready=False, age=1)],
             ds=surge(daemon_set(), 1)),
    NodeCase("with surge the old pod goes once the new one is available",
             [pod("old", "node1", "old-h", age=50), pod("new", "node1", "h", age=10)], delete=["old"],
             ds=surge(daemon_set(), 1)),
    NodeCase("with surge an unready old pod goes at once",
             [pod("old", "node1", "old-h", ready=False, age=50), pod("new", "node1", "h", ready=False, age=1)],
             delete=["old"], ds=surge(daemon_set(), 1)),
    NodeCase("with surge a node whose only pod is deleting gets a new one",
             [pod("old", "node1", "old-h", deleting=True)], create=True, ds=surge(daemon_set(), 1)),
]


@pytest.mark.parametrize("case", NODE_CASES, ids=lambda c: c.name)
def test_pods_should_be_on_node(case: NodeCase) -> None:
    verdict = du.node_should_run_daemon_pod(node(), case.ds)
    plan = du.pods_should_be_on_node("node1", verdict, case.pods, case.ds, "h", NOW, lambda n: case.in_backoff)
    assert (plan.create_on, plan.delete) == (["node1"] if case.create else [], case.delete)


def test_pods_on_a_node_that_should_not_run_them_are_deleted() -> None:
    """TestSelectorDaemonDeletesUnselectedPods: a node that stopped matching loses its pods."""
    ds = daemon_set(nodeSelector={"type": "production"})
    verdict = du.node_should_run_daemon_pod(node(), ds)
    plan = du.pods_should_be_on_node("node1", verdict, [pod("p1", "node1", "h")], ds, "h", NOW, lambda n: False)
    assert plan.delete == ["p1"]


NODES = {f"node{i}": node(f"node{i}") for i in range(5)}
OLD = {f"node{i}": [pod(f"old{i}", f"node{i}", "old-h")] for i in range(5)}


@dataclass(frozen=True)
class UpdateCase:
    name: str
    pods: dict[str, list[Obj]]
    delete: list[str]
    create_on: list[str] = field(default_factory=list)
    ds: Obj = field(default_factory=daemon_set)
    nodes: dict[str, Obj] = field(default_factory=lambda: NODES)


def max_unavailable(value: int) -> Obj:
    ds = daemon_set()
    ds["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": value, "maxSurge": 0}
    return ds


def cluster(count: int) -> dict[str, Obj]:
    return {f"node{i:03}": node(f"node{i:03}") for i in range(count)}


def pods_by_node(count: int, hash_: str, ready: bool, first: int = 0) -> dict[str, list[Obj]]:
    """One pod on each of `count` nodes from node `first` on, named after its node."""
    return {f"node{i:03}": [pod(f"{hash_}{i:03}", f"node{i:03}", hash_, ready=ready)]
            for i in range(first, first + count)}


# TestDaemonSetUpdatesSaveOldHealthyPods's state after its first step: 20 nodes, 10 old ready pods and 10 old
# unready ones (their new pods never became ready before the next template change).
SAVE_OLD_HEALTHY = {**pods_by_node(10, "old-h", ready=True), **pods_by_node(10, "old-h", ready=False, first=10)}
# TestDaemonSetUpdatesAllOldNotReadyPodsAndNewNotReadyPods: 100 nodes, 10 available old pods, 2 unavailable old
# pods and 88 unavailable new ones.
OLD_AND_NEW_NOT_READY = {**pods_by_node(10, "old-h", ready=True), **pods_by_node(2, "old-h", ready=False, first=10),
                         **pods_by_node(88, "h", ready=False, first=12)}

# Mirrors update_test.go's rolling-update cases on the decision itself.
UPDATE_CASES = [
    UpdateCase("TestDaemonSetUpdatesPods maxUnavailable=1 deletes one old pod", OLD, ["old0"]),
    UpdateCase("TestDaemonSetUpdatesPods maxUnavailable=2 deletes two",
               OLD, ["old0", "old1"], ds=(lambda d: d["spec"]["updateStrategy"].update(
                   rollingUpdate={"maxUnavailable": 2, "maxSurge": 0}) or d)(daemon_set())),
    UpdateCase("TestDaemonSetUpdatesWhenNewPodIsNotReady: an unready new pod uses the budget",
               {**OLD, "node0": [pod("new0", "node0", "h", ready=False)]}, []),
    UpdateCase("TestDaemonSetUpdatesAllOldPodsNotReady: unavailable old pods all go",
               {n: [pod(f"old{i}", n, "old-h", ready=False)] for i, n in enumerate(NODES)},
               [f"old{i}" for i in range(5)]),
    UpdateCase("TestDaemonSetUpdatesNoTemplateChanged", {n: [pod(f"p{i}", n, "h")] for i, n in enumerate(NODES)},
               []),
    UpdateCase("percent maxUnavailable rounds up", OLD, ["old0", "old1"],
               ds=(lambda d: d["spec"]["updateStrategy"].update(
                   rollingUpdate={"maxUnavailable": "30%", "maxSurge": 0}) or d)(daemon_set())),
    UpdateCase("TestDaemonSetUpdatesPodsWithMaxSurge: new pods beside old ones", OLD, [], ["node0", "node1"],
               ds=surge(daemon_set(), 2)),
    UpdateCase("with surge an available new pod retires its old one",
               {**OLD, "node0": [pod("old0", "node0", "old-h"), pod("new0", "node0", "h")]}, ["old0"],
               ["node1"], ds=surge(daemon_set(), 1)),
    UpdateCase("TestDaemonSetUpdatesAllOldPodsNotReadyMaxSurge: unavailable old pods get a new pod at once",
               {n: [pod(f"old{i}", n, "old-h", ready=False)] for i, n in enumerate(NODES)}, [], list(NODES),
               ds=surge(daemon_set(), 1)),
    UpdateCase("TestDaemonSetUpdatesSomeOldPodsNotReady: the unready old pods use up maxUnavailable",
               {**{f"node{i}": [pod(f"old{i}", f"node{i}", "old-h", ready=False)] for i in range(2)},
                **{f"node{i}": [pod(f"old{i}", f"node{i}", "old-h")] for i in range(2, 5)}},
               ["old0", "old1"], ds=max_unavailable(2)),
    *(UpdateCase(f"TestDaemonSetUpdatesSaveOldHealthyPods maxUnavailable={n}: only the 10 unready old pods go",
                 SAVE_OLD_HEALTHY, [f"old-h{i:03}" for i in range(10, 20)], ds=max_unavailable(n),
                 nodes=cluster(20)) for n in (1, 5, 9)),
    UpdateCase("TestDaemonSetUpdatesSaveOldHealthyPods maxUnavailable=11: the unready ones and one ready",
               SAVE_OLD_HEALTHY, [f"old-h{i:03}" for i in range(10, 20)] + ["old-h000"], ds=max_unavailable(11),
               nodes=cluster(20)),
    UpdateCase("TestDaemonSetUpdatesAllOldNotReadyPodsAndNewNotReadyPods: only the 2 unavailable old pods go",
               OLD_AND_NEW_NOT_READY, ["old-h010", "old-h011"], ds=max_unavailable(10), nodes=cluster(100)),
]


@pytest.mark.parametrize("case", UPDATE_CASES, ids=lambda c: c.name)
def test_rolling_update(case: UpdateCase) -> None:
    verdicts = du.verdicts(case.ds, case.nodes.values())
    assert du.rolling_update(case.ds, verdicts, case.pods, "h", NOW) == (case.delete, case.create_on)


def test_status_counts() -> None:
    """updateDaemonSetStatus: desired per eligible node, misscheduled pods elsewhere, the oldest pod's state."""
    ds = daemon_set(nodeSelector={"run": "yes"})
    nodes = [node("a", labels={"run": "yes"}), node("b", labels={"run": "yes"}), node("c", labels={"run": "yes"}),
             node("d")]
    node_pods = {"a": [pod("pa", "a", "h")], "b": [pod("pb", "b", "old", ready=False)], "d": [pod("pd", "d", "h")]}
    assert du.calculate_status(ds, du.verdicts(ds, nodes), node_pods, "h", NOW) == {
        "currentNumberScheduled": 2, "numberMisscheduled": 1, "desiredNumberScheduled": 3, "numberReady": 1,
        "updatedNumberScheduled": 1, "numberAvailable": 1, "numberUnavailable": 2}
