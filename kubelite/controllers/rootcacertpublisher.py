"""The root-CA publisher: a `kube-root-ca.crt` ConfigMap with the cluster CA in every namespace.

A port of pkg/controller/certificates/rootcacertpublisher: a namespace added or changed, or the
ConfigMap changed or deleted, queues its namespace; the sync creates the ConfigMap, or puts the
CA bundle and the description annotation back when they differ. In-pod clients verify the API
server with this bundle (the ServiceAccount admission mounts it at
/var/run/secrets/kubernetes.io/serviceaccount/ca.crt).
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
NAME = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")
WORKERS = 1


class RootCACertPublisher:
    def __init__(self, client: Client, clock: Clock, root_ca: bytes) -> None:
        self.client = client
        self.data = {"ca.crt": root_ca.decode()}
        self.runner: Runner[str] = Runner("root-ca-cert-publisher", self.sync, clock, WORKERS)
        self.namespaces = shared_informer(client, clock, "/api/v1/namespaces",
                                          Handlers(self._namespace, lambda old, new: self._namespace(new)))
        # Every ConfigMap (the shared informer, which the garbage collector watches anyway), filtered by name in
        # the handlers as upstream's publisher does.
        self.configmaps = shared_informer(client, clock, "/api/v1/configmaps",
                                          Handlers(on_update=lambda old, new: self._configmap(new),
                                                   on_delete=self._configmap))

    def _namespace(self, ns: Obj) -> None:
        self.runner.enqueue(ns["metadata"]["name"])

    def _configmap(self, cm: Obj) -> None:
        if cm["metadata"]["name"] == NAME:
            self.runner.enqueue(cm["metadata"]["namespace"])

    async def run(self) -> None:
        await run_synced((self.namespaces, self.configmaps), (self.runner.run,))

    async def sync(self, namespace: str) -> None:
        ns = self.namespaces.get("", namespace)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return
        cm = self.configmaps.get(namespace, NAME)
        try:
            if cm is None:
                await self.client.create(f"/api/v1/namespaces/{namespace}/configmaps", {
                    "apiVersion": "v1", "kind": "ConfigMap", "data": self.data,
                    "metadata": {"name": NAME, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}}})
                return
            annotations = cm["metadata"].get("annotations") or {}
            if cm.get("data") == self.data and annotations.get(DESCRIPTION_ANNOTATION) == DESCRIPTION:
                return
            updated = {**cm, "data": self.data,
                       "metadata": {**cm["metadata"], "annotations": {**annotations,
                                                                      DESCRIPTION_ANNOTATION: DESCRIPTION}}}
            await self.client.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/{NAME}", updated)
        except ApiError as exc:
            if exc.code not in (403, 404, 409):  # terminating namespace; gone; raced (the informer re-queues)
                raise
