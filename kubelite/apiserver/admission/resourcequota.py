"""ResourceQuota admission (k8s.io/apiserver/pkg/admission/plugin/resourcequota): charge a quota before the write.

Runs on create (and on updates of Services and claims, whose cost may grow), after validation, as upstream's
validating plugin. For every quota of the namespace
that tracks what the new object uses (`kubelite.api.quota`'s evaluators, an object count for any
other kind) and whose scopes take it in:

1. the object must state what the quota needs of it (`failed quota: q: must specify limits.cpu for: app`),
   and the quota must have been measured (`status unknown for quota: q, resources: pods`: the quota
   controller writes `status.used` first);
2. its usage added to `status.used` must stay within `status.hard`
   (`exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`);
3. then `status.used` is raised by a compare-and-swap on the quota's resourceVersion: a lost race
   re-reads the quota and checks step 2 again, so two creates racing for the last unit cannot both
   pass (upstream's checkQuotas retries the same way). A dry run checks and charges nothing.

Charges are not undone when the write that follows fails (as upstream): the quota controller's next
recalculation releases them, as it releases deleted and finished objects.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from kubelite.api import quota
from kubelite.api.quota import Evaluator, ResourceList
from kubelite.apiserver.registry.base import Obj, Resource
from kubelite.apiserver.registry.quota import RESOURCE_QUOTAS
from kubelite.clock import Clock


class QuotaStore(Protocol):
    """What the plugin needs of the registry: cached quotas, and the registry's compare-and-swap."""

    def list(self, resource: str, namespace: str = "") -> list[Obj]: ...

    def guaranteed_update(self, resource: Resource, namespace: str, name: str, mutate: Callable[[Obj], Obj],
                          dry_run: bool = False, reads_only: bool = False) -> Coroutine[Any, Any, Obj]: ...


class Refused(Exception):
    """The request does not fit a quota; its message is the Forbidden reason."""


def _status(q: Obj, field: str) -> ResourceList:
    return quota.parse_list((q.get("status") or {}).get(field))


def check_quota(evaluator: Evaluator, q: Obj, obj: Obj) -> None:
    """Step 1 for one quota that matches the object."""
    name = q["metadata"]["name"]
    hard = (q.get("status") or {}).get("hard") or {}
    restricted = evaluator.matching_resources(hard)
    problem = evaluator.constraints(restricted, obj)
    if problem:
        raise Refused(f"failed quota: {name}: {problem}")
    used = (q.get("status") or {}).get("used") or {}
    if any(resource not in used for resource in restricted):
        raise Refused(f"status unknown for quota: {name}, resources: {','.join(sorted(restricted))}")


def charged(q: Obj, usage: ResourceList) -> ResourceList | None:
    """Step 2: the quota's new `used` with `usage` added, None when nothing it limits changes; Refused when it
    would exceed `hard`."""
    hard, used = _status(q, "hard"), _status(q, "used")
    requested = quota.mask(usage, hard)
    if not requested:
        return None
    new_used = quota.add(used, requested)
    fits, exceeded = quota.less_than_or_equal(quota.mask(new_used, requested), hard)
    if not fits:
        raise Refused(f"exceeded quota: {q['metadata']['name']}, "
                      f"requested: {quota.pretty(quota.mask(requested, exceeded))}, "
                      f"used: {quota.pretty(quota.mask(used, exceeded))}, "
                      f"limited: {quota.pretty(quota.mask(hard, exceeded))}")
    return new_used


def check_request(quotas: list[Obj], evaluator: Evaluator, obj: Obj, old: Obj | None,
                  now: float) -> list[tuple[Obj, ResourceList]]:
    """CheckRequest: each quota to charge with what to charge it; Refused when the request may not go on. An
    update is charged what the object uses beyond its stored version, in the quotas that already counted it."""
    interesting = []
    for q in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        if quota.matches(evaluator, q, obj):
            check_quota(evaluator, q, obj)
            interesting.append(q)
    if not interesting:
        return []
    usage = evaluator.usage(obj, now)
    below = quota.negative(usage)
    if below:
        raise Refused(f"quota usage is negative for resource(s): {','.join(below)}")
    delta = quota.subtract_non_negative(usage, evaluator.usage(old, now)) if old is not None else usage
    charges = []
    for q in interesting:
        own = quota.remove_zeros(delta if old is not None and quota.matches(evaluator, q, old) else usage)
        if own:
            charged(q, own)
            charges.append((q, own))
    return charges


class ResourceQuotaAdmission:
    def __init__(self, store: QuotaStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def admit(self, resource: Resource, obj: Obj, old: Obj | None, dry_run: bool) -> str:
        """The Forbidden reason for creating `obj` (or updating `old` to it), or "" once every quota it uses has
        been charged. Updates count only for the kinds whose evaluators handle them (Services, claims)."""
        target = (resource.group, resource.plural)
        if not resource.namespaced or target in quota.IGNORED or (old is not None and
                                                                  target not in quota.UPDATE_EVALUATED):
            return ""
        namespace = obj["metadata"]["namespace"]
        quotas = self.store.list(RESOURCE_QUOTAS.plural, namespace)
        if not quotas:
            return ""
        evaluator = quota.evaluator_for(*target)
        try:
            charges = check_request(quotas, evaluator, obj, old, self.clock.now())
            if dry_run:
                return ""
            for q, usage in charges:
                await self.store.guaranteed_update(RESOURCE_QUOTAS, namespace, q["metadata"]["name"],
                                                   self._charge(usage))
        except Refused as refused:
            return str(refused)
        return ""

    @staticmethod
    def _charge(usage: ResourceList) -> Callable[[Obj], Obj]:
        """Step 3's mutation, run again on a fresh read after a lost race."""
        def mutate(current: Obj) -> Obj:
            new_used = charged(current, usage)
            if new_used is None:
                return current
            status = dict(current.get("status") or {})
            status["used"] = quota.to_wire(new_used)
            return {**current, "status": status}

        return mutate
