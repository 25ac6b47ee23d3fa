"""The horizontal pod autoscaler: a port of pkg/controller/podautoscaler/horizontal.go (v1.32).

Every sync period (15 s, --horizontal-pod-autoscaler-sync-period; upstream's fixed-interval rate limiter: an HPA
is first looked at one period after it appears) each HPA is reconciled, talking only to the API:
1. read the target's `scale` subresource (the target's resource found by discovery, as the REST mapper does);
2. outside [minReplicas, maxReplicas] the count is brought inside; a target at 0 replicas is not autoscaled;
3. otherwise every metric proposes a count (replica_calculator.py) from metrics.k8s.io's PodMetrics, and the largest
   wins; the proposal is then stabilized and rate-limited — without `behavior` by upstream's legacy rules (the
   highest recommendation of the downscale stabilization window, 300 s; at most max(2x, 4) replicas up), with it by
   its windows and policies;
4. a change is written to the scale subresource (event SuccessfulRescale "New size: N; reason: …"), and the status
   (currentReplicas, desiredReplicas, currentMetrics, lastScaleTime and the AbleToScale, ScalingActive and
   ScalingLimited conditions, upstream's reasons and messages) is written when it changed.

Pods, Object and External metrics need the custom and external metrics APIs, which kubelite does not serve: the
request is made, fails, and the HPA says so (ScalingActive False, FailedGetPodsMetric / FailedGetObjectMetric /
FailedGetExternalMetric) rather than scaling on a guess. Pods selected by two HPAs' targets stop both
(AmbiguousSelector). Not done: the controller's Prometheus metrics.
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import dataclass
from typing import Any, NoReturn

from kubelite.api.errors import ApiError
from kubelite.api.quantity import QuantityError, milli_quantity, milli_value
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import resource_path
from kubelite.client.informer import NAMESPACE_INDEX, Handlers, Key, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_duration, parse_rfc3339, rfc3339
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.replica_calculator import (
    DEFAULT_CPU_INITIALIZATION_PERIOD,
    DEFAULT_INITIAL_READINESS_DELAY,
    DEFAULT_TOLERANCE,
    MetricsError,
    PodMetric,
    PodMetrics,
    PodSelector,
    ReplicaCalculator,
)
from kubelite.controllers.runner import ItemExponentialFailureRateLimiter, Runner, run_synced

log = logging.getLogger("kubelite.controllers.horizontal")

Obj = dict[str, Any]
COMPONENT = "horizontal-pod-autoscaler"
HPA_GROUP_VERSION = "autoscaling/v2"
DEFAULT_SYNC_PERIOD = 15.0  # --horizontal-pod-autoscaler-sync-period
DISCOVERY_RESET = 30.0  # seconds a group-version's discovered resources are used before they are read again
DEFAULT_DOWNSCALE_STABILIZATION = 300.0  # --horizontal-pod-autoscaler-downscale-stabilization
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0
MAX_INT32, MIN_INT32 = 2**31 - 1, -(2**31)
METRICS_API = "/apis/metrics.k8s.io/v1beta1"
CUSTOM_METRICS_API = "/apis/custom.metrics.k8s.io/v1beta2"
EXTERNAL_METRICS_API = "/apis/external.metrics.k8s.io/v1beta1"


@dataclass
class Recommendation:
    replicas: int
    timestamp: float


@dataclass
class ScaleEvent:
    change: int
    timestamp: float
    outdated: bool = False


class SpecError(MetricsError):
    """An HPA spec the controller cannot act on (errSpec): refused by validation, so only seen in tests."""


# --- conditions ---------------------------------------------------------------------------------------------------

def set_condition(hpa: Obj, kind: str, status: str, reason: str, message: str, now: float) -> None:
    """setConditionInList: replace the condition of `kind` (or add it), its transition time moved only when its
    status changes."""
    conditions = hpa.setdefault("status", {}).setdefault("conditions", [])
    existing = next((c for c in conditions if c.get("type") == kind), None)
    if existing is None:
        existing = {"type": kind}
        conditions.append(existing)
    if existing.get("status") != status:
        existing["lastTransitionTime"] = rfc3339(now)
    existing["status"], existing["reason"], existing["message"] = status, reason, message


# --- rate limits (behavior) ---------------------------------------------------------------------------------------

def replicas_change_per_period(period_seconds: int, events: list[ScaleEvent], now: float) -> int:
    """getReplicasChangePerPeriod: the replicas added (or removed) by the events within the period."""
    cutoff = now - period_seconds
    return sum(e.change for e in events if e.timestamp > cutoff)


def _period_start(current: int, policy: Obj, up: list[ScaleEvent], down: list[ScaleEvent], now: float) -> int:
    period = policy.get("periodSeconds", 0)
    return current - replicas_change_per_period(period, up, now) + replicas_change_per_period(period, down, now)


def calculate_scale_up_limit_with_scaling_rules(current: int, up: list[ScaleEvent], down: list[ScaleEvent],
                                                rules: Obj, now: float) -> int:
    """calculateScaleUpLimitWithScalingRules: the most replicas the policies allow now (Max: the most any allows,
    Min: the least; Disabled: no change)."""
    select = rules.get("selectPolicy")
    if select == "Disabled":
        return current
    pick, result = (min, MAX_INT32) if select == "Min" else (max, MIN_INT32)
    for policy in rules.get("policies") or []:
        start = _period_start(current, policy, up, down, now)
        if policy.get("type") == "Pods":
            proposed = start + policy.get("value", 0)
        else:  # rounded up, or a small percentage of few pods would never add one
            proposed = math.ceil(start * (1 + policy.get("value", 0) / 100))
        result = pick(result, proposed)
    return result


def calculate_scale_down_limit_with_behaviors(current: int, up: list[ScaleEvent], down: list[ScaleEvent],
                                              rules: Obj, now: float) -> int:
    """calculateScaleDownLimitWithBehaviors: the fewest replicas the policies allow now."""
    select = rules.get("selectPolicy")
    if select == "Disabled":
        return current
    pick, result = (max, MIN_INT32) if select == "Min" else (min, MAX_INT32)
    for policy in rules.get("policies") or []:
        start = _period_start(current, policy, up, down, now)
        if policy.get("type") == "Pods":
            proposed = start - policy.get("value", 0)
        else:
            proposed = int(start * (1 - policy.get("value", 0) / 100))
        result = pick(result, proposed)
    return result


def calculate_scale_up_limit(current: int) -> int:
    """The legacy limit without behavior: at most double, at least 4 (issue #32304's bogus CPU spikes)."""
    return int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))


