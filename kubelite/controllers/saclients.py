"""`kubelite controller-manager --use-service-account-credentials`: each controller under its own identity, as
kube-controller-manager's SAControllerClientBuilder.

The controller manager itself runs as `system:kube-controller-manager`, whose role may create service
accounts in kube-system and tokens for them (and list/watch everything, for leader election and little else).
For each controller it makes sure the account `kube-system/<account>` exists, asks a TokenRequest for it and
runs the controller with a client carrying that token, so the controller can do exactly what its
`system:controller:<account>` role (the server's controller policy) grants. Tokens last TOKEN_SECONDS; at
REFRESH_AT of that the controller is stopped and started afresh with a new token (upstream swaps the token
under a running client; kubelite's HTTP client keeps one token, hence the restart). Partial: controllers do
not share informers in this mode (each watches with its own client).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from kubelite.api.errors import ApiError
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.metrics import PROVIDER
from kubelite.controllers.registry import Controller, Factory

log = logging.getLogger("kubelite.controllers")

NAMESPACE = "kube-system"
TOKEN_SECONDS = 24 * 3600
REFRESH_AT = 0.8

# controller name (--controllers) → its service account, as upstream's names; kubelite's own are marked
ACCOUNTS: dict[str, str] = {
    "daemonset": "daemon-set-controller",
    "deployment": "deployment-controller",
    "disruption": "disruption-controller",
    "nodelifecycle": "node-controller",
    "taint-eviction-controller": "taint-eviction-controller",
    "podgc": "pod-garbage-collector",
    "garbagecollector": "generic-garbage-collector",
    "namespace": "namespace-controller",
    "replicaset": "replicaset-controller",
    "replicationcontroller": "replication-controller",
    "horizontalpodautoscaling": "horizontal-pod-autoscaler",
    "job": "job-controller",
    "cronjob": "cronjob-controller",
    "ttl-after-finished": "ttl-after-finished-controller",
    "statefulset": "statefulset-controller",
    "serviceaccount": "service-account-controller",
    "endpointslice": "endpointslice-controller",
    "endpoint": "endpoint-controller",
    "persistentvolume-binder": "persistent-volume-binder",
    "pvc-protection": "pvc-protection-controller",
    "pv-protection": "pv-protection-controller",
    "attachdetach": "attachdetach-controller",
    "kubelite-provisioner": "kubelite-provisioner",  # kubelite
    "fencing": "fencing-controller",  # kubelite
    "clusterrole-aggregation": "clusterrole-aggregation-controller",
    "csrapproving": "certificate-controller",
    "tokencleaner": "token-cleaner",
    "bootstrapsigner": "bootstrap-signer",
    "resourcequota": "resourcequota-controller",
}


class _Refresh(Exception):
    """The token is due for renewal: the run ends so the supervisor starts it afresh."""


class ServiceAccountCredentials:
    """Makes each controller's account and a client with a fresh token for it."""

    def __init__(self, root: Client, connect: Callable[[str], Client]) -> None:
        self.root = root
        self.connect = connect

    async def client(self, account: str) -> Client:
        accounts = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts"
        try:
            await self.root.create(accounts, {"apiVersion": "v1", "kind": "ServiceAccount",
                                              "metadata": {"name": account}})
        except ApiError as exc:
            if exc.code != 409:
                raise
        answer = await self.root.create(f"{accounts}/{account}/token", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS}})
        return self.connect(str(answer["status"]["token"]))


class _AsAccount:
    """A controller run with its account's client, until the token is due for renewal."""

    def __init__(self, factory: Factory, account: str, credentials: ServiceAccountCredentials, clock: Clock) -> None:
        self.factory = factory
        self.account = account
        self.credentials = credentials
        self.clock = clock
        self.metrics = PROVIDER.get()  # the starter's queue metrics, for the controller built in run()

    async def run(self) -> None:
        client = await self.credentials.client(self.account)
        try:
            token = PROVIDER.set(self.metrics)
            try:
                controller = self.factory(client, self.clock)
            finally:
                PROVIDER.reset(token)
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(controller.run())
                await self.clock.sleep(TOKEN_SECONDS * REFRESH_AT)
                raise _Refresh
        except* _Refresh:
            log.info("renewing the token of kube-system/%s", self.account)
        finally:
            await client.close()


def credentialed(factories: Mapping[str, Factory], credentials: ServiceAccountCredentials) -> dict[str, Factory]:
    """The factories, each building its controller under its own service account (ValueError for a controller
    without one)."""
    missing = sorted(set(factories) - set(ACCOUNTS))
    if missing:
        raise ValueError(f"controllers without a service account: {', '.join(missing)}")

    def as_account(factory: Factory, account: str) -> Factory:
        def build(_root: Client, clock: Clock) -> Controller:
            return _AsAccount(factory, account, credentials, clock)
        return build

    return {name: as_account(factory, ACCOUNTS[name]) for name, factory in factories.items()}
