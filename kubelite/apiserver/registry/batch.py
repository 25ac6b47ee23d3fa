"""batch/v1 Jobs and CronJobs: upstream's defaults, generated selector, validation and update rules.

Mirrors pkg/registry/batch/job/strategy.go and pkg/apis/batch/validation. Without
`manualSelector: true` the server owns the selector: it is `batch.kubernetes.io/controller-uid=<uid>`
and the template gets that label plus `batch.kubernetes.io/job-name` (and the legacy unprefixed
`controller-uid` / `job-name`), so a Job's pods can never overlap another controller's. The
selector, completions (except for elastic Indexed Jobs), the completion mode, the pod failure
policy and the template (outside suspension) cannot change after creation.

Not done: backoffLimitPerIndex / maxFailedIndexes, successPolicy, podReplacementPolicy validation
beyond its enum, and the scheduling directives that a suspended Job may change in its template.

CronJobs (pkg/registry/batch/cronjob): a schedule robfig's parser accepts (its message as the cause), a
timeZone from the IANA database instead of `TZ=` in the schedule, a name of at most 52 characters, a job
template validated as a Job spec whose selector will be generated; defaults Allow, not suspended, history
limits 3 and 1. The controller that runs them is kubelite/controllers/cronjob.py.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from kubelite.api import validation as v
from kubelite.api.cron_schedule import CronError, load_location, parse_standard
from kubelite.api.errors import Cause
from kubelite.api.selectors import compile_label_selector
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy
from kubelite.apiserver.registry.pods import (
    default_pod_template,
    mapping,
    pod_spec_warnings,
    validate_pod_template_spec,
)

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"
COMPLETION_MODES = ["NonIndexed", "Indexed"]
MAX_INDEXED_COMPLETIONS = 100_000
MAX_FAILURE_RULES = 20
MAX_EXIT_CODE_VALUES = 255
RULE_ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]
EXIT_CODE_OPERATORS = ["In", "NotIn"]
REPLACEMENT_POLICIES = ["Failed", "TerminatingOrFailed"]
MAX_INT32 = 2**31 - 1  # math.MaxInt32, backoffLimit's default beside backoffLimitPerIndex


def _nonnegative(spec: Obj, field: str, causes: list[Cause], path: str = "spec") -> None:
    value = spec.get(field)
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        causes.append(v.invalid(f"{path}.{field}", value, "must be greater than or equal to 0"))


def _validate_exit_codes(rule_path: str, req: Obj) -> list[Cause]:
    causes: list[Cause] = []
    path = f"{rule_path}.onExitCodes"
    if req.get("operator") not in EXIT_CODE_OPERATORS:
        causes.append(v.not_supported(f"{path}.operator", req.get("operator"), EXIT_CODE_OPERATORS))
    values = req.get("values") or []
    if not values:
        causes.append(v.invalid(f"{path}.values", values, "at least one value is required"))
    if len(values) > MAX_EXIT_CODE_VALUES:
        causes.append(Cause("FieldValueTooMany", f"Too many: {len(values)}: must have at most "
                                                 f"{MAX_EXIT_CODE_VALUES} items", f"{path}.values"))
    previous: int | None = None
    for i, value in enumerate(values):
        if req.get("operator") == "In" and value == 0:
            causes.append(v.invalid(f"{path}.values[{i}]", value,
                                    "must not be 0 for the In operator"))
        if previous is not None and previous >= value:
            causes.append(v.invalid(f"{path}.values[{i}]", value, "must be ordered"))
        previous = value
    return causes


def validate_pod_failure_policy(spec: Obj) -> list[Cause]:
    """validatePodFailurePolicy: rules with one requirement each, known actions, sorted exit codes."""
    policy = spec.get("podFailurePolicy")
    if policy is None:
        return []
    causes: list[Cause] = []
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if restart != "Never":
        causes.append(v.invalid("spec.template.spec.restartPolicy", restart,
                                "only \"Never\" is supported when podFailurePolicy is specified"))
    rules = policy.get("rules") or []
    if len(rules) > MAX_FAILURE_RULES:
        causes.append(Cause("FieldValueTooMany", f"Too many: {len(rules)}: must have at most {MAX_FAILURE_RULES} "
                                                 "items", "spec.podFailurePolicy.rules"))
    for i, rule in enumerate(rules):
        path = f"spec.podFailurePolicy.rules[{i}]"
        action = rule.get("action")
        if action not in RULE_ACTIONS:
            causes.append(v.not_supported(f"{path}.action", action, RULE_ACTIONS))
        exit_codes, conditions = rule.get("onExitCodes"), rule.get("onPodConditions")
        if exit_codes is not None and conditions:
            causes.append(v.invalid(path, "", "specifying both OnExitCodes and OnPodConditions is not supported"))
        elif exit_codes is None and not conditions:
            causes.append(v.invalid(path, "", "specifying one of OnExitCodes and OnPodConditions is required"))
        if exit_codes is not None:
            causes += _validate_exit_codes(path, exit_codes)
        for j, pattern in enumerate(conditions or []):
            if pattern.get("status") not in ("True", "False", "Unknown"):
                causes.append(v.not_supported(f"{path}.onPodConditions[{j}].status", pattern.get("status"),
                                              ["False", "True", "Unknown"]))
            if not pattern.get("type"):
                causes.append(v.required(f"{path}.onPodConditions[{j}].type"))
    return causes


def validate_job_spec(spec: Obj) -> list[Cause]:
    return validate_job_spec_fields(spec) + _validate_selector(spec)


def validate_job_spec_fields(spec: Obj) -> list[Cause]:
    """validateJobSpec without the selector: what a Job and a CronJob's job template share."""
    causes: list[Cause] = []
    for field in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished"):
        _nonnegative(spec, field, causes)
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline == 0:
        causes.append(v.invalid("spec.activeDeadlineSeconds", deadline, "must be greater than 0"))
    mode = spec.get("completionMode")
    if mode is not None and mode not in COMPLETION_MODES:  # unset only in a CronJob's template: Jobs default it
        causes.append(v.not_supported("spec.completionMode", mode, COMPLETION_MODES))
    if mode == "Indexed":
        completions = spec.get("completions")
        if completions is None:
            causes.append(v.required("spec.completions", "when completion mode is Indexed"))
        elif isinstance(completions, int) and completions > MAX_INDEXED_COMPLETIONS:
            causes.append(v.invalid("spec.completions", completions,
                                    f"must be less than or equal to {MAX_INDEXED_COMPLETIONS} when completion mode "
                                    "is Indexed"))
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None and replacement not in REPLACEMENT_POLICIES:
        causes.append(v.not_supported("spec.podReplacementPolicy", replacement, REPLACEMENT_POLICIES))
    template = spec.get("template") or {}
    tmpl_spec = template.get("spec") or {}
    causes += validate_pod_template_spec(tmpl_spec, "spec.template.spec")
    causes = [c for c in causes if c.field != "spec.template.spec.restartPolicy"]
    if tmpl_spec.get("restartPolicy") not in ("OnFailure", "Never"):
        causes.append(v.not_supported("spec.template.spec.restartPolicy", tmpl_spec.get("restartPolicy"),
                                      ["OnFailure", "Never"]))
    causes += validate_pod_failure_policy(spec)
    return causes