def convert_desired_replicas_with_rules(current: int, desired: int, low: int, high: int) -> tuple[int, str, str]:
    """convertDesiredReplicasWithRules: the legacy clamp, with the ScalingLimited reason and message."""
    limit = calculate_scale_up_limit(current)
    if high > limit:
        maximum, reason, message = limit, "ScaleUpLimit", \
            "the desired replica count is increasing faster than the maximum scale rate"
    else:
        maximum, reason, message = high, "TooManyReplicas", \
            "the desired replica count is more than the maximum replica count"
    if desired < low:
        return low, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
    if desired > maximum:
        return maximum, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def longest_policy_period(rules: Obj) -> int:
    return max((p.get("periodSeconds", 0) for p in rules.get("policies") or []), default=0)


@dataclass
class NormalizationArg:
    key: Key
    scale_up: Obj
    scale_down: Obj
    min_replicas: int
    max_replicas: int
    current: int
    desired: int


class Recommender:
    """The controller's memory per HPA: recent recommendations (stabilization) and scale events (policies)."""

    def __init__(self, downscale_stabilization: float = DEFAULT_DOWNSCALE_STABILIZATION) -> None:
        self.downscale_stabilization = downscale_stabilization
        self.recommendations: dict[Key, list[Recommendation]] = {}
        self.scale_up_events: dict[Key, list[ScaleEvent]] = {}
        self.scale_down_events: dict[Key, list[ScaleEvent]] = {}

    def forget(self, key: Key) -> None:
        self.recommendations.pop(key, None)
        self.scale_up_events.pop(key, None)
        self.scale_down_events.pop(key, None)

    def record_initial(self, key: Key, current: int, now: float) -> None:
        self.recommendations.setdefault(key, [Recommendation(current, now)])

    def _record(self, key: Key, old_index: int | None, desired: int, now: float) -> None:
        """Record an unstabilized recommendation, in the slot of one that fell out of every window if any."""
        if old_index is not None:
            self.recommendations[key][old_index] = Recommendation(desired, now)
        else:
            self.recommendations.setdefault(key, []).append(Recommendation(desired, now))

    def stabilize_recommendation(self, key: Key, desired: int, now: float) -> int:
        """stabilizeRecommendation (no behavior): the highest recommendation of the downscale window."""
        highest, old = desired, None
        cutoff = now - self.downscale_stabilization
        for i, rec in enumerate(self.recommendations.get(key, [])):
            if rec.timestamp < cutoff:
                old = i
            elif rec.replicas > highest:
                highest = rec.replicas
        self._record(key, old, desired, now)
        return highest

    def stabilize_recommendation_with_behaviors(self, args: NormalizationArg, now: float) -> tuple[int, str, str]:
        """stabilizeRecommendationWithBehaviors: the count kept within the lowest recommendation of the scale-up
        window and the highest of the scale-down window."""
        up_cutoff = now - (args.scale_up.get("stabilizationWindowSeconds") or 0)
        down_cutoff = now - (args.scale_down.get("stabilizationWindowSeconds") or 0)
        up_recommendation = down_recommendation = args.desired
        old = None
        for i, rec in enumerate(self.recommendations.get(args.key, [])):
            if rec.timestamp > up_cutoff:
                up_recommendation = min(rec.replicas, up_recommendation)
            if rec.timestamp > down_cutoff:
                down_recommendation = max(rec.replicas, down_recommendation)
            if rec.timestamp < up_cutoff and rec.timestamp < down_cutoff:
                old = i
        recommendation = min(max(args.current, up_recommendation), down_recommendation)
        self._record(args.key, old, args.desired, now)
        if args.desired >= args.current:
            return recommendation, "ScaleUpStabilized", \
                "recent recommendations were lower than current one, applying the lowest recent recommendation"
        return recommendation, "ScaleDownStabilized", \
            "recent recommendations were higher than current one, applying the highest recent recommendation"

    def convert_desired_replicas_with_behavior_rate(self, args: NormalizationArg, now: float) -> tuple[int, str, str]:
        """convertDesiredReplicasWithBehaviorRate: the count within the policies' rate and minReplicas/maxReplicas."""
        up, down = self.scale_up_events.get(args.key, []), self.scale_down_events.get(args.key, [])
        if args.desired > args.current:
            limit = max(calculate_scale_up_limit_with_scaling_rules(args.current, up, down, args.scale_up, now),
                        args.current)  # no further scale-up until the events age out
            if args.max_replicas > limit:
                maximum, reason, message = limit, "ScaleUpLimit", \
                    "the desired replica count is increasing faster than the maximum scale rate"
            else:
                maximum, reason, message = args.max_replicas, "TooManyReplicas", \
                    "the desired replica count is more than the maximum replica count"
            if args.desired > maximum:
                return maximum, reason, message
        elif args.desired < args.current:
            limit = min(calculate_scale_down_limit_with_behaviors(args.current, up, down, args.scale_down, now),
                        args.current)
            if args.min_replicas < limit:
                minimum, reason, message = limit, "ScaleDownLimit", \
                    "the desired replica count is decreasing faster than the maximum scale rate"
            else:
                minimum, reason, message = args.min_replicas, "TooFewReplicas", \
                    "the desired replica count is less than the minimum replica count"
            if args.desired < minimum:
                return minimum, reason, message
        return args.desired, "DesiredWithinRange", "the desired count is within the acceptable range"

    def store_scale_event(self, behavior: Obj | None, key: Key, previous: int, new: int, now: float) -> None:
        """storeScaleEvent: remember a rescale for the policies, reusing the slot of an event past every period."""
        if behavior is None:
            return  # only the policies read them
        rising = new > previous
        rules = behavior.get("scaleUp" if rising else "scaleDown") or {}
        events = (self.scale_up_events if rising else self.scale_down_events).setdefault(key, [])
        cutoff = now - longest_policy_period(rules)
        old = None
        for i, event in enumerate(events):
            if event.timestamp < cutoff:
                event.outdated = True
            if event.outdated:
                old = i
        fresh = ScaleEvent(abs(new - previous), now)
        if old is not None:
            events[old] = fresh
        else:
            events.append(fresh)


