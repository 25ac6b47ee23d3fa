"""DefaultPreemption tables, ported from upstream's default_preemption_test.go (P4, P6, P7, P8)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelite.scheduler.candidate import PreemptionResult
from kubelite.scheduler.config import Profile
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import SUCCESS, Code, FilterResult, Status
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.plugins.default_preemption import DefaultPreemption
from kubelite.scheduler.plugins.node_resources import NodeResourcesFit
from kubelite.scheduler.plugins.volume_cache import VolumeCache
from kubelite.scheduler.podinfo import PodInfo
from kubelite.scheduler.profile import ProfileHandle, build
from kubelite.scheduler.queue import Nominator
from kubelite.scheduler.runtime import Framework
from kubelite.testing.builders import make_pod
from tests.scheduler.helpers import node, pod, table

Obj = dict[str, Any]
NOW = 1_800_000_000.0


@dataclass
class _Handle:
    """The scheduler's side of framework.Handle, over a fixed table, PDBs and pods."""

    table: NodeTable
    budgets: list[Obj]
    pods_by_ns: dict[str, list[Obj]]
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    nominator: Nominator = field(default_factory=Nominator)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    client: Any = None
    volume_cache: VolumeCache | None = None  # None: the profile's volume plugins know no claims

    def now(self) -> float:
        return NOW

    def disruption_budgets(self) -> list[Obj]:
        return self.budgets

    def pods_in_namespace(self, namespace: str) -> list[Obj]:
        return self.pods_by_ns.get(namespace, [])

    def owner_selector(self, pod: Any) -> None:
        return None


