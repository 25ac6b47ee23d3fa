"""The nominator (backend/queue/nominator.go): which pending pod was promised which node.

A pod that preempted is nominated to the node its victims are leaving. Nominated pods of equal
or higher priority hold their node's resources while other pods are filtered there
(RunFilterPluginsWithNominatedPods); a pod taking a node clears the nominations of lower-priority
pods that no longer fit; a pod whose victims are still terminating does not preempt again
(PodEligibleToPreemptOthers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.podinfo import PodInfo


class Nominator:
    def __init__(self) -> None:
        self._nominated: dict[str, tuple[PodInfo, str]] = {}  # uid → (pod, nominated node)

    def __contains__(self, uid: str) -> bool:
        return uid in self._nominated

    def add(self, pod: PodInfo, node: str) -> None:
        self._nominated[pod.uid] = (pod, node)

    def delete(self, uid: str) -> None:
        self._nominated.pop(uid, None)

    def node_of(self, uid: str) -> str | None:
        entry = self._nominated.get(uid)
        return entry[1] if entry else None

    def on_node(self, node: str) -> list[PodInfo]:
        return [info for info, n in self._nominated.values() if n == node]

    @contextmanager
    def holding(self, table: NodeTable, pod: PodInfo) -> Iterator[None]:
        """While filtering `pod`: nominated pods of equal or higher priority sit on their nodes in the table."""
        held = []
        for uid, (info, node) in self._nominated.items():
            if uid != pod.uid and info.priority >= pod.priority and node in table.index and table.pod(uid) is None:
                placed = dataclasses.replace(info, node_name=node)
                table.add_pod(placed)
                held.append(placed)
        try:
            yield
        finally:
            for info in held:
                table.remove_pod(info.uid)

    def waiting_for_victims(self, table: NodeTable, pod: PodInfo) -> bool:
        """PodEligibleToPreemptOthers is false: a lower-priority pod on the nominated node is terminating."""
        node = self.node_of(pod.uid)
        row = table.index.get(node) if node else None
        if row is None:
            return False
        return any(p.terminating and p.priority < pod.priority for p in table.pods[row].values())

    def displaced(self, table: NodeTable, placed: PodInfo) -> list[PodInfo]:
        """Lower-priority pods nominated to `placed`'s node that no longer fit there (their nominations go)."""
        row = table.index.get(placed.node_name)
        if row is None:
            return []
        return [info for info in self.on_node(placed.node_name)
                if info.priority < placed.priority and not table.requests_fit(info.requests, row)]