# --- metrics through the API --------------------------------------------------------------------------------------

class ApiMetricsClient:
    """The resource metrics client (rest_metrics_client.go) over kubelite's metrics.k8s.io, and the custom and
    external ones, whose APIs kubelite does not serve: their requests fail as upstream's would with no adapter."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def resource_metric(self, resource: str, namespace: str, selector: PodSelector,
                              container: str) -> tuple[PodMetrics, float]:
        """GetResourceMetric: each pod's usage summed over its containers (or the named one's)."""
        try:
            listed = await self.client.get(f"{METRICS_API}/namespaces/{namespace}/pods",
                                           {"labelSelector": selector.text})
        except ApiError as exc:
            raise MetricsError(f"unable to fetch metrics from resource metrics API: {exc}") from None
        items = listed.get("items") or []
        if not items:
            raise MetricsError("no metrics returned from resource metrics API")
        metrics = _container_metrics(items, resource, container) if container else _pod_metrics(items, resource)
        return metrics, _stamp(items[0].get("timestamp"))

    async def raw_metric(self, metric: str, namespace: str, selector: PodSelector,
                         metric_selector: Obj | None) -> tuple[PodMetrics, float]:
        """GetRawMetric: always fails here, as the request to the custom metrics API does."""
        await self._unserved(f"{CUSTOM_METRICS_API}/namespaces/{namespace}/pods/*/{metric}", "custom")

    async def _unserved(self, path: str, api: str) -> NoReturn:
        try:
            await self.client.get(path)
        except ApiError as exc:
            raise MetricsError(f"unable to fetch metrics from {api} metrics API: {exc}") from None
        raise MetricsError(f"unable to fetch metrics from {api} metrics API: kubelite's autoscaler reads no {api} "
                           "metrics")

    async def object_metric(self, metric: str, namespace: str, described: Obj) -> NoReturn:
        """GetObjectMetric: always fails here, as the request to the custom metrics API does."""
        kind = (described.get("kind") or "").lower()
        await self._unserved(f"{CUSTOM_METRICS_API}/namespaces/{namespace}/{kind}s/{described.get('name', '')}/"
                             f"{metric}", "custom")

    async def external_metric(self, metric: str, namespace: str) -> NoReturn:
        """GetExternalMetric: always fails here, as the request to the external metrics API does."""
        await self._unserved(f"{EXTERNAL_METRICS_API}/namespaces/{namespace}/{metric}", "external")


def _stamp(value: Any) -> float:
    try:
        return parse_rfc3339(value) if isinstance(value, str) and value else 0.0
    except ValueError:
        return 0.0


def _window(item: Obj) -> float:
    try:
        return parse_duration(str(item.get("window") or "0")) / 1e9
    except ValueError:
        return 0.0


def _usage(container: Obj, resource: str) -> int | None:
    value = (container.get("usage") or {}).get(resource)
    if value is None:
        return None
    try:
        return milli_value(value)
    except QuantityError:
        return None


def _pod_metrics(items: list[Obj], resource: str) -> PodMetrics:
    """getPodMetrics: a pod with a container lacking the resource (or with none) has no sample."""
    out: PodMetrics = {}
    for item in items:
        containers = item.get("containers") or []
        usages = [_usage(c, resource) for c in containers]
        if containers and all(u is not None for u in usages):
            out[item["metadata"]["name"]] = PodMetric(sum(u for u in usages if u is not None),
                                                      _stamp(item.get("timestamp")), _window(item))
    return out


def _container_metrics(items: list[Obj], resource: str, container: str) -> PodMetrics:
    """getContainerMetrics: every pod's named container; a pod without it is an error."""
    out: PodMetrics = {}
    for item in items:
        meta = item["metadata"]
        found = next((c for c in item.get("containers") or [] if c.get("name") == container), None)
        if found is None:
            raise MetricsError(f"failed to get container metrics: container {container} not present in metrics for "
                               f"pod {meta.get('namespace', '')}/{meta['name']}")
        usage = _usage(found, resource)
        if usage is not None:
            out[meta["name"]] = PodMetric(usage, _stamp(item.get("timestamp")), _window(item))
    return out


