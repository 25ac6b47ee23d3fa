"""The framework seams: the typed cycle state, the runtime's per-point plugin lists and their
result folding (frameworkImpl), the one-node PreFilterExtensions preemption relies on, and the
scheduling cycle's Reserve/Permit steps. Mirrors runtime/framework_test.go where it has a case."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelite.client.http import ApiClient
from kubelite.clock import FakeClock
from kubelite.scheduler.cycle_state import CycleState, StateKey
from kubelite.scheduler.framework import SKIP, SUCCESS, Code, Status
from kubelite.scheduler.interface import PreFilterExtensions
from kubelite.scheduler.plugins.node_ports import NodePorts
from kubelite.scheduler.plugins.node_resources import NodeResourcesFit
from kubelite.scheduler.podinfo import PodInfo
from kubelite.scheduler.runtime import Framework
from kubelite.scheduler.scheduler import Scheduler
from kubelite.testing.builders import make_pod
from tests.scheduler.helpers import node, pod, table

Obj = dict[str, Any]


@dataclass
class Counter:
    n: int

    def clone(self) -> Counter:
        return Counter(self.n)


COUNTER: StateKey[Counter] = StateKey("counter")
SHARED: StateKey[list[int]] = StateKey("shared")


def test_cycle_state_clone_copies_state_data_and_shares_the_rest() -> None:
    state = CycleState()
    state.write(COUNTER, Counter(1))
    shared = [1]
    state.write(SHARED, shared)
    copy = state.clone()
    copy.read(COUNTER).n = 2
    assert state.read(COUNTER).n == 1  # a dry run's change stays in the copy
    assert copy.read(SHARED) is shared
    copy.delete(SHARED)
    assert state.get(SHARED) is shared and copy.get(SHARED) is None
    with pytest.raises(KeyError):
        CycleState().read(COUNTER)


@dataclass
class Recorder:
    """A Reserve/Permit/Bind plugin that records its calls and answers with the statuses it is given."""

    name: str
    calls: list[str]
    reserve_status: Status = SUCCESS
    permit_status: Status = SUCCESS
    bind_status: Status = SUCCESS

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.calls.append(f"reserve {self.name}")
        return self.reserve_status

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.calls.append(f"unreserve {self.name}")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.calls.append(f"permit {self.name}")
        return self.permit_status

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.calls.append(f"bind {self.name}")
        return self.bind_status


@dataclass(frozen=True)
class ReserveCase:
    name: str
    statuses: list[Status]
    want_code: Code
    want_calls: list[str] = field(default_factory=list)


UNSCHEDULABLE = Status(Code.Unschedulable, ("no",))
RESERVE_CASES = [
    ReserveCase("all plugins reserve", [SUCCESS, SUCCESS], Code.Success, ["reserve a", "reserve b"]),
    ReserveCase("a failing reserve plugin unreserves the ones before it, in reverse order",
                [SUCCESS, SUCCESS, UNSCHEDULABLE], Code.Unschedulable,
                ["reserve a", "reserve b", "reserve c", "unreserve b", "unreserve a"]),
    ReserveCase("the first failure stops the remaining reserve plugins", [UNSCHEDULABLE, SUCCESS],
                Code.Unschedulable, ["reserve a"]),
]


@pytest.mark.parametrize("case", RESERVE_CASES, ids=lambda c: c.name)
def test_run_reserve(case: ReserveCase) -> None:
    calls: list[str] = []
    plugins: list[Any] = [Recorder(chr(ord("a") + i), calls, reserve_status=s) for i, s in enumerate(case.statuses)]
    fw = Framework([], others=plugins)
    status = fw.run_reserve(CycleState(), pod(make_pod("p").obj()), "n1")
    assert status.code is case.want_code
    assert calls == case.want_calls


async def test_run_bind_skips_to_the_next_bind_plugin() -> None:
    calls: list[str] = []
    fw = Framework([], others=[Recorder("skipper", calls, bind_status=SKIP), Recorder("binder", calls)])
    assert (await fw.run_bind(CycleState(), pod(make_pod("p").obj()), "n1")).ok
    assert calls == ["bind skipper", "bind binder"]


def _ported(name: str, port: int, node_name: str = "", cpu: str = "1", priority: int = 0) -> Obj:
    obj = make_pod(name).req(cpu=cpu).spec(priority=priority).obj()
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
    if node_name:
        obj["spec"]["nodeName"] = node_name
    return obj


@dataclass(frozen=True)
class ExtensionCase:
    name: str
    plugin: Any
    existing: list[Obj]
    incoming: Obj
    remove: list[str]  # pods taken off node n1 in the what-if


EXTENSION_CASES = [
    ExtensionCase("NodeResourcesFit: removing a pod frees its requests", NodeResourcesFit(),
                  [_ported("a", 1, "n1", "3")], make_pod("p").req(cpu="2").obj(), ["a"]),
    ExtensionCase("NodeResourcesFit: removing a small pod is not enough", NodeResourcesFit(),
                  [_ported("a", 1, "n1", "3"), _ported("b", 2, "n1", "500m")], make_pod("p").req(cpu="2").obj(),
                  ["b"]),
    ExtensionCase("NodePorts: removing the pod holding the port frees it", NodePorts(),
                  [_ported("a", 8080, "n1"), _ported("b", 9090, "n1")], _ported("p", 8080), ["a"]),
    ExtensionCase("NodePorts: two pods on the same port, one removed, still conflicts", NodePorts(),
                  [_ported("a", 8080, "n1"), _ported("b", 8080, "n1")], _ported("p", 8080), ["a"]),
]


@pytest.mark.parametrize("case", EXTENSION_CASES, ids=lambda c: c.name)
def test_pre_filter_extensions_agree_with_filtering_an_edited_table(case: ExtensionCase) -> None:
    """The one-node what-if (RemovePod/AddPod, then filter_node) says what Filter says on the edited table."""
    t = table([node("n1", cpu="4")], case.existing)
    incoming = pod(case.incoming)
    plugin = case.plugin
    assert isinstance(plugin, PreFilterExtensions)
    fw = Framework([plugin])
    state = CycleState()
    fw.run_filters(state, incoming, t)
    trial = state.clone()
    removed = [p for p in t.pods[0].values() if p.name in case.remove]
    for p in removed:
        plugin.remove_pod(trial, incoming, p, t, 0)
    what_if = plugin.filter_node(trial, incoming, t, 0)
    for p in removed:
        t.remove_pod(p.uid)
    assert what_if == bool(fw.run_filters(CycleState(), incoming, t).feasible[0])
    for p in removed:  # adding them back restores the original verdict
        plugin.add_pod(trial, incoming, p, t, 0)
        t.add_pod(p)
    assert plugin.filter_node(trial, incoming, t, 0) == bool(fw.run_filters(CycleState(), incoming, t).feasible[0])


def test_a_rejecting_permit_plugin_undoes_the_assumption_and_reserve() -> None:
    """schedule_one step 6: Permit rejects → Unreserve, the pod is forgotten and retried after backoff."""
    s = Scheduler(ApiClient("http://127.0.0.1:1"), FakeClock(), seed=0)
    s._spawn = lambda coro: coro.close()  # type: ignore[method-assign]  # no API writes here
    calls: list[str] = []
    fw = s.profiles["default-scheduler"]
    recorder = Recorder("gate", calls, permit_status=Status(Code.Unschedulable, ("not now",)))
    fw.reserve.append(recorder)
    fw.permit.append(recorder)
    s.nodes.handlers.on_add(node("n1"))
    obj = make_pod("p").obj()
    obj["metadata"]["uid"] = "uid-p"
    s.pods.store[("default", "p")] = obj
    s.pods.handlers.on_add(obj)
    qp = s.queue.pop_nowait()
    assert qp is not None
    assert s.schedule_one(qp) is None
    assert calls == ["reserve gate", "permit gate", "unreserve gate"]
    assert s.table.pod("uid-p") is None
    assert s.queue.pods["uid-p"].where == "backoff"
