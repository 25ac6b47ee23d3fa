"""apps/v1 workloads: stored and served with upstream defaults and validation (pkg/apis/apps/validation).

StatefulSets are validated as upstream's ValidateStatefulSet / ValidateStatefulSetUpdate: a
non-empty selector matching the template, restartPolicy Always, known policies, and after
creation only replicas, ordinals, template, updateStrategy, persistentVolumeClaimRetentionPolicy,
minReadySeconds and revisionHistoryLimit may change. ControllerRevisions hold the StatefulSet
controller's template history (`kubectl rollout history statefulset`); their data is immutable.
"""

from __future__ import annotations

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.api.validation import is_dns1123_subdomain
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


STS_POLICIES = ["OrderedReady", "Parallel"]
STS_STRATEGIES = ["RollingUpdate", "OnDelete"]
RETENTION = ["Retain", "Delete"]
STS_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
               "minReadySeconds", "revisionHistoryLimit")


class StatefulSetStrategy(WorkloadStrategy):
    def _default(self, spec: Obj) -> None:
        super()._default(spec)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            strategy.setdefault("type", "RollingUpdate")
            strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
        retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
        for claim in spec.get("volumeClaimTemplates") or []:
            if isinstance(claim, dict):
                claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        if spec.get("selector") is not None and not (spec["selector"].get("matchLabels")
                                                     or spec["selector"].get("matchExpressions")):
            causes.append(v.invalid("spec.selector", spec["selector"], "empty selector is invalid for statefulset"))
        if spec.get("podManagementPolicy") not in STS_POLICIES:
            causes.append(v.not_supported("spec.podManagementPolicy", spec.get("podManagementPolicy"), STS_POLICIES))
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type") not in STS_STRATEGIES:
            causes.append(v.not_supported("spec.updateStrategy.type", strategy.get("type"), STS_STRATEGIES))
        elif strategy["type"] == "OnDelete" and strategy.get("rollingUpdate") is not None:
            causes.append(v.invalid("spec.updateStrategy.rollingUpdate", strategy["rollingUpdate"],
                                    "only allowed for updateStrategy 'RollingUpdate'"))
        partition = (strategy.get("rollingUpdate") or {}).get("partition", 0)
        if not isinstance(partition, int) or partition < 0:
            causes.append(v.invalid("spec.updateStrategy.rollingUpdate.partition", partition,
                                    "must be greater than or equal to 0"))
        for field in ("minReadySeconds",):
            value = spec.get(field, 0)
            if not isinstance(value, int) or value < 0:
                causes.append(v.invalid(f"spec.{field}", value, "must be greater than or equal to 0"))
        start = (spec.get("ordinals") or {}).get("start", 0)
        if not isinstance(start, int) or start < 0:
            causes.append(v.invalid("spec.ordinals.start", start, "must be greater than or equal to 0"))
        retention = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        for field in ("whenDeleted", "whenScaled"):
            if retention.get(field) not in RETENTION:
                causes.append(v.not_supported(f"spec.persistentVolumeClaimRetentionPolicy.{field}",
                                              retention.get(field), RETENTION))
        tmpl_spec = (spec.get("template") or {}).get("spec") or {}
        if tmpl_spec.get("restartPolicy") != "Always":
            causes.append(v.not_supported("spec.template.spec.restartPolicy", tmpl_spec.get("restartPolicy"),
                                          ["Always"]))
        if tmpl_spec.get("activeDeadlineSeconds") is not None:
            causes.append(v.forbidden("spec.template.spec.activeDeadlineSeconds",
                                      "activeDeadlineSeconds in StatefulSet is not Supported"))
        for i, claim in enumerate(spec.get("volumeClaimTemplates") or []):
            name = ((claim or {}).get("metadata") or {}).get("name", "")
            if not name:
                causes.append(v.required(f"spec.volumeClaimTemplates[{i}].metadata.name"))
            else:
                causes += [v.invalid(f"spec.volumeClaimTemplates[{i}].metadata.name", name, e)
                           for e in is_dns1123_subdomain(name)]
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        if any(spec.get(k) != old_spec.get(k) for k in set(spec) | set(old_spec) if k not in STS_MUTABLE):
            causes.append(v.forbidden("spec", "updates to statefulset spec for fields other than 'replicas', "
                                              "'ordinals', 'template', 'updateStrategy', "
                                              "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
                                              "forbidden"))
        return causes


class ControllerRevisionStrategy(Strategy):
    """ValidateControllerRevision(Update): a non-negative revision; data never changes."""

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        revision = obj.get("revision")
        if not isinstance(revision, int) or revision < 0:
            causes.append(v.invalid("revision", revision, "must be greater than or equal to 0"))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        if new.get("data") != old.get("data"):
            causes.append(v.immutable("data"))
        return causes


_APPS = dict(categories=("all",), subresources=("status", "scale"))
STATEFULSETS = Resource("apps", "v1", "statefulsets", "statefulset", "StatefulSet", True, "V1StatefulSet",
                        short_names=("sts",), **_APPS)  # type: ignore[arg-type]
REPLICASETS = Resource("apps", "v1", "replicasets", "replicaset", "ReplicaSet", True, "V1ReplicaSet",
                       short_names=("rs",), **_APPS)  # type: ignore[arg-type]
CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision",
                                True, "V1ControllerRevision")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "deployment", "Deployment", True, "V1Deployment",
                       short_names=("deploy",), **_APPS)  # type: ignore[arg-type]
