"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): profiles, plugins, pluginConfig.

Invalid files are rejected at start with a message naming the field, as upstream's
validation does. Defaults are upstream's default profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

API_VERSION = "kubescheduler.config.k8s.io/v1"
DEFAULT_SCHEDULER = "default-scheduler"

FILTERS = ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
           "VolumeRestrictions", "VolumeBinding", "VolumeZone",
           "PodTopologySpread", "InterPodAffinity"]
SCORES = [("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("PodTopologySpread", 2),
          ("InterPodAffinity", 2), ("NodeResourcesBalancedAllocation", 1)]
POST_FILTERS = ["DefaultPreemption"]
KNOWN = {"PrioritySort", "SchedulingGates", "DefaultBinder", *FILTERS, *(n for n, _ in SCORES), *POST_FILTERS}
EXTENSION_POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve",
                    "permit", "preBind", "bind", "postBind", "multiPoint")

Obj = dict[str, Any]


class ConfigError(ValueError):
    pass


@dataclass
class Profile:
    scheduler_name: str = DEFAULT_SCHEDULER
    filters: list[str] = field(default_factory=lambda: list(FILTERS))
    scores: list[tuple[str, int]] = field(default_factory=lambda: list(SCORES))
    post_filters: list[str] = field(default_factory=lambda: list(POST_FILTERS))
    plugin_args: dict[str, Obj] = field(default_factory=dict)


@dataclass
class SchedulerConfig:
    profiles: list[Profile] = field(default_factory=lambda: [Profile()])
    percentage_of_nodes_to_score: int = 0
    initial_backoff: float = 1.0
    max_backoff: float = 10.0

    @property
    def scheduler_names(self) -> set[str]:
        return {p.scheduler_name for p in self.profiles}


