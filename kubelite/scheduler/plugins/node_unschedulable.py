"""NodeUnschedulable: mirrors pkg/scheduler/framework/plugins/nodeunschedulable."""

from __future__ import annotations

from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import Code, FilterResult, NodeVerdict, Rejection
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.podinfo import PodInfo, Taint

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class NodeUnschedulable(NodeVerdict):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return None
        bad = table.view(table.unschedulable)
        return FilterResult(~bad, [Rejection(ERR_REASON_UNSCHEDULABLE, bad, Code.UnschedulableAndUnresolvable)])
