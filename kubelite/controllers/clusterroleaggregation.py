"""The clusterrole-aggregation controller (pkg/controller/clusterroleaggregation).

A ClusterRole with an `aggregationRule` gets as its rules the rules of every other ClusterRole one of
its `clusterRoleSelectors` selects (in name order, duplicates dropped). Any ClusterRole change
queues every aggregated role, as upstream's enqueueAll: there are few of them and the sync is a
pure computation over the informer's cache that writes only when the rules differ.
"""

from __future__ import annotations

from typing import Any

from kubelite.api.errors import ApiError
from kubelite.api.selectors import compile_label_selector
from kubelite.client.informer import Handlers, Informer
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.runner import Runner, run_synced

Obj = dict[str, Any]
PATH = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
WORKERS = 1


def aggregated_rules(role: Obj, roles: list[Obj]) -> list[Obj]:
    """The rules `role`'s aggregationRule selects from `roles`."""
    selectors = [compile_label_selector(s) for s in (role.get("aggregationRule") or {}).get("clusterRoleSelectors")
                 or []]
    rules: list[Obj] = []
    for other in sorted(roles, key=lambda r: str(r["metadata"]["name"])):
        if other["metadata"]["name"] == role["metadata"]["name"]:
            continue
        labels = other["metadata"].get("labels") or {}
        if any(s.matches(labels) for s in selectors):
            rules += [r for r in other.get("rules") or [] if r not in rules]
    return rules


class ClusterRoleAggregationController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.runner: Runner[str] = Runner("clusterrole-aggregation", self.sync, clock, WORKERS)
        self.roles = Informer(client, PATH, clock, Handlers(lambda _: self._enqueue_all(),
                                                             lambda old, new: self._enqueue_all(),
                                                             lambda _: self._enqueue_all()))

    def _enqueue_all(self) -> None:
        for role in self.roles.store.values():
            if role.get("aggregationRule"):
                self.runner.enqueue(role["metadata"]["name"])

    async def run(self) -> None:
        await run_synced((self.roles,), (self.runner.run,))

    async def sync(self, name: str) -> None:
        role = self.roles.get("", name)
        if role is None or not role.get("aggregationRule"):
            return
        rules = aggregated_rules(role, list(self.roles.store.values()))
        if rules == (role.get("rules") or []):
            return
        try:
            await self.client.request("PUT", f"{PATH}/{name}", {**role, "rules": rules})
        except ApiError as exc:
            if exc.code not in (404, 409):  # gone; raced (the informer's update re-queues it)
                raise
