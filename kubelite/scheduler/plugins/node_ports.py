"""NodePorts: mirrors pkg/scheduler/framework/plugins/nodeports (host port conflicts)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kubelite.scheduler.cycle_state import CycleState, StateKey
from kubelite.scheduler.framework import FilterResult, Rejection
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


@dataclass(slots=True)
class PortsDraft:
    """The host ports the pods on one node use, in a dry run (a list: two pods may use the same port)."""

    row: int
    used: list[tuple[str, str, int]]

    def clone(self) -> PortsDraft:
        return PortsDraft(self.row, list(self.used))


PORTS_DRAFT: StateKey[PortsDraft] = StateKey("Draft" + NAME)


class NodePorts:
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        if not pod.host_ports:
            return None
        bad = np.zeros(table.n, np.bool_)
        for row, used in enumerate(table.ports):
            if used and any(conflicts(p, used) for p in pod.host_ports):
                bad[row] = True
        return FilterResult(~bad, [Rejection(ERR_REASON, bad)])

    # --- PreFilterExtensions: what-if on one node -----------------------------------------------

    def _draft(self, state: CycleState, table: NodeTable, row: int) -> PortsDraft:
        draft: PortsDraft | None = state.get(PORTS_DRAFT)
        if draft is None or draft.row != row:
            draft = PortsDraft(row, [hp for p in table.pods[row].values() for hp in p.host_ports])
            state.write(PORTS_DRAFT, draft)
        return draft

    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, table: NodeTable, row: int) -> None:
        if pod.host_ports:
            self._draft(state, table, row).used.extend(added.host_ports)

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: PodInfo, table: NodeTable, row: int) -> None:
        if pod.host_ports:
            used = self._draft(state, table, row).used
            for hp in removed.host_ports:
                used.remove(hp)

    def filter_node(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> bool:
        if not pod.host_ports:
            return True
        used = set(self._draft(state, table, row).used)
        return not any(conflicts(hp, used) for hp in pod.host_ports)