def _p(name: str, priority: int, cpu: str = "1", node_name: str = "", start: str = "",
       labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    obj = make_pod(name).req(cpu=cpu, memory="100Mi").spec(priority=priority, **spec).obj()
    if node_name:
        obj["spec"]["nodeName"] = node_name
    if start:
        obj["status"] = {"phase": "Running", "startTime": start}
    if labels:
        obj["metadata"]["labels"] = labels
    return obj


def _handle(t: NodeTable, existing: list[Obj], pdbs: list[Obj] | None = None,
            volume_cache: VolumeCache | None = None) -> _Handle:
    by_ns: dict[str, list[Obj]] = {}
    for e in existing:
        by_ns.setdefault(e["metadata"]["namespace"], []).append(e)
    return _Handle(t, pdbs or [], by_ns, volume_cache=volume_cache)


def _preempt(nodes: list[Obj], existing: list[Obj], incoming: Obj, pdbs: list[Obj] | None = None,
             volume_cache: VolumeCache | None = None, framework: Callable[[_Handle], Framework] | None = None
             ) -> PreemptionResult:
    """The default profile's PostFilter (DefaultPreemption) after its Filters, as a scheduling cycle runs them
    (`framework`: another profile built on the same handle)."""
    t = table(nodes, existing)
    info = pod(incoming)
    handle = _handle(t, existing, pdbs, volume_cache)
    fw = framework(handle) if framework is not None else build(Profile(), handle)
    state = CycleState()
    outcome = fw.run_filters(state, info, t)
    before = {n: sorted(t.pods[t.index[n]]) for n in t.names}
    post = fw.run_post_filters(state, info, outcome)
    assert {n: sorted(t.pods[t.index[n]]) for n in t.names} == before  # dry runs restore the table
    assert post is not None and post.preemption is not None
    return post.preemption


def _victims(result: PreemptionResult) -> dict[str, list[str]]:
    return {c.node: [v.name for v in c.victims] for c in result.candidates}


@dataclass(frozen=True)
class VictimCase:
    name: str
    nodes: list[Obj]
    existing: list[Obj]
    incoming: Obj
    want: dict[str, list[str]]
    pdbs: list[Obj] = field(default_factory=list)
    want_violations: dict[str, int] = field(default_factory=dict)


TWO = [node("node1", cpu="4"), node("node2", cpu="4")]

# Mirrors TestSelectNodesForPreemption / TestDryRunPreemption, defaultpreemption/default_preemption_test.go.
VICTIM_CASES = [
    VictimCase("a pod that does not fit on any node", TWO, [], _p("p", 100, cpu="5"), {}),
    VictimCase("a pod that fits on both nodes when lower priority pods are preempted", TWO,
               [_p("p1", 10, "3", "node1"), _p("p2", 10, "3", "node2")], _p("p", 100, "2"),
               {"node1": ["p1"], "node2": ["p2"]}),
    VictimCase("a pod that would fit on the nodes, but other pods running are higher priority, no preemption would "
               "happen", TWO, [_p("p1", 200, "3", "node1"), _p("p2", 200, "3", "node2")], _p("p", 100, "2"), {}),
    VictimCase("equal-priority pods are never victims", TWO,
               [_p("p1", 100, "3", "node1"), _p("p2", 100, "3", "node2")], _p("p", 100, "2"), {}),
    VictimCase("medium priority pod is preempted, but lower priority one stays as it is small",
               [node("node1", cpu="4")],
               [_p("low", 5, "500m", "node1"), _p("mid", 50, "3", "node1")], _p("p", 100, "3"),
               {"node1": ["mid"]}),
    VictimCase("mixed priority pods are preempted", [node("node1", cpu="5")],
               [_p("a", 1, "1", "node1"), _p("b", 2, "1", "node1"), _p("c", 3, "1", "node1"),
                _p("d", 4, "1", "node1"), _p("e", 5, "1", "node1")], _p("p", 100, "3"),
               {"node1": ["c", "b", "a"]}),
    VictimCase("pod with anti-affinity to a lower priority pod is preempted (P8: the node becomes eligible once "
               "every lower priority pod is gone)", [node("node1", cpu="4")],
               [_p("low", 1, "100m", "node1", labels={"app": "db"})],
               _p("p", 100, "100m", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                   {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}),
               {"node1": ["low"]}),
    VictimCase("pod with affinity to a lower priority pod cannot preempt it", [node("node1", cpu="1")],
               [_p("low", 1, "1", "node1", labels={"app": "db"})],
               _p("p", 100, "500m", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                   {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}),
               {}),
    VictimCase("preemption with violation of the pdb: violating pods are considered first for reprieve",
               [node("node1", cpu="3")],
               [_p("protected", 5, "1", "node1", labels={"app": "web"}), _p("free", 5, "1", "node1"),
                _p("other", 5, "1", "node1")], _p("p", 100, "1"),
               {"node1": ["other"]},
               pdbs=[{"metadata": {"name": "pdb", "namespace": "default"},
                      "spec": {"selector": {"matchLabels": {"app": "web"}}},
                      "status": {"observedGeneration": 1, "disruptionsAllowed": 0}}], want_violations={"node1": 0}),
    VictimCase("preemption with violation of the pdb with pod whose eviction was processed, the victim belongs to "
               "DisruptedPods", [node("node1", cpu="1")],
               [_p("protected", 5, "1", "node1", labels={"app": "web"})], _p("p", 100, "1"),
               {"node1": ["protected"]},
               pdbs=[{"metadata": {"name": "pdb", "namespace": "default"},
                      "spec": {"selector": {"matchLabels": {"app": "web"}}},
                      "status": {"observedGeneration": 1, "disruptionsAllowed": 0,
                                 "disruptedPods": {"protected": "2026-01-01T00:00:00Z"}}}],
               want_violations={"node1": 0}),
    VictimCase("preemption with violation of the pdb: a protected victim counts as a violation",
               [node("node1", cpu="1")], [_p("protected", 5, "1", "node1", labels={"app": "web"})], _p("p", 100, "1"),
               {"node1": ["protected"]},
               pdbs=[{"metadata": {"name": "pdb", "namespace": "default"},
                      "spec": {"selector": {"matchLabels": {"app": "web"}}},
                      "status": {"observedGeneration": 1, "disruptionsAllowed": 0}}], want_violations={"node1": 1}),
]


@pytest.mark.parametrize("case", VICTIM_CASES, ids=lambda c: c.name)
def test_select_victims_on_node(case: VictimCase, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _preempt(case.nodes, case.existing, case.incoming, case.pdbs)
    assert _victims(result) == case.want
    # the fast path (the plugins' PreFilterExtensions) must agree with editing the table and running every filter
    monkeypatch.setattr(Framework, "dry_run_extensions", lambda self, outcome: None)
    assert _victims(_preempt(case.nodes, case.existing, case.incoming, case.pdbs)) == case.want
    for c in result.candidates:
        if c.node in case.want_violations:
            assert c.pdb_violations == case.want_violations[c.node]


@dataclass(frozen=True)
class PickCase:
    name: str
    existing: list[Obj]
    incoming: Obj
    want_nodes: tuple[str, ...]
    criterion: str = ""
    nodes: int = 3


T1, T2, T3 = "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z", "2026-01-01T00:00:03Z"

# Mirrors TestSelectBestCandidate, defaultpreemption/default_preemption_test.go (3 nodes of 4 cpu).
PICK_CASES = [
    PickCase("a pod that fits on both nodes when lower priority pods are preempted",
             [_p("p1", 10, "3", "node1"), _p("p2", 10, "3", "node2")], _p("p", 100, "2"), ("node1", "node2"),
             nodes=2),
    PickCase("node with min highest priority pod is picked",
             [_p("p1", 30, "3", "node1"), _p("p2", 20, "3", "node2"), _p("p3", 40, "3", "node3")],
             _p("p", 100, "2"), ("node2",), "lowest highest-victim priority"),
    PickCase("when highest priorities are the same, minimum sum of lower priority pods is used",
             [_p("a1", 20, "2", "node1"), _p("a2", 10, "2", "node1"),
              _p("b1", 20, "2", "node2"), _p("b2", 5, "2", "node2"),
              _p("c1", 20, "2", "node3"), _p("c2", 15, "2", "node3")], _p("p", 100, "4"), ("node2",),
             "smallest sum of victim priorities"),
    PickCase("when highest priority and sum are the same, minimum number of pods is used",
             [_p("a1", 20, "2", "node1"), _p("a2", 10, "1", "node1"), _p("a3", 10, "1", "node1"),
              _p("b1", 20, "2", "node2"), _p("b2", 20, "2", "node2"),
              _p("c1", 20, "2", "node3"), _p("c2", 10, "1", "node3"), _p("c3", 10, "1", "node3")],
             # upstream's sum adds MaxInt32+1 per victim, so the sum criterion already prefers fewer pods
             _p("p", 100, "4"), ("node2",), "smallest sum of victim priorities"),
    PickCase("same priority, same number of victims, different start time for each node's pod",
             [_p("a", 10, "4", "node1", start=T1), _p("b", 10, "4", "node2", start=T3),
              _p("c", 10, "4", "node3", start=T2)], _p("p", 100, "4"), ("node2",),
             "latest start time of the highest-priority victims"),
    PickCase("a node without victims wins at once", [_p("a", 10, "4", "node1")], _p("p", 100, "4", nodeName=""),
             ("node1",), "", nodes=1),
]


@pytest.mark.parametrize("case", PICK_CASES, ids=lambda c: c.name)
def test_pick_one_node_for_preemption(case: PickCase) -> None:
    nodes = [node(f"node{i + 1}", cpu="4") for i in range(case.nodes)]
    result = _preempt(nodes, case.existing, case.incoming)
    assert result.candidate is not None and result.candidate.node in case.want_nodes
    if case.criterion:
        assert result.decided_by == case.criterion


def test_preemption_policy_never_does_not_preempt() -> None:
    result = _preempt(TWO, [_p("p1", 10, "3", "node1")], _p("p", 100, "2", preemptionPolicy="Never"))
    assert result.candidate is None
    assert result.message == "preemption: not eligible due to preemptionPolicy=Never."


def test_unresolvable_nodes_are_not_candidates() -> None:
    nodes = [node("node1", cpu="4", unschedulable=True), node("node2", cpu="4")]
    result = _preempt(nodes, [_p("p1", 200, "3", "node2")], _p("p", 100, "2"))
    assert result.candidate is None
    assert result.message == ("preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
                              "1 Preemption is not helpful for scheduling.")


HOLDER = "holds-claim"


class ClaimHeld:
    """A PreFilter that rejects the pod as a whole (plain Unschedulable, which preemption may resolve) while
    any pod labelled `holds-claim` runs anywhere, like a claim only one pod may use at a time."""

    name = "ClaimHeld"

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> Status:
        held = any(HOLDER in p.labels for pods in table.pods for p in pods.values() if p.uid != pod.uid)
        return Status(Code.Unschedulable, ("claim in use",), self.name) if held else SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        return None


def _claim_held_profile(handle: _Handle) -> Framework:
    """ClaimHeld then NodeResourcesFit, with DefaultPreemption as the PostFilter."""
    profile_handle = ProfileHandle(handle)
    fw = Framework([ClaimHeld(), NodeResourcesFit()], post_filters=[DefaultPreemption(profile_handle)])
    profile_handle.framework = fw
    return fw


def _claim(name: str, storage_class: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Pending"}}


def _claims(*claims: Obj) -> VolumeCache:
    return VolumeCache({("default", c["metadata"]["name"]): c for c in claims}, {},
                       {("", "immediate"): {"metadata": {"name": "immediate"}, "volumeBindingMode": "Immediate"}})


def _with_claim(obj: Obj, claim: str) -> Obj:
    obj["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return obj


@dataclass(frozen=True)
class PreFilterRejectionCase:
    name: str
    existing: list[Obj]
    incoming: Obj
    want: dict[str, list[str]]
    want_message: str = ""
    volume_cache: VolumeCache | None = None
    framework: Callable[[_Handle], Framework] | None = None


NOT_HELPFUL_ON_TWO = "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."

# A PreFilter that rejects the pod ends the cycle before any Filter runs (RunPreFilterPlugins); upstream then
# gives every node the PreFilter's status, so UnschedulableAndUnresolvable makes preemption not helpful anywhere
# (nodesWherePreemptionMightHelp) and plain Unschedulable leaves every node to the dry runs.
PRE_FILTER_REJECTION_CASES = [
    PreFilterRejectionCase("a claim the scheduler has not seen yet (a StatefulSet's first pods): preemption is not "
                           "helpful on any node", [_p("low", 1, "3", "node1"), _p("low2", 1, "3", "node2")],
                           _with_claim(_p("web-0", 100, "2"), "data-web-0"), {}, NOT_HELPFUL_ON_TWO),
    PreFilterRejectionCase("an unbound claim of an Immediate class: preemption is not helpful on any node",
                           [_p("low", 1, "3", "node1")], _with_claim(_p("web-0", 100, "2"), "data-web-0"), {},
                           NOT_HELPFUL_ON_TWO, volume_cache=_claims(_claim("data-web-0", "immediate"))),
    PreFilterRejectionCase("a plain Unschedulable PreFilter: the dry run reruns it, so only removing the "
                           "lower-priority holder helps", [_p("holder", 1, "1", "node2", labels={HOLDER: "y"}),
                                                           _p("other", 1, "1", "node1")],
                           _p("p", 100, "1"), {"node2": ["holder"]}, framework=_claim_held_profile),
    PreFilterRejectionCase("a plain Unschedulable PreFilter a higher-priority holder causes: no victims anywhere",
                           [_p("holder", 200, "1", "node2", labels={HOLDER: "y"}), _p("other", 1, "1", "node1")],
                           _p("p", 100, "1"), {},
                           "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
                           framework=_claim_held_profile),
]


@pytest.mark.parametrize("case", PRE_FILTER_REJECTION_CASES, ids=lambda c: c.name)
def test_preemption_after_a_pre_filter_rejection(case: PreFilterRejectionCase) -> None:
    result = _preempt(TWO, case.existing, case.incoming, volume_cache=case.volume_cache, framework=case.framework)
    assert _victims(result) == case.want
    assert (result.candidate is None) == (not case.want)
    if case.want_message:
        assert result.message == case.want_message


def test_a_pre_filter_rejection_leaves_one_result_per_filter_plugin() -> None:
    """The outcome's plugins and results stay parallel (preemption and explain zip them)."""
    t = table(TWO, [_p("holder", 1, "1", "node2", labels={HOLDER: "y"})])
    fw = _claim_held_profile(_handle(t, []))
    outcome = fw.run_filters(CycleState(), pod(_p("p", 100, "1")), t)
    assert outcome.prefilter_status is not None and outcome.prefilter_status.plugin == "ClaimHeld"
    assert len(outcome.results) == len(outcome.plugins) == 2
    assert not outcome.feasible.any()
