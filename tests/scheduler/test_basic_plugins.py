"""Filter and score tables for the node-level plugins, ported from upstream's plugin tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelite.scheduler.plugins.node_affinity import NodeAffinity
from kubelite.scheduler.plugins.node_name import NodeName
from kubelite.scheduler.plugins.node_ports import NodePorts
from kubelite.scheduler.plugins.node_resources import (
    FitArgs,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
)
from kubelite.scheduler.plugins.node_unschedulable import NodeUnschedulable
from kubelite.scheduler.plugins.taint_toleration import TaintToleration
from kubelite.scheduler.podinfo import pod_requests
from kubelite.testing.builders import make_pod
from tests.scheduler.helpers import filter_verdicts, node, scores, table
from tests.scheduler.helpers import pod as pod_of

Obj = dict[str, Any]


def _res(cpu: str | None = None, memory: str | None = None, extra: dict[str, str] | None = None) -> Obj:
    req = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    req.update(extra or {})
    return {"requests": req}


def _pod(name: str = "p", containers: list[Obj] | None = None, init: list[Obj] | None = None, **spec: Any) -> Obj:
    obj = make_pod(name).obj()
    if containers is not None:
        obj["spec"]["containers"] = [{"name": f"c{i}", "image": "i", "resources": r} for i, r in enumerate(containers)]
    if init is not None:
        obj["spec"]["initContainers"] = [{"name": f"i{i}", "image": "i", **c} for i, c in enumerate(init)]
    obj["spec"].update(spec)
    return obj


@dataclass(frozen=True)
class RequestsCase:
    name: str
    pod: Obj
    want: dict[str, int]


# Mirrors TestPodRequests, staging/src/k8s.io/component-helpers/resource/helpers_test.go.
REQUESTS_CASES = [
    RequestsCase("app containers add up", _pod(containers=[_res("1", "1Gi"), _res("500m", "1Gi")]),
                 {"cpu": 1500, "memory": 2 * 2**30}),
    RequestsCase("init container larger than apps wins", _pod(containers=[_res("1")], init=[
        {"resources": _res("3")}]), {"cpu": 3000}),
    RequestsCase("sidecar adds to apps and to later init containers",
                 _pod(containers=[_res("1")], init=[{"resources": _res("1"), "restartPolicy": "Always"},
                                                    {"resources": _res("2")}]), {"cpu": 3000}),
    RequestsCase("init container before the sidecar does not count it",
                 _pod(containers=[_res("1")], init=[{"resources": _res("2")},
                                                    {"resources": _res("1"), "restartPolicy": "Always"}]),
                 {"cpu": 2000}),
    RequestsCase("overhead is added", _pod(containers=[_res("1")], overhead={"cpu": "250m"}), {"cpu": 1250}),
]


@pytest.mark.parametrize("case", REQUESTS_CASES, ids=lambda c: c.name)
def test_pod_requests(case: RequestsCase) -> None:
    assert pod_requests(case.pod["spec"]) == case.want


@dataclass(frozen=True)
class FitCase:
    name: str
    pod: Obj
    existing: list[Obj]
    want: str
    node_cpu: str = "10"
    node_memory: str = "20"
    node_pods: str = "32"
    extended: dict[str, str] = field(default_factory=dict)


def _existing(cpu: str, memory: str) -> Obj:
    return _pod("existing", containers=[_res(cpu, memory)], nodeName="n")


# Mirrors TestEnoughRequests, pkg/scheduler/framework/plugins/noderesources/fit_test.go (memory in bytes).
FIT_CASES = [
    FitCase("no resources requested always fits", _pod(containers=[{}]), [_existing("10", "20")], ""),
    FitCase("too many resources fails", _pod(containers=[_res("1", "1")]), [_existing("10", "20")],
            "Insufficient cpu, Insufficient memory"),
    FitCase("too many resources fails due to init container cpu", _pod(containers=[_res("1", "1")], init=[
        {"resources": _res("3", "1")}]), [_existing("8", "19")], "Insufficient cpu"),
    FitCase("both resources fit", _pod(containers=[_res("1", "1")]), [_existing("5", "5")], ""),
    FitCase("one resource memory fits", _pod(containers=[_res("2", "1")]), [_existing("9", "5")],
            "Insufficient cpu"),
    FitCase("one resource cpu fits", _pod(containers=[_res("1", "2")]), [_existing("5", "19")],
            "Insufficient memory"),
    FitCase("equal edge case", _pod(containers=[_res("5", "1")]), [_existing("5", "19")], ""),
    FitCase("extended resource fits", _pod(containers=[_res(extra={"example.com/foo": "1"})]), [], "",
            extended={"example.com/foo": "5"}),
    FitCase("extended resource capacity enforced", _pod(containers=[_res(extra={"example.com/foo": "10"})]), [],
            "Insufficient example.com/foo", extended={"example.com/foo": "5"}),
    FitCase("too many pods", _pod(containers=[{}]), [_existing("1", "1")], "Too many pods", node_pods="1"),
]


@pytest.mark.parametrize("case", FIT_CASES, ids=lambda c: c.name)
def test_node_resources_fit_filter(case: FitCase) -> None:
    n = node("n", cpu=case.node_cpu, memory=case.node_memory, pods=case.node_pods)
    n["status"]["allocatable"].update(case.extended)
    t = table([n], case.existing)
    assert filter_verdicts(NodeResourcesFit(), t, case.pod) == {"n": case.want}


@dataclass(frozen=True)
class ScoreCase:
    name: str
    pod: Obj
    nodes: list[Obj]
    existing: list[Obj]
    want: dict[str, int]


def _on(node_name: str, cpu: str, memory: str) -> Obj:
    return _pod(f"e-{node_name}-{cpu}-{memory}", containers=[_res(cpu, memory)], nodeName=node_name)


# Mirrors TestLeastAllocatedScoringStrategy, noderesources/least_allocated_test.go (cpu in milli, memory bytes).
LEAST_CASES = [
    ScoreCase("nothing scheduled, nothing requested", _pod(containers=[{}]),
              [node("node1", cpu="4", memory="10000"), node("node2", cpu="4", memory="10000")], [],
              # non-zero defaults: 100m of 4000m, 200Mi of 10000 bytes (capped at 0)
              {"node1": (97 + 0) // 2, "node2": (97 + 0) // 2}),
    ScoreCase("nothing scheduled, resources requested, differently sized nodes",
              _pod(containers=[_res("1", "2000"), _res("2", "3000")]),
              [node("node1", cpu="4", memory="10000"), node("node2", cpu="6", memory="10000")], [],
              {"node1": (25 + 50) // 2, "node2": (50 + 50) // 2}),
    ScoreCase("resources requested with pods scheduled with resources",
              _pod(containers=[_res("1", "2000"), _res("2", "3000")]),
              [node("node1", cpu="10", memory="20000"), node("node2", cpu="10", memory="50000")],
              [_on("node1", "3", "0"), _on("node2", "3", "5000")],
              {"node1": (40 + 75) // 2, "node2": (40 + 80) // 2}),
]


@pytest.mark.parametrize("case", LEAST_CASES, ids=lambda c: c.name)
def test_least_allocated_score(case: ScoreCase) -> None:
    t = table(case.nodes, case.existing)
    assert scores(NodeResourcesFit(), t, case.pod) == case.want


def test_most_allocated_and_ratio_scores() -> None:
    t = table([node("node1", cpu="4", memory="10000"), node("node2", cpu="6", memory="10000")])
    incoming = _pod(containers=[_res("1", "2000"), _res("2", "3000")])
    assert scores(NodeResourcesFit(FitArgs.from_config({"scoringStrategy": {"type": "MostAllocated"}})), t,
                  incoming) == {"node1": (75 + 50) // 2, "node2": (50 + 50) // 2}
    ratio = FitArgs.from_config({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}})
    assert scores(NodeResourcesFit(ratio), t, incoming) == {"node1": (75 + 50) // 2, "node2": (50 + 50) // 2}


# Mirrors TestNodeResourcesBalancedAllocation, noderesources/balanced_allocation_test.go.
BALANCED_CASES = [
    ScoreCase("nothing scheduled, resources requested, differently sized nodes",
              _pod(containers=[_res("1", "2000"), _res("2", "3000")]),
              [node("node1", cpu="4", memory="10000"), node("node2", cpu="6", memory="10000")], [],
              {"node1": 87, "node2": 100}),
    ScoreCase("resources requested, pods scheduled with resources",
              _pod(containers=[_res("1", "2000"), _res("2", "3000")]),
              [node("node1", cpu="10", memory="20000"), node("node2", cpu="10", memory="50000")],
              [_on("node1", "3", "0"), _on("node2", "3", "5000")],
              # cpu 6/10 vs memory 5/20 → std 0.175; cpu 6/10 vs memory 10/50 → std 0.2
              {"node1": 82, "node2": 80}),
]


@pytest.mark.parametrize("case", BALANCED_CASES, ids=lambda c: c.name)
def test_balanced_allocation_score(case: ScoreCase) -> None:
    t = table(case.nodes, case.existing)
    assert scores(NodeResourcesBalancedAllocation(), t, case.pod) == case.want


def test_balanced_allocation_skips_best_effort() -> None:
    t = table([node("a"), node("b")])
    assert scores(NodeResourcesBalancedAllocation(), t, _pod(containers=[{}])) == {"a": 0, "b": 0}


@dataclass(frozen=True)
class TaintCase:
    name: str
    tolerations: list[Obj]
    taints: list[Obj]
    want: str


NO_SCHEDULE = {"key": "dedicated", "value": "user1", "effect": "NoSchedule"}

# Mirrors TestTaintTolerationFilter, plugins/tainttoleration/taint_toleration_test.go.
TAINT_FILTER_CASES = [
    TaintCase("A pod having no tolerations can't be scheduled onto a node with nonempty taints", [], [NO_SCHEDULE],
              "node(s) had untolerated taint {dedicated: user1}"),
    TaintCase("A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
              [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}], [NO_SCHEDULE], ""),
    TaintCase("A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
              [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}], [NO_SCHEDULE],
              "node(s) had untolerated taint {dedicated: user1}"),
    TaintCase("A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the "
              "taints on the node", [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
              [{"key": "foo", "value": "bar", "effect": "NoSchedule"}], ""),
    TaintCase("A pod has multiple tolerations, node has multiple taints, all the taints are tolerated, pod can be "
              "scheduled onto the node", [{"key": "dedicated", "operator": "Equal", "value": "user2",
                                           "effect": "NoSchedule"},
                                          {"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
              [{"key": "dedicated", "value": "user2", "effect": "NoSchedule"},
               {"key": "foo", "value": "bar", "effect": "NoSchedule"}], ""),
    TaintCase("A pod has a toleration that keys and values match the taint on the node, but (non-empty) effect "
              "doesn't match, can't be scheduled onto the node",
              [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
              [{"key": "foo", "value": "bar", "effect": "NoSchedule"}], "node(s) had untolerated taint {foo: bar}"),
    TaintCase("The pod has a toleration that keys and values match the taint on the node, the effect of "
              "toleration is empty, and the effect of taint is NoSchedule. Pod can be scheduled onto the node",
              [{"key": "foo", "operator": "Equal", "value": "bar"}],
              [{"key": "foo", "value": "bar", "effect": "NoSchedule"}], ""),
    TaintCase("The pod has a toleration that key and value don't match the taint on the node, but the effect of "
              "taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
              [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
              [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}], ""),
    TaintCase("The pod has no toleration, but the effect of taint on node is PreferNoSchedule. Pod can be "
              "scheduled onto the node", [], [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}],
              ""),
]


@pytest.mark.parametrize("case", TAINT_FILTER_CASES, ids=lambda c: c.name)
def test_taint_toleration_filter(case: TaintCase) -> None:
    t = table([node("nodeA", taints=case.taints)])
    incoming = _pod(tolerations=case.tolerations)
    assert filter_verdicts(TaintToleration(), t, incoming) == {"nodeA": case.want}


def test_taint_toleration_score() -> None:
    """Mirrors TestTaintTolerationScore "the more intolerable taints a node has, the lower score it gets"."""
    prefer = [{"key": f"k{i}", "value": "v", "effect": "PreferNoSchedule"} for i in range(2)]
    t = table([node("nodeA"), node("nodeB", taints=prefer[:1]), node("nodeC", taints=prefer)])
    assert scores(TaintToleration(), t, _pod()) == {"nodeA": 100, "nodeB": 50, "nodeC": 0}


AFFINITY_NODES = [node("n1", {"zone": "a", "gpu": "4"}), node("n2", {"zone": "b", "gpu": "1"}), node("n3", {})]
NODE_AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"


def _required(*exprs: Obj) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": list(exprs)}]}}}


@dataclass(frozen=True)
class AffinityCase:
    name: str
    spec: Obj
    passes: tuple[str, ...]


# Mirrors TestNodeAffinity, plugins/nodeaffinity/node_affinity_test.go.
NODE_AFFINITY_CASES = [
    AffinityCase("no selector", {}, ("n1", "n2", "n3")),
    AffinityCase("missing labels", {"nodeSelector": {"foo": "bar"}}, ()),
    AffinityCase("same labels", {"nodeSelector": {"zone": "a"}}, ("n1",)),
    AffinityCase("Pod with matchExpressions using In operator that matches the existing node",
                 {"affinity": _required({"key": "zone", "operator": "In", "values": ["a", "b"]})}, ("n1", "n2")),
    AffinityCase("Pod with matchExpressions using Gt operator that matches the existing node",
                 {"affinity": _required({"key": "gpu", "operator": "Gt", "values": ["2"]})}, ("n1",)),
    AffinityCase("Pod with matchExpressions using NotIn operator that matches the existing node",
                 {"affinity": _required({"key": "zone", "operator": "NotIn", "values": ["a"]})}, ("n2", "n3")),
    AffinityCase("Pod with matchExpressions using Exists operator that matches the existing node",
                 {"affinity": _required({"key": "gpu", "operator": "Exists"})}, ("n1", "n2")),
    AffinityCase("Pod with affinity that don't match node's labels won't schedule onto the node",
                 {"affinity": _required({"key": "zone", "operator": "DoesNotExist"})}, ("n3",)),
    AffinityCase("Pod with an empty NodeSelectorTerms won't schedule onto the node",
                 {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{}]}}}}, ()),
    AffinityCase("Pod with matchFields using In operator that matches the existing node",
                 {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                             "values": ["n2"]}]}]}}}}, ("n2",)),
    AffinityCase("Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's labels and will "
                 "schedule onto the node", {"affinity": {"nodeAffinity": {
                     "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                         {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["1"]}]}]}}}}, ("n1", "n2")),
    AffinityCase("nodeSelector and affinity are ANDed", {"nodeSelector": {"zone": "b"}, "affinity": _required(
        {"key": "gpu", "operator": "Exists"})}, ("n2",)),
]


@pytest.mark.parametrize("case", NODE_AFFINITY_CASES, ids=lambda c: c.name)
def test_node_affinity_filter(case: AffinityCase) -> None:
    got = filter_verdicts(NodeAffinity(), table(AFFINITY_NODES), _pod(**case.spec))
    assert got == {n: "" if n in case.passes else NODE_AFFINITY_REASON for n in ("n1", "n2", "n3")}


def test_node_affinity_added_affinity_and_score() -> None:
    added = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}
    got = filter_verdicts(NodeAffinity(added), table(AFFINITY_NODES), _pod())
    assert got == {"n1": "", "n2": "", "n3": "node(s) didn't match scheduler-enforced node affinity"}
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 2, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
        {"weight": 8, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}]}}
    assert scores(NodeAffinity(), table(AFFINITY_NODES), _pod(affinity=preferred)) == {"n1": 100, "n2": 80, "n3": 0}


def test_node_unschedulable_name_and_ports() -> None:
    t = table([node("a", unschedulable=True), node("b")], [_pod("web", containers=[{}], nodeName="b")])
    assert filter_verdicts(NodeUnschedulable(), t, _pod()) == {"a": "node(s) were unschedulable", "b": ""}
    tolerant = _pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                  "effect": "NoSchedule"}])
    assert filter_verdicts(NodeUnschedulable(), t, tolerant) == {"a": "", "b": ""}
    assert filter_verdicts(NodeName(), t, _pod(nodeName="b")) == {
        "a": "node(s) didn't match the requested node name", "b": ""}
    with_port = _pod("hp", nodeName="b")
    with_port["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]
    t.add_pod(pod_of(with_port))
    wants = _pod()
    wants["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    assert filter_verdicts(NodePorts(), t, wants) == {
        "a": "", "b": "node(s) didn't have free ports for the requested pod ports"}
