"""One small Protocol per extension point (staging/src/k8s.io/kube-scheduler/framework/interface.go).

A plugin implements any subset; the profile sorts its plugins into per-point lists once, when it
is built, so a cycle never asks "does this plugin do X?". Filters and scores are columnar: a
Filter returns a mask over every node row of the table and a Score a vector over the rows it is
given (DESIGN.md "Columnar snapshot"). PreFilterExtensions is the one-node form preemption uses
for its dry runs: AddPod/RemovePod update the plugin's view of one node in a cloned CycleState,
and `filter_node` gives the verdict on that node, so preemption never re-implements a plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kubelite.scheduler.candidate import PreemptionResult
from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import FilterOutcome, FilterResult, Status
from kubelite.scheduler.nodetable import IntArray, NodeTable
from kubelite.scheduler.podinfo import PodInfo


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        """The verdict on every node row; None when the plugin has nothing to say about this pod (all pass)."""


@runtime_checkable
class PreFilterExtensions(Protocol):
    """What-if on one node (upstream's AddPod/RemovePod plus Filter on the NodeInfo copy preemption hands over).

    A Filter plugin whose verdict on a node can change when pods leave or join it implements these;
    preemption's fast path needs every Filter plugin that had a verdict for the pod to implement them.
    """

    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, table: NodeTable, row: int) -> None: ...

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: PodInfo, table: NodeTable, row: int) -> None: ...

    def filter_node(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> bool: ...


@dataclass(frozen=True)
class PostFilterResult:
    """What a PostFilter plugin decided: the node to nominate (None when it could not help) and why."""

    nominated_node: str | None
    message: str
    preemption: PreemptionResult | None = None


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(self, state: CycleState, pod: PodInfo, outcome: FilterOutcome) -> PostFilterResult: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray: ...


@runtime_checkable
class ScoreExtensions(Protocol):
    def normalize(self, state: CycleState, scores: IntArray) -> IntArray: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...
