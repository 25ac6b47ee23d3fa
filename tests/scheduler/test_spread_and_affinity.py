"""PodTopologySpread and InterPodAffinity tables, ported from upstream's plugin tests (T1-T6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kubelite.api.selectors import compile_label_selector
from kubelite.scheduler.plugins.inter_pod_affinity import InterPodAffinity
from kubelite.scheduler.plugins.pod_topology_spread import PodTopologySpread
from kubelite.testing.builders import make_pod
from tests.scheduler.helpers import filter_verdicts, node, scores, table

Obj = dict[str, Any]
SKEW = "node(s) didn't match pod topology spread constraints"
MISSING = SKEW + " (missing required label)"


def _pod(name: str, labels: dict[str, str] | None = None, node_name: str = "", ns: str = "default",
         **spec: Any) -> Obj:
    obj = make_pod(name, ns).obj()
    obj["metadata"]["labels"] = labels or {}
    if node_name:
        obj["spec"]["nodeName"] = node_name
    obj["spec"].update(spec)
    return obj


def _tsc(key: str, skew: int = 1, when: str = "DoNotSchedule", **extra: Any) -> Obj:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}, **extra}


FOUR_NODES = [node("node-a", {"zone": "zone1", "node": "node-a"}), node("node-b", {"zone": "zone1", "node": "node-b"}),
              node("node-x", {"zone": "zone2", "node": "node-x"}), node("node-y", {"zone": "zone2", "node": "node-y"})]
FOO = {"foo": ""}


def _existing(*placements: tuple[str, int]) -> list[Obj]:
    out = []
    for node_name, count in placements:
        out += [_pod(f"p-{node_name}-{i}", FOO, node_name) for i in range(count)]
    return out


@dataclass(frozen=True)
class SpreadCase:
    name: str
    incoming: Obj
    nodes: list[Obj]
    existing: list[Obj]
    want: dict[str, str]


# Mirrors TestSingleConstraint / TestMultipleConstraints, plugins/podtopologyspread/filtering_test.go.
SPREAD_CASES = [
    SpreadCase("no existing pods", _pod("p", FOO, topologySpreadConstraints=[_tsc("zone")]), FOUR_NODES, [],
               {"node-a": "", "node-b": "", "node-x": "", "node-y": ""}),
    SpreadCase("no existing pods, incoming pod doesn't match itself",
               _pod("p", {}, topologySpreadConstraints=[_tsc("zone")]), FOUR_NODES, [],
               {"node-a": "", "node-b": "", "node-x": "", "node-y": ""}),
    SpreadCase("existing pods in a different namespace do not count",
               _pod("p", FOO, topologySpreadConstraints=[_tsc("zone")]), FOUR_NODES,
               [_pod("a1", FOO, "node-a", ns="ns1"), _pod("a2", FOO, "node-a", ns="ns1"),
                _pod("x1", FOO, "node-x")],
               {"node-a": "", "node-b": "", "node-x": SKEW, "node-y": SKEW}),
    SpreadCase("pods spread across zones as 3/3, all nodes fit",
               _pod("p", FOO, topologySpreadConstraints=[_tsc("zone")]), FOUR_NODES,
               _existing(("node-a", 1), ("node-b", 2), ("node-x", 2), ("node-y", 1)),
               {"node-a": "", "node-b": "", "node-x": "", "node-y": ""}),
    SpreadCase("pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
               _pod("p", FOO, topologySpreadConstraints=[_tsc("zone")]),
               [FOUR_NODES[0], node("node-b", {"zon": "zone1", "node": "node-b"}), FOUR_NODES[2], FOUR_NODES[3]],
               _existing(("node-a", 1), ("node-b", 1), ("node-x", 2)),
               {"node-a": "", "node-b": MISSING, "node-x": SKEW, "node-y": SKEW}),
    SpreadCase("pod cannot be scheduled as all nodes don't have label 'rack'",
               _pod("p", FOO, topologySpreadConstraints=[_tsc("rack")]), FOUR_NODES, [],
               {n: MISSING for n in ("node-a", "node-b", "node-x", "node-y")}),
    SpreadCase("pods spread across nodes as 2/1/0/3, only node-x fits",
               _pod("p", FOO, topologySpreadConstraints=[_tsc("node")]), FOUR_NODES,
               _existing(("node-a", 2), ("node-b", 1), ("node-y", 3)),
               {"node-a": SKEW, "node-b": SKEW, "node-x": "", "node-y": SKEW}),
    SpreadCase("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
               _pod("p", FOO, topologySpreadConstraints=[_tsc("node", 2)]), FOUR_NODES,
               _existing(("node-a", 2), ("node-b", 1), ("node-y", 3)),
               {"node-a": SKEW, "node-b": "", "node-x": "", "node-y": SKEW}),
    SpreadCase("terminating Pods should be excluded",
               _pod("p", FOO, topologySpreadConstraints=[_tsc("node")]), FOUR_NODES[:2],
               [{**_pod("t", FOO, "node-a"), "metadata": {**_pod("t", FOO, "node-a")["metadata"],
                                                          "deletionTimestamp": "2026-01-01T00:00:00Z"}},
                _pod("b1", FOO, "node-b")],
               {"node-a": "", "node-b": SKEW}),
    SpreadCase("minDomains greater than existing domains: global minimum is 0",
               _pod("p", FOO, topologySpreadConstraints=[_tsc("zone", 2, minDomains=3)]), FOUR_NODES,
               _existing(("node-a", 1), ("node-x", 2)),
               {"node-a": "", "node-b": "", "node-x": SKEW, "node-y": SKEW}),
    SpreadCase("two constraints on zone and node, spreads = [3/3, 2/1/0/3]",
               _pod("p", FOO, topologySpreadConstraints=[_tsc("zone"), _tsc("node")]), FOUR_NODES,
               _existing(("node-a", 2), ("node-b", 1), ("node-y", 3)),
               {"node-a": SKEW, "node-b": SKEW, "node-x": "", "node-y": SKEW}),
    SpreadCase("nodeAffinityPolicy Honor: nodes the pod can't go to don't count toward the minimum",
               _pod("p", FOO, nodeSelector={"zone": "zone1"},
                    topologySpreadConstraints=[_tsc("node")]),
               FOUR_NODES, _existing(("node-a", 1), ("node-b", 1)),
               {"node-a": "", "node-b": "", "node-x": "", "node-y": ""}),
    SpreadCase("nodeAffinityPolicy Ignore: every node counts",
               _pod("p", FOO, nodeSelector={"zone": "zone1"},
                    topologySpreadConstraints=[_tsc("node", nodeAffinityPolicy="Ignore")]),
               FOUR_NODES, _existing(("node-a", 1), ("node-b", 1)),
               {"node-a": SKEW, "node-b": SKEW, "node-x": "", "node-y": ""}),
    SpreadCase("matchLabelKeys narrows the selector to the pod's own value",
               _pod("p", {"foo": "", "rev": "2"}, topologySpreadConstraints=[_tsc("node", matchLabelKeys=["rev"])]),
               FOUR_NODES[:2], [_pod("old", {"foo": "", "rev": "1"}, "node-a"),
                                _pod("old2", {"foo": "", "rev": "1"}, "node-a")],
               {"node-a": "", "node-b": ""}),
]


@pytest.mark.parametrize("case", SPREAD_CASES, ids=lambda c: c.name)
def test_pod_topology_spread_filter(case: SpreadCase) -> None:
    got = filter_verdicts(PodTopologySpread(), table(case.nodes, case.existing), case.incoming)
    assert got == case.want


def test_node_taints_policy_honor() -> None:
    """Mirrors "NodeTaintsPolicy honored with tolerated taints/not tolerated taints"."""
    tainted = node("node-b", {"node": "node-b"}, taints=[{"key": "foo", "value": "", "effect": "NoSchedule"}])
    nodes = [node("node-a", {"node": "node-a"}), tainted, node("node-c", {"node": "node-c"})]
    existing = _existing(("node-a", 1), ("node-c", 1))
    honor = _pod("p", FOO, topologySpreadConstraints=[_tsc("node", nodeTaintsPolicy="Honor")])
    ignore = _pod("p", FOO, topologySpreadConstraints=[_tsc("node")])
    assert filter_verdicts(PodTopologySpread(), table(nodes, existing), honor) == {
        "node-a": "", "node-b": "", "node-c": ""}
    assert filter_verdicts(PodTopologySpread(), table(nodes, existing), ignore) == {
        "node-a": SKEW, "node-b": "", "node-c": SKEW}


def test_spread_score_prefers_emptier_domains() -> None:
    """Mirrors TestPodTopologySpreadScore "one constraint on node, all 4 nodes are candidates"."""
    t = table(FOUR_NODES, _existing(("node-a", 2), ("node-b", 1), ("node-y", 3)))
    incoming = _pod("p", FOO, topologySpreadConstraints=[_tsc("node", when="ScheduleAnyway")])
    got = scores(PodTopologySpread(), t, incoming)
    # counts 2/1/0/3 with weight log(4+2); raw = round(c*1.79): 4/2/0/5; normalized 100*(5+0-s)/5
    assert got == {"node-a": 20, "node-b": 60, "node-x": 100, "node-y": 0}


def test_system_default_constraints_use_owner_selector() -> None:
    t = table([node("a", {"kubernetes.io/hostname": "a"}), node("b", {"kubernetes.io/hostname": "b"})],
              [_pod("e1", {"app": "web"}, "a"), _pod("e2", {"app": "web"}, "a")])
    owned = _pod("p", {"app": "web"})
    owned["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "controller": True}]
    plugin = PodTopologySpread(owner_selector=lambda pod: compile_label_selector({"matchLabels": {"app": "web"}}))
    got = scores(plugin, t, owned)
    assert got["b"] > got["a"]
    assert scores(PodTopologySpread(), t, owned) == {"a": 0, "b": 0}  # no owner selector: no defaults


AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def _term(labels: dict[str, str], key: str, **extra: Any) -> Obj:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def _aff(kind: str, *terms: Obj) -> Obj:
    return {kind: {REQ: list(terms)}}


ZONED = [node("m1", {"region": "r1", "zone": "z1"}), node("m2", {"region": "r1", "zone": "z2"}),
         node("m3", {"region": "r2", "zone": "z3"})]


@dataclass(frozen=True)
class AffinityCase:
    name: str
    incoming: Obj
    existing: list[Obj]
    want: dict[str, str]


# Mirrors TestRequiredAffinitySingleNode / MultipleNodes, plugins/interpodaffinity/filtering_test.go.
AFFINITY_CASES = [
    AffinityCase("A pod that has no required pod affinity scheduling rules can schedule onto a node with no "
                 "existing pods", _pod("p"), [], {"m1": "", "m2": "", "m3": ""}),
    AffinityCase("satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator "
                 "that matches the existing pod",
                 _pod("p", affinity=_aff("podAffinity", _term({"service": "securityscan"}, "region"))),
                 [_pod("e", {"service": "securityscan"}, "m1")], {"m1": "", "m2": "", "m3": AFFINITY_REASON}),
    AffinityCase("Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
                 _pod("p", affinity=_aff("podAffinity", _term({"service": "securityscan"}, "region",
                                                              namespaces=["DiffNameSpace"]))),
                 [_pod("e", {"service": "securityscan"}, "m1")],
                 {"m1": AFFINITY_REASON, "m2": AFFINITY_REASON, "m3": AFFINITY_REASON}),
    AffinityCase("satisfies the pod with affinity to itself when no pod matches (first pod of a group)",
                 _pod("p", {"service": "s"}, affinity=_aff("podAffinity", _term({"service": "s"}, "zone"))), [],
                 {"m1": "", "m2": "", "m3": ""}),
    AffinityCase("satisfies the PodAntiAffinity with existing pod but doesn't match the topology",
                 _pod("p", affinity=_aff("podAntiAffinity", _term({"service": "securityscan"}, "zone"))),
                 [_pod("e", {"service": "securityscan"}, "m1")], {"m1": ANTI_REASON, "m2": "", "m3": ""}),
    AffinityCase("Verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity "
                 "constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
                 _pod("p", {"service": "securityscan"}),
                 [_pod("e", {"x": "y"}, "m1", affinity=_aff("podAntiAffinity", _term({"service": "securityscan"},
                                                                                      "region")))],
                 {"m1": EXISTING_ANTI_REASON, "m2": EXISTING_ANTI_REASON, "m3": ""}),
    AffinityCase("a replica with anti-affinity to its own app beside another: its own anti-affinity is the reason "
                 "(Filter checks the pod's own terms before the existing pods')",
                 _pod("p", {"app": "web"}, affinity=_aff("podAntiAffinity", _term({"app": "web"}, "zone"))),
                 [_pod("e", {"app": "web"}, "m1", affinity=_aff("podAntiAffinity", _term({"app": "web"}, "zone")))],
                 {"m1": ANTI_REASON, "m2": "", "m3": ""}),
    AffinityCase("namespaceSelector selects namespaces by label",
                 _pod("p", affinity=_aff("podAffinity", _term({"app": "db"}, "zone",
                                                              namespaceSelector={"matchLabels": {"team": "a"}}))),
                 [_pod("e", {"app": "db"}, "m2", ns="team-a"), _pod("f", {"app": "db"}, "m3", ns="team-b")],
                 {"m1": AFFINITY_REASON, "m2": "", "m3": AFFINITY_REASON}),
]


@pytest.mark.parametrize("case", AFFINITY_CASES, ids=lambda c: c.name)
def test_inter_pod_affinity_filter(case: AffinityCase) -> None:
    plugin = InterPodAffinity(namespace_labels={"team-a": {"team": "a"}, "team-b": {"team": "b"}})
    assert filter_verdicts(plugin, table(ZONED, case.existing), case.incoming) == case.want


def test_inter_pod_affinity_score() -> None:
    """Mirrors TestPreferredAffinity "Affinity: pod that matches topology key & pods in nodes will get high score"."""
    preferred = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": _term({"security": "S1"}, "region")}]}}
    incoming = _pod("p", affinity=preferred)
    t = table(ZONED, [_pod("e", {"security": "S1"}, "m1")])
    assert scores(InterPodAffinity(), t, incoming) == {"m1": 100, "m2": 100, "m3": 0}
    anti = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": _term({"security": "S1"}, "zone")}]}}
    assert scores(InterPodAffinity(), t, _pod("q", affinity=anti)) == {"m1": 0, "m2": 100, "m3": 100}
    symmetric = table(ZONED, [_pod("e", {"x": "y"}, "m3", affinity={"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 3, "podAffinityTerm": _term({"security": "S2"}, "zone")}]}})])
    assert scores(InterPodAffinity(), symmetric, _pod("r", {"security": "S2"})) == {"m1": 0, "m2": 0, "m3": 100}


def _sel(topology_key: str, *exprs: tuple[str, str, list[str]]) -> Obj:
    """A PodAffinityTerm with matchExpressions (key, operator, values), like st.PodAffinityIn/Exists."""
    return {"labelSelector": {"matchExpressions": [{"key": k, "operator": op, **({"values": v} if v else {})}
                                                   for k, op, v in exprs]}, "topologyKey": topology_key}


@dataclass(frozen=True)
class MultiNodeAffinityCase:
    name: str
    incoming: Obj
    nodes: list[Obj]
    existing: list[Obj]
    want: dict[str, str]


NODE1 = [node("node1", {"region": "r1", "zone": "z11"})]
ZONE_A_B = [node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"})]
SAME_ZONE_A_B = [node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
                 node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"})]
SECURITYSCAN = {"service": "securityscan"}

# Required affinity: an existing pod counts only if that one pod matches every term (upstream's
# updateWithAffinityTerms / podMatchesAllAffinityTerms). Mirrors TestRequiredAffinitySingleNode and
# TestRequiredAffinityMultipleNodes, plugins/interpodaffinity/filtering_test.go.
SAME_POD_CASES = [
    MultiNodeAffinityCase(
        "satisfies the PodAffinity with different label Operators in multiple "
        "RequiredDuringSchedulingIgnoredDuringExecution ",
        _pod("p", {"security": "S1"}, affinity=_aff(
            "podAffinity", _sel("region", ("service", "Exists", []), ("wrongkey", "DoesNotExist", [])),
            _sel("region", ("service", "In", ["securityscan"]), ("service", "NotIn", ["WrongValue"])))),
        NODE1, [_pod("e", SECURITYSCAN, "node1")], {"node1": ""}),
    MultiNodeAffinityCase(
        "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the "
        "node because one of the matchExpression item don't match.",
        _pod("p", {"security": "S1"}, affinity=_aff(
            "podAffinity", _sel("region", ("service", "Exists", []), ("wrongkey", "DoesNotExist", [])),
            _sel("region", ("service", "In", ["securityscan2"]), ("service", "NotIn", ["WrongValue"])))),
        NODE1, [_pod("e", SECURITYSCAN, "node1")], {"node1": AFFINITY_REASON}),
    MultiNodeAffinityCase(
        "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        _pod("p", SECURITYSCAN, affinity=_aff("podAffinity", _sel("region", ("service", "NotIn",
                                                                             ["securityscan", "value2"])))),
        NODE1, [_pod("e", SECURITYSCAN, "node2")], {"node1": AFFINITY_REASON}),
    MultiNodeAffinityCase(
        "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them "
        "has an existing pod that matches the affinity rules",
        _pod("p", affinity=_aff("podAffinity", _sel("region", ("foo", "In", ["bar"])))),
        [node("node1", {"region": "China"}), node("node2", {"region": "China", "az": "az1"}),
         node("node3", {"region": "India"})],
        [_pod("p1", {"foo": "bar"}, "node1")], {"node1": "", "node2": "", "node3": AFFINITY_REASON}),
    MultiNodeAffinityCase(
        "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the "
        "collection should not be blocked from being scheduled onto any node, even there's no existing pod that "
        "matches the rule anywhere.",
        _pod("p", {"foo": "bar", "service": "securityscan"}, affinity=_aff(
            "podAffinity", _sel("zone", ("foo", "In", ["bar"])), _sel("zone", ("service", "In", ["securityscan"])))),
        [node("nodeA", {"zone": "az1", "hostname": "h1"}), node("nodeB", {"zone": "az2", "hostname": "h2"})],
        [_pod("p1", {"foo": "bar"}, "nodeA")], {"nodeA": "", "nodeB": ""}),
    MultiNodeAffinityCase(
        "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
        _pod("p", {"foo": "bar", "service": "securityscan"}, affinity=_aff(
            "podAffinity", _sel("zone", ("foo", "In", ["bar"])), _sel("zone", ("service", "In", ["securityscan"])))),
        [node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}), node("nodeB", {"zoneLabel": "az2", "hostname": "h2"})],
        [_pod("p1", {"foo": "bar"}, "nodeA")], {"nodeA": AFFINITY_REASON, "nodeB": AFFINITY_REASON}),
    MultiNodeAffinityCase(
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys "
        "match",
        _pod("p", affinity=_aff("podAffinity", _sel("region", ("foo", "Exists", [])),
                                _sel("zone", ("bar", "Exists", [])))),
        SAME_ZONE_A_B, [_pod("pod1", {"foo": "", "bar": ""}, "nodeA")], {"nodeA": "", "nodeB": ""}),
    MultiNodeAffinityCase(
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys "
        "match, and the match logic should be satisfied on the same pod",
        _pod("p", affinity=_aff("podAffinity", _sel("region", ("foo", "Exists", [])),
                                _sel("zone", ("bar", "Exists", [])))),
        ZONE_A_B, [_pod("pod1", {"foo": ""}, "nodeA"), _pod("pod2", {"bar": ""}, "nodeB")],
        {"nodeA": AFFINITY_REASON, "nodeB": AFFINITY_REASON}),
]


@pytest.mark.parametrize("case", SAME_POD_CASES, ids=lambda c: c.name)
def test_required_affinity_terms_match_on_the_same_pod(case: MultiNodeAffinityCase) -> None:
    assert filter_verdicts(InterPodAffinity(), table(case.nodes, case.existing), case.incoming) == case.want
