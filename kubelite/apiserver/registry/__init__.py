"""The catalogue of served resources and their strategies."""

from __future__ import annotations

from kubelite.apiserver.registry import (
    apiextensions,
    apps,
    authorization,
    autoscaling,
    batch,
    certificates,
    config,
    core,
    kubelite_io,
    networking,
    policy,
    quota,
    rbac,
    scheduling,
    serviceaccounts,
    services,
    storage,
)
from kubelite.apiserver.registry.base import Resource, Strategy
from kubelite.apiserver.registry.fencing import NODE_FENCES, NodeFenceStrategy
from kubelite.apiserver.registry.pods import PODS, PodStrategy

STRATEGIES: dict[Resource, type[Strategy]] = {
    core.NAMESPACES: core.NamespaceStrategy,
    core.NODES: core.NodeStrategy,
    PODS: PodStrategy,
    core.EVENTS: core.EventStrategy,
    storage.PERSISTENT_VOLUMES: storage.PersistentVolumeStrategy,
    storage.PERSISTENT_VOLUME_CLAIMS: storage.PersistentVolumeClaimStrategy,
    core.LEASES: core.LeaseStrategy,
    config.CONFIG_MAPS: config.ConfigMapStrategy,
    config.SECRETS: config.SecretStrategy,
    quota.LIMIT_RANGES: quota.LimitRangeStrategy,
    quota.RESOURCE_QUOTAS: quota.ResourceQuotaStrategy,
    scheduling.PRIORITY_CLASSES: scheduling.PriorityClassStrategy,
    policy.PDBS: policy.PodDisruptionBudgetStrategy,
    apps.STATEFULSETS: apps.StatefulSetStrategy,
    apps.REPLICASETS: apps.WorkloadStrategy,
    apps.DEPLOYMENTS: apps.DeploymentStrategy,
    apps.CONTROLLER_REVISIONS: apps.ControllerRevisionStrategy,
    apps.DAEMONSETS: apps.DaemonSetStrategy,
    apps.REPLICATION_CONTROLLERS: apps.ReplicationControllerStrategy,
    batch.JOBS: batch.JobStrategy,
    batch.CRONJOBS: batch.CronJobStrategy,
    kubelite_io.SCHEDULING_EXPLANATIONS: kubelite_io.ExplanationStrategy,
    serviceaccounts.SERVICE_ACCOUNTS: serviceaccounts.ServiceAccountStrategy,
    serviceaccounts.SELF_SUBJECT_REVIEWS: serviceaccounts.NotStoredStrategy,
    services.SERVICES: services.ServiceStrategy,
    services.ENDPOINT_SLICES: services.EndpointSliceStrategy,
    services.ENDPOINTS: services.EndpointsStrategy,
    storage.STORAGE_CLASSES: storage.StorageClassStrategy,
    storage.VOLUME_ATTACHMENTS: storage.VolumeAttachmentStrategy,
    NODE_FENCES: NodeFenceStrategy,
    rbac.ROLES: rbac.RoleStrategy,
    rbac.CLUSTER_ROLES: rbac.RoleStrategy,
    rbac.ROLE_BINDINGS: rbac.BindingStrategy,
    rbac.CLUSTER_ROLE_BINDINGS: rbac.BindingStrategy,
    **{review: serviceaccounts.NotStoredStrategy for review in authorization.REVIEWS},
    certificates.CERTIFICATE_SIGNING_REQUESTS: certificates.CertificateSigningRequestStrategy,
    networking.INGRESSES: networking.IngressStrategy,
    networking.INGRESS_CLASSES: networking.IngressClassStrategy,
    networking.NETWORK_POLICIES: networking.NetworkPolicyStrategy,
    autoscaling.HPAS: autoscaling.HorizontalPodAutoscalerStrategy,
    apiextensions.CUSTOM_RESOURCE_DEFINITIONS: apiextensions.CustomResourceDefinitionStrategy,
}
RESOURCES: tuple[Resource, ...] = tuple(STRATEGIES)
# Versions served by conversion to a stored one (apiserver.versions converts): routed and discovered, not stored.
CONVERTED: tuple[Resource, ...] = (autoscaling.HPAS_V1,)
SERVED: tuple[Resource, ...] = (*RESOURCES, *CONVERTED)
