"""Every controller by name, as kube-controller-manager's `NewControllerDescriptors`: one flat map.

A new controller is one module plus one line here; `--controllers` and the composition root in
`kubelite.cli` pick from this map, so nothing else names controllers.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.attachdetach import AttachDetachController
from kubelite.controllers.bootstrapsigner import BootstrapSigner
from kubelite.controllers.clusterroleaggregation import ClusterRoleAggregationController
from kubelite.controllers.cronjob import CronJobController
from kubelite.controllers.csrapproving import CSRApprovingController
from kubelite.controllers.daemonset import DaemonSetController
from kubelite.controllers.deployment import DeploymentController
from kubelite.controllers.disruption import DisruptionController
from kubelite.controllers.endpoints import EndpointsController
from kubelite.controllers.endpointslice import EndpointSliceController
from kubelite.controllers.fencing import FencingController
from kubelite.controllers.garbagecollector import GarbageCollector
from kubelite.controllers.horizontal import HorizontalController
from kubelite.controllers.job import JobController
from kubelite.controllers.metrics import PROVIDER, WorkqueueMetrics
from kubelite.controllers.namespace import NamespaceController
from kubelite.controllers.nodelifecycle import NodeLifecycleController
from kubelite.controllers.persistentvolume import PersistentVolumeController
from kubelite.controllers.podgc import PodGCController
from kubelite.controllers.provisioner import ProvisionerController
from kubelite.controllers.replicaset import ReplicaSetController, ReplicationManager
from kubelite.controllers.resourcequota import ResourceQuotaController
from kubelite.controllers.serviceaccount import ServiceAccountsController
from kubelite.controllers.statefulset import StatefulSetController
from kubelite.controllers.taint_eviction import TaintEvictionController
from kubelite.controllers.tokencleaner import TokenCleaner
from kubelite.controllers.ttl_after_finished import TTLAfterFinishedController
from kubelite.controllers.volume_protection import PVCProtectionController, PVProtectionController


class Controller(Protocol):
    async def run(self) -> None: ...


Factory = Callable[[Client, Clock], Controller]

CONTROLLERS: dict[str, Factory] = {
    "daemonset": DaemonSetController,
    "deployment": DeploymentController,
    "disruption": DisruptionController,
    "nodelifecycle": NodeLifecycleController,
    "taint-eviction-controller": TaintEvictionController,
    "podgc": PodGCController,
    "garbagecollector": GarbageCollector,
    "namespace": NamespaceController,
    "replicaset": ReplicaSetController,
    "replicationcontroller": ReplicationManager,
    "job": JobController,
    "cronjob": CronJobController,
    "horizontalpodautoscaling": HorizontalController,
    "ttl-after-finished": TTLAfterFinishedController,
    "statefulset": StatefulSetController,
    "serviceaccount": ServiceAccountsController,
    "endpointslice": EndpointSliceController,
    "endpoint": EndpointsController,
    "persistentvolume-binder": PersistentVolumeController,
    "pvc-protection": PVCProtectionController,
    "pv-protection": PVProtectionController,
    "attachdetach": AttachDetachController,
    "kubelite-provisioner": ProvisionerController,
    "fencing": FencingController,
    "clusterrole-aggregation": ClusterRoleAggregationController,
    "csrapproving": CSRApprovingController,
    "tokencleaner": TokenCleaner,
    "bootstrapsigner": BootstrapSigner,
    "resourcequota": ResourceQuotaController,
}


Starter = Callable[[], Coroutine[Any, Any, None]]


def starters(client: Client, clock: Clock, names: list[str] | None = None,
             factories: Mapping[str, Factory] | None = None,
             metrics: WorkqueueMetrics | None = None) -> dict[str, Starter]:
    """A fresh-run factory per selected controller (all when `names` is None), for a supervisor to restart.
    `factories` replaces some controllers' factories, e.g. with options from the command line; the work
    queues of controllers built by the starters report to `metrics`."""
    table = {**CONTROLLERS, **(factories or {})}
    selected = list(table) if names is None else names
    unknown = [n for n in selected if n not in table]
    if unknown:
        raise ValueError(f"unknown controllers: {', '.join(unknown)} (known: {', '.join(sorted(CONTROLLERS))})")

    def starter(factory: Factory) -> Starter:
        async def start() -> None:
            token = PROVIDER.set(metrics)
            try:
                controller = factory(client, clock)
            finally:
                PROVIDER.reset(token)
            await controller.run()

        return start

    return {name: starter(table[name]) for name in selected}
