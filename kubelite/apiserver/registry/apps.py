"""apps/v1 workloads: stored and served with upstream defaults; their controllers come later."""

from __future__ import annotations

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy
from kubelite.apiserver.registry.pods import default_pod_spec, pod_spec_warnings, validate_pod_spec


class WorkloadStrategy(Strategy):
    has_status = True
    has_spec_generation = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        self._default(spec)
        obj["status"] = {"replicas": 0}

    def prepare_update(self, new: Obj, old: Obj) -> None:
        self._default(new.setdefault("spec", {}))
        super().prepare_update(new, old)

    def _default(self, spec: Obj) -> None:
        tmpl_spec = spec.setdefault("template", {}).setdefault("spec", {})
        default_pod_spec(tmpl_spec)

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        selector = spec.get("selector")
        if not selector:
            causes.append(v.required("spec.selector"))
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        wanted = (selector or {}).get("matchLabels") or {}
        if selector and any(labels.get(k) != val for k, val in wanted.items()):
            causes.append(v.invalid("spec.template.metadata.labels", labels,
                                    "`selector` does not match template `labels`"))
        replicas = spec.get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            causes.append(v.invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
        causes += validate_pod_spec((spec.get("template") or {}).get("spec") or {}, "spec.template.spec")
        return causes

    def warnings(self, obj: Obj, old: Obj | None) -> list[str]:
        """GetWarningsForPodTemplate, with the template's path."""
        return pod_spec_warnings(((obj.get("spec") or {}).get("template") or {}).get("spec") or {},
                                 "spec.template.spec")


class DeploymentStrategy(WorkloadStrategy):
    def _default(self, spec: Obj) -> None:
        super()._default(spec)
        strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            strategy.setdefault("rollingUpdate", {"maxUnavailable": "25%", "maxSurge": "25%"})
        spec.setdefault("progressDeadlineSeconds", 600)


class StatefulSetStrategy(WorkloadStrategy):
    def _default(self, spec: Obj) -> None:
        super()._default(spec)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})


_APPS = dict(categories=("all",), subresources=("status", "scale"))
STATEFULSETS = Resource("apps", "v1", "statefulsets", "statefulset", "StatefulSet", True, "V1StatefulSet",
                        short_names=("sts",), **_APPS)  # type: ignore[arg-type]
REPLICASETS = Resource("apps", "v1", "replicasets", "replicaset", "ReplicaSet", True, "V1ReplicaSet",
                       short_names=("rs",), **_APPS)  # type: ignore[arg-type]
DEPLOYMENTS = Resource("apps", "v1", "deployments", "deployment", "Deployment", True, "V1Deployment",
                       short_names=("deploy",), **_APPS)  # type: ignore[arg-type]
