"""The FencingConfiguration file: what is accepted, what each bad field is refused with, and the command
line refusing a bad file with exit status 2 before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubelite.cli.main import main
from kubelite.clock import FakeClock
from kubelite.controllers.fencing_agents import CommandAgent, PythonAgent, SelfFenceAgent, WebhookAgent
from kubelite.controllers.fencing_config import FencingConfigError, build_agent, load, parse

Obj = dict[str, Any]
AGENT = {"command": ["true"]}


def pool(*agents: Obj, selector: Obj | None = None) -> Obj:
    return {"name": "p", "nodeSelector": selector or {}, "agents": list(agents)}


@pytest.mark.parametrize("name,raw,error", [
    ("not a mapping", ["pools"], "must be a mapping"),
    ("the wrong kind", {"kind": "KubeletConfiguration"}, "kind: must be FencingConfiguration"),
    ("a pool without agents", {"pools": [{"name": "p"}]}, "pools[0]: needs agents"),
    ("an agent of no known kind", {"pools": [pool({"ipmi": "x"})]}, "needs exactly one of"),
    ("an agent of two kinds", {"pools": [pool({"command": ["x"], "self": {}})]}, "needs exactly one of"),
    ("an empty command", {"pools": [pool({"command": []})]}, "command: must be a non-empty list"),
    ("a webhook that is not a URL", {"pools": [pool({"webhook": "pdu"})]}, "webhook: must be an http(s) URL"),
    ("a python entry point without a function", {"pools": [pool({"python": "mod"})]}, "'module:function'"),
    ("a negative delay", {"delay": -1}, "delay: must be a number >= 0"),
    ("zero concurrent fences", {"maxConcurrent": 0}, "maxConcurrent: must be a number >= 1"),
    ("a delay given as text", {"delay": "30s"}, "delay: must be a number"),
    ("a zone threshold above the whole zone", {"unhealthyZoneThreshold": 1.5}, "unhealthyZoneThreshold: must be a "
                                                                               "fraction"),
    ("a fence rate of 0 (it would never fence: leave out the pools instead)", {"fenceRate": 0}, "fenceRate: must be"),
    ("a fractional large-cluster size", {"largeClusterSizeThreshold": 2.5}, "largeClusterSizeThreshold: must be a "
                                                                           "whole number"),
    ("fenceFullyDisruptedZones given as text", {"fenceFullyDisruptedZones": "yes"}, "must be true or false"),
    ("a bad selector operator", {"pools": [pool(AGENT, selector={"matchExpressions": [
        {"key": "a", "operator": "Near", "values": ["b"]}]})]}, "nodeSelector"),
])
def test_bad_configuration_is_refused_naming_the_field(name: str, raw: Any, error: str) -> None:
    with pytest.raises(FencingConfigError, match=error.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        parse(raw)


def test_a_full_configuration() -> None:
    cfg = parse({"kind": "FencingConfiguration", "delay": 10, "maxConcurrent": 2, "selfFenceMargin": 3,
                 "retry": {"initial": 0.5, "max": 30},
                 "pools": [pool({"command": ["fence", "{node}"], "timeout": 5}, {"webhook": "http://pdu/fence"},
                                {"python": "os.path:exists"}, {"self": {}}, selector={"matchLabels": {"rack": "a"}})]})
    assert (cfg.delay, cfg.max_concurrent, cfg.self_fence_margin, cfg.retry_initial, cfg.retry_max) == (
        10, 2, 3, 0.5, 30)
    assert cfg.pool_for({"rack": "a"}) is cfg.pools[0] and cfg.pool_for({"rack": "b"}) is None
    agents = [build_agent(a, FakeClock(), cfg.self_fence_margin, lambda n: None) for a in cfg.pools[0].agents]
    assert [type(a) for a in agents] == [CommandAgent, WebhookAgent, PythonAgent, SelfFenceAgent]
    assert isinstance(agents[0], CommandAgent) and agents[0].timeout == 5


def test_the_zone_brake_defaults_are_upstreams_eviction_defaults() -> None:
    """--node-eviction-rate 0.1, --secondary-node-eviction-rate 0.01, --large-cluster-size-threshold 50,
    --unhealthy-zone-threshold 0.55; a fully disrupted zone held (the one departure, see fencing_policy)."""
    cfg = parse({})
    assert (cfg.fence_rate, cfg.secondary_fence_rate, cfg.large_cluster_size_threshold, cfg.unhealthy_zone_threshold,
            cfg.fence_fully_disrupted_zones) == (0.1, 0.01, 50, 0.55, False)
    cfg = parse({"fenceRate": 1, "secondaryFenceRate": 0, "largeClusterSizeThreshold": 10,
                 "unhealthyZoneThreshold": 0.3, "fenceFullyDisruptedZones": True})
    assert (cfg.fence_rate, cfg.secondary_fence_rate, cfg.large_cluster_size_threshold, cfg.unhealthy_zone_threshold,
            cfg.fence_fully_disrupted_zones) == (1, 0, 10, 0.3, True)


def test_no_pools_fence_nothing() -> None:
    assert parse({}).pool_for({"any": "node"}) is None


def test_load_reports_the_file(tmp_path: Path) -> None:
    path = tmp_path / "fencing.yaml"
    path.write_text("kind: [unclosed")
    with pytest.raises(FencingConfigError, match=str(path)):
        load(path)


@pytest.mark.parametrize("command", [
    ["controller-manager", "--kubeconfig", "/nonexistent"],
    ["server", "--data-dir", "DATA"],
])
def test_the_command_line_refuses_a_bad_file_with_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           command: list[str]) -> None:
    path = tmp_path / "fencing.yaml"
    path.write_text("kind: FencingConfiguration\nmaxConcurrent: 0\n")
    argv = [a.replace("DATA", str(tmp_path / "data")) for a in command] + ["--fencing-config", str(path)]
    assert main(argv) == 2
    assert "maxConcurrent" in capsys.readouterr().err
