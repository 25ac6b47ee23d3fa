"""NodePorts: mirrors pkg/scheduler/framework/plugins/nodeports (host port conflicts)."""

from __future__ import annotations

import numpy as np

from kubelite.scheduler.framework import CycleState, FilterResult, Plugin, Rejection
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.podinfo import PodInfo

NAME = "NodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
WILDCARD = "0.0.0.0"


def conflicts(want: tuple[str, str, int], used: set[tuple[str, str, int]]) -> bool:
    ip, proto, port = want
    if ip == WILDCARD:
        return any(p == port and pr == proto for _, pr, p in used)
    return (ip, proto, port) in used or (WILDCARD, proto, port) in used


class NodePorts(Plugin):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        if not pod.host_ports:
            return None
        bad = np.zeros(table.n, np.bool_)
        for row, used in enumerate(table.ports):
            if used and any(conflicts(p, used) for p in pod.host_ports):
                bad[row] = True
        return FilterResult(~bad, [Rejection(ERR_REASON, bad)])
