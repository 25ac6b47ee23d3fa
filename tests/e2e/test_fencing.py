"""Partition end to end (S4, S1, S5; seed 002): real server, two real agents, node-a's link to the API
server through a TCP proxy the test cuts.

A StatefulSet pod with a ReadWriteOnce volume on the shared-path provisioner runs on node-a; the
link is cut; node-a goes Unknown; then
- with a command fence agent (a script that records its call and kills node-a's agent and every
  process under it — the stand-in for powering the machine off), the fence runs, the attachment is
  removed, and web-0 starts on node-b with the data node-a's instance wrote;
- with no fence agent configured, web-0 is *not* replaced: the identity stays with the
  unreachable node (the seed's safe default);
- with `--self-fence-after` on node-a and only the `self` agent, node-a's container is dead before
  the replacement starts — the old container's last sighting in the host's /proc against the
  replacement's own start stamp;
- with node-a alone in its zone (zone labels), the zone brake holds the fence: a whole-zone partition
  is not fenced; labelled into node-b's zone, the same lost node is fenced.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.partition import (
    GRACE,
    SELF_FENCE_AFTER,
    Partition,
    Watcher,
    command_fencing,
    data_log,
    partitioned_cluster,
    pids_with_env,
    ready,
    running_on,
    self_fencing_config,
)
from tests.e2e.pods import get_pod, wait_for


@pytest.fixture
def fenced_by_command(tmp_path: Path) -> Iterator[Partition]:
    fencing, pidfile = command_fencing(tmp_path)
    with partitioned_cluster(tmp_path, fencing) as p:
        pidfile.write_text(str(p.agents["node-a"].pid))
        yield p


def test_a_partitioned_node_is_fenced_and_its_statefulset_pod_moves_with_its_data(
        fenced_by_command: Partition) -> None:
    p = fenced_by_command
    old = get_pod(p.server, "web-0")
    assert wait_for(lambda: len(data_log(p)) == 1)
    cut_at = time.time()
    p.proxy.cut()
    assert wait_for(lambda: ready(p.server, "node-a") == "Unknown", timeout=GRACE + 20)
    assert wait_for(lambda: running_on(p.server) == "node-b", timeout=60), get_pod(p.server, "web-0")
    new = get_pod(p.server, "web-0")
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    calls = (p.base / "calls").read_text().split()
    assert calls[0] == "node-a" and float(calls[1]) > cut_at
    fence = json.loads(p.server.kubectl("get", "nodefence", "node-a", "-o", "json").stdout)
    assert fence["status"]["phase"] == "Succeeded" and fence["status"]["agent"] == "command"
    assert p.agents["node-a"].wait(timeout=5) == -signal.SIGKILL
    assert wait_for(lambda: len(data_log(p)) == 2)
    first, second = data_log(p)
    assert first.split()[1] == old["metadata"]["uid"] and second.split()[1] == new["metadata"]["uid"]
    vas = json.loads(p.server.kubectl("get", "volumeattachments", "-o", "json").stdout)["items"]
    assert [va["spec"]["nodeName"] for va in vas] == ["node-b"]


def _label_zone(p: Partition, node: str, zone: str) -> None:
    p.server.kubectl("label", "node", node, "--overwrite", "topology.kubernetes.io/region=r",
                     f"topology.kubernetes.io/zone={zone}")


def _events(p: Partition, reason: str) -> list[dict[str, object]]:
    items = json.loads(p.server.kubectl("get", "events", "-A", "-o", "json").stdout)["items"]
    return [e for e in items if e["reason"] == reason]


def test_a_partitioned_zone_is_not_fenced_until_its_node_shares_a_zone_with_a_ready_one(
        fenced_by_command: Partition) -> None:
    """The zone brake on real processes. node-a alone in zone a, node-b in zone b: cutting node-a's link is
    a whole-zone partition — held (FenceHeldByZoneDisruption), no fence runs, web-0 stays. The same lost
    node labelled into node-b's zone is a single-node loss in a Normal zone: fenced, and web-0 moves."""
    p = fenced_by_command
    _label_zone(p, "node-a", "a")
    _label_zone(p, "node-b", "b")
    old = get_pod(p.server, "web-0")
    p.proxy.cut()
    assert wait_for(lambda: ready(p.server, "node-a") == "Unknown", timeout=GRACE + 20)
    assert wait_for(lambda: bool(_events(p, "FenceHeldByZoneDisruption")), timeout=20)
    time.sleep(5)  # well past the fencing delay (2 s) and many passes (0.5 s)
    held = _events(p, "FenceHeldByZoneDisruption")
    assert len(held) == 1 and "zone r/a is in FullDisruption" in str(held[0]["message"])
    assert not (p.base / "calls").exists()
    assert p.server.kubectl("get", "nodefences", "-o", "name").stdout.strip() == ""
    assert get_pod(p.server, "web-0")["metadata"]["uid"] == old["metadata"]["uid"]
    _label_zone(p, "node-a", "b")
    assert wait_for(lambda: running_on(p.server) == "node-b", timeout=60), get_pod(p.server, "web-0")
    assert (p.base / "calls").read_text().split()[0] == "node-a"


