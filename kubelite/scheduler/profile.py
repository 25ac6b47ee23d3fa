"""Building a profile's framework from its configuration: the in-tree registry (plugins/registry.go),
one flat map from plugin name to factory, and the handle the factories receive."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kubelite.api.selectors import LabelSelector
from kubelite.client.interface import Client
from kubelite.scheduler.config import ConfigError, Profile
from kubelite.scheduler.interface import Plugin
from kubelite.scheduler.plugins.default_binder import NAME as DEFAULT_BINDER
from kubelite.scheduler.plugins.default_binder import DefaultBinder
from kubelite.scheduler.plugins.default_preemption import ClusterView, DefaultPreemption
from kubelite.scheduler.plugins.inter_pod_affinity import InterPodAffinity
from kubelite.scheduler.plugins.node_affinity import NodeAffinity
from kubelite.scheduler.plugins.node_name import NodeName
from kubelite.scheduler.plugins.node_ports import NodePorts
from kubelite.scheduler.plugins.node_resources import FitArgs, NodeResourcesBalancedAllocation, NodeResourcesFit
from kubelite.scheduler.plugins.node_unschedulable import NodeUnschedulable
from kubelite.scheduler.plugins.pod_topology_spread import SYSTEM_DEFAULTS, PodTopologySpread
from kubelite.scheduler.plugins.taint_toleration import TaintToleration
from kubelite.scheduler.plugins.volume_binding import VolumeBinding
from kubelite.scheduler.plugins.volume_cache import VolumeCache
from kubelite.scheduler.plugins.volume_restrictions import VolumeRestrictions
from kubelite.scheduler.plugins.volume_zone import VolumeZone
from kubelite.scheduler.podinfo import PodInfo
from kubelite.scheduler.runtime import Framework

Obj = dict[str, Any]


class Handle(ClusterView, Protocol):
    """What plugins may ask of the scheduler (framework.Handle)."""

    @property
    def client(self) -> Client: ...

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]: ...

    def owner_selector(self, pod: PodInfo) -> LabelSelector | None: ...


class ProfileHandle:
    """The scheduler's handle plus this profile's framework, which exists only once its plugins do
    (upstream hands plugins the frameworkImpl under construction)."""

    def __init__(self, scheduler: Handle) -> None:
        self._scheduler = scheduler
        self.framework: Framework | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._scheduler, name)


def _spread(args: Obj, handle: Any) -> Plugin:
    defaults = SYSTEM_DEFAULTS if args.get("defaultingType", "System") == "System" else \
        tuple(args.get("defaultConstraints") or ())
    return PodTopologySpread(defaults, handle.owner_selector)


def _fit(args: Obj, handle: Any) -> Plugin:
    try:
        return NodeResourcesFit(FitArgs.from_config(args))
    except ValueError as exc:
        raise ConfigError(f"pluginConfig[NodeResourcesFit].args.{exc}") from None


def _volumes(handle: Any) -> VolumeCache:
    """The scheduler's claims/volumes/classes view; a handle without one (a test's) knows no claims."""
    cache = getattr(handle, "volume_cache", None)
    return cache if isinstance(cache, VolumeCache) else VolumeCache({}, {}, {})


REGISTRY: dict[str, Callable[[Obj, Any], Plugin]] = {
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
    "DefaultPreemption": lambda a, h: DefaultPreemption(h),
    DEFAULT_BINDER: lambda a, h: DefaultBinder(h.client),
    "VolumeRestrictions": lambda a, h: VolumeRestrictions(_volumes(h)),
    "VolumeBinding": lambda a, h: VolumeBinding(_volumes(h), h, float(a.get("bindTimeoutSeconds", 600))),
    "VolumeZone": lambda a, h: VolumeZone(_volumes(h)),
}


def build(profile: Profile, handle: Handle) -> Framework:
    """The profile's plugins, each built once from the registry, sorted into the extension points."""
    profile_handle = ProfileHandle(handle)
    instances: dict[str, Plugin] = {}

    def get(name: str) -> Plugin:
        if name not in instances:
            instances[name] = REGISTRY[name](profile.plugin_args.get(name, {}), profile_handle)
        return instances[name]

    framework = Framework([get(n) for n in profile.filters], [(get(n), w) for n, w in profile.scores],
                          [get(n) for n in profile.post_filters], [get(DEFAULT_BINDER)], profile)
    profile_handle.framework = framework
    return framework
