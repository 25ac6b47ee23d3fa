"""The fencing controller's configuration file (`--fencing-config FILE`): pools, agents and policy.

    apiVersion: kubelite.io/v1alpha1
    kind: FencingConfiguration
    delay: 30              # seconds a node must be NotReady/Unknown before it is fenced
    maxConcurrent: 1       # fences in progress at once, at most
    selfFenceMargin: 5     # the `self` agent's safety margin on top of the node's advertised D
    retry: {initial: 1, max: 60}   # back-off between failed attempts (doubling)
    # The zone brake (fencing_policy.ZoneBrake), upstream's node eviction flags and defaults:
    fenceRate: 0.1                 # fences a second per zone (--node-eviction-rate)
    secondaryFenceRate: 0.01       # in a partially disrupted zone (--secondary-node-eviction-rate) ...
    largeClusterSizeThreshold: 50  # ... of more nodes than this; smaller ones stop (--large-cluster-size-threshold)
    unhealthyZoneThreshold: 0.55   # not-Ready share (of more than 2 nodes) for PartialDisruption
    fenceFullyDisruptedZones: false  # true: upstream's eviction rule, a zone with no Ready node at fenceRate
    pools:                 # the first pool whose nodeSelector matches a node fences it
    - name: rack-a
      nodeSelector: {matchLabels: {rack: a}}
      agents:              # tried in order; the first confirmed fence wins
      - command: ["/usr/local/bin/fence-ipmi", "{node}", "{address}"]
        timeout: 60
      - webhook: "https://pdu.example/fence"
      - python: "mypkg.fence:power_off"
      - self: {}

A node matched by no pool is never fenced: its pods stay until an administrator acts (seed 002).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubelite.api.errors import ApiError
from kubelite.api.selectors import LabelSelector, compile_label_selector
from kubelite.clock import Clock
from kubelite.controllers.fencing_agents import (
    CommandAgent,
    FenceAgent,
    PythonAgent,
    SelfFenceAgent,
    WebhookAgent,
)

Obj = dict[str, Any]
KIND = "FencingConfiguration"


class FencingConfigError(ValueError):
    pass


@dataclass(frozen=True)
class AgentSpec:
    kind: str  # command, webhook, python, self
    value: Any
    timeout: float


@dataclass(frozen=True)
class Pool:
    name: str
    selector: LabelSelector
    agents: tuple[AgentSpec, ...]


@dataclass(frozen=True)
class FencingConfig:
    delay: float = 30.0
    max_concurrent: int = 1
    self_fence_margin: float = 5.0
    retry_initial: float = 1.0
    retry_max: float = 60.0
    period: float = 1.0  # how often the policy looks at the nodes
    fence_rate: float = 0.1
    secondary_fence_rate: float = 0.01
    large_cluster_size_threshold: int = 50
    unhealthy_zone_threshold: float = 0.55
    fence_fully_disrupted_zones: bool = False
    pools: tuple[Pool, ...] = field(default_factory=tuple)

    def pool_for(self, labels: dict[str, str] | None) -> Pool | None:
        return next((p for p in self.pools if p.selector.matches(labels)), None)


def _number(raw: Obj, key: str, default: float, minimum: float = 0.0) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise FencingConfigError(f"{key}: must be a number >= {minimum:g}, not {value!r}")
    return float(value)


def _agent(raw: Any, where: str) -> AgentSpec:
    if not isinstance(raw, dict):
        raise FencingConfigError(f"{where}: must be a mapping with one of command, webhook, python, self")
    kinds = [k for k in ("command", "webhook", "python", "self") if k in raw]
    if len(kinds) != 1:
        raise FencingConfigError(f"{where}: needs exactly one of command, webhook, python, self")
    kind, value = kinds[0], raw[kinds[0]]
    timeout = _number(raw, "timeout", 60.0, 0.001)
    if kind == "command" and not (isinstance(value, list) and value and all(isinstance(a, str) for a in value)):
        raise FencingConfigError(f"{where}.command: must be a non-empty list of strings")
    if kind == "webhook" and not (isinstance(value, str) and value.startswith(("http://", "https://"))):
        raise FencingConfigError(f"{where}.webhook: must be an http(s) URL")
    if kind == "python" and not (isinstance(value, str) and ":" in value):
        raise FencingConfigError(f"{where}.python: must be 'module:function'")
    return AgentSpec(kind, value, timeout)


def parse(raw: Any) -> FencingConfig:
    if not isinstance(raw, dict):
        raise FencingConfigError("the fencing configuration must be a mapping")
    if raw.get("kind", KIND) != KIND:
        raise FencingConfigError(f"kind: must be {KIND}, not {raw.get('kind')!r}")
    pools = []
    for i, pool in enumerate(raw.get("pools") or []):
        where = f"pools[{i}]"
        if not isinstance(pool, dict) or not pool.get("agents"):
            raise FencingConfigError(f"{where}: needs agents")
        try:
            selector = compile_label_selector(pool.get("nodeSelector") or {})
        except ApiError as exc:
            raise FencingConfigError(f"{where}.nodeSelector: {exc.message}") from None
        agents = tuple(_agent(a, f"{where}.agents[{j}]") for j, a in enumerate(pool["agents"]))
        pools.append(Pool(str(pool.get("name") or where), selector, agents))
    max_concurrent = _number(raw, "maxConcurrent", 1, 1)
    retry = raw.get("retry") or {}
    if not isinstance(retry, dict):
        raise FencingConfigError("retry: must be a mapping with initial and max")
    large = _number(raw, "largeClusterSizeThreshold", 50)
    if not large.is_integer():
        raise FencingConfigError(f"largeClusterSizeThreshold: must be a whole number, not {large:g}")
    threshold = _number(raw, "unhealthyZoneThreshold", 0.55, 0.001)
    if threshold > 1:
        raise FencingConfigError(f"unhealthyZoneThreshold: must be a fraction of the zone (<= 1), not {threshold:g}")
    full = raw.get("fenceFullyDisruptedZones", False)
    if not isinstance(full, bool):
        raise FencingConfigError(f"fenceFullyDisruptedZones: must be true or false, not {full!r}")
    return FencingConfig(delay=_number(raw, "delay", 30.0), max_concurrent=int(max_concurrent),
                         self_fence_margin=_number(raw, "selfFenceMargin", 5.0),
                         retry_initial=_number(retry, "initial", 1.0, 0.001), retry_max=_number(retry, "max", 60.0),
                         period=_number(raw, "period", 1.0, 0.01), fence_rate=_number(raw, "fenceRate", 0.1, 0.0001),
                         secondary_fence_rate=_number(raw, "secondaryFenceRate", 0.01),
                         large_cluster_size_threshold=int(large), unhealthy_zone_threshold=threshold,
                         fence_fully_disrupted_zones=full, pools=tuple(pools))


def load(path: Path) -> FencingConfig:
    try:
        return parse(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError) as exc:
        raise FencingConfigError(f"{path}: {exc}") from None
    except FencingConfigError as exc:
        raise FencingConfigError(f"{path}: {exc}") from None


def build_agent(spec: AgentSpec, clock: Clock, margin: float,
                last_renewal_seen: Callable[[str], float | None]) -> FenceAgent:
    if spec.kind == "command":
        return CommandAgent(list(spec.value), clock, spec.timeout)
    if spec.kind == "webhook":
        return WebhookAgent(str(spec.value), spec.timeout)
    if spec.kind == "python":
        return PythonAgent(str(spec.value))
    return SelfFenceAgent(clock, margin, last_renewal_seen)
