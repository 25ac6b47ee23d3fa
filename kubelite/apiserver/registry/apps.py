"""apps/v1 workloads: stored and served with upstream defaults and validation (pkg/apis/apps/validation).

Their controllers (kubelite.controllers) read only what validation let through: a selector
that matches the template, replicas and minReadySeconds not negative, a template that
restarts always, and for Deployments a strategy whose arithmetic makes progress.

StatefulSets are validated as upstream's ValidateStatefulSet / ValidateStatefulSetUpdate: the
same spec rules plus known policies, and after creation only replicas, ordinals, template,
updateStrategy, persistentVolumeClaimRetentionPolicy, minReadySeconds and revisionHistoryLimit
may change. ControllerRevisions hold the StatefulSet and DaemonSet controllers' template history
(`kubectl rollout history statefulset|daemonset`); their data is immutable.

DaemonSets follow pkg/registry/apps/daemonset/strategy.go: a template change bumps the template generation,
which apps/v1 carries in the `deprecated.daemonset.template.generation` annotation (the DaemonSet controller
stamps it on pods as `pod-template-generation`); the selector is immutable.

core/v1 ReplicationControllers, the ReplicaSet's predecessor, are here beside it: a plain label map as selector
(defaulted from the template's labels, and mutable), validated as pkg/apis/core/validation's
ValidateReplicationController.
"""

from __future__ import annotations

from kubelite.api import validation as v
from kubelite.api.errors import ApiError, Cause, bad_request
from kubelite.api.selectors import compile_label_selector
from kubelite.api.strconv import parse_int
from kubelite.api.validation import is_dns1123_subdomain
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy
from kubelite.apiserver.registry.pods import (
    default_pod_template,
    mapping,
    pod_spec_warnings,
    validate_pod_template_spec,
)


def _unset(obj: Obj, key: str) -> bool:
    """A field upstream's defaulting sees as nil: absent or JSON null (a typed Go pointer decodes both as nil)."""
    return obj.get(key) is None


def default_replica_set(spec: Obj) -> None:
    """SetDefaults_ReplicaSet (replicas 1; a ReplicaSet has no revisionHistoryLimit) and its template's defaults."""
    if _unset(spec, "replicas"):
        spec["replicas"] = 1
    default_pod_template(spec)


def default_deployment(spec: Obj) -> None:
    """SetDefaults_Deployment: replicas 1, a RollingUpdate strategy of 25% / 25% (each bound defaulted on its own),
    revisionHistoryLimit 10, progressDeadlineSeconds 600, and the template's defaults."""
    default_replica_set(spec)
    strategy = mapping(spec, "strategy")
    if not strategy.get("type"):  # also protobuf's `strategy: {}`
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = mapping(strategy, "rollingUpdate")
        for bound in ("maxUnavailable", "maxSurge"):
            if _unset(rolling, bound):
                rolling[bound] = "25%"
    for field, value in (("revisionHistoryLimit", 10), ("progressDeadlineSeconds", 600)):
        if _unset(spec, field):
            spec[field] = value


def default_stateful_set(spec: Obj) -> None:
    """SetDefaults_StatefulSet: OrderedReady; a RollingUpdate strategy (its rollingUpdate made only when the type was
    defaulted too) with partition 0; Retain/Retain PVC retention; replicas 1; revisionHistoryLimit 10; and the
    template's and claim templates' defaults."""
    default_replica_set(spec)
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = mapping(spec, "updateStrategy")
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        if _unset(strategy, "rollingUpdate"):
            strategy["rollingUpdate"] = {}
    rolling = strategy.get("rollingUpdate")
    if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict) and _unset(rolling, "partition"):
        rolling["partition"] = 0
    retention = mapping(spec, "persistentVolumeClaimRetentionPolicy")
    for field in ("whenDeleted", "whenScaled"):
        if not retention.get(field):
            retention[field] = "Retain"
    if _unset(spec, "revisionHistoryLimit"):
        spec["revisionHistoryLimit"] = 10
    for claim in spec.get("volumeClaimTemplates") or []:
        if isinstance(claim, dict):
            claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")