@pytest.fixture
def unfenced(tmp_path: Path) -> Iterator[Partition]:
    with partitioned_cluster(tmp_path, None) as p:
        yield p


def test_without_a_fence_agent_the_statefulset_pod_is_not_replaced(unfenced: Partition) -> None:
    p = unfenced
    old = get_pod(p.server, "web-0")
    p.proxy.cut()
    assert wait_for(lambda: ready(p.server, "node-a") == "Unknown", timeout=GRACE + 20)
    time.sleep(30)  # generous: well past the node's grace, the taints and any eviction
    pod = get_pod(p.server, "web-0")
    assert pod["metadata"]["uid"] == old["metadata"]["uid"] and pod["spec"]["nodeName"] == "node-a"
    assert len(data_log(p)) == 1
    assert p.server.kubectl("get", "nodefences", "-o", "name").stdout.strip() == ""


@pytest.fixture
def self_fencing(tmp_path: Path) -> Iterator[Partition]:
    with partitioned_cluster(tmp_path, self_fencing_config(), "--self-fence-after", str(SELF_FENCE_AFTER)) as p:
        yield p


def test_a_self_fencing_node_kills_its_container_before_the_replacement_starts(self_fencing: Partition) -> None:
    p = self_fencing
    old = get_pod(p.server, "web-0")
    node = json.loads(p.server.kubectl("get", "node", "node-a", "-o", "json").stdout)
    assert node["metadata"]["annotations"]["kubelite.io/self-fence-after"] == f"{SELF_FENCE_AFTER:g}"
    watcher = Watcher(old["metadata"]["uid"])
    assert wait_for(lambda: watcher.seen and len(data_log(p)) == 1)
    p.proxy.cut()
    try:
        assert wait_for(lambda: running_on(p.server) == "node-b", timeout=GRACE + 60), get_pod(p.server, "web-0")
        assert wait_for(lambda: len(data_log(p)) == 2)
    finally:
        watcher.stop.set()
    new_uid, new_start = data_log(p)[1].split()[1:3]
    assert new_uid == get_pod(p.server, "web-0")["metadata"]["uid"] != old["metadata"]["uid"]
    assert p.agents["node-a"].poll() is None, "the agent itself stays up: it only killed its containers"
    assert not pids_with_env(watcher.marker)
    assert watcher.last_alive < float(new_start), (watcher.last_alive, new_start)
    fence = json.loads(p.server.kubectl("get", "nodefence", "node-a", "-o", "json").stdout)
    assert fence["status"]["agent"] == "self" and fence["status"]["phase"] == "Succeeded"
    # the partition heals: node-a is back, but fenced — its old pod never runs again, nothing new starts
    p.proxy.heal()
    assert wait_for(lambda: ready(p.server, "node-a") == "True", timeout=30)
    node = json.loads(p.server.kubectl("get", "node", "node-a", "-o", "json").stdout)
    assert {"key": "kubelite.io/fenced", "effect": "NoSchedule"} in [
        {k: t[k] for k in ("key", "effect")} for t in node["spec"].get("taints") or []]
    assert wait_for(lambda: bool(pids_with_env(watcher.marker)), timeout=5) is False
    p.server.kubectl("delete", "nodefence", "node-a")  # the administrator's word: node-a may run pods again
    assert wait_for(lambda: "kubelite.io/Fenced" not in p.server.kubectl(
        "get", "node", "node-a", "-o", "jsonpath={.status.conditions[*].type}").stdout, timeout=20)
