"""The node's configuration: a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1 field names)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubelite.agent.allocatable import NodeAllocatable, ReservationError, parse_reserved
from kubelite.agent.container import DEFAULT_CLUSTER_DOMAIN
from kubelite.agent.eviction.quantity import Quantity
from kubelite.agent.eviction.thresholds import EvictionConfig, ThresholdConfigError, eviction_config
from kubelite.agent.lifecycle import INITIAL_BACKOFF, MAX_BACKOFF
from kubelite.clock import parse_duration

MIN_SELF_FENCE_AFTER = 2.0  # seconds: Lease renewals at most twice a second


class NodeConfigError(ValueError):
    pass


def duration(text: str) -> float:
    """A KubeletConfiguration duration (metav1.Duration, read by Go's time.ParseDuration: 1m30s, 45s, 500ms, 0)
    in seconds; a negative one is refused here, where no field takes one."""
    try:
        ns = parse_duration(str(text).strip())
    except ValueError:
        raise NodeConfigError(f"invalid duration {text!r}") from None
    if ns < 0:
        raise NodeConfigError(f"invalid duration {text!r}: must not be negative")
    return ns / 1e9


@dataclass
class NodeConfig:
    max_restart_period: float = MAX_BACKOFF
    initial_backoff: float = INITIAL_BACKOFF
    image_catalog: dict[str, list[str]] = field(default_factory=dict)
    eviction: EvictionConfig = field(default_factory=lambda: eviction_config({}))
    max_pods: int = 110
    shutdown_grace_period: float = 0.0  # > 0: on shutdown the agent stops its pods (kubelet's graceful node shutdown)
    # Hidden from every container besides the agent's own data dir (`--protect-path`; under `kubelite up`
    # the control plane's data dir). Not a KubeletConfiguration field: set by the command line.
    protected_paths: tuple[Path, ...] = ()
    self_fence_after: float = 0.0  # > 0: kill every container after this long without a Lease renewal (self_fence.py)
    node_lease_duration: int = 40  # nodeLeaseDurationSeconds: the Lease is renewed every quarter of it (node.py)
    kube_reserved: dict[str, Quantity] = field(default_factory=dict)  # kept out of allocatable (allocatable.py)
    system_reserved: dict[str, Quantity] = field(default_factory=dict)
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN  # clusterDomain: a pod's FQDN ends with it (setHostnameAsFQDN)


def parse(raw: dict[str, Any]) -> NodeConfig:
    if raw.get("kind") != "KubeletConfiguration":
        raise NodeConfigError("the node config must be a KubeletConfiguration")
    cfg = NodeConfig()
    crash = raw.get("crashLoopBackOff") or {}
    if "maxContainerRestartPeriod" in crash:
        period = duration(crash["maxContainerRestartPeriod"])
        if not 1 <= period <= 300:
            raise NodeConfigError("crashLoopBackOff.maxContainerRestartPeriod: must be between 1s and 300s")
        cfg.max_restart_period = period
    if (raw.get("featureGates") or {}).get("ReduceDefaultCrashLoopBackOffDecay"):
        cfg.initial_backoff, cfg.max_restart_period = 1.0, min(cfg.max_restart_period, 60.0)
    cfg.initial_backoff = min(cfg.initial_backoff, cfg.max_restart_period)
    catalog = raw.get("imageCatalog") or {}
    for image, entry in catalog.items():
        if not isinstance(entry, list) or not all(isinstance(a, str) for a in entry):
            raise NodeConfigError(f"imageCatalog[{image}]: must be a list of strings (the entrypoint)")
    cfg.image_catalog = dict(catalog)
    try:
        cfg.eviction = eviction_config(raw)
    except ThresholdConfigError as exc:
        raise NodeConfigError(str(exc)) from None
    try:
        cfg.kube_reserved = parse_reserved("kubeReserved", raw.get("kubeReserved"))
        cfg.system_reserved = parse_reserved("systemReserved", raw.get("systemReserved"))
    except ReservationError as exc:
        raise NodeConfigError(str(exc)) from None
    cfg.max_pods = int(raw.get("maxPods", 110))
    if raw.get("shutdownGracePeriod"):
        cfg.shutdown_grace_period = duration(raw["shutdownGracePeriod"])
    if "nodeLeaseDurationSeconds" in raw:
        lease = raw["nodeLeaseDurationSeconds"]
        if not isinstance(lease, int) or isinstance(lease, bool) or lease <= 0:
            raise NodeConfigError("nodeLeaseDurationSeconds: must be a positive integer")
        cfg.node_lease_duration = lease
    if raw.get("clusterDomain"):
        cfg.cluster_domain = str(raw["clusterDomain"]).strip(".")
    if raw.get("selfFenceAfter"):  # kubelite's own field
        cfg.self_fence_after = duration(raw["selfFenceAfter"])
    check_self_fence(cfg)
    return cfg


def check_self_fence(cfg: NodeConfig) -> None:
    """A self-fence period has a floor: the agent renews its Lease every quarter of it and checks every twentieth,
    so a few milliseconds (a `10ms` meant as `10s`) would flood the API server with renewals and kill every
    container on the first slow one. Checked once the command line's `--self-fence-after` is applied too."""
    after = cfg.self_fence_after
    if after < 0:
        raise NodeConfigError(f"selfFenceAfter: {after:g}s must not be negative")
    if 0 < after < MIN_SELF_FENCE_AFTER:
        raise NodeConfigError(f"selfFenceAfter: {after:g}s is below the {MIN_SELF_FENCE_AFTER:g}s minimum (the Lease "
                              "is renewed every quarter of it)")


def node_allocatable(cfg: NodeConfig, capacity: dict[str, str]) -> NodeAllocatable:
    """The allocatable of a node of `capacity` under `cfg`; refused, as kubelet refuses to start, when a reservation
    exceeds the capacity."""
    allocatable = NodeAllocatable(capacity, [cfg.kube_reserved, cfg.system_reserved], cfg.eviction.thresholds)
    try:
        allocatable.validate()
    except ReservationError as exc:
        raise NodeConfigError(str(exc)) from None
    return allocatable


def load(path: Path | None) -> NodeConfig:
    if path is None:
        return NodeConfig()
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise NodeConfigError(f"cannot read node config {path}: {exc}") from None
    return parse(raw or {})