class WorkloadStrategy(Strategy):
    """A ReplicaSet's strategy, and the base of the Deployment's and StatefulSet's."""

    has_status = True
    has_spec_generation = True
    # The kind's SetDefaults_*. Upstream runs it on every decode, so an update or patch that drops a defaulted field
    # (`kubectl replace` or `apply` without spec.replicas, a JSON patch removing it) stores the default again, as a
    # create would: readers (`kubectl describe`, the controllers, the scale subresource) always find it.
    defaults = staticmethod(default_replica_set)

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        self.defaults(mapping(obj, "spec"))
        obj["status"] = {"replicas": 0}

    def prepare_update(self, new: Obj, old: Obj) -> None:
        self.defaults(mapping(new, "spec"))
        super().prepare_update(new, old)

    owner = "deployment"  # upstream's word in the empty-selector message, "deployment" for ReplicaSets too

    def validate(self, obj: Obj) -> list[Cause]:
        return super().validate(obj) + validate_workload_spec(obj.get("spec") or {}, self.owner)

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        """apps/v1 selectors are immutable (ValidateReplicaSetUpdate, ValidateDeploymentUpdate)."""
        causes = self.validate(new)
        if (new.get("spec") or {}).get("selector") != (old.get("spec") or {}).get("selector"):
            causes.append(v.invalid("spec.selector", (new.get("spec") or {}).get("selector"), "field is immutable",
                                    v.LABEL_SELECTOR))
        return causes

    def warnings(self, obj: Obj, old: Obj | None) -> list[str]:
        """GetWarningsForPodTemplate, with the template's path."""
        return pod_spec_warnings(((obj.get("spec") or {}).get("template") or {}).get("spec") or {},
                                 "spec.template.spec")


def default_replication_controller(obj: Obj) -> None:
    """SetDefaults_ReplicationController: a template with labels gives an empty selector and empty object labels
    its labels; replicas 1; the template's defaults, when there is one."""
    spec = mapping(obj, "spec")
    template = spec.get("template")
    labels = (template.get("metadata") or {}).get("labels") if isinstance(template, dict) else None
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        if not obj["metadata"].get("labels"):
            obj["metadata"]["labels"] = dict(labels)
    if _unset(spec, "replicas"):
        spec["replicas"] = 1
    if isinstance(template, dict):  # a pointer upstream: no template is left absent ("spec.template: Required")
        default_pod_template(spec)


def validate_replication_controller_spec(spec: Obj) -> list[Cause]:
    """ValidateReplicationControllerSpec: a non-empty selector map that matches the template's labels, replicas and
    minReadySeconds not negative, a template that restarts always and sets no activeDeadlineSeconds."""
    causes = _nonnegative(spec, "minReadySeconds")
    selector = spec.get("selector") or {}
    if not isinstance(selector, dict) or not selector:
        causes.append(v.required("spec.selector"))
    causes += _nonnegative(spec, "replicas")
    template = spec.get("template")
    if not isinstance(template, dict):
        return [*causes, v.required("spec.template")]
    labels = (template.get("metadata") or {}).get("labels") or {}
    if isinstance(selector, dict) and selector and any(labels.get(k) != val for k, val in selector.items()):
        causes.append(v.invalid("spec.template.metadata.labels", labels,
                                "`selector` does not match template `labels`"))
    return causes + _validate_long_running_template(template.get("spec") or {}, "ReplicationController")


class ReplicationControllerStrategy(WorkloadStrategy):
    """A ReplicaSet's strategy with the ReplicationController's defaults and validation; its selector may change."""

    @staticmethod
    def defaults(spec: Obj) -> None:
        """None by spec alone: default_replication_controller reads the whole object (it sets labels), first."""

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        default_replication_controller(obj)
        super().prepare_create(obj, lookup)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        default_replication_controller(new)
        super().prepare_update(new, old)

    def validate(self, obj: Obj) -> list[Cause]:
        return Strategy.validate(self, obj) + validate_replication_controller_spec(obj.get("spec") or {})

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        return self.validate(new)