def _validate_selector(spec: Obj) -> list[Cause]:
    """A Job's selector is required and must match its template's labels."""
    causes: list[Cause] = []
    template = spec.get("template") or {}
    selector = spec.get("selector")
    if selector is None:
        causes.append(v.required("spec.selector"))
    else:
        try:
            compiled = compile_label_selector(selector)
        except ValueError as exc:
            causes.append(v.invalid("spec.selector", selector, str(exc), v.LABEL_SELECTOR))
        else:
            labels = (template.get("metadata") or {}).get("labels") or {}
            if not compiled.matches(labels):
                causes.append(v.invalid("spec.template.metadata.labels", labels,
                                        "`selector` does not match template `labels`"))
    return causes


def _generated_selector_causes(obj: Obj) -> list[Cause]:
    """ValidateGeneratedSelector: a generated selector must name this Job's uid, and its pods must carry it."""
    spec, meta = obj.get("spec") or {}, obj["metadata"]
    if spec.get("manualSelector") is True or spec.get("selector") is None:
        return []
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    causes: list[Cause] = []
    for key, want in ((CONTROLLER_UID, meta.get("uid", "")), (JOB_NAME, meta.get("name", ""))):
        if labels.get(key) != want:
            causes.append(v.invalid("spec.template.metadata.labels", labels,
                                    f"must be '{want}'" if key in labels else f"must include {key}"))
    try:
        ok = compile_label_selector(spec["selector"]).matches({CONTROLLER_UID: meta.get("uid", ""),
                                                               JOB_NAME: meta.get("name", "")})
    except ValueError:
        ok = True  # reported by validate_job_spec
    if not ok:
        causes.append(v.invalid("spec.selector", spec["selector"], "`selector` not auto-generated", v.LABEL_SELECTOR))
    return causes


