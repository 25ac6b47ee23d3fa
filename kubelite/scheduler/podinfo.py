"""PodInfo: what the scheduler needs from a pod, compiled once per pod version.

Requests come from `kubelite.api.podresources` (upstream's PodRequests); scores use the
"non-zero" requests, as upstream's NodeResourcesFit and BalancedAllocation do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubelite.api.podresources import CPU, MEMORY, PODS, pod_requests, quantity_units
from kubelite.api.selectors import LabelSelector, Requirement, compile_label_selector
from kubelite.clock import parse_rfc3339

Obj = dict[str, Any]

__all__ = ["CPU", "MEMORY", "PODS", "AffinityTerm", "PodInfo", "Taint", "Toleration", "compile_taints",
           "pod_info", "pod_requests", "quantity_units"]


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """v1 Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}"


def compile_tolerations(raw: list[Obj] | None) -> tuple[Toleration, ...]:
    return tuple(Toleration(t.get("key", ""), t.get("operator") or "Equal", t.get("value", ""), t.get("effect", ""))
                 for t in raw or [])


def compile_taints(raw: list[Obj] | None) -> tuple[Taint, ...]:
    return tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in raw or [])


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A compiled PodAffinityTerm: which pods it selects, and over which topology key."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str
    weight: int = 0

    def matches(self, pod: PodInfo, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        """The namespaces listed plus those the namespaceSelector picks (an empty selector picks all)."""
        ns_ok = pod.namespace in self.namespaces or (
            self.namespace_selector is not None
            and self.namespace_selector.matches(namespace_labels.get(pod.namespace, {})))
        return ns_ok and self.selector.matches(pod.labels)

    @property
    def cache_key(self) -> tuple[Any, ...]:
        return (self.selector, self.namespaces, self.namespace_selector)


def _terms(raw: list[Obj] | None, namespace: str, labels: Mapping[str, str], weighted: bool) -> tuple[
        AffinityTerm, ...]:
    out = []
    for item in raw or []:
        term = item.get("podAffinityTerm", {}) if weighted else item
        selector = term.get("labelSelector")
        compiled = compile_label_selector(selector) if selector is not None else compile_label_selector(None)
        reqs = list(compiled.requirements)
        for key in term.get("matchLabelKeys") or []:
            if key in labels:
                reqs.append(Requirement(key, "In", frozenset([labels[key]])))
        for key in term.get("mismatchLabelKeys") or []:
            if key in labels:
                reqs.append(Requirement(key, "NotIn", frozenset([labels[key]])))
        if selector is not None:
            compiled = LabelSelector(tuple(reqs))
        ns_sel_raw = term.get("namespaceSelector")
        ns_sel = compile_label_selector(ns_sel_raw) if ns_sel_raw is not None else None
        namespaces = frozenset(term.get("namespaces") or [])
        if not namespaces and ns_sel is None:
            namespaces = frozenset([namespace])
        out.append(AffinityTerm(compiled, namespaces, ns_sel, term.get("topologyKey", ""),
                                int(item.get("weight", 0)) if weighted else 0))
    return tuple(out)


@dataclass(slots=True)
class PodInfo:
    obj: Obj
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    priority: int
    created: float
    node_name: str
    requests: dict[str, int]
    non_zero_cpu: int
    non_zero_memory: int
    tolerations: tuple[Toleration, ...]
    host_ports: tuple[tuple[str, str, int], ...]
    terminating: bool
    started: float | None = None  # status.startTime (preemption orders victims by it)
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[AffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[AffinityTerm, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # per-plugin compiled views

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def spec(self) -> Obj:
        spec: Obj = self.obj["spec"]
        return spec


def status_start_time(obj: Obj) -> float | None:
    """status.startTime (written by the node agent through the status subresource), None until then."""
    started = (obj.get("status") or {}).get("startTime")
    return parse_rfc3339(started) if started else None


def pod_info(obj: Obj) -> PodInfo:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    labels = meta.get("labels") or {}
    ns = meta.get("namespace", "")
    nz = pod_requests(spec, non_zero=True)
    ports = tuple((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", int(p["hostPort"]))
                  for c in spec.get("containers") or [] for p in c.get("ports") or [] if p.get("hostPort"))
    affinity = spec.get("affinity") or {}
    pa, paa = affinity.get("podAffinity") or {}, affinity.get("podAntiAffinity") or {}
    created = meta.get("creationTimestamp")
    return PodInfo(
        obj=obj, namespace=ns, name=meta["name"], uid=meta.get("uid", ""), labels=labels,
        priority=int(spec.get("priority") or 0), created=parse_rfc3339(created) if created else 0.0,
        node_name=spec.get("nodeName") or "", requests=pod_requests(spec), non_zero_cpu=nz.get(CPU, 0),
        non_zero_memory=nz.get(MEMORY, 0), tolerations=compile_tolerations(spec.get("tolerations")),
        host_ports=ports, terminating=bool(meta.get("deletionTimestamp")),
        started=status_start_time(obj),
        affinity=_terms(pa.get("requiredDuringSchedulingIgnoredDuringExecution"), ns, labels, False),
        anti_affinity=_terms(paa.get("requiredDuringSchedulingIgnoredDuringExecution"), ns, labels, False),
        preferred_affinity=_terms(pa.get("preferredDuringSchedulingIgnoredDuringExecution"), ns, labels, True),
        preferred_anti_affinity=_terms(paa.get("preferredDuringSchedulingIgnoredDuringExecution"), ns, labels, True),
    )
