"""The serviceaccount controller: every active namespace has a `default` ServiceAccount.

A port of pkg/controller/serviceaccount/serviceaccounts_controller.go: a namespace added or
changed, or a `default` account deleted, queues its namespace; the sync creates what is missing
(AlreadyExists and a terminating namespace's Forbidden are expected, not failures). Its informers
are the controller manager's shared ones (kubelite.controllers.informers).
"""

from __future__ import annotations

from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.informer import Handlers
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import Runner, run_synced

Obj = dict[str, Any]
ENSURED = ("default",)
WORKERS = 1


class ServiceAccountsController:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.runner: Runner[str] = Runner("serviceaccount", self.sync, clock, WORKERS)
        self.namespaces = shared_informer(client, clock, "/api/v1/namespaces",
                                          Handlers(self._namespace, lambda old, new: self._namespace(new)))
        self.accounts = shared_informer(client, clock, "/api/v1/serviceaccounts",
                                        Handlers(on_delete=self._account_deleted))

    def _namespace(self, ns: Obj) -> None:
        self.runner.enqueue(ns["metadata"]["name"])

    def _account_deleted(self, sa: Obj) -> None:
        if sa["metadata"]["name"] in ENSURED:
            self.runner.enqueue(sa["metadata"]["namespace"])

    async def run(self) -> None:
        await run_synced((self.namespaces, self.accounts), (self.runner.run,))

    async def sync(self, namespace: str) -> None:
        ns = self.namespaces.get("", namespace)
        if ns is None or ns["metadata"].get("deletionTimestamp") or (ns.get("status") or {}).get("phase") != "Active":
            return
        for name in ENSURED:
            if self.accounts.get(namespace, name) is not None:
                continue
            try:
                await self.client.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                                         {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
            except ApiError as exc:
                if exc.code not in (403, 409):  # terminating namespace; created meanwhile
                    raise