def default_job(spec: Obj) -> None:
    """SetDefaults_Job, run on create, update and patch alike (upstream defaults on every decode): a patch removing
    spec.completionMode stores NonIndexed again rather than failing validation on a null. Completions and
    parallelism are 1 when both are unset; backoffLimit 6 (the int32 maximum when backoffLimitPerIndex is set);
    pod-condition rules match status True unless told; podReplacementPolicy Failed under a podFailurePolicy,
    TerminatingOrFailed otherwise; the template gets SetDefaults_PodSpec, not a Pod's requests-from-limits copy.

    Not done: the Job's labels copied from the template's when it has none, and manualSelector defaulted to false."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    for field, value in (("parallelism", 1), ("completionMode", "NonIndexed"), ("suspend", False),
                         ("backoffLimit", MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6),
                         ("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") is not None
                          else "TerminatingOrFailed")):
        if spec.get(field) is None:
            spec[field] = value
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        for pattern in (rule.get("onPodConditions") or []) if isinstance(rule, dict) else []:
            if isinstance(pattern, dict) and not pattern.get("status"):
                pattern["status"] = "True"
    default_pod_template(spec)


# pkg/registry/batch/job/storage/storage.go deleteOptionWarnings
ORPHAN_BY_DEFAULT_WARNING = ("child pods are preserved by default when jobs are deleted; set "
                             "propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress "
                             "this warning")


class JobStrategy(Strategy):
    has_status = True
    has_spec_generation = True
    orphans_by_default = True  # batch/v1 (kubelite's only Job version) keeps its pods, for back compatibility

    def delete_warnings(self, obj: Obj, options: Obj) -> list[str]:
        """REST.Delete and DeleteCollection: a delete that does not choose a policy hears that pods are kept."""
        if options.get("propagationPolicy") is None and options.get("orphanDependents") is None:
            return [ORPHAN_BY_DEFAULT_WARNING]
        return []

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        spec = mapping(obj, "spec")
        default_job(spec)
        if spec.get("manualSelector") is not True:
            self._generate_selector(obj)
        obj["status"] = {}

    @staticmethod
    def _generate_selector(obj: Obj) -> None:
        """generateSelector: the uid/name labels on the template, a selector on the uid; user labels kept."""
        meta, spec = obj["metadata"], obj["spec"]
        labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
        for key, value in ((LEGACY_CONTROLLER_UID, meta["uid"]), (CONTROLLER_UID, meta["uid"]),
                           (LEGACY_JOB_NAME, meta.get("name", "")), (JOB_NAME, meta.get("name", ""))):
            labels.setdefault(key, value)
        spec.setdefault("selector", {"matchLabels": {CONTROLLER_UID: meta["uid"]}})

    def prepare_update(self, new: Obj, old: Obj) -> None:
        default_job(mapping(new, "spec"))
        super().prepare_update(new, old)

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        causes += _generated_selector_causes(obj)
        causes += validate_job_spec(obj.get("spec") or {})
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = self.validate(new)
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        for field in ("selector", "completionMode", "podFailurePolicy"):
            if spec.get(field) != old_spec.get(field):
                causes.append(v.immutable(f"spec.{field}"))
        if spec.get("completions") != old_spec.get("completions") and not _elastic_indexed(spec, old_spec):
            causes.append(v.immutable("spec.completions"))
        if spec.get("template") != old_spec.get("template"):
            causes.append(v.immutable("spec.template"))
        return causes

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes: list[Cause] = []
        status = new.get("status") or {}
        for field in ("active", "succeeded", "failed", "ready", "terminating"):
            _nonnegative(status, field, causes, "status")
        return causes


def _elastic_indexed(spec: Obj, old: Obj) -> bool:
    """Elastic Indexed Jobs: completions may change together with parallelism, kept equal."""
    return (spec.get("completionMode") == "Indexed" and spec.get("completions") is not None
            and spec.get("completions") == spec.get("parallelism")
            and old.get("completions") == old.get("parallelism"))


JOBS = Resource("batch", "v1", "jobs", "job", "Job", True, "V1Job", categories=("all",),
                subresources=("status",))


# --- CronJobs: pkg/registry/batch/cronjob/strategy.go, ValidateCronJobCreate/Update, SetDefaults_CronJob ---

CONCURRENCY_POLICIES = ["Allow", "Forbid", "Replace"]
MAX_CRONJOB_NAME = 52  # a Job's name is the CronJob's plus `-<minutes since the epoch>` (11 characters), at most 63
_TIME_ZONE_PART = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")


def default_cronjob(spec: Obj) -> None:
    """SetDefaults_CronJob, and SetDefaults_PodSpec in the job template. The template gets no Job defaults
    (completions, backoffLimit…): each Job made from it gets them when it is created."""
    for field, value in (("concurrencyPolicy", "Allow"), ("suspend", False), ("successfulJobsHistoryLimit", 3),
                         ("failedJobsHistoryLimit", 1)):
        if spec.get(field) is None:
            spec[field] = value
    default_pod_template(mapping(mapping(spec, "jobTemplate"), "spec"))


def _validate_schedule(schedule: str, allow_tz: bool, time_zone: str | None) -> list[Cause]:
    """validateScheduleFormat: robfig's parse error as the detail; TZ in the schedule only where it already was."""
    causes: list[Cause] = []
    try:
        parse_standard(schedule)
    except CronError as exc:
        causes.append(v.invalid("spec.schedule", schedule, str(exc)))
    if "TZ" in schedule:
        if not allow_tz:
            causes.append(v.invalid("spec.schedule", schedule,
                                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
        elif time_zone is not None:
            causes.append(v.invalid("spec.schedule", schedule,
                                    "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
    return causes


def _validate_time_zone(zone: Any) -> list[Cause]:
    """validateTimeZone: an IANA name (checked part by part as upstream, then looked up), never "Local"."""
    if zone is None:
        return []
    path = "spec.timeZone"
    if zone == "":
        return [v.invalid(path, zone, "timeZone must be nil or non-empty string")]
    for part in str(zone).split("/"):
        if part in (".", "..") or part.startswith("-") or not _TIME_ZONE_PART.fullmatch(part):
            return [v.invalid(path, zone, f"unknown time zone {zone}")]
    causes: list[Cause] = []
    if str(zone).lower() == "local":
        causes.append(v.invalid(path, zone,
                                "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"))
    try:
        if zone != "Local":  # Go's time.LoadLocation("Local") succeeds (its own zone): one cause, as upstream's
            load_location(str(zone))
    except CronError as exc:
        causes.append(v.invalid(path, zone, str(exc)))
    return causes


def _validate_job_template(template: Obj) -> list[Cause]:
    """ValidateJobTemplateSpec: a Job spec under spec.jobTemplate, whose selector the Job will generate."""
    spec = template.get("spec") or {}
    causes = [replace(c, field="spec.jobTemplate." + c.field) if c.field.startswith("spec.") else c
              for c in validate_job_spec_fields(spec)]
    if spec.get("selector") is not None:
        causes.append(v.invalid("spec.jobTemplate.spec.selector", spec["selector"], "`selector` will be "
                                "auto-generated", v.LABEL_SELECTOR))
    if spec.get("manualSelector") is True:
        causes.append(v.not_supported("spec.jobTemplate.spec.manualSelector", True, ["nil", "false"]))
    return causes


def validate_cronjob_spec(spec: Obj, old: Obj | None) -> list[Cause]:
    """validateCronJobSpec; `old` is the stored spec on an update (TZ in a schedule that had one stays allowed, and
    an unchanged timeZone is not looked up again)."""
    causes: list[Cause] = []
    schedule = spec.get("schedule")
    if not schedule:
        causes.append(v.required("spec.schedule"))
    else:
        causes += _validate_schedule(str(schedule), old is not None and "TZ" in str(old.get("schedule") or ""),
                                     spec.get("timeZone"))
    _nonnegative(spec, "startingDeadlineSeconds", causes)
    if old is None or old.get("timeZone") != spec.get("timeZone"):
        causes += _validate_time_zone(spec.get("timeZone"))
    policy = spec.get("concurrencyPolicy")
    if not policy:
        causes.append(v.required("spec.concurrencyPolicy"))
    elif policy not in CONCURRENCY_POLICIES:
        causes.append(v.not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES))
    causes += _validate_job_template(spec.get("jobTemplate") or {})
    for field in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        _nonnegative(spec, field, causes)
    return causes


class CronJobStrategy(Strategy):
    has_status = True
    has_spec_generation = True

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        default_cronjob(mapping(obj, "spec"))
        obj["status"] = {}

    def prepare_update(self, new: Obj, old: Obj) -> None:
        default_cronjob(mapping(new, "spec"))
        super().prepare_update(new, old)

    def validate(self, obj: Obj) -> list[Cause]:
        """ValidateCronJobCreate: the name is at most 52 characters (on create only: older, longer names may still
        be updated and deleted)."""
        causes = super().validate(obj) + validate_cronjob_spec(obj.get("spec") or {}, None)
        name = obj["metadata"].get("name") or ""
        if len(name) > MAX_CRONJOB_NAME:
            causes.append(v.invalid("metadata.name", name, f"must be no more than {MAX_CRONJOB_NAME} characters"))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        return super().validate(new) + validate_cronjob_spec(new.get("spec") or {}, old.get("spec") or {})

    def warnings(self, obj: Obj, old: Obj | None) -> list[str]:
        """WarningsOnCreate: a name that is not a DNS label (its Jobs' pods are named after it) and the pod
        template's warnings; WarningsOnUpdate: the template's, when the spec changed."""
        out: list[str] = []
        if old is None and (msgs := v.is_dns1123_label(obj["metadata"].get("name") or "")):
            out.append("metadata.name: this is used in Pod names and hostnames, which can result in surprising "
                       f"behavior; a DNS label is recommended: [{' '.join(msgs)}]")
        if old is None or obj["metadata"].get("generation") != old["metadata"].get("generation"):
            template = ((obj.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}
            out += pod_spec_warnings((template.get("template") or {}).get("spec") or {},
                                     "spec.jobTemplate.spec.template.spec")
        return out


CRONJOBS = Resource("batch", "v1", "cronjobs", "cronjob", "CronJob", True, "V1CronJob", short_names=("cj",),
                    categories=("all",), subresources=("status",))