# --- the controller -----------------------------------------------------------------------------------------------

@dataclass
class Proposal:
    replicas: int
    metric: str
    timestamp: float


class Unable(Exception):
    """A metric gave no proposal: the error and the ScalingActive condition it sets (reason, message)."""

    def __init__(self, message: str, reason: str, condition: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.condition = condition


class HorizontalController:
    def __init__(self, client: Client, clock: Clock, sync_period: float = DEFAULT_SYNC_PERIOD,
                 downscale_stabilization: float = DEFAULT_DOWNSCALE_STABILIZATION,
                 tolerance: float = DEFAULT_TOLERANCE,
                 cpu_initialization_period: float = DEFAULT_CPU_INITIALIZATION_PERIOD,
                 delay_of_initial_readiness_status: float = DEFAULT_INITIAL_READINESS_DELAY) -> None:
        self.client = client
        self.clock = clock
        self.sync_period = sync_period
        self.runner: Runner[Key] = Runner("horizontalpodautoscaler", self.reconcile, clock)
        # NewDefaultHPARateLimiter: every HPA is processed once per sync period, failures included
        self.runner.queue.limiter = ItemExponentialFailureRateLimiter(sync_period, sync_period)
        self.hpas = shared_informer(client, clock, f"/apis/{HPA_GROUP_VERSION}/horizontalpodautoscalers",
                                    Handlers(self._enqueue, lambda old, new: self._enqueue(new), self._deleted))
        self.pods = shared_informer(client, clock, "/api/v1/pods")
        self.events = EventSink(client, clock)
        self.metrics = ApiMetricsClient(client)
        self.calculator = ReplicaCalculator(self.metrics, self._pods, clock.now, tolerance, cpu_initialization_period,
                                            delay_of_initial_readiness_status)
        self.recommender = Recommender(downscale_stabilization)
        # group-version → (when read, its discovered resources); read again after DISCOVERY_RESET, as upstream's
        # controller manager resets its deferred RESTMapper every 30 s (a CRD's kind appears without a restart)
        self._resources: dict[str, tuple[float, list[Obj]]] = {}
        # hpaSelectors: each HPA's target selector as last read (None: not read yet, selects nothing)
        self.selectors: dict[Key, PodSelector | None] = {}

    def _enqueue(self, hpa: Obj) -> None:
        self.runner.queue.add_rate_limited(key_of(hpa))
        self.selectors.setdefault(key_of(hpa), None)

    def _deleted(self, hpa: Obj) -> None:
        self.runner.queue.forget(key_of(hpa))
        self.selectors.pop(key_of(hpa), None)

    def _pods(self, namespace: str, selector: PodSelector) -> list[Obj]:
        return [p for p in self.pods.by_index(NAMESPACE_INDEX, namespace)
                if selector.matches(p["metadata"].get("labels"))]

    async def run(self) -> None:
        await run_synced((self.hpas, self.pods), (self.runner.run,), alongside=(self.events.run,))

    async def reconcile(self, key: Key) -> None:
        """reconcileKey: a deleted HPA is forgotten; any other is reconciled and comes back one period later."""
        hpa = self.hpas.get(*key)
        if hpa is None:
            self.recommender.forget(key)
            return
        try:
            await self.reconcile_autoscaler(hpa, key)
        finally:
            self.runner.queue.add_rate_limited(key)

    def _event(self, hpa: Obj, event_type: str, reason: str, message: str) -> None:
        self.events.post(event_for(hpa, reason, message, "HorizontalPodAutoscaler", COMPONENT, self.clock.now(),
                                   event_type))

    def _condition(self, hpa: Obj, kind: str, status: str, reason: str, message: str) -> None:
        set_condition(hpa, kind, status, reason, message, self.clock.now())

    # --- scale ------------------------------------------------------------------------------------------------

    async def _scale_path(self, ref: Obj, namespace: str) -> str:
        """The target's scale subresource, its resource found by discovery of the reference's group-version."""
        group_version, kind = ref.get("apiVersion") or "", ref.get("kind", "")
        if group_version.count("/") > 1:
            raise MetricsError(f"unexpected GroupVersion string: {group_version}")
        read_at, resources = self._resources.get(group_version, (None, []))
        if read_at is None or self.clock.monotonic() - read_at >= DISCOVERY_RESET:
            path = "/api/v1" if group_version in ("", "v1") else f"/apis/{group_version}"
            try:
                resources = (await self.client.get(path)).get("resources") or []
            except ApiError as exc:
                if exc.code != 404:
                    raise
                resources = []
            self._resources[group_version] = (self.clock.monotonic(), resources)
        plural = next((r["name"] for r in resources if r.get("kind") == kind and "/" not in r.get("name", "")), None)
        if plural is None:
            group = group_version.split("/")[0] if "/" in group_version else ""
            raise MetricsError(f'no matches for kind "{kind}" in group "{group}"')
        return resource_path(plural, namespace, ref.get("name", ""), "scale", group_version or "v1")

    # --- reconcile --------------------------------------------------------------------------------------------

    async def reconcile_autoscaler(self, shared: Obj, key: Key) -> None:
        """reconcileAutoscaler."""
        hpa = copy.deepcopy(shared)
        original = copy.deepcopy(hpa.get("status") or {})
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        reference = f"{ref.get('kind', '')}/{hpa['metadata'].get('namespace', '')}/{ref.get('name', '')}"
        try:
            scale_path = await self._scale_path(ref, key[0])
            scale = await self.client.get(scale_path)
        except (ApiError, MetricsError) as exc:
            self._event(hpa, "Warning", "FailedGetScale", str(exc))
            self._condition(hpa, "AbleToScale", "False", "FailedGetScale",
                            f"the HPA controller was unable to get the target's current scale: {exc}")
            await self._update_status_if_needed(original, hpa)
            log.warning("failed to query scale subresource for %s: %s", reference, exc)
            return
        self._condition(hpa, "AbleToScale", "True", "SucceededGetScale",
                        "the HPA controller was able to get the target's current scale")
        current = (scale.get("spec") or {}).get("replicas", 0)
        now = self.clock.now()
        self.recommender.record_initial(key, current, now)
        low = spec.get("minReplicas", 1)
        high = spec.get("maxReplicas", 0)
        statuses: list[Obj] = []
        desired, reason, rescale = 0, "", True
        if current == 0 and low != 0:
            rescale = False  # autoscaling is disabled for this target
            self._condition(hpa, "ScalingActive", "False", "ScalingDisabled",
                            "scaling is disabled since the replica count of the target is zero")
        elif current > high:
            reason, desired = "Current number of replicas above Spec.MaxReplicas", high
        elif current < low:
            reason, desired = "Current number of replicas below Spec.MinReplicas", low
        else:
            proposal, statuses, error = await self.compute_replicas_for_metrics(hpa, scale, spec.get("metrics") or [])
            if proposal is None:
                self._set_status(hpa, current, (hpa.get("status") or {}).get("desiredReplicas", 0), statuses, False)
                await self._update_status_if_needed(original, hpa)
                self._event(hpa, "Warning", "FailedComputeMetricsReplicas", error)
                log.info("failed to compute desired number of replicas based on listed metrics for %s: %s",
                         reference, error)
                return
            desired = max(proposal.replicas, 0)
            if desired > current:
                reason = f"{proposal.metric} above target"
            elif desired < current:
                reason = "All metrics below target"
            desired = self.normalize(hpa, key, current, desired, low, now)
            rescale = desired != current
        if rescale:
            try:
                await self.client.request("PUT", scale_path, {**scale, "spec": {**(scale.get("spec") or {}),
                                                                                 "replicas": desired}})
            except ApiError as exc:
                self._event(hpa, "Warning", "FailedRescale", f"New size: {desired}; reason: {reason}; error: {exc}")
                self._condition(hpa, "AbleToScale", "False", "FailedUpdateScale",
                                f"the HPA controller was unable to update the target scale: {exc}")
                self._set_status(hpa, current, (hpa.get("status") or {}).get("desiredReplicas", 0), statuses, False)
                await self._update_status_if_needed(original, hpa)
                log.warning("failed to rescale %s: %s", reference, exc)
                return
            self._condition(hpa, "AbleToScale", "True", "SucceededRescale",
                            f"the HPA controller was able to update the target scale to {desired}")
            self._event(hpa, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}")
            self.recommender.store_scale_event(spec.get("behavior"), key, current, desired, self.clock.now())
            log.info("successfully rescaled %s from %d to %d: %s", reference, current, desired, reason)
        else:
            desired = current
        self._set_status(hpa, current, desired, statuses, rescale)
        await self._update_status_if_needed(original, hpa)

    def normalize(self, hpa: Obj, key: Key, current: int, desired: int, low: int, now: float) -> int:
        """normalizeDesiredReplicas (no behavior) or normalizeDesiredReplicasWithBehaviors, with the AbleToScale and
        ScalingLimited conditions they set."""
        spec = hpa.get("spec") or {}
        behavior = spec.get("behavior")
        if behavior is None:
            stabilized = self.recommender.stabilize_recommendation(key, desired, now)
            if stabilized != desired:
                self._condition(hpa, "AbleToScale", "True", "ScaleDownStabilized",
                                "recent recommendations were higher than current one, applying the highest recent "
                                "recommendation")
            else:
                self._condition(hpa, "AbleToScale", "True", "ReadyForNewScale",
                                "recommended size matches current size")
            result, reason, message = convert_desired_replicas_with_rules(current, stabilized, low,
                                                                          spec.get("maxReplicas", 0))
        else:
            scale_down = dict(behavior.get("scaleDown") or {})
            if scale_down.get("stabilizationWindowSeconds") is None:  # maybeInitScaleDownStabilizationWindow
                scale_down["stabilizationWindowSeconds"] = int(self.recommender.downscale_stabilization)
            args = NormalizationArg(key, behavior.get("scaleUp") or {}, scale_down, low, spec.get("maxReplicas", 0),
                                    current, desired)
            stabilized, reason, message = self.recommender.stabilize_recommendation_with_behaviors(args, now)
            if stabilized != desired:
                self._condition(hpa, "AbleToScale", "True", reason, message)
            else:
                self._condition(hpa, "AbleToScale", "True", "ReadyForNewScale",
                                "recommended size matches current size")
            args.desired = stabilized
            result, reason, message = self.recommender.convert_desired_replicas_with_behavior_rate(args, now)
        self._condition(hpa, "ScalingLimited", "False" if result == stabilized else "True", reason, message)
        return result

    async def compute_replicas_for_metrics(self, hpa: Obj, scale: Obj,
                                           specs: list[Obj]) -> tuple[Proposal | None, list[Obj], str]:
        """computeReplicasForMetrics: the largest proposal, every metric's status, and the first error. None when
        every metric failed, or some did and the rest would scale down (ScalingActive then says why)."""
        selector_text = (scale.get("status") or {}).get("selector") or ""
        if not selector_text:
            self._event(hpa, "Warning", "SelectorRequired", "selector is required")
            self._condition(hpa, "ScalingActive", "False", "InvalidSelector",
                            "the HPA target's scale is missing a selector")
            return None, [], "selector is required"
        try:
            selector = PodSelector.parse(selector_text)
        except ApiError as exc:
            message = f"couldn't convert selector into a corresponding internal selector object: {exc}"
            self._event(hpa, "Warning", "InvalidSelector", message)
            self._condition(hpa, "ScalingActive", "False", "InvalidSelector", message)
            return None, [], message
        ambiguous = self._ambiguous(hpa, selector)
        if ambiguous:
            self._event(hpa, "Warning", "AmbiguousSelector", ambiguous)
            self._condition(hpa, "ScalingActive", "False", "AmbiguousSelector", ambiguous)
            return None, [], ambiguous
        spec_replicas = (scale.get("spec") or {}).get("replicas", 0)
        statuses: list[Obj] = [{"type": ""} for _ in specs]  # a failed metric's stays empty, as upstream's
        best: Proposal | None = None
        invalid: list[Unable] = []
        for i, metric in enumerate(specs):
            try:
                proposal = await self.compute_replicas_for_metric(hpa, metric, spec_replicas, selector, statuses[i])
            except Unable as exc:
                invalid.append(exc)
                continue
            if best is None or best.replicas == 0 or proposal.replicas > best.replicas:
                best = proposal
        error = ""
        if invalid:
            error = f"invalid metrics ({len(invalid)} invalid out of {len(specs)}), first error is: {invalid[0]}"
        if len(invalid) >= len(specs) or (invalid and best is not None and best.replicas < spec_replicas):
            self._condition(hpa, "ScalingActive", "False", invalid[0].reason, invalid[0].condition)
            return None, statuses, error
        assert best is not None
        self._condition(hpa, "ScalingActive", "True", "ValidMetricFound",
                        f"the HPA was able to successfully calculate a replica count from {best.metric}")
        if error:
            log.info("%s/%s: %s", hpa["metadata"].get("namespace"), hpa["metadata"]["name"], error)
        return best, statuses, error

    def _ambiguous(self, hpa: Obj, selector: PodSelector) -> str:
        """validateAndParseSelector's last check: the message when the pods of `selector` are also selected by
        another HPA's target (as last read), "" when this HPA is their only one."""
        key = key_of(hpa)
        if key in self.selectors:
            self.selectors[key] = selector
        pods = [p["metadata"].get("labels") or {} for p in self._pods(key[0], selector)]
        selecting = sorted(k for k, other in self.selectors.items()
                           if other is not None and k[0] == key[0] and any(other.matches(labels) for labels in pods))
        if len(selecting) <= 1:
            return ""
        keys = " ".join(f"{{{name} {namespace}}}" for namespace, name in selecting)
        return f"pods by selector {selector.text} are controlled by multiple HPAs: [{keys}]"

    def _unable(self, hpa: Obj, reason: str, error: str, wrapped: str) -> Unable:
        """getUnableComputeReplicaCountCondition: the Warning event and ScalingActive's message for a failed
        metric, and the error computeReplicasForMetric returns (`wrapped`)."""
        self._event(hpa, "Warning", reason, error)
        return Unable(wrapped, reason, f"the HPA was unable to compute the replica count: {error}")

    async def compute_replicas_for_metric(self, hpa: Obj, metric: Obj, spec_replicas: int, selector: PodSelector,
                                          status: Obj) -> Proposal:
        """computeReplicasForMetric: one metric's proposal; its status is filled into `status`."""
        kind, namespace = metric.get("type"), hpa["metadata"].get("namespace", "")
        if kind in ("Resource", "ContainerResource"):
            field = "resource" if kind == "Resource" else "containerResource"
            source = metric.get(field) or {}
            resource, container = source.get("name", ""), source.get("container", "")
            reason = "FailedGetResourceMetric" if kind == "Resource" else "FailedGetContainerResourceMetric"
            try:
                replicas, current, name, timestamp = await self._resource_proposal(
                    spec_replicas, source.get("target") or {}, resource, namespace, container, selector, kind)
            except MetricsError as exc:
                what = f"{resource} resource metric value" if kind == "Resource" else f"{container} container metric " \
                                                                                        "value"
                raise self._unable(hpa, reason, str(exc), f"failed to get {what}: {exc}") from None
            status.update({"type": kind, field: {"name": resource, **({"container": container} if container else {}),
                                                 "current": current}})
            return Proposal(replicas, name, timestamp)
        if kind == "Pods":
            source = metric.get("pods") or {}
            name = (source.get("metric") or {}).get("name", "")
            try:
                target = milli_value((source.get("target") or {}).get("averageValue"))
                replicas, usage, timestamp = await self.calculator.metric_replicas(
                    spec_replicas, target, name, namespace, selector, (source.get("metric") or {}).get("selector"))
            except (MetricsError, QuantityError) as exc:
                raise self._unable(hpa, "FailedGetPodsMetric", str(exc),
                                   f"failed to get pods metric value: {exc}") from None
            status.update({"type": "Pods", "pods": {"metric": source.get("metric") or {},
                                                    "current": {"averageValue": milli_quantity(usage)}}})
            return Proposal(replicas, f"pods metric {name}", timestamp)
        if kind == "Object":
            source = metric.get("object") or {}
            name, described = (source.get("metric") or {}).get("name", ""), source.get("describedObject") or {}
            try:
                await self.metrics.object_metric(name, namespace, described)
            except MetricsError as exc:
                error = f"unable to get metric {name}: {exc} on {described.get('kind', '')} {namespace}/" \
                        f"{described.get('name', '')}"
                raise self._unable(hpa, "FailedGetObjectMetric", error,
                                   f"failed to get object metric value: {error}") from None
        if kind == "External":
            source = metric.get("external") or {}
            name = (source.get("metric") or {}).get("name", "")
            try:
                await self.metrics.external_metric(name, namespace)
            except MetricsError as exc:
                error = f"unable to get external metric {namespace}/{name}/<nil>: {exc}"
                raise self._unable(hpa, "FailedGetExternalMetric", error,
                                   f"failed to get {name} external metric value: {error}") from None
        error = f'unknown metric source type "{kind}"'
        raise self._unable(hpa, "InvalidMetricSourceType", error, error)

    async def _resource_proposal(self, current: int, target: Obj, resource: str, namespace: str, container: str,
                                 selector: PodSelector, kind: str) -> tuple[int, Obj, str, float]:
        """computeStatusForResourceMetricGeneric: (replicas, current status, metric's description, time)."""
        if target.get("averageValue") is not None:
            try:
                target_usage = milli_value(target["averageValue"])
            except QuantityError as exc:
                raise MetricsError(f"failed to get {resource} usage: {exc}") from None
            try:
                replicas, usage, timestamp = await self.calculator.raw_resource_replicas(
                    current, target_usage, resource, namespace, selector, container)
            except MetricsError as exc:
                raise MetricsError(f"failed to get {resource} usage: {exc}") from None
            return replicas, {"averageValue": milli_quantity(usage)}, f"{resource} resource", timestamp
        utilization_target = target.get("averageUtilization")
        if utilization_target is None:
            raise MetricsError("invalid resource metric source: neither an average utilization target nor an average "
                               "value (usage) target was set")
        try:
            replicas, utilization, raw, timestamp = await self.calculator.resource_replicas(
                current, utilization_target, resource, namespace, selector, container)
        except MetricsError as exc:
            raise MetricsError(f"failed to get {resource} utilization: {exc}") from None
        what = "container resource" if kind == "ContainerResource" else "resource"
        return replicas, {"averageUtilization": utilization, "averageValue": milli_quantity(raw)}, \
            f"{resource} {what} utilization (percentage of request)", timestamp

    # --- status -----------------------------------------------------------------------------------------------

    def _set_status(self, hpa: Obj, current: int, desired: int, metrics: list[Obj], rescale: bool) -> None:
        """setStatus: the counts and metrics replaced, lastScaleTime moved on a rescale, conditions kept."""
        old = hpa.get("status") or {}
        status: Obj = {"currentReplicas": current, "desiredReplicas": desired}
        if metrics:
            status["currentMetrics"] = metrics
        last = rfc3339(self.clock.now()) if rescale else old.get("lastScaleTime")
        if last:
            status["lastScaleTime"] = last
        if old.get("conditions"):
            status["conditions"] = old["conditions"]
        hpa["status"] = status

    async def _update_status_if_needed(self, original: Obj, hpa: Obj) -> None:
        """updateStatusIfNeeded: write the status only when it changed."""
        if _comparable(original) == _comparable(hpa.get("status") or {}):
            return
        meta = hpa["metadata"]
        path = resource_path("horizontalpodautoscalers", meta.get("namespace", ""), meta["name"], "status",
                             HPA_GROUP_VERSION)
        try:
            await self.client.request("PUT", path, hpa)
        except ApiError as exc:
            self._event(hpa, "Warning", "FailedUpdateStatus", str(exc))
            log.warning("failed to update status for %s: %s", meta["name"], exc)


def _comparable(status: Obj) -> Obj:
    """A status as Semantic.DeepEqual compares it: an empty currentReplicas (omitempty) is 0."""
    return {"currentReplicas": 0, **{k: v for k, v in status.items() if v not in (None, [])}}
