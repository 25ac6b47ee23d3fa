"""Building a profile's plugin instances from its configuration (the in-tree registry)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubelite.api.selectors import LabelSelector
from kubelite.scheduler.config import ConfigError, Profile
from kubelite.scheduler.framework import Plugin
from kubelite.scheduler.plugins.inter_pod_affinity import InterPodAffinity
from kubelite.scheduler.plugins.node_affinity import NodeAffinity
from kubelite.scheduler.plugins.node_name import NodeName
from kubelite.scheduler.plugins.node_ports import NodePorts
from kubelite.scheduler.plugins.node_resources import FitArgs, NodeResourcesBalancedAllocation, NodeResourcesFit
from kubelite.scheduler.plugins.node_unschedulable import NodeUnschedulable
from kubelite.scheduler.plugins.pod_topology_spread import SYSTEM_DEFAULTS, PodTopologySpread
from kubelite.scheduler.plugins.taint_toleration import TaintToleration
from kubelite.scheduler.podinfo import PodInfo

Obj = dict[str, Any]


class Handle(Protocol):
    """What plugins may ask of the scheduler beyond the node table (framework.Handle)."""

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]: ...

    def owner_selector(self, pod: PodInfo) -> LabelSelector | None: ...


def _spread(args: Obj, handle: Handle) -> Plugin:
    defaults = SYSTEM_DEFAULTS if args.get("defaultingType", "System") == "System" else \
        tuple(args.get("defaultConstraints") or ())
    return PodTopologySpread(defaults, handle.owner_selector)


def _fit(args: Obj, handle: Handle) -> Plugin:
    try:
        return NodeResourcesFit(FitArgs.from_config(args))
    except ValueError as exc:
        raise ConfigError(f"pluginConfig[NodeResourcesFit].args.{exc}") from None


REGISTRY: dict[str, Callable[[Obj, Handle], Plugin]] = {
    "NodeUnschedulable": lambda a, h: NodeUnschedulable(),
    "NodeName": lambda a, h: NodeName(),
    "TaintToleration": lambda a, h: TaintToleration(),
    "NodeAffinity": lambda a, h: NodeAffinity(a.get("addedAffinity")),
    "NodePorts": lambda a, h: NodePorts(),
    "NodeResourcesFit": _fit,
    "NodeResourcesBalancedAllocation": lambda a, h: NodeResourcesBalancedAllocation(
        tuple(r["name"] for r in a.get("resources") or [{"name": "cpu"}, {"name": "memory"}])),
    "PodTopologySpread": _spread,
    "InterPodAffinity": lambda a, h: InterPodAffinity(int(a.get("hardPodAffinityWeight", 1)), h.namespace_labels),
}


@dataclass
class ProfileRuntime:
    config: Profile
    filters: list[Plugin]
    scores: list[tuple[Plugin, int]]

    @property
    def preemption(self) -> bool:
        return "DefaultPreemption" in self.config.post_filters

    def plugin(self, name: str) -> Plugin | None:
        return next((p for p in [*self.filters, *(s for s, _ in self.scores)] if p.name == name), None)


def build(profile: Profile, handle: Handle) -> ProfileRuntime:
    instances: dict[str, Plugin] = {}

    def get(name: str) -> Plugin:
        if name not in instances:
            instances[name] = REGISTRY[name](profile.plugin_args.get(name, {}), handle)
        return instances[name]

    return ProfileRuntime(profile, [get(n) for n in profile.filters], [(get(n), w) for n, w in profile.scores])
