"""NodeName: mirrors pkg/scheduler/framework/plugins/nodename."""

from __future__ import annotations

import numpy as np

from kubelite.scheduler.cycle_state import CycleState
from kubelite.scheduler.framework import Code, FilterResult, NodeVerdict, Rejection
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.podinfo import PodInfo

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(NodeVerdict):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        wanted = pod.spec.get("nodeName")
        if not wanted:
            return None
        ok = np.zeros(table.n, np.bool_)
        row = table.index.get(wanted)
        if row is not None:
            ok[row] = True
        return FilterResult(ok, [Rejection(ERR_REASON, ~ok, Code.UnschedulableAndUnresolvable)])