def _nonnegative(spec: Obj, field: str) -> list[Cause]:
    """ValidateNonnegativeField (a missing field is defaulted or optional)."""
    value = spec.get(field, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return [v.invalid(f"spec.{field}", value, "must be greater than or equal to 0")]
    return []


_TEMPLATE_KIND = {"statefulset": "StatefulSet", "daemonset": "DaemonSet"}  # a Deployment's pods are a ReplicaSet's


def validate_workload_spec(spec: Obj, owner: str) -> list[Cause]:
    """ValidateReplicaSetSpec and ValidatePodTemplateSpecForReplicaSet, or the same rules of
    ValidateStatefulSetSpec / ValidateDaemonSetSpec when `owner` is "statefulset" / "daemonset", with upstream's
    messages."""
    causes = _nonnegative(spec, "replicas") + _nonnegative(spec, "minReadySeconds")
    selector = spec.get("selector")
    compiled = None
    nothing = False  # a DaemonSet's nil selector: LabelSelectorAsSelector(nil) selects nothing, no Required cause
    if selector is None and owner == "daemonset":
        nothing = True
    elif selector is None:
        causes.append(v.required("spec.selector"))
    elif not isinstance(selector, dict):
        causes.append(v.invalid("spec.selector", selector, "invalid label selector"))
    else:
        if not (selector.get("matchLabels") or selector.get("matchExpressions")):
            causes.append(v.invalid("spec.selector", selector, f"empty selector is invalid for {owner}",
                                    v.LABEL_SELECTOR))
        try:
            compiled = compile_label_selector(selector)
        except ApiError:
            causes.append(v.invalid("spec.selector", selector, "invalid label selector", v.LABEL_SELECTOR))
    template = spec.get("template")
    if not isinstance(template, dict):
        return [*causes, v.required("spec.template")]
    labels = (template.get("metadata") or {}).get("labels") or {}
    if nothing or (compiled is not None and not compiled.empty and not compiled.matches(labels)):
        causes.append(v.invalid("spec.template.metadata.labels", labels, "`selector` does not match template "
                                                                          "`labels`"))
    return causes + _validate_long_running_template(template.get("spec") or {}, _TEMPLATE_KIND.get(owner, "ReplicaSet"))


def _validate_long_running_template(tspec: Obj, kind: str) -> list[Cause]:
    """ValidatePodTemplateSpecFor{ReplicaSet,RC,…}: the template's pod spec, restartPolicy Always, and no
    activeDeadlineSeconds (Forbidden, naming the kind the template's pods belong to)."""
    causes = validate_pod_template_spec(tspec, "spec.template.spec")
    if tspec.get("restartPolicy", "Always") != "Always":
        causes.append(v.not_supported("spec.template.spec.restartPolicy", tspec.get("restartPolicy"), ["Always"]))
    if tspec.get("activeDeadlineSeconds") is not None:
        causes.append(v.forbidden("spec.template.spec.activeDeadlineSeconds",
                                  f"activeDeadlineSeconds in {kind} is not Supported"))
    return causes


class DeploymentStrategy(WorkloadStrategy):
    defaults = staticmethod(default_deployment)

    def validate(self, obj: Obj) -> list[Cause]:
        spec = obj.get("spec") or {}
        causes = super().validate(obj) + _nonnegative(spec, "revisionHistoryLimit") + validate_strategy(spec)
        deadline = spec.get("progressDeadlineSeconds")
        if deadline is not None:
            causes += _nonnegative(spec, "progressDeadlineSeconds")
            if isinstance(deadline, int) and deadline <= int(spec.get("minReadySeconds") or 0):
                causes.append(v.invalid("spec.progressDeadlineSeconds", deadline,
                                        "must be greater than minReadySeconds"))
        return causes


def _int_or_percent(value: object, path: str) -> tuple[int | None, list[Cause]]:
    """ValidatePositiveIntOrPercent: (the number or percentage, causes)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value, ([] if value >= 0 else [v.invalid(path, value, "must be greater than or equal to 0")])
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return int(value[:-1]), []
    return None, [v.invalid(path, value, "a valid percent string must be a numeric string followed by an ending "
                                         "'%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")]


def validate_strategy(spec: Obj) -> list[Cause]:
    """ValidateDeploymentStrategy and ValidateRollingUpdateDeployment."""
    strategy = spec.get("strategy") or {}
    kind, rolling = strategy.get("type", "RollingUpdate"), strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            return [v.forbidden("spec.strategy.rollingUpdate",
                                "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind != "RollingUpdate":
        return [v.not_supported("spec.strategy.type", kind, ["Recreate", "RollingUpdate"])]
    if not isinstance(rolling, dict):
        return [v.required("spec.strategy.rollingUpdate", "this should be defaulted and never be nil")]
    path = "spec.strategy.rollingUpdate"
    unavailable, causes = _int_or_percent(rolling.get("maxUnavailable", 0), f"{path}.maxUnavailable")
    surge, more = _int_or_percent(rolling.get("maxSurge", 0), f"{path}.maxSurge")
    causes += more
    if unavailable == 0 and surge == 0:
        causes.append(v.invalid(f"{path}.maxUnavailable", rolling.get("maxUnavailable"),
                                "may not be 0 when `maxSurge` is 0"))
    if isinstance(rolling.get("maxUnavailable"), str) and (unavailable or 0) > 100:
        causes.append(v.invalid(f"{path}.maxUnavailable", rolling["maxUnavailable"], "must not be greater than 100%"))
    return causes


STS_POLICIES = ["OrderedReady", "Parallel"]
STS_STRATEGIES = ["RollingUpdate", "OnDelete"]
RETENTION = ["Retain", "Delete"]
STS_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
               "minReadySeconds", "revisionHistoryLimit")


class StatefulSetStrategy(WorkloadStrategy):
    owner = "statefulset"
    defaults = staticmethod(default_stateful_set)

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
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
        start = (spec.get("ordinals") or {}).get("start", 0)
        if not isinstance(start, int) or start < 0:
            causes.append(v.invalid("spec.ordinals.start", start, "must be greater than or equal to 0"))
        retention = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        for field in ("whenDeleted", "whenScaled"):
            if retention.get(field) not in RETENTION:
                causes.append(v.not_supported(f"spec.persistentVolumeClaimRetentionPolicy.{field}",
                                              retention.get(field), RETENTION))
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


TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
DS_STRATEGIES = ["RollingUpdate", "OnDelete"]
DS_STATUS_COUNTS = ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady",
                    "observedGeneration", "updatedNumberScheduled", "numberAvailable", "numberUnavailable",
                    "collisionCount")


def default_daemon_set(spec: Obj) -> None:
    """SetDefaults_DaemonSet: a RollingUpdate strategy of maxUnavailable 1 / maxSurge 0 (each bound defaulted on
    its own), revisionHistoryLimit 10, and the template's defaults."""
    strategy = mapping(spec, "updateStrategy")
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = mapping(strategy, "rollingUpdate")
        for bound, value in (("maxUnavailable", 1), ("maxSurge", 0)):
            if _unset(rolling, bound):
                rolling[bound] = value
    if _unset(spec, "revisionHistoryLimit"):
        spec["revisionHistoryLimit"] = 10
    default_pod_template(spec)


def template_generation(ds: Obj) -> int:
    """The DaemonSet's TemplateGeneration, read from its apps/v1 annotation (0 when absent). A value
    strconv.ParseInt refuses fails the request as upstream's decoding does (Convert_v1_DaemonSet_To_apps_DaemonSet
    returns the parse error: a 400 that quotes it)."""
    raw = ((ds.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_GENERATION)
    if raw is None:
        return 0
    try:
        return parse_int(str(raw))
    except ValueError as exc:
        raise bad_request(f'DaemonSet in version "v1" cannot be handled as a DaemonSet: {exc}') from None


def _set_template_generation(ds: Obj, generation: int) -> None:
    meta = ds["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), TEMPLATE_GENERATION: str(generation)}


class DaemonSetStrategy(WorkloadStrategy):
    """pkg/registry/apps/daemonset/strategy.go with ValidateDaemonSet / ValidateDaemonSetUpdate."""

    owner = "daemonset"
    defaults = staticmethod(default_daemon_set)

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        obj["status"] = {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                         "numberReady": 0}
        _set_template_generation(obj, max(1, template_generation(obj)))

    def prepare_update(self, new: Obj, old: Obj) -> None:
        """A template change bumps the template generation (and so the generation); the client cannot set it."""
        super().prepare_update(new, old)
        template_generation(new)  # decoded upstream before the strategy runs: a bad value is a 400
        generation = template_generation(old)
        if (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template"):
            generation += 1
        _set_template_generation(new, generation)

    def prepare_status_update(self, new: Obj, old: Obj) -> Obj:
        template_generation(new)  # the status body is decoded the same way
        return super().prepare_status_update(new, old)

    def validate(self, obj: Obj) -> list[Cause]:
        spec = obj.get("spec") or {}
        return super().validate(obj) + _nonnegative(spec, "revisionHistoryLimit") + \
            validate_daemon_set_update_strategy(spec.get("updateStrategy") or {})

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        """ValidateDaemonSetStatusUpdate: no negative count, and collisionCount never decremented."""
        status, old_status = new.get("status") or {}, old.get("status") or {}
        causes = [v.invalid(f"status.{k}", status[k], "must be greater than or equal to 0") for k in DS_STATUS_COUNTS
                  if isinstance(status.get(k), int) and status[k] < 0]
        count, old_count = status.get("collisionCount"), old_status.get("collisionCount")
        if isinstance(old_count, int) and (not isinstance(count, int) or count < old_count):
            causes.append(v.invalid("status.collisionCount", count or 0, "cannot be decremented"))
        return causes


def validate_daemon_set_update_strategy(strategy: Obj) -> list[Cause]:
    """ValidateDaemonSetUpdateStrategy and ValidateRollingUpdateDaemonSet: exactly one of maxUnavailable and
    maxSurge is non-zero, each an int or a percentage of at most 100%."""
    path = "spec.updateStrategy"
    if strategy.get("type") == "OnDelete":
        return []
    if strategy.get("type") != "RollingUpdate":
        return [v.not_supported(path, strategy, DS_STRATEGIES)]
    rolling = strategy.get("rollingUpdate")
    if not isinstance(rolling, dict):
        return [v.required(f"{path}.rollingUpdate")]
    causes: list[Cause] = []
    values: dict[str, int | None] = {}
    for bound in ("maxUnavailable", "maxSurge"):
        raw = rolling.get(bound, 0)
        values[bound], more = _int_or_percent(raw, f"{path}.rollingUpdate.{bound}")
        causes += more
        if isinstance(raw, str) and (values[bound] or 0) > 100:
            causes.append(v.invalid(f"{path}.rollingUpdate.{bound}", raw, "must not be greater than 100%"))
    if values["maxUnavailable"] and values["maxSurge"]:
        causes.append(v.invalid(f"{path}.rollingUpdate.maxSurge", rolling.get("maxSurge"),
                                "may not be set when maxUnavailable is non-zero"))
    elif not values["maxUnavailable"] and not values["maxSurge"]:
        causes.append(v.required(f"{path}.rollingUpdate.maxUnavailable", "cannot be 0 when maxSurge is 0"))
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
REPLICATION_CONTROLLERS = Resource("", "v1", "replicationcontrollers", "replicationcontroller",
                                   "ReplicationController", True, "V1ReplicationController", short_names=("rc",),
                                   **_APPS)  # type: ignore[arg-type]
DAEMONSETS = Resource("apps", "v1", "daemonsets", "daemonset", "DaemonSet", True, "V1DaemonSet",
                      short_names=("ds",), categories=("all",), subresources=("status",))