def _names(section: Obj | None, key: str, path: str) -> list[Obj]:
    items = (section or {}).get(key) or []
    if not isinstance(items, list):
        raise ConfigError(f"{path}.{key}: Invalid value: must be a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not item.get("name"):
            raise ConfigError(f"{path}.{key}[{i}].name: Required value")
        if item["name"] != "*" and item["name"] not in KNOWN:
            raise ConfigError(f'{path}.{key}[{i}].name: Invalid value: "{item["name"]}": unknown plugin')
    return items


def _apply(default: list[str], section: Obj | None, path: str, multi: Obj | None) -> list[str]:
    out = list(default)
    for sec, where in ((multi, f"{path}.multiPoint"), (section, path)):
        disabled = {d["name"] for d in _names(sec, "disabled", where)}
        if "*" in disabled:
            out = []
        out = [n for n in out if n not in disabled]
        for e in _names(sec, "enabled", where):
            if e["name"] not in out:
                out.append(e["name"])
    return out


def _profile(raw: Obj, i: int) -> Profile:
    path = f"profiles[{i}]"
    name = raw.get("schedulerName") or DEFAULT_SCHEDULER
    plugins = raw.get("plugins") or {}
    for point in plugins:
        if point not in EXTENSION_POINTS:
            raise ConfigError(f"{path}.plugins.{point}: Invalid value: unknown extension point")
    multi = plugins.get("multiPoint")
    filters = [n for n in _apply(FILTERS, plugins.get("filter"), f"{path}.plugins.filter", multi) if n in FILTERS]
    weights = dict(SCORES)
    for sec in (multi, plugins.get("score")):
        for e in (sec or {}).get("enabled") or []:
            if "weight" in e:
                if not isinstance(e["weight"], int) or e["weight"] <= 0:
                    raise ConfigError(f"{path}.plugins.score.enabled[{e['name']}].weight: Invalid value: "
                                      f"{e['weight']}: must be a positive integer")
                weights[e["name"]] = e["weight"]
    score_names = _apply([n for n, _ in SCORES], plugins.get("score"), f"{path}.plugins.score", multi)
    scores = [(n, weights.get(n, 1)) for n in score_names if n in weights]
    post = [n for n in _apply(POST_FILTERS, plugins.get("postFilter"), f"{path}.plugins.postFilter", multi)
            if n in POST_FILTERS]
    args: dict[str, Obj] = {}
    for j, pc in enumerate(raw.get("pluginConfig") or []):
        pname = (pc or {}).get("name")
        if pname not in KNOWN:
            raise ConfigError(f'{path}.pluginConfig[{j}].name: Invalid value: "{pname}": unknown plugin')
        if pname in args:
            raise ConfigError(f'{path}.pluginConfig[{j}].name: Duplicate value: "{pname}"')
        args[pname] = pc.get("args") or {}
    _validate_args(args, path)
    return Profile(name, filters, scores, post, args)


def _validate_args(args: dict[str, Obj], path: str) -> None:
    spread = args.get("PodTopologySpread")
    if spread is not None:
        kind = spread.get("defaultingType", "System")
        if kind not in ("System", "List"):
            raise ConfigError(f'{path}.pluginConfig[PodTopologySpread].args.defaultingType: Unsupported value: '
                              f'"{kind}": supported values: "List", "System"')
        if kind == "System" and spread.get("defaultConstraints"):
            raise ConfigError(f"{path}.pluginConfig[PodTopologySpread].args.defaultConstraints: Invalid value: "
                              "when .defaultingType is \"System\"")
        for k, c in enumerate(spread.get("defaultConstraints") or []):
            if c.get("labelSelector") is not None:
                raise ConfigError(f"{path}.pluginConfig[PodTopologySpread].args.defaultConstraints[{k}]"
                                  ".labelSelector: Forbidden: constraint must not define a selector, as they "
                                  "deduced for each pod")
            if not isinstance(c.get("maxSkew"), int) or c["maxSkew"] <= 0:
                raise ConfigError(f"{path}.pluginConfig[PodTopologySpread].args.defaultConstraints[{k}].maxSkew: "
                                  "Invalid value: must be greater than zero")
    ipa = args.get("InterPodAffinity")
    if ipa is not None:
        weight = ipa.get("hardPodAffinityWeight", 1)
        if not isinstance(weight, int) or not 0 <= weight <= 100:
            raise ConfigError(f"{path}.pluginConfig[InterPodAffinity].args.hardPodAffinityWeight: Invalid value: "
                              f"{weight}: not in valid range [0-100]")
    fit = args.get("NodeResourcesFit")
    if fit is not None:
        kind = (fit.get("scoringStrategy") or {}).get("type", "LeastAllocated")
        if kind not in ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"):
            raise ConfigError(f'{path}.pluginConfig[NodeResourcesFit].args.scoringStrategy.type: Unsupported '
                              f'value: "{kind}"')


def parse(raw: Obj) -> SchedulerConfig:
    if raw.get("apiVersion") != API_VERSION or raw.get("kind") != "KubeSchedulerConfiguration":
        raise ConfigError(f"expected apiVersion {API_VERSION} and kind KubeSchedulerConfiguration, got "
                          f"{raw.get('apiVersion')!r} / {raw.get('kind')!r}")
    profiles = [_profile(p or {}, i) for i, p in enumerate(raw.get("profiles") or [{}])]
    names = [p.scheduler_name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError("profiles[].schedulerName: Duplicate value")
    pct = raw.get("percentageOfNodesToScore", 0) or 0
    if not isinstance(pct, int) or not 0 <= pct <= 100:
        raise ConfigError(f"percentageOfNodesToScore: Invalid value: {pct}: not in valid range [0-100]")
    initial = raw.get("podInitialBackoffSeconds", 1)
    maximum = raw.get("podMaxBackoffSeconds", 10)
    if not isinstance(initial, int) or initial <= 0:
        raise ConfigError(f"podInitialBackoffSeconds: Invalid value: {initial}: must be greater than 0")
    if not isinstance(maximum, int) or maximum < initial:
        raise ConfigError(f"podMaxBackoffSeconds: Invalid value: {maximum}: must be greater than or equal to "
                          "PodInitialBackoffSeconds")
    return SchedulerConfig(profiles, pct, float(initial), float(maximum))


def load(path: Path | str | None) -> SchedulerConfig:
    if path is None:
        return SchedulerConfig()
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read scheduler config {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"scheduler config {path} is not a mapping")
    return parse(raw)
