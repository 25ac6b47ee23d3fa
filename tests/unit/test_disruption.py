"""PDB status arithmetic, mirroring pkg/controller/disruption/disruption_test.go (bare pods)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kubelite.api import disruption
from kubelite.client.http import ApiClient
from kubelite.client.informer import key_of
from kubelite.clock import FakeClock
from kubelite.controllers.disruption import DisruptionController, desired_status
from kubelite.controllers.runner import WorkQueue
from kubelite.testing.builders import make_pod

Obj = dict[str, Any]
NOW = 1_800_000_000.0


def _pods(ready: int, unready: int = 0) -> list[Obj]:
    out = []
    for i in range(ready + unready):
        p = make_pod(f"p{i}").label("app", "web").obj()
        p["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if i < ready
                                                           else "False"}]}
        out.append(p)
    return out


def _pdb(**spec: Any) -> Obj:
    return {"metadata": {"name": "b", "namespace": "default", "generation": 3},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


@dataclass(frozen=True)
class Case:
    name: str
    spec: dict[str, Any]
    ready: int
    unready: int
    want: tuple[int, int, int, int]  # expected, currentHealthy, desiredHealthy, disruptionsAllowed


CASES = [
    Case("TestNoSelector-like: minAvailable 1 with no pods", {"minAvailable": 1}, 0, 0, (0, 0, 1, 0)),
    Case("TestUnavailable: minAvailable 3 of 4 healthy", {"minAvailable": 3}, 4, 0, (4, 4, 3, 1)),
    Case("TestIntegerMaxUnavailable", {"maxUnavailable": 1}, 3, 0, (3, 3, 2, 1)),
    Case("TestNakedPod-like: percentage minAvailable rounds up", {"minAvailable": "50%"}, 3, 0, (3, 3, 2, 1)),
    Case("TestMaxUnavailablePercentage rounds up the unavailable count", {"maxUnavailable": "25%"}, 10, 0,
         (10, 10, 7, 3)),
    Case("unready pods are not healthy", {"minAvailable": 2}, 2, 2, (4, 2, 2, 0)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pdb_status(case: Case) -> None:
    status = desired_status(_pdb(**case.spec), _pods(case.ready, case.unready), NOW)
    got = (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"])
    assert got == case.want
    assert status["observedGeneration"] == 3
    cond = status["conditions"][0]
    assert (cond["type"], cond["status"]) == ("DisruptionAllowed", "True" if case.want[3] > 0 else "False")


def test_disrupted_pods_expire_and_do_not_count() -> None:
    pdb = _pdb(minAvailable=1)
    pdb["status"] = {"disruptedPods": {"p0": "2027-01-15T08:00:00Z", "gone": "2027-01-15T08:00:00Z"}}
    fresh = desired_status(pdb, _pods(2), 1_800_000_000.0 + 0)  # 2027-01-15T08:00:00Z
    assert fresh["disruptedPods"] == {"p0": "2027-01-15T08:00:00Z"}
    assert (fresh["currentHealthy"], fresh["disruptionsAllowed"]) == (1, 0)
    later = desired_status({**pdb, "status": fresh}, _pods(2), 1_800_000_000.0 + 121)
    assert "disruptedPods" not in later and later["disruptionsAllowed"] == 1


def _pod(name: str, ready: bool = True, ns: str = "default", app: str = "web", phase: str = "Running",
         deleting: bool = False) -> Obj:
    p = make_pod(name, ns).label("app", app).obj()
    p["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    return p


# (name, pods before the PDB exists, events after: (old, new) with None for add/delete, whether the PDB is marked)
INDEX_CASES = [
    ("a PDB created after its pods counts them", [_pod("a"), _pod("b", ready=False)], [], True),
    ("a new ready pod joins the budget", [], [(None, _pod("a"))], True),
    ("a pod losing readiness stays expected but unhealthy", [_pod("a")], [(_pod("a"), _pod("a", ready=False))],
     True),
    ("a pod being deleted leaves the budget", [_pod("a")], [(_pod("a"), _pod("a", deleting=True))], True),
    ("a pod relabelled out of the selector leaves", [_pod("a")], [(_pod("a"), _pod("a", app="db"))], True),
    ("a finished pod leaves", [_pod("a")], [(_pod("a"), _pod("a", phase="Succeeded"))], True),
    ("a removed pod leaves", [_pod("a")], [(_pod("a"), None)], True),
    ("a pod of another namespace is ignored", [], [(None, _pod("a", ns="other"))], False),
    ("an unselected pod is ignored", [], [(None, _pod("a", app="db"))], False),
    ("a change that keeps membership and readiness marks nothing", [_pod("a")],
     [(_pod("a"), {**_pod("a"), "spec": {"nodeName": "n1"}})], False),
]


@pytest.mark.parametrize("name,before,events,marked", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
async def test_expected_pods_index_matches_a_full_recount(name: str, before: list[Obj],
                                                          events: list[tuple[Obj | None, Obj | None]],
                                                          marked: bool) -> None:
    ctrl = DisruptionController(ApiClient("http://127.0.0.1:1"), FakeClock())
    for p in before:
        ctrl.pods.add(p)
    pdb = _pdb(minAvailable=1)
    ctrl.pdbs.add(pdb)
    ctrl._pdb_changed(pdb)
    if events:
        ctrl.runner.queue = WorkQueue(FakeClock())
    for old, new in events:
        if new is None:
            assert old is not None
            ctrl.pods.remove(key_of(old))
        else:
            ctrl.pods.add(new)
        ctrl._pod_changed(old, new)
    ns_pods = [p for (ns, _), p in ctrl.pods.store.items() if ns == "default"]
    assert ctrl.expected[key_of(pdb)] == disruption.members(pdb, ns_pods)
    assert (key_of(pdb) in ctrl.runner.queue.queued()) is marked
